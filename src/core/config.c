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
        if (s->index)
                g_hash_table_destroy(s->index);
}

void conf_free(Conf *c)
{
        if (!c)
                return;
        for (size_t i = 0; i < c->n_sections; i++)
                section_clear(&c->sections[i]);
        free(c->sections);
        if (c->index)
                g_hash_table_destroy(c->index);
        free(c);
}

/* The position+1 of name in c->sections, from an index rebuilt whenever the array is reordered. */
static void conf_reindex(Conf *c)
{
        if (c->index)
                g_hash_table_remove_all(c->index);
        else
                c->index = g_hash_table_new(g_str_hash, g_str_equal);
        for (size_t i = 0; i < c->n_sections; i++)
                g_hash_table_insert(c->index, c->sections[i].name, GSIZE_TO_POINTER(i + 1));
}

static ConfSection *section_append(Conf *c, const char *name, const char *file, unsigned line)
{
        ConfSection *s;

        GREEDY_REALLOC(c->sections, c->sections_allocated, c->n_sections + 1);
        s = &c->sections[c->n_sections++];
        *s = (ConfSection){.name = xstrdup(name), .file = xstrdup(file), .line = line};
        if (!c->index)
                conf_reindex(c);
        else
                g_hash_table_insert(c->index, s->name, GSIZE_TO_POINTER(c->n_sections));
        return s;
}

static ConfKey *section_find_key(ConfSection *s, const char *key)
{
        size_t i = s->index ? GPOINTER_TO_SIZE(g_hash_table_lookup(s->index, key)) : 0;

        return i ? &s->keys[i - 1] : NULL;
}

static void section_set(ConfSection *s, const char *key, const char *value, const char *file, unsigned line)
{
        ConfKey *k = section_find_key(s, key);

        if (!k) {
                GREEDY_REALLOC(s->keys, s->keys_allocated, s->n_keys + 1);
                k = &s->keys[s->n_keys++];
                *k = (ConfKey){.key = xstrdup(key)};
                if (!s->index)
                        s->index = g_hash_table_new(g_str_hash, g_str_equal);
                g_hash_table_insert(s->index, k->key, GSIZE_TO_POINTER(s->n_keys));
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
        size_t i = c->index ? GPOINTER_TO_SIZE(g_hash_table_lookup(c->index, name)) : 0;

        return i ? &c->sections[i - 1] : NULL;
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

/* A message is one line: control characters a value holds (the parser unescapes \n, \t, \r) are shown
 * escaped again, as the file spells them. Takes s. */
static char *one_line(char *s)
{
        GString *out;

        if (!strpbrk(s, "\n\t\r"))
                return s;
        out = g_string_sized_new(strlen(s) + 8);
        for (const char *p = s; *p; p++)
                if (*p == '\n')
                        g_string_append(out, "\\n");
                else if (*p == '\t')
                        g_string_append(out, "\\t");
                else if (*p == '\r')
                        g_string_append(out, "\\r");
                else
                        g_string_append_c(out, *p);
        free(s);
        return g_string_free(out, false);
}

/* "where: message" on one line; takes where. */
_printf_(2, 0) static char *located_error(char *where, const char *fmt, va_list ap)
{
        _cleanup_free_ char *w = where, *msg = NULL;

        if (vasprintf(&msg, fmt, ap) < 0)
                abort();
        return one_line(xasprintf("%s: %s", w, msg));
}

char *conf_key_error(const ConfKey *k, const char *fmt, ...)
{
        va_list ap;
        char *e;

        assert(k);

        va_start(ap, fmt);
        e = located_error(xasprintf("%s:%u: %s=%s", k->file, k->line, k->key, k->value), fmt, ap);
        va_end(ap);
        return e;
}

char *conf_section_error(const ConfSection *s, const char *fmt, ...)
{
        va_list ap;
        char *e;

        assert(s);

        va_start(ap, fmt);
        e = located_error(xasprintf("%s:%u: [%s]", s->file, s->line, s->name), fmt, ap);
        va_end(ap);
        return e;
}

/* A key name: what GKeyFile and systemd allow, minus the locale suffix (Description[de]=), which rtctl
 * would only ignore. */
static bool key_name_valid(const char *k)
{
        if (!*k)
                return false;
        for (const char *p = k; *p; p++)
                if (!g_ascii_isalnum(*p) && !strchr("_-./", *p))
                        return false;
        return true;
}

/* A section name: printable, no brackets inside ([Block a]b] is a typo, not a name). */
static bool section_name_valid(const char *n)
{
        if (!*n || g_ascii_isspace(n[0]) || g_ascii_isspace(n[strlen(n) - 1]))
                return false;
        for (const char *p = n; *p; p++)
                if (*p == '[' || *p == ']' || (unsigned char)*p < 0x20 || *p == 0x7f)
                        return false;
        return true;
}

/* The escapes of rtctl.profile(5): \s (a space, for one at either end), \n, \t, \r and \\. Anything else
 * after a backslash is an error, never kept as written. */
static char *unescape(const char *v, char **ret_error)
{
        static const char escapes[] = "s n\nt\tr\r\\\\"; /* pairs: the letter, what it stands for */
        GString *out = g_string_sized_new(strlen(v));

        for (const char *p = v; *p; p++) {
                const char *e;

                if (*p != '\\') {
                        g_string_append_c(out, *p);
                        continue;
                }
                p++;
                if (!*p) {
                        *ret_error = xstrdup("ends in a lone backslash (write \\\\ for one)");
                        g_string_free(out, true);
                        return NULL;
                }
                for (e = escapes; *e && *e != *p; e += 2)
                        ;
                if (!*e) {
                        /* The whole character after the backslash, however many bytes it has. */
                        const char *next = g_utf8_next_char(p);
                        *ret_error = xasprintf("invalid escape '\\%.*s' (\\s, \\n, \\t, \\r and \\\\ are "
                                               "the escapes)",
                                               (int)(next - p), p);
                        g_string_free(out, true);
                        return NULL;
                }
                g_string_append_c(out, e[1]);
        }
        return g_string_free(out, false);
}

_printf_(4, 5) static int parse_error(char **ret_error, const char *path, unsigned line, const char *fmt,
                                      ...)
{
        GString *out = g_string_new(NULL);
        va_list ap;

        g_string_printf(out, "%s:%u: ", path, line);
        va_start(ap, fmt);
        g_string_append_vprintf(out, fmt, ap);
        va_end(ap);
        *ret_error = g_string_free(out, false);
        return -EINVAL;
}

int conf_parse_file(const char *path, Conf **ret, char **ret_error)
{
        _cleanup_free_ char *text = NULL;
        size_t size;
        int r;

        assert(path);
        assert(ret);

        r = read_config_file(path, CONFIG_FILE_MAX, &text, &size, ret_error);
        if (r == -EFBIG)
                return -EINVAL; /* an invalid file, like any other that breaks the rules */
        if (r < 0)
                return r;
        return conf_parse_data(path, text, size, ret, ret_error);
}

int conf_parse_data(const char *path, const char *text, size_t size, Conf **ret, char **ret_error)
{
        assert(text || size == 0);
        assert(ret);

        _cleanup_conf_ Conf *c = xmalloc0(sizeof(Conf));
        const char *p = text, *end = text + size, *nul = memchr(text, 0, size);
        ssize_t cur = -1; /* the section being read, by position: the array moves as it grows */
        unsigned line = 0;

        if (nul) {
                unsigned at = 1;
                for (const char *q = text; q < nul; q++)
                        at += *q == '\n';
                return parse_error(ret_error, path, at, "a NUL byte: a configuration file is text");
        }
        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                _cleanup_free_ char *raw = xstrndup(p, nl ? (size_t)(nl - p) : (size_t)(end - p));
                char *l, *eq;

                line++;
                p = nl ? nl + 1 : end;
                if (!g_utf8_validate(raw, -1, NULL))
                        return parse_error(ret_error, path, line, "not valid UTF-8");
                l = strstrip(raw);
                if (!*l || *l == '#' || *l == ';')
                        continue;
                if (*l == '[') {
                        size_t n = strlen(l);
                        _cleanup_free_ char *shown = echo_text(l);
                        _cleanup_free_ char *name =
                            n >= 2 && l[n - 1] == ']' ? xstrndup(l + 1, n - 2) : NULL;
                        if (!name || !section_name_valid(name))
                                return parse_error(ret_error, path, line, "malformed section header '%s'",
                                                   shown);
                        ConfSection *s = find_section(c, name);
                        if (!s)
                                s = section_append(c, name, path, line);
                        cur = s - c->sections;
                        continue;
                }
                eq = strchr(l, '=');
                if (!eq) {
                        _cleanup_free_ char *shown = echo_text(l);
                        return parse_error(ret_error, path, line, "expected Key=Value, found '%s'", shown);
                }
                *eq = 0;
                const char *key = strstrip(l), *value = eq + 1;
                while (g_ascii_isspace(*value))
                        value++;
                if (cur < 0)
                        return parse_error(ret_error, path, line, "key outside of any [section]");
                if (!key_name_valid(key)) {
                        _cleanup_free_ char *shown = echo_text(key);
                        if (strchr(key, '['))
                                return parse_error(ret_error, path, line,
                                                   "%s=: localized keys (Key[locale]=) are not supported",
                                                   shown);
                        return parse_error(ret_error, path, line,
                                           "'%s' is not a key name (letters, digits, '_', '-', '.', '/')",
                                           shown);
                }
                _cleanup_free_ char *why = NULL;
                _cleanup_free_ char *v = unescape(value, &why);
                if (!v) {
                        _cleanup_free_ char *shown = echo_text(value);
                        return parse_error(ret_error, path, line, "%s=%s: %s", key, shown, why);
                }
                section_set(&c->sections[cur], key, v, path, line);
        }
        *ret = TAKE_PTR(c);
        return 0;
}

void conf_merge(Conf *lower, Conf *upper)
{
        size_t n_new = 0;
        ConfSection *merged;

        assert(lower);
        assert(upper);

        for (size_t i = 0; i < upper->n_sections; i++) {
                ConfSection *u = &upper->sections[i];
                ConfSection *l = find_section(lower, u->name);

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
        lower->sections_allocated = lower->n_sections;
        conf_reindex(lower);

        free(upper->sections);
        if (upper->index)
                g_hash_table_destroy(upper->index);
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

        assert(search_path);
        assert(relpath);
        assert(ret);

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
