/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <ctype.h>
#include <fnmatch.h>
#include <limits.h>
#include <pwd.h>
#include <sched.h>

#include "core/attach.h"
#include "core/policy.h"
#include "shared/sysfs.h"

/* The kernel keeps TASK_COMM_LEN - 1 characters of a name. */
#define COMM_MAX 15

static void term_clear(AttachTerm *t)
{
        strv_free(t->globs);
        free(t->uids);
}

static void rule_clear(AttachRule *r)
{
        for (size_t i = 0; i < r->n_terms; i++)
                term_clear(&r->terms[i]);
        free(r->terms);
        free(r->name);
        free(r->profile);
        strv_free(r->thread_globs);
}

void attach_rules_free(AttachRules *r)
{
        if (!r)
                return;
        for (size_t i = 0; i < r->n; i++)
                rule_clear(&r->rules[i]);
        free(r->rules);
        free(r);
}

/* A glob longer than the kernel keeps can never match a comm unless a wildcard absorbs the cut. */
static bool comm_glob_ok(const char *g)
{
        return strlen(g) <= COMM_MAX || strpbrk(g, "*?[") != NULL;
}

static int parse_user(const char *s, AttachTerm *t, char **ret_error)
{
        unsigned uid;

        if (streq(s, "active")) {
                t->active = true;
                return 0;
        }
        if (safe_atou(s, &uid) < 0) {
                /* Read when the profile is loaded, never on an event. */
                struct passwd *pw = getpwnam(s);
                if (!pw) {
                        *ret_error = xasprintf("no user named '%s' (a user name, a UID or active)", s);
                        return -EINVAL;
                }
                uid = pw->pw_uid;
        }
        GREEDY_REALLOC(t->uids, t->uids_allocated, t->n_uids + 1);
        t->uids[t->n_uids++] = (uid_t)uid;
        return 0;
}

static int parse_term(const char *word, AttachTerm *ret, char **ret_error)
{
        const char *colon = strchr(word, ':');
        _cleanup_strv_free_ char **alts = NULL;
        _cleanup_free_ char *key = NULL;
        AttachTerm t = {};

        if (!colon || colon == word || !colon[1]) {
                *ret_error = xasprintf("'%s' is not a condition: expected comm:GLOB, exe:PATH, user:NAME or "
                                       "graph:pipewire|jack",
                                       word);
                return -EINVAL;
        }
        key = xstrndup(word, (size_t)(colon - word));
        if (streq(key, "comm"))
                t.kind = ATTACH_COMM;
        else if (streq(key, "exe"))
                t.kind = ATTACH_EXE;
        else if (streq(key, "user"))
                t.kind = ATTACH_USER;
        else if (streq(key, "graph"))
                t.kind = ATTACH_GRAPH;
        else {
                *ret_error = xasprintf("unknown condition '%s': expected comm:, exe:, user: or graph:", key);
                return -EINVAL;
        }
        if (colon[1] == '|' || endswith(word, "|") || strstr(word, "||")) {
                *ret_error = xasprintf("'%s' has an empty alternative", word);
                return -EINVAL;
        }
        alts = strv_split(colon + 1, "|");
        for (char **a = alts; a && *a; a++) {
                int r = 0;
                if (t.kind == ATTACH_GRAPH) {
                        if (streq(*a, "pipewire"))
                                t.graphs |= ATTACH_GRAPH_PIPEWIRE;
                        else if (streq(*a, "jack"))
                                t.graphs |= ATTACH_GRAPH_JACK;
                        else {
                                *ret_error = xasprintf("graph:%s: the graphs are pipewire and jack", *a);
                                r = -EINVAL;
                        }
                } else if (t.kind != ATTACH_USER && (*ret_error = glob_error(*a)))
                        r = -EINVAL;
                else if (t.kind == ATTACH_USER)
                        r = parse_user(*a, &t, ret_error);
                else if (t.kind == ATTACH_COMM && !comm_glob_ok(*a)) {
                        *ret_error =
                            xasprintf("comm:%s can never match: the kernel keeps %d characters of a "
                                      "process name (write comm:%.*s*)",
                                      *a, COMM_MAX, COMM_MAX - 1, *a);
                        r = -EINVAL;
                } else if (t.kind == ATTACH_EXE && (*a)[0] != '/') {
                        *ret_error = xasprintf("exe:%s is not an absolute path", *a);
                        r = -EINVAL;
                } else
                        strv_push(&t.globs, xstrdup(*a));
                if (r < 0) {
                        term_clear(&t);
                        return r;
                }
        }
        *ret = t;
        return 0;
}

static void rule_error(char ***errors, const ConfKey *k, char *msg)
{
        strv_push(errors, conf_key_error(k, "%s", msg));
        free(msg);
}

static bool rule_names_users(const AttachRule *r)
{
        for (size_t i = 0; i < r->n_terms; i++)
                if (r->terms[i].kind == ATTACH_USER)
                        return true;
        return false;
}

/* Threads=: all alone, or alternatives: realtime and thread-name globs. */
static bool parse_threads(const ConfKey *k, AttachRule *r, char ***errors)
{
        _cleanup_strv_free_ char **alts = strv_split(k->value, " \t");
        bool ok = true;

        for (char **a = alts; a && *a; a++) {
                char *bad;
                if (streq(*a, "all")) {
                        if (strv_length(alts) > 1) {
                                rule_error(
                                    errors, k,
                                    xstrdup("all is the whole process: it takes no other alternative"));
                                ok = false;
                        }
                        r->all = true;
                } else if (streq(*a, "realtime"))
                        r->realtime = true;
                else if ((bad = glob_error(*a))) {
                        rule_error(errors, k, bad);
                        ok = false;
                } else if (!comm_glob_ok(*a)) {
                        rule_error(
                            errors, k,
                            xasprintf("%s can never match: the kernel keeps %d characters of a thread "
                                      "name",
                                      *a, COMM_MAX));
                        ok = false;
                } else
                        strv_push(&r->thread_globs, xstrdup(*a));
        }
        return ok;
}

static bool parse_rule(ConfSection *s, const char *name, bool hold, AttachRule *ret, char ***errors)
{
        ConfKey *match = conf_key(s, "Match"), *threads = hold ? NULL : conf_key(s, "Threads"),
                *profile = hold ? conf_key(s, "Profile") : NULL;
        _cleanup_strv_free_ char **words = NULL;
        AttachRule r = {.name = xstrdup(name)};
        size_t allocated = 0;
        bool ok = true;

        if (!match || isempty(match->value)) {
                strv_push(errors,
                          conf_section_error(s, hold ? "Match= is missing: a rule must say which "
                                                       "processes hold its profile (comm:, exe:, user:)"
                                                     : "Match= is missing: a rule must say which "
                                                       "processes it attaches (comm:, exe:, user:)"));
                ok = false;
        } else {
                words = strv_split(match->value, " \t");
                for (char **w = words; w && *w; w++) {
                        char *err = NULL;
                        AttachTerm t;
                        if (parse_term(*w, &t, &err) < 0) {
                                rule_error(errors, match, err);
                                ok = false;
                                continue;
                        }
                        if (hold && t.kind == ATTACH_GRAPH) {
                                /* A graph is mapped after the exec, and only [Attach] rules look again
                                 * then (a thread born real-time): a [Hold] rule would hold nothing. */
                                rule_error(errors, match,
                                           xasprintf("%s: a [Hold] rule cannot match graph: (the graph is "
                                                     "mapped after the program starts); match comm: or exe:",
                                                     *w));
                                term_clear(&t);
                                ok = false;
                                continue;
                        }
                        GREEDY_REALLOC(r.terms, allocated, r.n_terms + 1);
                        r.terms[r.n_terms++] = t;
                }
        }
        if (ok && !rule_names_users(&r)) {
                /* comm: and exe: are the process's to choose: without a user condition, any local user
                 * who names a process so would get onto the isolated CPUs without asking anyone. */
                rule_error(errors, match,
                           xasprintf("a rule must say whose processes %s: add user:active (the active "
                                     "session's user), a user name or a UID",
                                     hold ? "hold its profile" : "it attaches"));
                ok = false;
        }
        for (size_t t = 0; t < r.n_terms && !hold; t++)
                if (r.terms[t].kind == ATTACH_USER) {
                        r.names_need_realtime |= r.terms[t].active;
                        for (size_t u = 0; u < r.terms[t].n_uids; u++)
                                r.names_need_realtime |= r.terms[t].uids[u] != 0;
                }
        if (hold) {
                if (!profile || isempty(profile->value)) {
                        strv_push(errors,
                                  conf_section_error(s, "Profile= is missing: the profile held while "
                                                        "a matching process runs"));
                        ok = false;
                } else if (!profile_name_valid(profile->value)) {
                        rule_error(errors, profile,
                                   xasprintf("%s is not a profile name (letters, digits, - and _)",
                                             profile->value));
                        ok = false;
                } else
                        r.profile = xstrdup(profile->value);
        } else if (!threads || isempty(threads->value)) {
                strv_push(errors, conf_section_error(s, "Threads= is missing: realtime, thread-name globs, "
                                                        "or all for the whole process"));
                ok = false;
        } else if (!parse_threads(threads, &r, errors))
                ok = false;
        if (!ok) {
                rule_clear(&r);
                return false;
        }
        *ret = r;
        return true;
}

static AttachRules *rules_parse(Conf *conf, const char *kind, char ***errors)
{
        AttachRules *rules = xmalloc0(sizeof(AttachRules));
        bool hold = streq(kind, "Hold");
        size_t allocated = 0;

        assert(conf);

        for (size_t i = 0; i < conf->n_sections; i++) {
                ConfSection *s = &conf->sections[i];
                const char *name = startswith(s->name, kind);
                AttachRule r;

                if (!name || (*name != ' ' && *name != 0))
                        continue;
                s->used = true;
                name += strspn(name, " ");
                if (isempty(name)) {
                        strv_push(errors, conf_section_error(s, "a rule needs a name: [%s NAME]", kind));
                        continue;
                }
                if (!parse_rule(s, name, hold, &r, errors))
                        continue;
                GREEDY_REALLOC(rules->rules, allocated, rules->n + 1);
                rules->rules[rules->n++] = r;
                for (size_t t = 0; t < r.n_terms; t++) {
                        rules->uses_active |= r.terms[t].active;
                        rules->uses_graph |= r.terms[t].kind == ATTACH_GRAPH;
                }
                rules->uses_realtime |= r.realtime || (r.names_need_realtime && r.thread_globs);
        }
        if (rules->n == 0) {
                attach_rules_free(rules);
                return NULL;
        }
        return rules;
}

AttachRules *attach_rules_parse(Conf *conf, char ***errors)
{
        return rules_parse(conf, "Attach", errors);
}

AttachRules *hold_rules_parse(Conf *conf, char ***errors)
{
        return rules_parse(conf, "Hold", errors);
}

void attach_proc_init(AttachProc *p, unsigned pid, const char *comm)
{
        assert(p);

        *p = (AttachProc){.pid = pid, .realtime = -1};
        if (comm) {
                snprintf(p->comm, sizeof p->comm, "%s", comm);
                p->have_comm = true;
        }
}

void attach_proc_clear(AttachProc *p)
{
        assert(p);

        free(p->exe);
        p->exe = NULL;
}

static const char *proc_comm(AttachProc *p)
{
        if (!p->have_comm) {
                _cleanup_free_ char *path = xasprintf("/proc/%u/comm", p->pid), *s = NULL;
                p->have_comm = true;
                if (sys_read(path, &s) >= 0)
                        snprintf(p->comm, sizeof p->comm, "%s", s);
        }
        return p->comm;
}

static const char *proc_exe(AttachProc *p)
{
        if (!p->have_exe) {
                _cleanup_free_ char *path = xasprintf("/proc/%u/exe", p->pid);
                p->have_exe = true;
                if (sys_readlink(path, &p->exe) < 0)
                        p->exe = NULL;
        }
        return p->exe;
}

static int proc_uid(AttachProc *p, uid_t *ret)
{
        if (!p->have_uid) {
                _cleanup_free_ char *path = xasprintf("/proc/%u/status", p->pid), *s = NULL;
                const char *line;
                unsigned uid, euid, suid, fsuid;

                p->have_uid = true;
                p->uid_error = sys_read(path, &s);
                if (p->uid_error >= 0) {
                        line = strstr(s, "\nUid:");
                        if (!line || sscanf(line + 5, "%u %u %u %u", &uid, &euid, &suid, &fsuid) != 4)
                                p->uid_error = -EBADMSG;
                        else if (euid != uid || suid != uid || fsuid != uid)
                                /* A set-user-ID program (su linked as ~/jackd) is not its caller's
                                 * alone: it is nobody's to match, as AttachProcess asks for both uids. */
                                p->uid_error = -EPERM;
                        else
                                p->uid = (uid_t)uid;
                }
        }
        *ret = p->uid;
        return p->uid_error;
}

static bool any_glob(char *const *globs, const char *s)
{
        for (char *const *g = globs; s && g && *g; g++)
                if (fnmatch(*g, s, 0) == 0)
                        return true;
        return false;
}

static bool user_matches(const AttachTerm *t, AttachProc *p, const uid_t *active, size_t n_active)
{
        uid_t uid;

        if (proc_uid(p, &uid) < 0)
                return false;
        for (size_t i = 0; i < t->n_uids; i++)
                if (t->uids[i] == uid)
                        return true;
        for (size_t i = 0; t->active && i < n_active; i++)
                if (active[i] == uid)
                        return true;
        return false;
}

static bool proc_realtime(AttachProc *p)
{
        if (p->realtime < 0) {
                _cleanup_free_ char *dir = xasprintf("/proc/%u/task", p->pid);
                _cleanup_closedir_ DIR *d = sys_opendir(dir);
                struct dirent *de;
                unsigned tid;
                int policy;

                p->realtime = 0;
                while (d && (de = readdir(d)))
                        if (safe_atou(de->d_name, &tid) >= 0 &&
                            attach_thread_policy(p->pid, tid, &policy) >= 0 &&
                            attach_policy_realtime(policy)) {
                                p->realtime = 1;
                                break;
                        }
        }
        return p->realtime > 0;
}

static unsigned proc_graphs(AttachProc *p)
{
        if (!p->have_graphs) {
                _cleanup_free_ char *path = xasprintf("/proc/%u/maps", p->pid), *maps = NULL;
                p->have_graphs = true;
                if (sys_read(path, &maps) >= 0)
                        p->graphs = attach_maps_graphs(maps);
        }
        return p->graphs;
}

static bool term_matches(const AttachTerm *t, AttachProc *p, const uid_t *active, size_t n_active)
{
        switch (t->kind) {
        case ATTACH_GRAPH:
                return (proc_graphs(p) & t->graphs) != 0;
        case ATTACH_COMM:
                return any_glob(t->globs, proc_comm(p));
        case ATTACH_EXE:
                return any_glob(t->globs, proc_exe(p));
        case ATTACH_USER:
                return user_matches(t, p, active, n_active);
        }
        return false;
}

/* Whether a rule needs a real-time thread in the process: its only alternative is realtime, or it lets
 * in a user but root (whose named threads must be real-time too). */
static bool realtime_only(const AttachRule *r)
{
        return !r->all && (r->names_need_realtime || (r->realtime && !r->thread_globs));
}

/* Cheapest first, whatever order the file lists them in: comm often comes with the event, exe is one
 * readlink, the user one parsed file, the thread test (a realtime-only rule) one stat per thread, and
 * graph: the process's whole memory map, last. */
static bool rule_matches(const AttachRule *r, AttachProc *p, const uid_t *active, size_t n_active)
{
        static const AttachTermKind order[] = {ATTACH_COMM, ATTACH_EXE, ATTACH_USER};

        for (size_t o = 0; o < ELEMENTSOF(order); o++)
                for (size_t i = 0; i < r->n_terms; i++)
                        if (r->terms[i].kind == order[o] && !term_matches(&r->terms[i], p, active, n_active))
                                return false;
        if (realtime_only(r) && !proc_realtime(p))
                return false;
        for (size_t i = 0; i < r->n_terms; i++)
                if (r->terms[i].kind == ATTACH_GRAPH && !term_matches(&r->terms[i], p, active, n_active))
                        return false;
        return true;
}

int attach_rules_match(const AttachRules *r, AttachProc *p, const uid_t *active, size_t n_active)
{
        assert(p);
        assert(active || n_active == 0);

        for (size_t i = 0; r && i < r->n; i++)
                if (rule_matches(&r->rules[i], p, active, n_active))
                        return (int)i;
        return -1;
}

bool attach_policy_realtime(int policy)
{
        policy &= ~SCHED_RESET_ON_FORK;
        return policy == SCHED_FIFO || policy == SCHED_RR || policy == 6 /* SCHED_DEADLINE */;
}

int attach_stat_policy(const char *stat, int *ret)
{
        const char *p = strrchr(stat, ')');
        unsigned long long policy;
        char *end;

        assert(ret);

        /* "pid (comm) state ...": comm may hold anything, the last ')' ends it; policy is field 41. */
        if (!p)
                return -EBADMSG;
        p++;
        for (int field = 2; field < 41; field++) {
                if (*p != ' ')
                        return -EBADMSG;
                p++;
                if (field < 40)
                        p += strcspn(p, " \n");
        }
        if (!isdigit((unsigned char)*p))
                return -EBADMSG;
        errno = 0;
        policy = strtoull(p, &end, 10);
        if (errno || policy > INT_MAX || (*end != ' ' && *end != '\n' && *end))
                return -EBADMSG;
        *ret = (int)policy;
        return 0;
}

int attach_thread_policy(unsigned pid, unsigned tid, int *ret)
{
        _cleanup_free_ char *path = xasprintf("/proc/%u/task/%u/stat", pid, tid), *s = NULL;
        int r;

        r = sys_read(path, &s);
        if (r < 0)
                return r;
        return attach_stat_policy(s, ret);
}

unsigned attach_maps_graphs(const char *maps)
{
        static const struct {
                const char *path;
                unsigned graph;
        } markers[] = {
            /* PipeWire's buffers and its clients': memfd_create("pipewire-memfd:flags=...,type=...,
             * size=..."), which the kernel prints as "/memfd:NAME (deleted)" */
            {"/memfd:pipewire-memfd", ATTACH_GRAPH_PIPEWIRE},
            /* jack2's shared memory registry, mapped by jackd and by every client of it */
            {"/dev/shm/jack-shm-registry", ATTACH_GRAPH_JACK},
        };
        unsigned graphs = 0;

        assert(maps);

        for (const char *l = maps; *l;) {
                const char *eol = strchrnul(l, '\n'), *path = memchr(l, '/', (size_t)(eol - l));
                for (size_t i = 0; path && i < ELEMENTSOF(markers); i++) {
                        size_t len = strlen(markers[i].path);
                        if ((size_t)(eol - path) >= len && strneq(path, markers[i].path, len) &&
                            (path + len == eol || path[len] == ' ' || path[len] == ':'))
                                graphs |= markers[i].graph;
                }
                l = *eol ? eol + 1 : eol;
        }
        return graphs;
}

int attach_thread_tgid(unsigned tid, unsigned *ret)
{
        _cleanup_free_ char *path = xasprintf("/proc/%u/status", tid), *s = NULL;
        const char *line;
        int r;

        assert(ret);

        r = sys_read(path, &s);
        if (r < 0)
                return r == -ESRCH ? -ENOENT : r;
        line = strstr(s, "\nTgid:");
        if (!line || sscanf(line + 6, "%u", ret) != 1)
                return -EBADMSG;
        return 0;
}

unsigned attach_rule_wants_thread(const AttachRule *rule, const char *thread_comm, int policy)
{
        unsigned why = 0;

        assert(rule);

        if (rule->all)
                return ATTACH_WHY_ALL;
        if (rule->realtime && attach_policy_realtime(policy))
                why |= ATTACH_WHY_REALTIME;
        if (rule->names_need_realtime && !attach_policy_realtime(policy))
                return why;
        for (char **g = rule->thread_globs; thread_comm && g && *g; g++)
                if (fnmatch(*g, thread_comm, 0) == 0) {
                        why |= ATTACH_WHY_NAME;
                        break;
                }
        return why;
}

const char *attach_why_string(unsigned why)
{
        if (why & ATTACH_WHY_ALL)
                return "all";
        if ((why & ATTACH_WHY_REALTIME) && (why & ATTACH_WHY_NAME))
                return "realtime,name";
        if (why & ATTACH_WHY_REALTIME)
                return "realtime";
        if (why & ATTACH_WHY_NAME)
                return "name";
        return "";
}

int attach_list_threads(const AttachRule *rule, unsigned pid, AttachedThread **threads, size_t *n,
                        size_t *allocated)
{
        _cleanup_free_ char *dir = xasprintf("/proc/%u/task", pid);
        _cleanup_closedir_ DIR *d = sys_opendir(dir);
        struct dirent *de;

        assert(rule);
        assert(threads);
        assert(n);
        assert(allocated);

        if (!d)
                return errno == ENOENT || errno == ESRCH ? -ENOENT : -errno;
        while ((de = readdir(d))) {
                _cleanup_free_ char *path = NULL, *comm = NULL;
                AttachedThread *t;
                unsigned tid;
                int policy = SCHED_OTHER;

                if (safe_atou(de->d_name, &tid) < 0)
                        continue;
                path = xasprintf("/proc/%u/task/%u/comm", pid, tid);
                if (sys_read(path, &comm) < 0)
                        continue; /* it ended meanwhile */
                if ((rule->realtime || rule->names_need_realtime) &&
                    attach_thread_policy(pid, tid, &policy) < 0)
                        continue;
                GREEDY_REALLOC(*threads, *allocated, *n + 1);
                t = &(*threads)[(*n)++];
                *t = (AttachedThread){.pid = pid, .tid = tid, .rule = rule->name};
                snprintf(t->comm, sizeof t->comm, "%s", comm);
                t->why = attach_rule_wants_thread(rule, t->comm, policy);
                t->isolate = t->why != 0;
        }
        return 0;
}
