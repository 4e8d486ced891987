/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Topology discovery on machine fixtures (tests/fixtures/gen-machine.py), and auto:N on them. */
#include "core/policy.h"
#include "core/topology.h"
#include "shared/sysfs.h"
#include "test.h"

static Topology *load_shape(const char *shape)
{
        _cleanup_free_ char *root = xasprintf("%s/%s", getenv("RTCTL_FIXTURES"), shape);
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
        _cleanup_cpuset_ CpuSet *sib = topology_core_siblings(t, 29);
        _cleanup_free_ char *l = list(sib);
        CHECK_STREQ(l, "13,29");
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

static char *isolate(const char *shape, const char *spec, char **ret_error)
{
        _cleanup_topology_ Topology *t = load_shape(shape);
        _cleanup_cpuset_ CpuSet *iso = NULL, *hk = NULL;
        Policy p = {};
        char *result = NULL;

        *ret_error = NULL;
        if (!t || cpu_spec_parse(spec, &p.isolate, ret_error) < 0)
                return NULL;
        if (policy_cpus(&p, t, &iso, &hk, ret_error) >= 0)
                result = list(iso);
        cpu_spec_clear(&p.isolate);
        return result;
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
        /* Two cores of the second CCX: both siblings of each. */
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
        CHECK_CONTAINS(e1, "includes CPU 0");
        CHECK_STREQ(b, NULL);
        CHECK_CONTAINS(e2, "includes CPU 0");
        CHECK_STREQ(c, NULL);
        CHECK_CONTAINS(e3, "names CPUs this machine does not have (it has 0-1)");
}

TEST_MAIN(T(vm2), T(smp2x8), T(holes_and_offline_cpus),
          T(auto_isolation_picks_whole_cores_in_one_llc_never_cpu0), T(isolation_refusals))
