/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Isolation plans on small trees: the mechanism follows the cgroup setup the machine has. The v1 and
 * v2-with-systemd mechanisms also run for real (host tier, VM tier); v2 without systemd has no test bed
 * and is tested here only. */
#include "core/reconcile.h"
#include "core/systemd.h"
#include "shared/sysfs.h"
#include "test.h"

static PassResult res;

static char *tree(const char *name, const char *mounts)
{
        char *root = xasprintf("%s/%s", test_tmpdir(), name);

        test_write(root, "sys/devices/system/cpu/possible", "0-3\n");
        test_write(root, "sys/devices/system/cpu/online", "0-3\n");
        test_write(root, "proc/self/mounts", mounts);
        test_write(root, "proc/cmdline", "root=/dev/vda ro\n");
        /* One user process and one kernel thread (PF_KTHREAD, flags 0x00208040). */
        test_write(root, "proc/100/stat",
                   "100 (pipewire) S 1 100 100 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 2 0 5000\n");
        test_write(root, "proc/100/status", "Name:\tpipewire\nCpus_allowed_list:\t0-3\n");
        test_write(root, "proc/2/stat", "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 1\n");
        test_write(root, "proc/2/status", "Name:\tkthreadd\nCpus_allowed_list:\t0-3\n");
        return root;
}

static void plan_with(const char *root, const TaskId *attached, size_t n, SettingContext *kinds)
{
        _cleanup_policy_ Policy *p = test_profile("[Profile]\nDescription=i\n[CPU]\nIsolate=3\n");

        pass_result_clear(&res);
        if (p)
                test_pass_policy(root, p, NULL,
                                 &(PassInput){.attached = attached, .n_attached = n, .kinds = kinds}, &res);
}

static void plan(const char *root, const TaskId *attached, size_t n)
{
        plan_with(root, attached, n, NULL);
}

static const Setting *find(const char *object)
{
        return test_plan_find(&res.plan, object);
}

#define CHECK_PLANNED(object, want_desired)                                                                 \
        do {                                                                                                \
                const Setting *s_ = find(object);                                                           \
                CHECK(s_ != NULL);                                                                          \
                CHECK_STREQ(s_ ? s_->desired : NULL, want_desired);                                         \
        } while (0)

static bool noted(const char *what)
{
        for (size_t i = 0; i < res.notes.n; i++)
                if (strstr(res.notes.items[i].reason, what))
                        return true;
        return false;
}

/* Without systemd: rtctl-housekeeping takes the root's processes, rtctl-attached is the threaded domain
 * of the attached processes, whole ones in its isolated child. No cpuset.cpus.exclusive (6.1): no
 * partition, and a note says what that costs. */
TEST(v2_without_systemd_uses_a_threaded_domain)
{
        _cleanup_free_ char *root = tree("v2", "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0\n");
        TaskId attached[] = {{100, 5000}};

        test_write(root, "sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n");
        test_write(root, "sys/fs/cgroup/cgroup.subtree_control", "memory pids\n");
        test_write(root, "sys/fs/cgroup/cgroup.procs", "2\n100\n");
        test_write(root, "proc/100/cgroup", "0::/\n");
        plan(root, attached, 1);
        CHECK_PLANNED("/sys/fs/cgroup/cgroup.subtree_control", "cpuset");
        const Setting *sub = find("/sys/fs/cgroup/cgroup.subtree_control");
        CHECK_STREQ(sub ? sub->current : NULL, "no cpuset");
        CHECK_PLANNED("/sys/fs/cgroup/rtctl-housekeeping", "present");
        CHECK_PLANNED("/sys/fs/cgroup/rtctl-attached", "present");
        CHECK_PLANNED("/sys/fs/cgroup/rtctl-housekeeping/cpuset.cpus", "0-2");
        CHECK_PLANNED("/sys/fs/cgroup/rtctl-attached/cpuset.cpus", "0-3");
        CHECK_PLANNED("/sys/fs/cgroup/rtctl-attached/isolated", "present");
        CHECK_PLANNED("/sys/fs/cgroup/rtctl-attached/isolated/cgroup.type", "threaded");
        CHECK_PLANNED("/sys/fs/cgroup/rtctl-attached/isolated/cpuset.cpus", "3");
        CHECK_PLANNED("/sys/fs/cgroup/rtctl-attached/housekeeping/cgroup.type", "threaded");
        CHECK_PLANNED("/sys/fs/cgroup/rtctl-attached/housekeeping/cpuset.cpus", "0-2");
        CHECK_PLANNED("/sys/fs/cgroup/rtctl-attached/cgroup.subtree_control", "cpuset");
        CHECK(find("/sys/fs/cgroup/rtctl-attached/isolated/cpuset.cpus.partition") == NULL);
        CHECK(noted("no isolated partition"));
        CHECK(noted("isolcpus=domain, which rtctl bootargs asks for"));
        CHECK(!noted("an isolated partition"));
        CHECK_PLANNED("/sys/fs/cgroup/rtctl-housekeeping/cgroup.procs", "all from /sys/fs/cgroup");
        CHECK_PLANNED("/proc/100/cgroup", "/rtctl-attached/isolated");
        /* Kernel threads stay in the v2 root: their CPUs go through affinity. */
        CHECK_PLANNED("/proc/2/affinity", "0-2");
        CHECK(find("/proc/100/affinity") == NULL);
        CHECK_INTEQ(res.stats.failed, 0);
}

TEST(v1_uses_cpusets)
{
        _cleanup_free_ char *root = tree("v1", "cgroup /sys/fs/cgroup/cpuset cgroup rw,cpuset 0 0\n"
                                               "cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n");
        TaskId attached[] = {{100, 5000}};

        test_write(root, "sys/fs/cgroup/cpuset/cpuset.mems", "0\n");
        test_write(root, "sys/fs/cgroup/cpuset/cgroup.procs", "2\n100\n");
        test_write(root, "sys/fs/cgroup/unified/cgroup.controllers", "\n");
        test_write(root, "proc/100/cpuset", "/\n");
        plan(root, attached, 1);
        CHECK_PLANNED("/sys/fs/cgroup/cpuset/rtctl-isolated/cpuset.cpus", "3");
        CHECK_PLANNED("/sys/fs/cgroup/cpuset/rtctl-isolated/cpuset.cpu_exclusive", "1");
        CHECK_PLANNED("/sys/fs/cgroup/cpuset/cpuset.sched_load_balance", "0");
        CHECK_PLANNED("/proc/100/cpuset", "/rtctl-isolated");
        CHECK(find("/sys/fs/cgroup/cgroup.subtree_control") == NULL);
        CHECK_INTEQ(res.stats.failed, 0);
}

TEST(no_cpuset_controller_is_a_note)
{
        _cleanup_free_ char *root = tree("none", "proc /proc proc rw 0 0\n");

        plan(root, NULL, 0);
        CHECK(noted("no cpuset controller"));
        CHECK_INTEQ(res.stats.failed, 0);
}

/* Isolate= naming a CPU the machine could hot-add but has not (possible 0-3, present 0-2): planned as
 * asked (it is isolated once it comes), and a note says that nothing is isolated meanwhile. With the
 * CPU present, no such note. */
TEST(an_isolated_cpu_not_present_is_a_note)
{
        _cleanup_free_ char *root = tree("absent", "cgroup /sys/fs/cgroup/cpuset cgroup rw,cpuset 0 0\n");

        test_write(root, "sys/fs/cgroup/cpuset/cpuset.mems", "0\n");
        test_write(root, "sys/fs/cgroup/cpuset/cgroup.procs", "2\n100\n");
        test_write(root, "sys/devices/system/cpu/present", "0-2\n");
        test_write(root, "sys/devices/system/cpu/online", "0-2\n");
        plan(root, NULL, 0);
        CHECK(
            noted("isolated CPUs 3 are not present (the machine has 0-2; they may be hot-added): no CPU is "
                  "isolated until they are"));
        CHECK_INTEQ(res.stats.failed, 0);

        test_write(root, "sys/devices/system/cpu/present", "0-3\n");
        test_write(root, "sys/devices/system/cpu/online", "0-3\n");
        plan(root, NULL, 0);
        CHECK(!noted("not present"));
}

/* cgroup v2 under systemd: rtctl.slice has every CPU, the other top-level units the housekeeping ones.
 * systemd makes the attached processes' scope with the first of them; once it is there, its threaded
 * children follow, and where the kernel has cpuset.cpus.exclusive the isolated child becomes a remote
 * isolated partition (the exclusive CPUs written on every ancestor below the root first). */
TEST(v2_systemd_threaded_scope_and_remote_partition)
{
        _cleanup_free_ char *root = tree("v2-systemd", "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0\n");
        TaskId attached[] = {{100, 5000}};

        test_write(root, "run/systemd/system/.exists", "");
        test_write(root, "sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n");
        test_write(root, "sys/fs/cgroup/system.slice/cgroup.procs", "100\n");
        test_write(root, "sys/fs/cgroup/init.scope/cgroup.procs", "1\n");
        test_write(root, "proc/100/cgroup", "0::/system.slice\n");

        /* No scope yet: the process goes into it (systemd makes it), nothing below it is planned. */
        plan(root, attached, 1);
        CHECK_PLANNED("systemd:system.slice:AllowedCPUs", "0-2");
        CHECK_PLANNED("systemd:init.scope:AllowedCPUs", "0-2");
        CHECK_PLANNED("systemd:rtctl.slice:AllowedCPUs", "0-3");
        CHECK_PLANNED("/proc/100/cgroup", "/rtctl.slice/rtctl-attached.scope");
        CHECK(find("/sys/fs/cgroup/rtctl.slice/rtctl-attached.scope/isolated") == NULL);
        /* ...but a setting after the move, so the pass waits for systemd's job and the next one follows. */
        const Setting *wait = find("/sys/fs/cgroup/rtctl.slice/rtctl-attached.scope/cgroup.subtree_control");
        const Setting *move = find("/proc/100/cgroup");
        CHECK(wait && move && wait->phase > move->phase);
        CHECK(find("systemd:rtctl.slice:CPUSetPartition") == NULL);

        /* The scope is there, on a kernel with cpuset.cpus.exclusive. */
        test_write(root, "sys/fs/cgroup/rtctl.slice/rtctl-attached.scope/cgroup.procs", "100\n");
        test_write(root, "sys/fs/cgroup/rtctl.slice/rtctl-attached.scope/cpuset.cpus.exclusive", "\n");
        test_write(root, "sys/fs/cgroup/rtctl.slice/cpuset.cpus.exclusive", "\n");
        plan(root, attached, 1);
        CHECK_PLANNED("/proc/100/cgroup", "/rtctl.slice/rtctl-attached.scope/isolated");
        CHECK_PLANNED("/sys/fs/cgroup/rtctl.slice/rtctl-attached.scope/isolated", "present");
        CHECK_PLANNED("/sys/fs/cgroup/rtctl.slice/rtctl-attached.scope/isolated/cgroup.type", "threaded");
        CHECK_PLANNED("/sys/fs/cgroup/rtctl.slice/rtctl-attached.scope/housekeeping/cpuset.cpus", "0-2");
        CHECK_PLANNED("/sys/fs/cgroup/rtctl.slice/cpuset.cpus.exclusive", "3");
        CHECK_PLANNED("/sys/fs/cgroup/rtctl.slice/rtctl-attached.scope/cpuset.cpus.exclusive", "3");
        CHECK_PLANNED("/sys/fs/cgroup/rtctl.slice/rtctl-attached.scope/isolated/cpuset.cpus.exclusive", "3");
        CHECK_PLANNED("/sys/fs/cgroup/rtctl.slice/rtctl-attached.scope/isolated/cpuset.cpus.partition",
                      "isolated");
        CHECK(!noted("no isolated partition"));
        CHECK(noted("an isolated partition: the isolated CPUs are exclusive"));
}

/* A process attached by thread on v2: the process into the scope (anywhere below it), each thread into
 * the child its rule says. */
TEST(v2_threads_placed_one_by_one)
{
        _cleanup_free_ char *root = tree("v2-threads", "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0\n");
        AttachedThread threads[] = {
            {.pid = 100, .tid = 100, .comm = "pipewire", .rule = "pipewire", .isolate = false},
            {.pid = 100, .tid = 101, .comm = "data-loop.0", .rule = "pipewire", .isolate = true},
        };
        _cleanup_policy_ Policy *p = test_profile("[Profile]\nDescription=i\n[CPU]\nIsolate=3\n");

        test_write(root, "run/systemd/system/.exists", "");
        test_write(root, "sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n");
        test_write(root, "sys/fs/cgroup/rtctl.slice/rtctl-attached.scope/cgroup.procs", "\n");
        test_write(root, "proc/100/cgroup", "0::/user.slice\n");
        pass_result_clear(&res);
        test_pass_policy(root, p, NULL, &(PassInput){.threads = threads, .n_threads = 2}, &res);
        CHECK_PLANNED("/proc/100/cgroup", "/rtctl.slice/rtctl-attached.scope/");
        CHECK_PLANNED("/proc/100/task/101/cgroup", "/rtctl.slice/rtctl-attached.scope/isolated");
        CHECK_PLANNED("/proc/100/task/100/cgroup", "/rtctl.slice/rtctl-attached.scope/housekeeping");
        CHECK(noted("no isolated partition"));
        CHECK(!noted("cannot be placed"));
}

/* What systemd_has_property() looks for in the running manager's introspection data, as sd-bus prints
 * it: the property on the Slice interface, with the type rtctl writes. */
TEST(cpuset_partition_property_found_in_introspection_data)
{
        const char *slice_without = "<node>\n <interface name=\"org.freedesktop.systemd1.Unit\">\n"
                                    "  <property name=\"Id\" type=\"s\" access=\"read\">\n  </property>\n"
                                    " </interface>\n <interface name=\"org.freedesktop.systemd1.Slice\">\n"
                                    "  <property name=\"AllowedCPUs\" type=\"ay\" access=\"read\">\n"
                                    "  </property>\n </interface>\n"
                                    " <interface name=\"org.example.Other\">\n"
                                    "  <property name=\"CPUSetPartition\" type=\"s\" access=\"read\"/>\n"
                                    " </interface>\n</node>\n";
        const char *slice_with =
            "<node>\n <interface name=\"org.freedesktop.systemd1.Slice\">\n"
            "  <property name=\"AllowedCPUs\" type=\"ay\" access=\"read\">\n  </property>\n"
            "  <property name=\"CPUSetPartition\" type=\"s\" access=\"read\">\n"
            "   <annotation name=\"org.freedesktop.DBus.Property.EmitsChangedSignal\" "
            "value=\"false\"/>\n  </property>\n </interface>\n</node>\n";
        const char *iface = "org.freedesktop.systemd1.Slice";

        CHECK(systemd_introspection_has(slice_with, iface, "CPUSetPartition", "s"));
        /* Another interface's property of that name is not the slice's. */
        CHECK(!systemd_introspection_has(slice_without, iface, "CPUSetPartition", "s"));
        /* A type rtctl does not know how to write is as good as absent: today's path. */
        CHECK(!systemd_introspection_has(slice_with, iface, "CPUSetPartition", "i"));
        CHECK(!systemd_introspection_has("", iface, "CPUSetPartition", "s"));
}

TEST_MAIN(T(an_isolated_cpu_not_present_is_a_note), T(v2_without_systemd_uses_a_threaded_domain),
          T(v1_uses_cpusets), T(no_cpuset_controller_is_a_note),
          T(v2_systemd_threaded_scope_and_remote_partition), T(v2_threads_placed_one_by_one),
          T(cpuset_partition_property_found_in_introspection_data))
