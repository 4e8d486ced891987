/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The scheduler's own knobs under /sys/kernel/debug/sched, from the [Scheduler] section:
 * base_slice_ns=3000000, features=NO_TTWU_QUEUE. Which knobs exist says which scheduler runs: EEVDF
 * kernels (6.6 on) have base_slice_ns, CFS kernels had latency_ns, min_granularity_ns and
 * wakeup_granularity_ns. A knob the running kernel lacks is reported, never written under another name. */
#include <ctype.h>

#include "tuners/registry.h"
#include "shared/sysfs.h"

#define SCHED_DEBUG    "/sys/kernel/debug"
#define SCHED_DIR      SCHED_DEBUG "/sched/"
#define SCHED_FEATURES SCHED_DIR "features"

typedef struct SchedKnob {
        const char *name;
        /* What an EEVDF kernel has instead (NULL: nothing, or the knob is EEVDF's own). */
        const char *eevdf_instead;
} SchedKnob;

/* min_granularity_ns became base_slice_ns (the kernel renamed it when EEVDF made it the base request
 * size); latency_ns was CFS's target period, which base_slice_ns now sets the length of a turn for.
 * EEVDF decides wakeup preemption by deadlines: wakeup_granularity_ns has no successor. */
static const SchedKnob knobs[] = {
    {"base_slice_ns", NULL},
    {"latency_ns", "base_slice_ns"},
    {"min_granularity_ns", "base_slice_ns"},
    {"wakeup_granularity_ns", NULL},
    {"migration_cost_ns", NULL},
    {"nr_migrate", NULL},
};

typedef struct SchedConfig {
        char **knobs; /* "base_slice_ns" */
        char **values;
        char **features; /* "NO_TTWU_QUEUE", "HRTICK" */
} SchedConfig;

static void sched_free_config(void *p)
{
        SchedConfig *c = p;

        strv_free(c->knobs);
        strv_free(c->values);
        strv_free(c->features);
        free(c);
}

static const SchedKnob *sched_knob(const char *name)
{
        for (size_t i = 0; i < ELEMENTSOF(knobs); i++)
                if (streq(knobs[i].name, name))
                        return &knobs[i];
        return NULL;
}

static bool sched_feature_valid(const char *f)
{
        if (isempty(f) || streq(f, "NO_"))
                return false;
        for (const char *c = f; *c; c++)
                if (!isupper((unsigned char)*c) && !isdigit((unsigned char)*c) && *c != '_')
                        return false;
        return true;
}

static const char *feature_name(const char *f)
{
        return startswith(f, "NO_") ?: f;
}

static void sched_parse_features(SchedConfig *c, ConfKey *k, char ***errors)
{
        _cleanup_strv_free_ char **words = strv_split(k->value, " \t");

        for (size_t i = 0; words && words[i]; i++) {
                bool dup = false;

                if (!sched_feature_valid(words[i])) {
                        strv_push(errors,
                                  conf_key_error(k, "'%s' is not a scheduler feature name (NAME or NO_NAME)",
                                                 words[i]));
                        continue;
                }
                for (size_t j = 0; c->features && c->features[j]; j++)
                        if (streq(feature_name(c->features[j]), feature_name(words[i]))) {
                                strv_push(errors,
                                          conf_key_error(k, "'%s' is named twice", feature_name(words[i])));
                                dup = true;
                        }
                if (!dup)
                        strv_push(&c->features, xstrdup(words[i]));
        }
}

static bool sched_value_valid(const char *v)
{
        if (isempty(v))
                return false;
        for (const char *c = v; *c; c++)
                if (!isdigit((unsigned char)*c))
                        return false;
        return strlen(v) <= 19;
}

static void *sched_parse(Conf *conf, char ***errors)
{
        ConfSection *s = conf_section(conf, "Scheduler");
        SchedConfig *c;
        bool hinted = false;

        if (!s || s->n_keys == 0)
                return NULL;
        c = xmalloc0(sizeof(SchedConfig));
        for (size_t i = 0; i < s->n_keys; i++) {
                ConfKey *k = &s->keys[i];

                /* The first unknown key is told the knobs there are; the rest stay unused for the
                 * loader, which names a few and counts the others (one error each made a profile with
                 * thousands of them load in quadratic time). */
                if (!streq(k->key, "features") && !sched_knob(k->key)) {
                        if (!hinted)
                                strv_push(errors, conf_key_error(
                                                      k, "not a scheduler knob (base_slice_ns, latency_ns, "
                                                         "min_granularity_ns, wakeup_granularity_ns, "
                                                         "migration_cost_ns, nr_migrate, features)"));
                        k->used = !hinted;
                        hinted = true;
                        continue;
                }
                k->used = true;
                if (streq(k->key, "features")) {
                        sched_parse_features(c, k, errors);
                        continue;
                }
                if (!sched_value_valid(k->value)) {
                        strv_push(errors, conf_key_error(k, "expected a whole number"));
                        continue;
                }
                strv_push(&c->knobs, xstrdup(k->key));
                strv_push(&c->values, xstrdup(k->value));
        }
        return c;
}

/* Why nothing under /sys/kernel/debug/sched can be used, or NULL when it can. */
static char *sched_unavailable(void)
{
        _cleanup_free_ char *features = NULL;
        DIR *d;
        int r;

        if (!sys_exists(SCHED_DIR)) {
                bool empty = true;

                d = sys_opendir(SCHED_DEBUG);
                if (d) {
                        for (struct dirent *de; (de = readdir(d));)
                                if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
                                        empty = false;
                        closedir(d);
                }
                if (empty)
                        return xstrdup(
                            "not supported: debugfs is not mounted (mount -t debugfs none " SCHED_DEBUG ")");
                return xstrdup("not supported: this kernel has no " SCHED_DIR);
        }
        /* Kernel lockdown (integrity or confidentiality) lets debugfs be mounted but refuses every read. */
        r = sys_read(SCHED_FEATURES, &features);
        if (r == -EPERM || r == -EACCES)
                return xstrdup(
                    "not supported: the kernel's lockdown forbids debugfs access (see kernel_lockdown(7))");
        return NULL;
}

static char *sched_knob_missing(const SchedKnob *k, bool eevdf)
{
        if (eevdf && k->eevdf_instead)
                return xasprintf("not supported: use %s (this kernel schedules with EEVDF)",
                                 k->eevdf_instead);
        return xstrdup("not supported by this kernel");
}

static void sched_plan_features(const SchedConfig *c, Plan *plan, PlanNotes *notes)
{
        _cleanup_free_ char *all = NULL;
        _cleanup_strv_free_ char **have = NULL;

        if (!c->features)
                return;
        if (sys_read(SCHED_FEATURES, &all) < 0) {
                for (size_t i = 0; c->features[i]; i++)
                        plan_notes_add(notes, "scheduler",
                                       xasprintf(SCHED_FEATURES "/%s", feature_name(c->features[i])),
                                       xstrdup("not supported: this kernel has no " SCHED_FEATURES));
                return;
        }
        have = strv_split(all, " \t\n");
        for (size_t i = 0; c->features[i]; i++) {
                const char *name = feature_name(c->features[i]);
                _cleanup_free_ char *no = xasprintf("NO_%s", name);
                char *object = xasprintf(SCHED_FEATURES "/%s", name);

                if (!strv_contains(have, name) && !strv_contains(have, no)) {
                        plan_notes_add(notes, "scheduler", object,
                                       xstrdup("not supported: not a feature of this kernel's scheduler"));
                        continue;
                }
                plan_add(plan, &setting_kind_sched_feature, "scheduler", 0, object,
                         xstrdup(startswith(c->features[i], "NO_") ? "off" : "on"));
        }
}

static int sched_plan(const PlanContext *ctx, const void *config, const char *device, Plan *plan,
                      PlanNotes *notes)
{
        const SchedConfig *c = config;
        _cleanup_free_ char *why = sched_unavailable();
        bool eevdf;

        if (why) {
                for (size_t i = 0; c->knobs && c->knobs[i]; i++)
                        plan_notes_add(notes, "scheduler", xasprintf(SCHED_DIR "%s", c->knobs[i]),
                                       xstrdup(why));
                for (size_t i = 0; c->features && c->features[i]; i++)
                        plan_notes_add(notes, "scheduler",
                                       xasprintf(SCHED_FEATURES "/%s", feature_name(c->features[i])),
                                       xstrdup(why));
                return 0;
        }
        /* Decided by what the kernel has, never by its version: a distribution kernel may carry either. */
        eevdf = sys_exists(SCHED_DIR "base_slice_ns");
        for (size_t i = 0; c->knobs && c->knobs[i]; i++) {
                char *path = xasprintf(SCHED_DIR "%s", c->knobs[i]);

                if (!sys_exists(path)) {
                        plan_notes_add(notes, "scheduler", path,
                                       sched_knob_missing(sched_knob(c->knobs[i]), eevdf));
                        continue;
                }
                plan_add(plan, &setting_kind_file, "scheduler", 0, path, xstrdup(c->values[i]));
        }
        sched_plan_features(c, plan, notes);
        return 0;
}

const Tuner tuner_sched = {
    .name = "scheduler",
    .sections = (const char *const[]){"Scheduler", NULL},
    .parse = sched_parse,
    .free_config = sched_free_config,
    .plan = sched_plan,
};
