/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <glib.h>
#include <stdarg.h>

#include "core/config.h"
#include "shared/sysfs.h"

static void key_clear(ConfKey *k)
{
        free(k->key);
        free(k->value);
        free(k->file);
}

static void section_clear(ConfSection *s)
{
        for (size_t i = 0; i < s->n_keys; i++)
                key_clear(&s->keys[i]);
        free(s->keys);
        free(s->name);
        free(s->file);
}

void conf_free(Conf *c)
{
        if (!c)
                return;
        for (size_t i = 0; i < c->n_sections; i++)
                section_clear(&c->sections[i]);
        free(c->sections);
        free(c);
}

static ConfSection *section_append(Conf *c, const char *name, const char *file, unsigned line)
{
        ConfSection *s;

        c->sections = realloc(c->sections, sizeof(ConfSection) * (c->n_sections + 1));
        if (!c->sections)
                abort();
        s = &c->sections[c->n_sections++];
        *s = (ConfSection){.name = xstrdup(name), .file = xstrdup(file), .line = line};
        return s;
}

static ConfKey *section_find_key(ConfSection *s, const char *key)
{
        for (size_t i = 0; i < s->n_keys; i++)
                if (streq(s->keys[i].key, key))
                        return &s->keys[i];
        return NULL;
}

static void section_set(ConfSection *s, const char *key, const char *value, const char *file, unsigned line)
{
        ConfKey *k = section_find_key(s, key);

        if (!k) {
                s->keys = realloc(s->keys, sizeof(ConfKey) * (s->n_keys + 1));
                if (!s->keys)
                        abort();
                k = &s->keys[s->n_keys++];
                *k = (ConfKey){.key = xstrdup(key)};
        } else {
                free(k->value);
                free(k->file);
        }
        k->value = xstrdup(value);
        k->file = xstrdup(file);
        k->line = line;
}

static ConfSection *find_section(Conf *c, const char *name)
{
        for (size_t i = 0; i < c->n_sections; i++)
                if (streq(c->sections[i].name, name))
                        return &c->sections[i];
        return NULL;
}

ConfSection *conf_section(Conf *c, const char *name)
{
        ConfSection *s = find_section(c, name);

        if (s)
                s->used = true;
        return s;
}

ConfKey *conf_key(ConfSection *s, const char *key)
{
        ConfKey *k;

        if (!s)
                return NULL;
        k = section_find_key(s, key);
        if (k)
                k->used = true;
        return k;
}

char *conf_key_error(const ConfKey *k, const char *fmt, ...)
{
        _cleanup_free_ char *msg = NULL;
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&msg, fmt, ap) < 0)
                abort();
        va_end(ap);
        return xasprintf("%s:%u: %s=%s: %s", k->file, k->line, k->key, k->value, msg);
}

char *conf_section_error(const ConfSection *s, const char *fmt, ...)
{
        _cleanup_free_ char *msg = NULL;
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&msg, fmt, ap) < 0)
                abort();
        va_end(ap);
        return xasprintf("%s:%u: [%s]: %s", s->file, s->line, s->name, msg);
}

/* Records where every section and key stands. GKeyFile has already accepted the text, so any line
 * here is blank, a comment, a [section] or a key=value. */
static int index_lines(const char *path, const char *text, GKeyFile *kf, Conf *c, char **ret_error)
{
        g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
        ConfSection *cur = NULL;

        for (unsigned i = 0; lines[i]; i++) {
                g_autofree char *line = g_strstrip(g_strdup(lines[i]));
                char *eq;

                if (!*line || *line == '#' || *line == ';')
                        continue;
                if (*line == '[') {
                        size_t l = strlen(line);
                        g_autofree char *name = g_strndup(line + 1, l >= 2 ? l - 2 : 0);
                        cur = find_section(c, name);
                        if (!cur)
                                cur = section_append(c, name, path, i + 1);
                        continue;
                }
                eq = strchr(line, '=');
                if (!eq || !cur)
                        continue;
                *eq = 0;
                g_autofree char *key = g_strstrip(g_strdup(line));
                g_autoptr(GError) err = NULL;
                g_autofree char *value = g_key_file_get_string(kf, cur->name, key, &err);
                if (!value) {
                        *ret_error = xasprintf("%s:%u: %s=: %s", path, i + 1, key, err->message);
                        return -EINVAL;
                }
                section_set(cur, key, value, path, i + 1);
        }
        return 0;
}

/* GKeyFile's own messages name no line; find the first line it would refuse ourselves. */
static char *syntax_error(const char *path, const char *text, const char *fallback)
{
        g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
        bool in_section = false;

        for (unsigned i = 0; lines[i]; i++) {
                g_autofree char *line = g_strstrip(g_strdup(lines[i]));

                if (!*line || *line == '#')
                        continue;
                if (*line == '[') {
                        if (line[strlen(line) - 1] != ']' || strlen(line) < 3)
                                return xasprintf("%s:%u: malformed section header '%s'", path, i + 1, line);
                        in_section = true;
                        continue;
                }
                if (!strchr(line, '=') || *line == '=')
                        return xasprintf("%s:%u: expected Key=Value, found '%s'", path, i + 1, line);
                if (!in_section)
                        return xasprintf("%s:%u: key outside of any [section]", path, i + 1);
        }
        return xasprintf("%s: %s", path, fallback);
}

int conf_parse_file(const char *path, Conf **ret, char **ret_error)
{
        g_autoptr(GKeyFile) kf = g_key_file_new();
        g_autoptr(GError) err = NULL;
        _cleanup_free_ char *text = NULL;
        _cleanup_conf_ Conf *c = xmalloc0(sizeof(Conf));
        size_t size;
        int r;

        r = read_full_file(path, &text, &size);
        if (r < 0) {
                *ret_error = xasprintf("%s: cannot read: %s", path, strerror(-r));
                return r;
        }
        if (!g_key_file_load_from_data(kf, text, size, G_KEY_FILE_NONE, &err)) {
                *ret_error = syntax_error(path, text, err->message);
                return -EINVAL;
        }
        r = index_lines(path, text, kf, c, ret_error);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(c);
        return 0;
}

void conf_merge(Conf *lower, Conf *upper)
{
        size_t n_new = 0;
        ConfSection *merged;

        for (size_t i = 0; i < upper->n_sections; i++) {
                ConfSection *u = &upper->sections[i];
                ConfSection *l = NULL;

                for (size_t j = 0; j < lower->n_sections; j++)
                        if (streq(lower->sections[j].name, u->name))
                                l = &lower->sections[j];
                if (!l) {
                        n_new++;
                        continue;
                }
                for (size_t k = 0; k < u->n_keys; k++)
                        section_set(l, u->keys[k].key, u->keys[k].value, u->keys[k].file, u->keys[k].line);
                section_clear(u);
                u->name = NULL;
        }

        /* New sections first, in upper's order, then lower's. */
        merged = xmalloc0(sizeof(ConfSection) * (n_new + lower->n_sections));
        n_new = 0;
        for (size_t i = 0; i < upper->n_sections; i++)
                if (upper->sections[i].name)
                        merged[n_new++] = upper->sections[i];
        if (lower->n_sections) /* memcpy from NULL is undefined even for 0 bytes */
                memcpy(merged + n_new, lower->sections, sizeof(ConfSection) * lower->n_sections);
        free(lower->sections);
        lower->sections = merged;
        lower->n_sections += n_new;

        free(upper->sections);
        free(upper);
}

static bool running_from_build_tree(void)
{
        char exe[4096];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);

        if (n < 0)
                return false;
        exe[n] = 0;
        return startswith(exe, RTCTL_BUILD_ROOT "/") != NULL;
}

char **conf_search_path(void)
{
        const char *e = getenv("RTCTL_CONF_PATH");
        char **l = NULL;

        if (e)
                return strv_split(e, ":");
        strv_push(&l, xstrdup(RTCTL_ADMIN_CONFDIR));
        strv_push(&l, xstrdup(running_from_build_tree() ? RTCTL_SOURCE_CONFDIR : RTCTL_SHIPPED_CONFDIR));
        return l;
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

int conf_load_layered(char *const *search_path, const char *relpath, Conf **ret, char **ret_error)
{
        _cleanup_conf_ Conf *base = NULL;
        _cleanup_strv_free_ char **names = NULL;
        _cleanup_strv_free_ char **paths = NULL;
        int r;

        for (char *const *dir = search_path; *dir && !base; dir++) {
                _cleanup_free_ char *p = xasprintf("%s/%s", *dir, relpath);
                if (access(p, F_OK) < 0)
                        continue;
                r = conf_parse_file(p, &base, ret_error);
                if (r < 0)
                        return r;
        }
        if (!base)
                return -ENOENT;

        /* Drop-ins: file names unique across directories, the first directory's copy wins. */
        for (char *const *dir = search_path; *dir; dir++) {
                _cleanup_free_ char *d = xasprintf("%s/%s.d", *dir, relpath);
                _cleanup_closedir_ DIR *dd = opendir(d);
                struct dirent *de;

                if (!dd)
                        continue;
                while ((de = readdir(dd))) {
                        if (!endswith(de->d_name, ".conf") || strv_contains(names, de->d_name))
                                continue;
                        strv_push(&names, xstrdup(de->d_name));
                        strv_push(&paths, xasprintf("%s/%s", d, de->d_name));
                }
        }
        if (paths) {
                size_t n = strv_length(paths);
                /* Sort by file name, not by directory. */
                char **keyed = xmalloc0(sizeof(char *) * (n + 1));
                for (size_t i = 0; i < n; i++)
                        keyed[i] = xasprintf("%s\t%s", strrchr(paths[i], '/') + 1, paths[i]);
                qsort(keyed, n, sizeof(char *), cmp_str);
                for (size_t i = 0; i < n; i++) {
                        Conf *dropin = NULL;
                        r = conf_parse_file(strchr(keyed[i], '\t') + 1, &dropin, ret_error);
                        if (r < 0) {
                                strv_free(keyed);
                                return r;
                        }
                        conf_merge(base, dropin);
                }
                strv_free(keyed);
        }
        *ret = TAKE_PTR(base);
        return 0;
}
