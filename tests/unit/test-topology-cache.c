/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The daemon's topology: CPU events mark it stale, and it is reread once, when next used. */
#include "daemon/topology-cache.h"
#include "shared/sysfs.h"
#include "test.h"

static char *online(TopologyCache *c)
{
        return cpuset_format_list(topology_cache_get(c)->online);
}

TEST(a_burst_of_cpu_events_rereads_the_topology_once)
{
        _cleanup_free_ char *root = test_fixture_copy("smp2x8");
        TopologyCache c = {0};

        sysroot_set(root);
        CHECK_INTEQ(topology_cache_load(&c), 0);
        CHECK_INTEQ(c.loads, 1);
        _cleanup_free_ char *before = online(&c);
        CHECK_STREQ(before, "0-31");

        /* A resume brings CPUs back one uevent each; the kernel's files change under them. */
        test_write(root, "sys/devices/system/cpu/online", "0-3\n");
        for (int cpu = 4; cpu < 32; cpu++)
                topology_cache_invalidate(&c);
        CHECK_INTEQ(c.loads, 1);
        _cleanup_free_ char *after = online(&c);
        CHECK_STREQ(after, "0-3");
        CHECK_INTEQ(c.loads, 2);
        /* Readers after the pass's read find it current, and read nothing. */
        _cleanup_free_ char *again = online(&c);
        CHECK_STREQ(again, "0-3");
        CHECK_INTEQ(c.loads, 2);
        topology_cache_clear(&c);
}

TEST(a_failed_reread_keeps_the_last_topology_until_the_next_event)
{
        _cleanup_free_ char *root = test_fixture_copy("vm2");
        _cleanup_free_ char *path = xasprintf("%s/sys/devices/system/cpu/online", root);
        TopologyCache c = {0};
        Topology *first;

        sysroot_set(root);
        CHECK_INTEQ(topology_cache_load(&c), 0);
        first = c.topology;
        CHECK(unlink(path) == 0);
        topology_cache_invalidate(&c);
        CHECK(topology_cache_get(&c) == first);
        CHECK(topology_cache_get(&c) == first);
        CHECK_INTEQ(c.loads, 1);
        test_write(root, "sys/devices/system/cpu/online", "0\n");
        topology_cache_invalidate(&c);
        _cleanup_free_ char *now = online(&c);
        CHECK_STREQ(now, "0");
        CHECK_INTEQ(c.loads, 2);
        topology_cache_clear(&c);
}

TEST_MAIN(T(a_burst_of_cpu_events_rereads_the_topology_once),
          T(a_failed_reread_keeps_the_last_topology_until_the_next_event))
