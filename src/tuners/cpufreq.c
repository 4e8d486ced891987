/* SPDX-License-Identifier: GPL-2.0-or-later */
/* cpufreq: governor, energy/performance preference, minimum frequency and boost, per cpufreq policy
 * (policyN/, which may govern several CPUs: related_cpus). A policy shared with a CPU outside the set
 * is reported, never silently widened; a value the driver does not offer is a failure naming what it
 * offers. intel_pstate (active and passive), amd-pstate and acpi-cpufreq each keep boost in their own
 * knob. */
#include <dirent.h>
#include <stdlib.h>

#include "tuners/registry.h"
#include "shared/sysfs.h"
#include "tuners/irq.h"
#include "tuners/power-config.h"

#define CPUFREQ "/sys/devices/system/cpu/cpufreq"

enum {
        PHASE_GOVERNOR = 0,
        PHASE_AFTER = 1, /* EPP, minimum frequency, boost: some drivers refuse them under the old governor */
};

static void *cpufreq_parse(Conf *conf, char ***errors)
{
        return power_config_parse(conf, errors);
}

static char *read_attr(const char *policy, const char *attr)
{
        _cleanup_free_ char *p = xasprintf(CPUFREQ "/%s/%s", policy, attr);
        char *s = NULL;

        char *t;

        if (sys_read(p, &s) < 0)
                return NULL;
        t = strstrip(s);
        memmove(s, t, strlen(t) + 1);
        return s;
}

/* related_cpus and affected_cpus are space separated: "5 69". */
static CpuSet *read_cpus(const char *policy, const char *attr, unsigned size)
{
        _cleanup_free_ char *s = read_attr(policy, attr);
        _cleanup_strv_free_ char **words = s ? strv_split(s, " \t") : NULL;
        CpuSet *set = cpuset_new(size);
        unsigned cpu;

        for (char **w = words; w && *w; w++)
                if (safe_atou(*w, &cpu) >= 0 && cpu < size)
                        cpuset_add(set, cpu);
        return set;
}

static bool offered(const char *list, const char *value)
{
        _cleanup_strv_free_ char **words = strv_split(strempty(list), " \t");

        return strv_contains(words, value);
}

typedef struct Policy1 {
        const char *name;
        CpuSet *related;
        char *driver;
} Policy1;

/* The first set that sets the key (non-NULL from get) and covers some CPU of the policy; NULL if none.
 * *ret_partial is set when that set leaves some of the policy's CPUs out. */
static const PowerSet *set_for(const PowerConfig *c, const PlanContext *ctx, const Policy1 *pol,
                               bool (*sets)(const PowerSet *), bool *ret_partial, CpuSet **ret_cpus)
{
        for (size_t i = 0; i < c->n; i++) {
                CpuSet *cpus;
                if (!sets(&c->sets[i]))
                        continue;
                cpus = power_set_cpus(&c->sets[i], ctx);
                if (!cpuset_intersects(cpus, pol->related)) {
                        cpuset_free(cpus);
                        continue;
                }
                *ret_partial = !cpuset_subset(pol->related, cpus);
                *ret_cpus = cpus;
                return &c->sets[i];
        }
        return NULL;
}

static bool sets_governor(const PowerSet *s)
{
        return s->governor;
}
static bool sets_epp(const PowerSet *s)
{
        return s->epp;
}
static bool sets_min(const PowerSet *s)
{
        return s->min_freq;
}
static bool sets_boost(const PowerSet *s)
{
        return s->boost >= 0;
}

static bool whole_policy(const Policy1 *pol, const PowerSet *set, const char *key, bool partial,
                         const CpuSet *cpus, PlanNotes *notes)
{
        _cleanup_free_ char *rel = NULL, *want = NULL;

        if (!partial)
                return true;
        rel = cpuset_format_list(pol->related);
        want = cpuset_format_list(cpus);
        plan_notes_add(
            notes, "cpufreq", xasprintf(CPUFREQ "/%s", pol->name),
            xasprintf("%s= of [%s] not applied: %s governs CPUs %s together and [%s] covers only %s "
                      "of them",
                      key, set->section, pol->name, rel, set->section, want));
        return false;
}

static void plan_governor(const PowerConfig *c, const PlanContext *ctx, const Policy1 *pol, Plan *plan,
                          PlanNotes *notes, char **ret_governor)
{
        _cleanup_cpuset_ CpuSet *cpus = NULL;
        _cleanup_free_ char *avail = NULL;
        bool partial;
        const PowerSet *s = set_for(c, ctx, pol, sets_governor, &partial, &cpus);

        *ret_governor = read_attr(pol->name, "scaling_governor");
        if (!s || !whole_policy(pol, s, "Governor", partial, cpus, notes))
                return;
        avail = read_attr(pol->name, "scaling_available_governors");
        if (!offered(avail, s->governor)) {
                plan_notes_fail(notes, "cpufreq", xasprintf(CPUFREQ "/%s/scaling_governor", pol->name),
                                EINVAL,
                                xasprintf("Governor=%s of [%s] is not offered by %s (it offers: %s)",
                                          s->governor, s->section, strempty(pol->driver), strempty(avail)));
                return;
        }
        plan_add(plan, &setting_kind_file, "cpufreq", PHASE_GOVERNOR,
                 xasprintf(CPUFREQ "/%s/scaling_governor", pol->name), xstrdup(s->governor));
        free(*ret_governor);
        *ret_governor = xstrdup(s->governor);
}

static void plan_epp(const PowerConfig *c, const PlanContext *ctx, const Policy1 *pol, const char *governor,
                     Plan *plan, PlanNotes *notes)
{
        _cleanup_cpuset_ CpuSet *cpus = NULL;
        _cleanup_free_ char *avail = NULL, *file = NULL;
        bool partial;
        const PowerSet *s = set_for(c, ctx, pol, sets_epp, &partial, &cpus);
        unsigned raw;

        if (!s || !whole_policy(pol, s, "EnergyPerformancePreference", partial, cpus, notes))
                return;
        file = xasprintf(CPUFREQ "/%s/energy_performance_preference", pol->name);
        if (!sys_exists(file)) {
                plan_notes_add(
                    notes, "cpufreq", TAKE_PTR(file),
                    xasprintf("%s has no energy/performance preference (EPP needs intel_pstate or "
                              "amd-pstate in active mode)",
                              strempty(pol->driver)));
                return;
        }
        avail = read_attr(pol->name, "energy_performance_available_preferences");
        if (!offered(avail, s->epp) &&
            !(safe_atou(s->epp, &raw) >= 0 && streq_ptr(pol->driver, "intel_pstate"))) {
                plan_notes_fail(
                    notes, "cpufreq", TAKE_PTR(file), EINVAL,
                    xasprintf("EnergyPerformancePreference=%s of [%s] is not offered by %s (it offers: "
                              "%s)",
                              s->epp, s->section, strempty(pol->driver), strempty(avail)));
                return;
        }
        /* Both pstate drivers pin EPP to performance under the performance governor (EBUSY otherwise). */
        if (streq_ptr(governor, "performance") && !streq(s->epp, "performance")) {
                plan_notes_fail(
                    notes, "cpufreq", TAKE_PTR(file), EBUSY,
                    xasprintf("EnergyPerformancePreference=%s of [%s]: %s keeps EPP at performance "
                              "under the performance governor",
                              s->epp, s->section, strempty(pol->driver)));
                return;
        }
        plan_add(plan, &setting_kind_file, "cpufreq", PHASE_AFTER, TAKE_PTR(file), xstrdup(s->epp));
}

static void plan_min_freq(const PowerConfig *c, const PlanContext *ctx, const Policy1 *pol, Plan *plan,
                          PlanNotes *notes)
{
        _cleanup_cpuset_ CpuSet *cpus = NULL;
        _cleanup_free_ char *smin = NULL, *smax = NULL;
        bool partial;
        const PowerSet *s = set_for(c, ctx, pol, sets_min, &partial, &cpus);
        unsigned lo, hi, want;
        size_t n;

        if (!s || !whole_policy(pol, s, "MinFreq", partial, cpus, notes))
                return;
        smin = read_attr(pol->name, "cpuinfo_min_freq");
        smax = read_attr(pol->name, "cpuinfo_max_freq");
        if (!smin || !smax || safe_atou(smin, &lo) < 0 || safe_atou(smax, &hi) < 0)
                return;
        n = strlen(s->min_freq);
        if (streq(s->min_freq, "max"))
                want = hi;
        else if (s->min_freq[n - 1] == '%') {
                _cleanup_free_ char *num = xstrndup(s->min_freq, n - 1);
                unsigned pct = 0;
                (void)safe_atou(num, &pct);
                want = (unsigned)((unsigned long long)hi * pct / 100);
                want = MAX(want, lo);
        } else if (safe_atou(s->min_freq, &want) < 0 || want < lo || want > hi) {
                plan_notes_fail(notes, "cpufreq", xasprintf(CPUFREQ "/%s/scaling_min_freq", pol->name),
                                ERANGE,
                                xasprintf("MinFreq=%s of [%s] is outside what %s offers (%u-%u kHz)",
                                          s->min_freq, s->section, pol->name, lo, hi));
                return;
        }
        plan_add(plan, &setting_kind_file, "cpufreq", PHASE_AFTER,
                 xasprintf(CPUFREQ "/%s/scaling_min_freq", pol->name), xasprintf("%u", want));
}

static void plan_boost(const PowerConfig *c, const PlanContext *ctx, const Policy1 *pol, Plan *plan,
                       PlanNotes *notes, bool *global_done)
{
        _cleanup_cpuset_ CpuSet *cpus = NULL;
        _cleanup_free_ char *per = xasprintf(CPUFREQ "/%s/boost", pol->name);
        bool partial;
        const PowerSet *s = set_for(c, ctx, pol, sets_boost, &partial, &cpus);

        if (!s)
                return;
        if (sys_exists(per)) {
                if (whole_policy(pol, s, "Boost", partial, cpus, notes))
                        plan_add(plan, &setting_kind_file, "cpufreq", PHASE_AFTER, TAKE_PTR(per),
                                 xasprintf("%d", s->boost));
                return;
        }
        if (*global_done)
                return;
        *global_done = true;
        /* The driver's own machine-wide knob: set only by a set that covers every online CPU. */
        if (!cpuset_subset(ctx->topology->online, cpus)) {
                plan_notes_add(
                    notes, "cpufreq", xstrdup("boost"),
                    xasprintf("Boost= of [%s] not applied: %s boosts all CPUs or none; set it in a "
                              "section with CPUs=all",
                              s->section, strempty(pol->driver)));
                return;
        }
        if (sys_exists("/sys/devices/system/cpu/intel_pstate/no_turbo"))
                plan_add(plan, &setting_kind_file, "cpufreq", PHASE_AFTER,
                         xstrdup("/sys/devices/system/cpu/intel_pstate/no_turbo"),
                         xasprintf("%d", !s->boost));
        else if (sys_exists(CPUFREQ "/boost"))
                plan_add(plan, &setting_kind_file, "cpufreq", PHASE_AFTER, xstrdup(CPUFREQ "/boost"),
                         xasprintf("%d", s->boost));
        else
                plan_notes_add(notes, "cpufreq", xstrdup("boost"),
                               xasprintf("%s has no boost switch", strempty(pol->driver)));
}

static int cmp_str(const void *a, const void *b)
{
        return strverscmp(*(char *const *)a, *(char *const *)b);
}

static int cpufreq_plan(const PlanContext *ctx, const void *config, const char *device, Plan *plan,
                        PlanNotes *notes)
{
        const PowerConfig *c = config;
        _cleanup_closedir_ DIR *d = NULL;
        _cleanup_strv_free_ char **names = NULL;
        struct dirent *de;
        bool global_boost = false;

        if (!power_config_has_cpufreq(c))
                return 0;
        power_config_note_beyond(c, ctx, notes);
        d = sys_opendir(CPUFREQ);
        while (d && (de = readdir(d)))
                if (startswith(de->d_name, "policy"))
                        strv_push(&names, xstrdup(de->d_name));
        if (!names) {
                plan_notes_add(
                    notes, "cpufreq", xstrdup(CPUFREQ),
                    xstrdup("no cpufreq driver: governor, EPP, frequency and boost cannot be set here"));
                return 0;
        }
        qsort(names, strv_length(names), sizeof(char *), cmp_str);
        for (char **n = names; *n; n++) {
                _cleanup_cpuset_ CpuSet *affected = read_cpus(*n, "affected_cpus", ctx->topology->n_cpus);
                _cleanup_free_ char *governor = NULL;
                Policy1 pol = {.name = *n};

                /* A policy whose CPUs are all offline is inactive: its files answer EBUSY. */
                cpuset_and(affected, ctx->topology->online);
                if (cpuset_empty(affected))
                        continue;
                pol.related = read_cpus(*n, "related_cpus", ctx->topology->n_cpus);
                pol.driver = read_attr(*n, "scaling_driver");
                plan_governor(c, ctx, &pol, plan, notes, &governor);
                plan_epp(c, ctx, &pol, governor, plan, notes);
                plan_min_freq(c, ctx, &pol, plan, notes);
                plan_boost(c, ctx, &pol, plan, notes, &global_boost);
                cpuset_free(pol.related);
                free(pol.driver);
        }
        return 0;
}

const Tuner tuner_cpufreq = {
    .name = "cpufreq",
    .sections = (const char *const[]){"Power", NULL},
    .cpu_dependent = true,
    .parse = cpufreq_parse,
    .free_config = power_config_free,
    .plan = cpufreq_plan,
};
