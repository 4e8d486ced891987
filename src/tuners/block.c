/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Block I/O: per-device scheduler and queue tunables, chosen by [Block NAME] rules. */
#include <fnmatch.h>

#include "tuners/registry.h"
#include "shared/sysfs.h"

enum {
        PHASE_QUEUE = 0,   /* scheduler and read-ahead */
        PHASE_IOSCHED = 1, /* iosched/ and nr_requests belong to the scheduler: set after the switch */
};

typedef struct BlockRule {
        char *name;
        char **match; /* "key:alt1|alt2", all must hold */
        char **schedulers;
        char **tunables; /* "key=value" */
        char *read_ahead_kb;
        char *nr_requests;
} BlockRule;

typedef struct BlockConfig {
        BlockRule *rules;
        size_t n_rules;
} BlockConfig;

static const char *const match_keys[] = {"rotational", "transport", "name", "model", "removable", NULL};
static const char *const transports[] = {"nvme", "sata", "scsi", "usb", "virtio",
                                         "mmc",  "loop", "zram", NULL};
static const char *const schedulers[] = {"none", "mq-deadline", "kyber", "bfq", NULL};

static bool in_list(const char *const *l, const char *s)
{
        for (; *l; l++)
                if (streq(*l, s))
                        return true;
        return false;
}

static void rule_clear(BlockRule *r)
{
        free(r->name);
        strv_free(r->match);
        strv_free(r->schedulers);
        strv_free(r->tunables);
        free(r->read_ahead_kb);
        free(r->nr_requests);
}

static void block_free_config(void *p)
{
        BlockConfig *c = p;

        for (size_t i = 0; i < c->n_rules; i++)
                rule_clear(&c->rules[i]);
        free(c->rules);
        free(c);
}

static bool check_match(ConfKey *k, char **conds, char ***errors)
{
        for (char **c = conds; *c; c++) {
                const char *colon = strchr(*c, ':');
                _cleanup_free_ char *key = colon ? xstrndup(*c, (size_t)(colon - *c)) : NULL;
                _cleanup_strv_free_ char **alts = NULL;

                if (!key || !in_list(match_keys, key) || isempty(colon + 1)) {
                        strv_push(errors,
                                  conf_key_error(k,
                                                 "'%s' is not a condition: expected rotational:0|1, "
                                                 "transport:T, name:GLOB, model:GLOB or removable:0|1",
                                                 *c));
                        return false;
                }
                alts = strv_split(colon + 1, "|");
                for (char **a = alts; *a; a++) {
                        _cleanup_free_ char *bad = glob_error(*a);
                        if (bad) {
                                strv_push(errors, conf_key_error(k, "%s", bad));
                                return false;
                        }
                        if ((streq(key, "rotational") || streq(key, "removable")) && !streq(*a, "0") &&
                            !streq(*a, "1")) {
                                strv_push(errors, conf_key_error(k, "%s: takes 0 or 1, not '%s'", key, *a));
                                return false;
                        }
                        if (streq(key, "transport") && !in_list(transports, *a)) {
                                strv_push(errors,
                                          conf_key_error(k,
                                                         "unknown transport '%s' (nvme, sata, scsi, usb, "
                                                         "virtio, mmc, loop, zram)",
                                                         *a));
                                return false;
                        }
                }
        }
        return true;
}

static bool check_uint(ConfKey *k, char ***errors)
{
        unsigned v;

        if (safe_atou(k->value, &v) < 0) {
                strv_push(errors, conf_key_error(k, "expected a whole number"));
                return false;
        }
        return true;
}

static bool parse_rule(ConfSection *s, const char *name, BlockRule *r, char ***errors)
{
        ConfKey *k;
        bool ok = true;

        *r = (BlockRule){.name = xstrdup(name)};
        k = conf_key(s, "Match");
        r->match = strv_split(k ? k->value : "", " \t");
        if (k)
                ok = check_match(k, r->match, errors) && ok;

        k = conf_key(s, "Scheduler");
        if (k) {
                r->schedulers = strv_split(k->value, " \t,");
                for (char **x = r->schedulers; *x; x++)
                        if (!in_list(schedulers, *x)) {
                                strv_push(errors,
                                          conf_key_error(k,
                                                         "unknown I/O scheduler '%s' (none, mq-deadline, "
                                                         "kyber, bfq)",
                                                         *x));
                                ok = false;
                        }
        }
        k = conf_key(s, "Tunables");
        if (k) {
                r->tunables = strv_split(k->value, " \t");
                for (char **t = r->tunables; *t; t++) {
                        const char *eq = strchr(*t, '=');
                        if (!eq || eq == *t || eq[1] == 0 || strcspn(*t, "/.") < (size_t)(eq - *t)) {
                                strv_push(errors, conf_key_error(k,
                                                                 "'%s' is not name=value of a queue/iosched "
                                                                 "tunable",
                                                                 *t));
                                ok = false;
                        }
                }
        }
        k = conf_key(s, "ReadAheadKB");
        if (k && check_uint(k, errors))
                r->read_ahead_kb = xstrdup(k->value);
        else if (k)
                ok = false;
        k = conf_key(s, "NrRequests");
        if (k && check_uint(k, errors))
                r->nr_requests = xstrdup(k->value);
        else if (k)
                ok = false;
        return ok;
}

static void *block_parse(Conf *conf, char ***errors)
{
        BlockConfig *c = xmalloc0(sizeof(BlockConfig));
        size_t allocated = 0;

        for (size_t i = 0; i < conf->n_sections; i++) {
                ConfSection *s = &conf->sections[i];
                const char *name = startswith(s->name, "Block");
                BlockRule r;

                if (!name || (*name != 0 && *name != ' '))
                        continue;
                s->used = true;
                name += strspn(name, " ");
                if (!*name) {
                        strv_push(errors, conf_section_error(s, "a block rule needs a name: [Block NAME]"));
                        continue;
                }
                if (!parse_rule(s, name, &r, errors)) {
                        rule_clear(&r);
                        continue;
                }
                GREEDY_REALLOC(c->rules, allocated, c->n_rules + 1);
                c->rules[c->n_rules++] = r;
        }
        if (c->n_rules == 0) {
                block_free_config(c);
                return NULL;
        }
        return c;
}

/* What a rule can match a disk on, read once per disk. */
typedef struct Disk {
        const char *name;
        char *rotational;
        char *removable;
        char *model;
        const char *transport;
} Disk;

static const char *disk_transport(const char *name, const char *target)
{
        if (startswith(name, "loop"))
                return "loop";
        if (startswith(name, "zram"))
                return "zram";
        if (strstr(target, "/nvme/") || startswith(name, "nvme"))
                return "nvme";
        if (strstr(target, "/mmc") || startswith(name, "mmcblk"))
                return "mmc";
        if (strstr(target, "/usb"))
                return "usb";
        if (strstr(target, "/virtio"))
                return "virtio";
        if (strstr(target, "/ata"))
                return "sata";
        if (strstr(target, "/host"))
                return "scsi";
        return "other";
}

static void disk_read(Disk *d, const char *name)
{
        _cleanup_free_ char *p = NULL, *target = NULL;

        *d = (Disk){.name = name};
        p = xasprintf("/sys/block/%s/queue/rotational", name);
        if (sys_read(p, &d->rotational) < 0)
                d->rotational = xstrdup("");
        free(p);
        p = xasprintf("/sys/block/%s/removable", name);
        if (sys_read(p, &d->removable) < 0)
                d->removable = xstrdup("");
        free(p);
        p = xasprintf("/sys/block/%s/device/model", name);
        if (sys_read(p, &d->model) < 0)
                d->model = xstrdup("");
        strstrip(d->model);
        free(p);
        p = xasprintf("/sys/block/%s", name);
        if (sys_readlink(p, &target) < 0)
                target = xstrdup("");
        d->transport = disk_transport(name, target);
}

static void disk_clear(Disk *d)
{
        free(d->rotational);
        free(d->removable);
        free(d->model);
}

static bool cond_holds(const Disk *d, const char *key, const char *value)
{
        if (streq(key, "rotational"))
                return streq(d->rotational, value);
        if (streq(key, "removable"))
                return streq(d->removable, value);
        if (streq(key, "transport"))
                return streq(d->transport, value);
        if (streq(key, "name"))
                return fnmatch(value, d->name, 0) == 0;
        if (streq(key, "model"))
                return fnmatch(value, d->model, 0) == 0;
        return false;
}

static bool rule_matches(const BlockRule *r, const Disk *d)
{
        for (char **c = r->match; *c; c++) {
                const char *colon = strchr(*c, ':');
                _cleanup_free_ char *key = xstrndup(*c, (size_t)(colon - *c));
                _cleanup_strv_free_ char **alts = strv_split(colon + 1, "|");
                bool any = false;

                for (char **a = alts; *a && !any; a++)
                        any = cond_holds(d, key, *a);
                if (!any)
                        return false;
        }
        return true;
}

/* An elevator built as a module (bfq, kyber on Debian) is not listed until it is loaded; writing its name
 * makes the kernel load it. It counts as offered when modules.dep has it (read once per kernel). */
static bool scheduler_loadable(const char *name)
{
        static char *dep, *dep_path;
        _cleanup_free_ char *mod = xasprintf("/%s.ko", name), *iosched = xasprintf("/%s-iosched.ko", name);
        _cleanup_free_ char *release = NULL, *path = NULL;

        if (sys_read("/proc/sys/kernel/osrelease", &release) < 0)
                return false;
        path = sys_path(release); /* keyed by root prefix and release: fixtures differ */
        if (!streq_ptr(path, dep_path)) {
                _cleanup_free_ char *file = xasprintf("/lib/modules/%s/modules.dep", strstrip(release));
                free(dep);
                free(dep_path);
                dep_path = TAKE_PTR(path);
                if (sys_read(file, &dep) < 0)
                        dep = NULL;
        }
        return dep && (strstr(dep, mod) || strstr(dep, iosched));
}

/* The scheduler file lists what the kernel offers: "none [mq-deadline] kyber bfq". */
static const char *pick_scheduler(char **wanted, const char *offered_line)
{
        _cleanup_strv_free_ char **offered = strv_split(offered_line, " []");

        for (char **w = wanted; *w; w++)
                if (strv_contains(offered, *w) || scheduler_loadable(*w))
                        return *w;
        return NULL;
}

static void plan_disk(const BlockConfig *c, const char *name, Plan *plan, PlanNotes *notes)
{
        _cleanup_free_ char *sched_path = xasprintf("/sys/block/%s/queue/scheduler", name);
        _cleanup_free_ char *offered = NULL;
        const BlockRule *rule = NULL;
        bool unsatisfied = false;
        Disk d;

        /* Bio-based devices (zram, some dm) have no scheduler file: nothing here to tune. */
        if (sys_read(sched_path, &offered) < 0)
                return;

        disk_read(&d, name);
        for (size_t i = 0; i < c->n_rules && !rule; i++)
                if (rule_matches(&c->rules[i], &d))
                        rule = &c->rules[i];
        disk_clear(&d);
        if (!rule)
                return;

        if (rule->schedulers) {
                const char *s = pick_scheduler(rule->schedulers, offered);
                unsatisfied = !s;
                if (s)
                        plan_add(plan, &setting_kind_choice, "block", PHASE_QUEUE, TAKE_PTR(sched_path),
                                 xstrdup(s));
                else {
                        _cleanup_free_ char *want = NULL;
                        for (char **w = rule->schedulers; *w; w++) {
                                char *n = xasprintf("%s%s%s", strempty(want), want ? " " : "", *w);
                                free(want);
                                want = n;
                        }
                        plan_notes_add(notes, "block", TAKE_PTR(sched_path),
                                       xasprintf("[Block %s]: the kernel offers none of '%s' (it has: %s)",
                                                 rule->name, want, offered));
                }
        }
        if (rule->read_ahead_kb)
                plan_add(plan, &setting_kind_file, "block", PHASE_QUEUE,
                         xasprintf("/sys/block/%s/queue/read_ahead_kb", name), xstrdup(rule->read_ahead_kb));
        /* Tunables belong to the scheduler the rule asked for: without it they are not there (or are
         * another scheduler's). */
        for (char **t = unsatisfied ? NULL : rule->tunables; t && *t; t++) {
                const char *eq = strchr(*t, '=');
                plan_add(plan, &setting_kind_file, "block", PHASE_IOSCHED,
                         xasprintf("/sys/block/%s/queue/iosched/%.*s", name, (int)(eq - *t), *t),
                         xstrdup(eq + 1));
        }
        if (rule->nr_requests)
                plan_add(plan, &setting_kind_file, "block", PHASE_IOSCHED,
                         xasprintf("/sys/block/%s/queue/nr_requests", name), xstrdup(rule->nr_requests));
}

static int block_plan(const PlanContext *ctx, const void *config, const char *device, Plan *plan,
                      PlanNotes *notes)
{
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;

        if (device) {
                /* Partitions have no entry in /sys/block and no queue of their own. */
                if (strchr(device, '/') || streq(device, ".") || streq(device, ".."))
                        return -EINVAL;
                plan_disk(config, device, plan, notes);
                return 0;
        }
        d = sys_opendir("/sys/block");
        if (!d)
                return -errno;
        while ((de = readdir(d)))
                if (de->d_name[0] != '.')
                        plan_disk(config, de->d_name, plan, notes);
        return 0;
}

const Tuner tuner_block = {
    .name = "block",
    .sections = (const char *const[]){"Block", NULL},
    .subsystems = (const char *const[]){"block", NULL},
    .parse = block_parse,
    .free_config = block_free_config,
    .plan = block_plan,
};
