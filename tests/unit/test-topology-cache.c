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

/* A CPU event rereads the files of the CPUs it moved, not of every CPU: where a CPU sits does not
 * change while it stays online, nor when it goes offline and online again; only a CPU that came (back)
 * into the present mask, a hot-add, is read again. The fixture's core_id of cpu5 and cpu6 changes under
 * them to show which reads happened. */
TEST(only_a_cpu_that_was_added_is_read_again)
{
        _cleanup_free_ char *root = test_fixture_copy("smp2x8");
        TopologyCache c = {0};

        sysroot_set(root);
        CHECK_INTEQ(topology_cache_load(&c), 0);
        CHECK_INTEQ(c.topology->cpus[5].core_id, 5);
        CHECK_INTEQ(c.topology->cpus[5].llc, 0);

        _cleanup_free_ char *dir = xasprintf("%s/sys/devices/system/cpu/cpu6/topology", root);
        _cleanup_free_ char *aside = xasprintf("%s.offline", dir);

        /* cpu6 goes offline, and like x86 the kernel takes its topology/ away. */
        test_write(root, "sys/devices/system/cpu/cpu5/topology/core_id", "6\n");
        test_write(root, "sys/devices/system/cpu/cpu6/online", "0\n");
        CHECK_INTEQ(rename(dir, aside), 0);
        test_write(root, "sys/devices/system/cpu/online", "0-5,7-31\n");
        topology_cache_invalidate(&c);
        CHECK(!topology_cache_get(&c)->cpus[6].online);
        CHECK_INTEQ(c.topology->cpus[5].core_id, 5); /* online all along: not read */
        CHECK_INTEQ(c.topology->cpus[6].core_id, 6); /* kept from before it went */
        CHECK_INTEQ(c.topology->cpus[6].core, 6);

        /* Back online: the same CPU in the same place, not read again. */
        CHECK_INTEQ(rename(aside, dir), 0);
        test_write(root, "sys/devices/system/cpu/cpu6/topology/core_id", "5\n");
        test_write(root, "sys/devices/system/cpu/cpu6/online", "1\n");
        test_write(root, "sys/devices/system/cpu/online", "0-31\n");
        topology_cache_invalidate(&c);
        CHECK(topology_cache_get(&c)->cpus[6].online);
        CHECK_INTEQ(c.topology->cpus[6].core_id, 6);
        CHECK_INTEQ(c.topology->cpus[6].core, 6);

        /* A CPU added or removed between two reads leaves the masks as they were: the add/remove
         * uevent itself says to read every place again: cpu5 too, online all along. */
        test_write(root, "sys/devices/system/cpu/cpu5/topology/core_id", "5\n");
        topology_cache_invalidate_places(&c);
        CHECK_INTEQ(topology_cache_get(&c)->cpus[6].core_id, 5);
        CHECK_INTEQ(c.topology->cpus[5].core_id, 5);
        test_write(root, "sys/devices/system/cpu/cpu6/topology/core_id", "6\n");

        /* Removed and added again (a hot-add may be another CPU): read. */
        test_write(root, "sys/devices/system/cpu/present", "0-5,7-31\n");
        test_write(root, "sys/devices/system/cpu/online", "0-5,7-31\n");
        topology_cache_invalidate(&c);
        CHECK(!topology_cache_get(&c)->cpus[6].present);
        test_write(root, "sys/devices/system/cpu/cpu6/topology/core_id", "5\n");
        test_write(root, "sys/devices/system/cpu/present", "0-31\n");
        test_write(root, "sys/devices/system/cpu/online", "0-31\n");
        topology_cache_invalidate(&c);
        CHECK(topology_cache_get(&c)->cpus[6].online);
        CHECK_INTEQ(c.topology->cpus[6].core_id, 5); /* came back: read */
        CHECK_INTEQ(c.topology->cpus[6].core, 5);    /* and numbered with what it says now */
        CHECK_INTEQ(c.topology->cpus[5].core_id, 5);
        CHECK_INTEQ(c.loads, 6);
        topology_cache_clear(&c);
}

TEST_MAIN(T(a_burst_of_cpu_events_rereads_the_topology_once),
          T(a_failed_reread_keeps_the_last_topology_until_the_next_event),
          T(only_a_cpu_that_was_added_is_read_again))
