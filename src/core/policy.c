/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <ctype.h>
#include <dirent.h>

#include "core/policy.h"

int cpu_spec_parse(const char *s, CpuSpec *ret, char **ret_error)
{
        const char *n;

        assert(s);
        assert(ret);

        *ret = (CpuSpec){};
        if (streq(s, "all"))
                ret->kind = CPU_SPEC_ALL;
        else if (streq(s, "housekeeping"))
                ret->kind = CPU_SPEC_HOUSEKEEPING;
        else if (streq(s, "isolated"))
                ret->kind = CPU_SPEC_ISOLATED;
        else if ((n = startswith(s, "auto:"))) {
                _cleanup_free_ char *count = xstrndup(n, strcspn(n, ":"));
                const char *pref = n[strlen(count)] == ':' ? n + strlen(count) + 1 : NULL;

                if (safe_atou(count, &ret->auto_cores) < 0 || ret->auto_cores == 0) {
                        *ret_error = xasprintf("'%s': auto:N takes a number of whole cores, 1 or more", s);
                        return -EINVAL;
                }
                if (pref && core_preference_from_string(pref, &ret->auto_prefer) < 0) {
                        *ret_error = xasprintf("'%s': auto:N:PREFERENCE takes fast, efficient or cache", s);
                        return -EINVAL;
                }
                ret->kind = CPU_SPEC_AUTO;
        } else if (isdigit((unsigned char)s[0]) || s[0] == '-' || s[0] == ',') {
                _cleanup_free_ char *err = NULL;
                if (cpuset_parse_list(s, CPUSET_MAX_CPUS, &ret->list, &err) < 0) {
                        *ret_error = TAKE_PTR(err);
                        return -EINVAL;
                }
                ret->kind = CPU_SPEC_LIST;
        } else {
                *ret_error = xasprintf("'%s' is not a CPU set: expected a CPU list such as 0-3,8, or all, "
                                       "housekeeping, isolated or auto:N[:fast|efficient|cache]",
                                       s);
                return -EINVAL;
        }
        return 0;
}

bool cpu_spec_parse_key(const ConfKey *k, CpuSpec *ret, char ***errors)
{
        _cleanup_free_ char *err = NULL;

        assert(k);
        assert(ret);

        if (cpu_spec_parse(k->value, ret, &err) < 0) {
                strv_push(errors, conf_key_error(k, "%s", err));
                return false;
        }
        if (ret->kind == CPU_SPEC_AUTO) {
                cpu_spec_clear(ret);
                strv_push(errors, conf_key_error(k, "auto:N chooses CPUs to isolate, in [CPU] Isolate=; "
                                                    "here say isolated, housekeeping, all or a CPU list"));
                return false;
        }
        ret->origin = xasprintf("%s:%u: %s=%s", k->file, k->line, k->key, k->value);
        return true;
}

void cpu_spec_note_beyond(const CpuSpec *s, const Topology *t, const char *tuner, PlanNotes *notes)
{
        char *why = cpu_spec_beyond(s, t);

        if (!why)
                return;
        for (size_t i = 0; i < notes->n; i++)
                if (streq(notes->items[i].object, strna(s->origin))) { /* [Power] is read by two tuners */
                        free(why);
                        return;
                }
        plan_notes_fail(notes, tuner, xstrdup(strna(s->origin)), EINVAL, why);
}

char *cpu_spec_beyond(const CpuSpec *s, const Topology *t)
{
        _cleanup_cpuset_ CpuSet *beyond = NULL;
        _cleanup_free_ char *list = NULL, *all = NULL;

        assert(s);
        assert(t);

        if (s->kind != CPU_SPEC_LIST || !t->possible)
                return NULL;
        beyond = cpuset_dup(s->list);
        cpuset_andnot(beyond, t->possible);
        if (cpuset_empty(beyond))
                return NULL;
        list = cpuset_format_list(beyond);
        all = cpuset_format_list(t->possible);
        return xasprintf("CPUs %s are not CPUs of this machine (its CPUs are %s)", list, all);
}

void cpu_spec_clear(CpuSpec *s)
{
        assert(s);

        free(s->origin);
        cpuset_free(s->list);
        *s = (CpuSpec){};
}

char *cpu_spec_format(const CpuSpec *s)
{
        assert(s);

        switch (s->kind) {
        case CPU_SPEC_UNSET:
                return xstrdup("");
        case CPU_SPEC_LIST:
                return cpuset_format_list(s->list);
        case CPU_SPEC_ALL:
                return xstrdup("all");
        case CPU_SPEC_HOUSEKEEPING:
                return xstrdup("housekeeping");
        case CPU_SPEC_ISOLATED:
                return xstrdup("isolated");
        case CPU_SPEC_AUTO:
                if (s->auto_prefer == CORE_PREFER_FAST)
                        return xasprintf("auto:%u", s->auto_cores);
                return xasprintf("auto:%u:%s", s->auto_cores, core_preference_to_string(s->auto_prefer));
        }
        return xstrdup("");
}

bool profile_name_valid(const char *name)
{
        if (isempty(name) || strlen(name) > 64)
                return false;
        for (const char *p = name; *p; p++)
                if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.')
                        return false;
        return name[0] != '.';
}

static int load_conf(const ConfSource *src, const char *name, char ***stack, const ConfKey *from, Conf **ret,
                     char **ret_error)
{
        _cleanup_free_ char *rel = xasprintf("profiles/%s.conf", name);
        _cleanup_conf_ Conf *own = NULL, *base = xmalloc0(sizeof(Conf));
        _cleanup_strv_free_ char **includes = NULL;
        ConfKey *inc;
        int r;

        if (strv_contains(*stack, name)) {
                _cleanup_free_ char *chain = NULL;
                for (char **s = *stack; *s; s++) {
                        char *c = xasprintf("%s%s -> ", strempty(chain), *s);
                        free(chain);
                        chain = c;
                }
                *ret_error = conf_key_error(from, "include cycle: %s%s", chain, name);
                return -EINVAL;
        }
        r = src->load(src->userdata, rel, &own, ret_error);
        if (r == -ENOENT) {
                *ret_error = from ? conf_key_error(from, "no profile named '%s'", name)
                                  : xasprintf("no profile named '%s'", name);
                return from ? -EINVAL : -ENOENT;
        }
        if (r < 0)
                return r;

        inc = conf_key(conf_section(own, "Profile"), "Include");
        if (inc)
                includes = strv_split(inc->value, " \t,;");
        strv_push(stack, xstrdup(name));
        for (char **i = includes; i && *i; i++) {
                Conf *parent = NULL;
                if (!profile_name_valid(*i)) {
                        *ret_error = conf_key_error(inc, "'%s' is not a profile name", *i);
                        return -EINVAL;
                }
                r = load_conf(src, *i, stack, inc, &parent, ret_error);
                if (r < 0)
                        return r;
                conf_merge(base, parent);
        }
        free((*stack)[strv_length(*stack) - 1]);
        (*stack)[strv_length(*stack) - 1] = NULL;

        conf_merge(base, TAKE_PTR(own));
        *ret = TAKE_PTR(base);
        return 0;
}

static bool section_known(const char *name)
{
        const char *attach = startswith(name, "Attach"), *hold = startswith(name, "Hold");

        if (streq(name, "Profile") || streq(name, "CPU") || (attach && (*attach == 0 || *attach == ' ')) ||
            (hold && (*hold == 0 || *hold == ' ')))
                return true;
        for (size_t i = 0; i < tuners_n(); i++)
                for (const char *const *s = tuner_nth(i)->sections; s && *s; s++) {
                        const char *rest = startswith(name, *s);
                        if (rest && (*rest == 0 || *rest == ' '))
                                return true;
                }
        return false;
}

/* A section with thousands of unknown keys is a wrong file, not thousands of typos: the first few, then a
 * count. */
#define UNKNOWN_KEYS_SHOWN 20

static void check_unused(Conf *c, char ***errors)
{
        for (size_t i = 0; i < c->n_sections; i++) {
                ConfSection *s = &c->sections[i];

                if (!section_known(s->name)) {
                        strv_push(errors, conf_section_error(s, "unknown section"));
                        continue;
                }
                size_t unknown = 0;
                for (size_t k = 0; k < s->n_keys; k++)
                        if (!s->keys[k].used && ++unknown <= UNKNOWN_KEYS_SHOWN)
                                strv_push(errors,
                                          conf_key_error(&s->keys[k], "unknown key in [%s]", s->name));
                if (unknown > UNKNOWN_KEYS_SHOWN)
                        strv_push(errors, conf_section_error(s, "and %zu more unknown keys",
                                                             unknown - UNKNOWN_KEYS_SHOWN));
        }
}

static void parse_core(Policy *p, Conf *c, char ***errors)
{
        ConfSection *prof = conf_section(c, "Profile");
        ConfSection *cpu = conf_section(c, "CPU");
        ConfKey *k;

        (void)conf_key(prof, "Include");
        k = conf_key(prof, "Description");
        p->description = xstrdup(k ? k->value : "");
        k = conf_key(prof, "Rank");
        if (k) {
                char *end;
                long v;
                errno = 0;
                v = strtol(k->value, &end, 10);
                if (errno || end == k->value || *end || v < 0 || v > 1000)
                        strv_push(errors, conf_key_error(k, "Rank= takes a number from 0 to 1000"));
                else
                        p->rank = (int)v;
        }

        k = conf_key(cpu, "Isolate");
        if (k && !isempty(k->value)) {
                _cleanup_free_ char *err = NULL;
                if (cpu_spec_parse(k->value, &p->isolate, &err) < 0)
                        strv_push(errors, conf_key_error(k, "%s", err));
                else if (p->isolate.kind != CPU_SPEC_LIST && p->isolate.kind != CPU_SPEC_AUTO) {
                        strv_push(errors, conf_key_error(k, "Isolate= takes a CPU list or auto:N"));
                        cpu_spec_clear(&p->isolate);
                } else if (p->isolate.kind == CPU_SPEC_LIST && cpuset_has(p->isolate.list, 0)) {
                        /* True on every machine: said where the key is, not when a pass places it. */
                        strv_push(errors, conf_key_error(k, "CPU 0 must stay a housekeeping CPU"));
                        cpu_spec_clear(&p->isolate);
                } else
                        p->isolate.origin = xasprintf("%s:%u: %s=%s", k->file, k->line, k->key, k->value);
        }
}

static int load_layered(void *userdata, const char *relpath, Conf **ret, char **ret_error)
{
        return conf_load_layered(userdata, relpath, ret, ret_error);
}

int policy_load(char *const *search_path, const char *name, Policy **ret, char **ret_error)
{
        return policy_load_from(&(ConfSource){load_layered, (void *)search_path}, name, ret, ret_error);
}

int policy_load_from(const ConfSource *src, const char *name, Policy **ret, char **ret_error)
{
        _cleanup_policy_ Policy *p = NULL;
        _cleanup_conf_ Conf *c = NULL;
        _cleanup_strv_free_ char **stack = NULL;
        _cleanup_strv_free_ char **errors = NULL;
        int r;

        assert(src);
        assert(name);
        assert(ret);

        if (!profile_name_valid(name)) {
                _cleanup_free_ char *shown = echo_text(name);
                *ret_error = xasprintf(
                    "'%s' is not a profile name (letters, digits, '-', '_', '.'; at most 64)", shown);
                return -EINVAL;
        }
        r = load_conf(src, name, &stack, NULL, &c, ret_error);
        if (r < 0)
                return r;

        p = xmalloc0(sizeof(Policy));
        p->name = xstrdup(name);
        parse_core(p, c, &errors);
        p->attach = attach_rules_parse(c, &errors);
        p->holds = hold_rules_parse(c, &errors);
        if (p->attach && p->isolate.kind == CPU_SPEC_UNSET)
                for (size_t i = 0; i < c->n_sections; i++)
                        if (startswith(c->sections[i].name, "Attach "))
                                strv_push(&errors, conf_section_error(&c->sections[i],
                                                                      "attach rules need isolated CPUs, and "
                                                                      "this profile isolates none ([CPU] "
                                                                      "Isolate=)"));
        for (size_t i = 0; i < tuners_n(); i++)
                if (!tuner_nth(i)->config_from)
                        p->config[i] = tuner_nth(i)->parse(c, &errors);
        for (size_t i = 0; i < tuners_n(); i++) {
                const Tuner *t = tuner_nth(i);
                int from = t->config_from ? tuner_place(t->config_from) : -1;

                if (from >= 0) {
                        const void *shared = p->config[from];
                        p->config[i] = shared && t->uses(shared) ? (void *)shared : NULL;
                }
        }
        check_unused(c, &errors);

        if (errors) {
                size_t len = 0;
                for (char **e = errors; *e; e++)
                        len += strlen(*e) + 1;
                *ret_error = xmalloc0(len + 1);
                for (char **e = errors; *e; e++) {
                        strcat(*ret_error, *e);
                        if (e[1])
                                strcat(*ret_error, "\n");
                }
                return -EINVAL;
        }
        *ret = TAKE_PTR(p);
        return 0;
}

void policy_free(Policy *p)
{
        if (!p)
                return;
        for (size_t i = 0; i < tuners_n(); i++)
                if (p->config[i] && !tuner_nth(i)->config_from)
                        tuner_nth(i)->free_config(p->config[i]);
        cpu_spec_clear(&p->isolate);
        attach_rules_free(p->attach);
        attach_rules_free(p->holds);
        free(p->name);
        free(p->description);
        free(p);
}

int policy_cpus(const Policy *p, const Topology *t, CpuSet **ret_isolated, CpuSet **ret_housekeeping,
                char **ret_error)
{
        return policy_cpus_explained(p, t, ret_isolated, ret_housekeeping, NULL, ret_error);
}

int policy_cpus_explained(const Policy *p, const Topology *t, CpuSet **ret_isolated,
                          CpuSet **ret_housekeeping, char **ret_reason, char **ret_error)
{
        assert(p);
        assert(t);

        _cleanup_cpuset_ CpuSet *iso = NULL, *hk = NULL;
        _cleanup_free_ char *reason = NULL, *spec = cpu_spec_format(&p->isolate);
        /* Where the key is, for every message: file:line: Isolate=..., or the key alone for a policy
         * not read from a file. */
        _cleanup_free_ char *where =
            p->isolate.origin ? xstrdup(p->isolate.origin) : xasprintf("Isolate=%s", spec);
        int r;

        switch (p->isolate.kind) {
        case CPU_SPEC_LIST:
                if (!cpuset_subset(p->isolate.list, t->possible)) {
                        _cleanup_free_ char *have = cpuset_format_list(t->possible);
                        *ret_error =
                            xasprintf("%s: names CPUs this machine does not have (it has %s)", where, have);
                        return -EINVAL;
                }
                iso = cpuset_new(t->n_cpus);
                cpuset_or(iso, p->isolate.list);
                break;
        case CPU_SPEC_AUTO:
                r = cores_pick(t, p->isolate.auto_cores, p->isolate.auto_prefer, &iso, &reason, ret_error);
                if (r < 0) {
                        char *bare = *ret_error;
                        *ret_error = xasprintf("%s: %s", where, bare);
                        free(bare);
                        return r;
                }
                break;
        default:
                iso = cpuset_new(t->n_cpus);
        }

        if (cpuset_has(iso, 0)) { /* a list is refused when loaded; auto:N never takes CPU 0's core */
                *ret_error = xasprintf("%s: CPU 0 must stay a housekeeping CPU", where);
                return -EINVAL;
        }
        hk = cpuset_dup(t->possible);
        cpuset_andnot(hk, iso);
        if (cpuset_empty(hk)) {
                *ret_error = xasprintf("%s: leaves no housekeeping CPU", where);
                return -EINVAL;
        }
        *ret_isolated = TAKE_PTR(iso);
        *ret_housekeeping = TAKE_PTR(hk);
        if (ret_reason)
                *ret_reason = TAKE_PTR(reason);
        return 0;
}

static int cmp_info(const void *a, const void *b)
{
        return strcmp(((const ProfileInfo *)a)->name, ((const ProfileInfo *)b)->name);
}

int profiles_list(char *const *search_path, ProfileInfo **ret, size_t *ret_n)
{
        _cleanup_strv_free_ char **names = NULL;
        ProfileInfo *l = NULL;
        size_t n = 0, allocated = 0;

        assert(search_path);
        assert(ret);
        assert(ret_n);

        for (char *const *dir = search_path; *dir; dir++) {
                _cleanup_free_ char *d = xasprintf("%s/profiles", *dir);
                _cleanup_closedir_ DIR *dd = opendir(d);
                struct dirent *de;

                if (!dd)
                        continue;
                while ((de = readdir(dd))) {
                        _cleanup_free_ char *name = NULL, *rel = NULL, *err = NULL;
                        _cleanup_conf_ Conf *c = NULL;
                        ConfKey *k;

                        if (!endswith(de->d_name, ".conf") || de->d_type == DT_DIR)
                                continue;
                        name = xstrndup(de->d_name, strlen(de->d_name) - 5);
                        if (!profile_name_valid(name) || strv_contains(names, name))
                                continue;
                        strv_push(&names, xstrdup(name));
                        rel = xasprintf("profiles/%s", de->d_name);
                        if (conf_load_layered(search_path, rel, &c, &err) < 0)
                                k = NULL;
                        else
                                k = conf_key(conf_section(c, "Profile"), "Description");
                        GREEDY_REALLOC(l, allocated, n + 1);
                        l[n++] = (ProfileInfo){.name = TAKE_PTR(name),
                                               .description = xstrdup(k     ? k->value
                                                                      : err ? "(invalid)"
                                                                            : "")};
                }
        }
        if (n > 1)
                qsort(l, n, sizeof(ProfileInfo), cmp_info);
        *ret = l;
        *ret_n = n;
        return 0;
}

void profiles_free(ProfileInfo *l, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                free(l[i].name);
                free(l[i].description);
        }
        free(l);
}
