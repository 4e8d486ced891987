/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Topology discovery on machine fixtures (tests/fixtures/gen-machine.py), and auto:N on them. */
#include "core/policy.h"
#include "core/topology.h"
#include "shared/sysfs.h"
#include "test.h"

static Topology *load_shape(const char *shape)
{
        _cleanup_free_ char *root = test_fixture(shape);
        Topology *t = NULL;

        sysroot_set(root);
        CHECK_INTEQ(topology_load(NULL, &t), 0);
        return t;
}

static char *list(const CpuSet *s)
{
        return cpuset_format_list(s);
}

TEST(vm2)
{
        _cleanup_topology_ Topology *t = load_shape("vm2");

        if (!t)
                return;
        CHECK_INTEQ(t->n_cpus, 2);
        _cleanup_free_ char *on = list(t->online);
        CHECK_STREQ(on, "0-1");
        CHECK_INTEQ(t->cpus[0].core, 0);
        CHECK_INTEQ(t->cpus[1].core, 1);
        CHECK_INTEQ(t->cpus[0].llc, t->cpus[1].llc);
        CHECK_INTEQ(t->cpus[1].package, 0);
}

TEST(smp2x8)
{
        _cleanup_topology_ Topology *t = load_shape("smp2x8");

        if (!t)
                return;
        CHECK_INTEQ(t->n_cpus, 32);
        /* Linux numbering: thread 0 of every core first, siblings 16 apart. */
        CHECK_INTEQ(t->cpus[17].core, 1);
        CHECK_INTEQ(t->cpus[1].core, 1);
        CHECK_INTEQ(t->cpus[24].core, 8);
        CHECK_INTEQ(t->cpus[17].package, 0);
        CHECK_INTEQ(t->cpus[24].package, 1);
        /* One L3 per socket, one node per socket. */
        CHECK_INTEQ(t->cpus[23].llc, 0);
        CHECK_INTEQ(t->cpus[31].llc, 8);
        CHECK_INTEQ(t->cpus[9].node, 1);
        CHECK_INTEQ(t->cpus[16].node, 0);
        /* CPU 29's one sibling is 13. */
        for (unsigned c = 0; c < t->n_cpus; c++)
                CHECK_INTEQ(t->cpus[c].core == t->cpus[29].core, c == 13 || c == 29);
}

TEST(holes_and_offline_cpus)
{
        _cleanup_topology_ Topology *t = load_shape("holes");
        Topology *again = NULL;

        if (!t)
                return;
        CHECK_INTEQ(t->n_cpus, 16);
        _cleanup_free_ char *pr = list(t->present), *on = list(t->online);
        CHECK_STREQ(pr, "0-5,8-13");
        CHECK_STREQ(on, "0-3,8-13");
        /* cpu4 is offline: x86 hides its topology. Its online sibling cpu12 is still a core of its
         * own number, not confused with another core. */
        CHECK(t->cpus[4].present && !t->cpus[4].online);
        CHECK_INTEQ(t->cpus[4].core, -1);
        CHECK_INTEQ(t->cpus[12].core, 12);
        CHECK_INTEQ(t->cpus[8].core, 0);
        CHECK(!t->cpus[6].present);
        CHECK_INTEQ(t->cpus[6].core, -1);

        /* What was known of an offline CPU while it was online is kept across a refresh. */
        t->cpus[4].package = 0;
        t->cpus[4].die = 0;
        t->cpus[4].core_id = t->cpus[12].core_id;
        t->cpus[4].llc = 0;
        CHECK_INTEQ(topology_load(t, &again), 0);
        if (again) {
                CHECK_INTEQ(again->cpus[4].core, 4);
                CHECK_INTEQ(again->cpus[12].core, 4);
                CHECK_INTEQ(again->cpus[4].llc, 0);
        }
        topology_free(again);
}

/* The CPUs Isolate=spec isolates on the shape, and in *ret_reason (when given) why. */
static char *isolate_why(const char *shape, const char *spec, char **ret_reason, char **ret_error)
{
        _cleanup_topology_ Topology *t = load_shape(shape);
        _cleanup_cpuset_ CpuSet *iso = NULL, *hk = NULL;
        Policy p = {};
        char *result = NULL;

        *ret_error = NULL;
        if (ret_reason)
                *ret_reason = NULL;
        if (!t || cpu_spec_parse(spec, &p.isolate, ret_error) < 0)
                return NULL;
        if (policy_cpus_explained(&p, t, &iso, &hk, ret_reason, ret_error) >= 0)
                result = list(iso);
        cpu_spec_clear(&p.isolate);
        return result;
}

static char *isolate(const char *shape, const char *spec, char **ret_error)
{
        return isolate_why(shape, spec, NULL, ret_error);
}

TEST(hybrid_and_ccd_topology)
{
        _cleanup_topology_ Topology *ih = load_shape("intel-hybrid");
        _cleanup_topology_ Topology *x3d = load_shape("ryzen-x3d");

        if (!ih || !x3d)
                return;
        CHECK(ih->hybrid);
        CHECK_INTEQ(ih->cpus[15].type, CORE_TYPE_PERFORMANCE);
        CHECK_INTEQ(ih->cpus[16].type, CORE_TYPE_EFFICIENT);
        CHECK_INTEQ(ih->cpus[15].core, 14);
        CHECK_INTEQ(ih->cpus[21].cluster, 20);
        CHECK_INTEQ(ih->cpus[15].cluster, 14);
        CHECK_INTEQ(ih->cpus[3].max_freq_khz, 5100000);
        CHECK_INTEQ(ih->cpus[20].max_freq_khz, 3900000);
        CHECK_INTEQ(ih->cpus[20].highest_perf, 40);
        CHECK_INTEQ(ih->cpus[20].capacity, 0); /* the shape models a kernel without cpu_capacity */
        CHECK_INTEQ(ih->cpus[23].llc_bytes, 30u << 20);

        CHECK(!x3d->hybrid);
        CHECK_INTEQ(x3d->cpus[16].type, CORE_TYPE_UNKNOWN);
        CHECK_INTEQ(x3d->cpus[16].llc, 0);
        CHECK_INTEQ(x3d->cpus[16].llc_bytes, 96u << 20);
        CHECK_INTEQ(x3d->cpus[24].llc, 8);
        CHECK_INTEQ(x3d->cpus[24].llc_bytes, 32u << 20);
        CHECK_INTEQ(x3d->cpus[8].highest_perf, 236);

        /* P-cores are one tier, E-cores the slower one; AMD's per-core ranking is no core type. */
        unsigned n = 0;
        _cleanup_free_ int *ti = cores_tiers(ih, &n);
        CHECK_INTEQ(n, 2);
        CHECK_INTEQ(ti[2], 0);
        CHECK_INTEQ(ti[23], 1);
        _cleanup_free_ int *tx = cores_tiers(x3d, &n);
        CHECK_INTEQ(n, 1);
        CHECK(tx && tx[1] == 0);
}

typedef struct Choice {
        const char *shape, *spec;
        const char *want; /* "CPUS | reason", or NULL: refused with the error below */
} Choice;

static void check_choices(const Choice *cases, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *err = NULL, *reason = NULL, *got = NULL;
                _cleanup_free_ char *cpus = isolate_why(cases[i].shape, cases[i].spec, &reason, &err);

                if (cpus)
                        got = xasprintf("%s | %s", cpus, strna(reason));
                CHECK_STREQ(got, cases[i].want);
                if (!cases[i].want)
                        CHECK_CONTAINS(err, "whole cores besides CPU 0's");
        }
}

#define CHECK_CHOICES(...)                                                                                  \
        do {                                                                                                \
                const Choice _c[] = {__VA_ARGS__};                                                          \
                check_choices(_c, sizeof(_c) / sizeof(_c[0]));                                              \
        } while (0)

TEST(auto_on_hybrid_desktop)
{
        CHECK_CHOICES(
            /* The highest P-core, never the E-cores numbered above it. */
            {"intel-hybrid", "auto:1", "14-15 | P-cores on CPUs 14-15 in LLC 0 (30 MB)"},
            {"intel-hybrid", "auto:2", "12-15 | P-cores on CPUs 12-15 in LLC 0 (30 MB)"},
            /* E-cores when asked, from one cluster (shared L2). */
            {"intel-hybrid", "auto:2:efficient", "22-23 | E-cores on CPUs 22-23 in LLC 0 (30 MB)"},
            {"intel-hybrid", "auto:4:efficient", "20-23 | E-cores on CPUs 20-23 in LLC 0 (30 MB)"},
            /* One LLC: the cache preference changes nothing. */
            {"intel-hybrid", "auto:2:cache", "12-15 | P-cores on CPUs 12-15 in LLC 0 (30 MB)"},
            /* 7 P-cores besides CPU 0's: 8 cores can only be the E-cores. */
            {"intel-hybrid", "auto:8",
             "16-23 | E-cores on CPUs 16-23 in LLC 0 (30 MB); no LLC has 8 P-cores besides CPU 0's"});
}

TEST(auto_on_hybrid_laptop_with_two_p_cores)
{
        CHECK_CHOICES(
            /* The one P-core that is not CPU 0's. */
            {"laptop-hybrid", "auto:1", "2-3 | P-cores on CPUs 2-3 in LLC 0 (12 MB)"},
            /* Two cores of one type: only the E-cores have two, taken from one cluster. */
            {"laptop-hybrid", "auto:2",
             "10-11 | E-cores on CPUs 10-11 in LLC 0 (12 MB); no LLC has 2 P-cores besides CPU 0's"},
            /* Types are never mixed: 1 P-core + 8 E-cores is not 9 cores of one type. */
            {"laptop-hybrid", "auto:9", NULL});
}

TEST(auto_on_x3d)
{
        CHECK_CHOICES(
            /* Away from CPU 0's CCD, which is also the V-Cache one. */
            {"ryzen-x3d", "auto:2",
             "14-15,30-31 | cores on CPUs 14-15,30-31 in LLC 1 (32 MB), away from housekeeping's LLC 0"},
            /* :cache takes the 96 MB CCD even though housekeeping runs there. */
            {"ryzen-x3d", "auto:2:cache",
             "6-7,22-23 | cores on CPUs 6-7,22-23 in LLC 0 (96 MB), the largest last-level cache, shared "
             "with housekeeping"},
            {"ryzen-x3d", "auto:8",
             "8-15,24-31 | cores on CPUs 8-15,24-31 in LLC 1 (32 MB), away from housekeeping's LLC 0"},
            /* The V-Cache CCD has only 7 cores besides CPU 0's. */
            {"ryzen-x3d", "auto:8:cache",
             "8-15,24-31 | cores on CPUs 8-15,24-31 in LLC 1 (32 MB), the largest last-level cache with 8 "
             "free cores, away from housekeeping's LLC 0"},
            {"ryzen-x3d", "auto:9", NULL});
}

TEST(auto_on_two_equal_ccds)
{
        CHECK_CHOICES(
            {"ryzen-2ccd", "auto:2",
             "14-15,30-31 | cores on CPUs 14-15,30-31 in LLC 1 (32 MB), away from housekeeping's LLC 0"},
            /* Equal caches: the tie goes to the CCD housekeeping does not use. */
            {"ryzen-2ccd", "auto:2:cache",
             "14-15,30-31 | cores on CPUs 14-15,30-31 in LLC 1 (32 MB), the largest last-level cache, away "
             "from housekeeping's LLC 0"},
            /* One core type: efficient picks as the default does. */
            {"ryzen-2ccd", "auto:2:efficient",
             "14-15,30-31 | cores on CPUs 14-15,30-31 in LLC 1 (32 MB), away from housekeeping's LLC 0"},
            {"ryzen-2ccd", "auto:8",
             "8-15,24-31 | cores on CPUs 8-15,24-31 in LLC 1 (32 MB), away from housekeeping's LLC 0"});
}

TEST(auto_unchanged_with_one_type_and_one_llc)
{
        CHECK_CHOICES(
            /* The highest-numbered core, as before core types and LLC preferences. */
            {"laptop-intel", "auto:1", "3,7 | cores on CPUs 3,7 in LLC 0 (12 MB)"},
            {"laptop-intel", "auto:2:efficient", "2-3,6-7 | cores on CPUs 2-3,6-7 in LLC 0 (12 MB)"},
            {"vm2", "auto:1", "1 | cores on CPUs 1 in LLC 0 (32 MB)"},
            /* CPUs offline since boot have no known LLC: never taken for one housekeeping does not use. */
            {"holes", "auto:1", "13 | cores on CPUs 13 in LLC 0 (24 MB)"});
}

/* A machine the kernel describes by speed alone (arm64 cpu_capacity, or CPPC): one core per CPU, all in
 * LLC 0, no sizes. */
static Topology *speed_topology(unsigned n, const unsigned *capacity, const unsigned *perf)
{
        Topology *t = xmalloc0(sizeof(Topology));

        t->n_cpus = n;
        t->possible = cpuset_new(n);
        t->cpus = xmalloc0(sizeof(CpuInfo) * n);
        for (unsigned c = 0; c < n; c++) {
                cpuset_add(t->possible, c);
                t->cpus[c] = (CpuInfo){.package = 0,
                                       .die = 0,
                                       .core_id = (int)c,
                                       .core = (int)c,
                                       .llc = 0,
                                       .cluster = -1,
                                       .node = 0,
                                       .present = true,
                                       .online = true,
                                       .capacity = capacity ? capacity[c] : 0,
                                       .highest_perf = perf ? perf[c] : 0};
        }
        t->present = cpuset_dup(t->possible);
        t->online = cpuset_dup(t->possible);
        return t;
}

static char *pick(const Topology *t, unsigned n, CorePreference pref)
{
        _cleanup_cpuset_ CpuSet *s = NULL;
        _cleanup_free_ char *reason = NULL, *err = NULL, *cpus = NULL;

        if (cores_pick(t, n, pref, &s, &reason, &err) < 0)
                return xasprintf("error: %s", err);
        cpus = cpuset_format_list(s);
        return xasprintf("%s | %s", cpus, reason);
}

TEST(types_from_speed)
{
        /* big.LITTLE as arm64 reports it: LITTLE cores first, CPU 0 among them. */
        const unsigned big_little[] = {446, 446, 446, 446, 1024, 1024, 1024, 1024};
        /* big, middle, LITTLE: each more than 15% below the next faster. */
        const unsigned three[] = {160, 160, 160, 160, 800, 800, 1024, 1024};
        /* AMD's preferred-core ranking: a step of 5 is no core type. */
        const unsigned ranking[] = {236, 231, 226, 221, 216, 211, 206, 201};
        _cleanup_topology_ Topology *bl = speed_topology(8, big_little, NULL);
        _cleanup_topology_ Topology *tri = speed_topology(8, three, NULL);
        _cleanup_topology_ Topology *amd = speed_topology(8, NULL, ranking);
        unsigned n = 0;

        _cleanup_free_ int *tiers = cores_tiers(tri, &n);
        CHECK_INTEQ(n, 3);
        CHECK_INTEQ(tiers[0], 2);
        CHECK_INTEQ(tiers[4], 1);
        CHECK_INTEQ(tiers[7], 0);

        _cleanup_free_ char *a = pick(bl, 2, CORE_PREFER_FAST), *b = pick(bl, 2, CORE_PREFER_EFFICIENT);
        _cleanup_free_ char *c = pick(bl, 4, CORE_PREFER_FAST), *d = pick(tri, 3, CORE_PREFER_FAST);
        _cleanup_free_ char *e = pick(amd, 2, CORE_PREFER_FAST), *f = pick(tri, 2, CORE_PREFER_EFFICIENT);
        CHECK_STREQ(a, "6-7 | fastest cores on CPUs 6-7 in LLC 0");
        CHECK_STREQ(b, "2-3 | slower cores on CPUs 2-3 in LLC 0");
        /* 4 big cores, none CPU 0's. */
        CHECK_STREQ(c, "4-7 | fastest cores on CPUs 4-7 in LLC 0");
        /* Two big cores only: the next type down has three besides CPU 0's. */
        CHECK_STREQ(d,
                    "1-3 | slower cores on CPUs 1-3 in LLC 0; no LLC has 3 fastest cores besides CPU 0's");
        CHECK_STREQ(e, "6-7 | cores on CPUs 6-7 in LLC 0");
        CHECK_STREQ(f, "2-3 | slower cores on CPUs 2-3 in LLC 0");
}

TEST(auto_isolation_picks_whole_cores_in_one_llc_never_cpu0)
{
        _cleanup_free_ char *e1 = NULL, *e2 = NULL, *e3 = NULL, *e4 = NULL, *e5 = NULL, *e6 = NULL;
        _cleanup_free_ char *a = isolate("smp2x8", "auto:1", &e1);
        _cleanup_free_ char *b = isolate("smp2x8", "auto:3", &e2);
        _cleanup_free_ char *c = isolate("amd-workstation", "auto:2", &e3);
        _cleanup_free_ char *d = isolate("vm2", "auto:1", &e4);
        _cleanup_free_ char *x = isolate("smp2x8", "auto:8", &e5);
        _cleanup_free_ char *y = isolate("vm2", "auto:2", &e6);

        /* The highest core of the highest LLC, with its SMT sibling. */
        CHECK_STREQ(a, "15,31");
        CHECK_STREQ(b, "13-15,29-31");
        CHECK_STREQ(d, "1");
        /* A whole socket holds 8 cores; socket 1's LLC has all 8 and does not contain CPU 0. */
        CHECK_STREQ(x, "8-15,24-31");
        CHECK_STREQ(y, NULL);
        CHECK_CONTAINS(e6, "no last-level cache group has 2 whole cores besides CPU 0's");
        /* Two cores of the second CCX (away from CPU 0's): both siblings of each. */
        CHECK_STREQ(c, "6-7,14-15");
        CHECK(c != NULL);
        if (c) {
                _cleanup_cpuset_ CpuSet *s = NULL;
                CHECK_INTEQ(cpuset_parse_list(c, 16, &s, NULL), 0);
                CHECK_INTEQ(cpuset_count(s), 4);
                CHECK(!cpuset_has(s, 0));
        }
}

TEST(isolation_refusals)
{
        _cleanup_free_ char *e1 = NULL, *e2 = NULL, *e3 = NULL;
        _cleanup_free_ char *a = isolate("vm2", "0", &e1);
        _cleanup_free_ char *b = isolate("vm2", "0-1", &e2);
        _cleanup_free_ char *c = isolate("vm2", "1-5", &e3);

        CHECK_STREQ(a, NULL);
        CHECK_CONTAINS(e1, "Isolate=0: CPU 0 must stay a housekeeping CPU");
        CHECK_STREQ(b, NULL);
        CHECK_CONTAINS(e2, "Isolate=0-1: CPU 0 must stay a housekeeping CPU");
        CHECK_STREQ(c, NULL);
        CHECK_CONTAINS(e3, "Isolate=1-5: names CPUs this machine does not have (it has 0-1)");
}

TEST_MAIN(T(vm2), T(smp2x8), T(holes_and_offline_cpus),
          T(auto_isolation_picks_whole_cores_in_one_llc_never_cpu0), T(isolation_refusals),
          T(hybrid_and_ccd_topology), T(auto_on_hybrid_desktop), T(auto_on_hybrid_laptop_with_two_p_cores),
          T(auto_on_x3d), T(auto_on_two_equal_ccds), T(auto_unchanged_with_one_type_and_one_llc),
          T(types_from_speed))
