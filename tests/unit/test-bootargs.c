/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Boot arguments from a profile, for the three kinds of kernel (PREEMPT_RT, PREEMPT_DYNAMIC, plain),
 * and whether the running command line already has them. */
#include "core/bootargs.h"
#include "shared/sysfs.h"
#include "test.h"

#define PROFILE_ISO                                                                                         \
        "[Profile]\nDescription=i\n[CPU]\nIsolate=2-3\n[IRQ audio]\nMatch=class:audio\nThreadPriority=90\n"

/* A 4-CPU machine with kernel version string version; nohz_full: built with NO_HZ_FULL. */
static char *machine(const char *name, const char *version, bool realtime, bool nohz_full)
{
        char *root = xasprintf("%s/%s", test_tmpdir(), name);

        test_write(root, "sys/devices/system/cpu/possible", "0-3\n");
        test_write(root, "sys/devices/system/cpu/online", "0-3\n");
        test_write(root, "proc/sys/kernel/version", version);
        if (realtime)
                test_write(root, "sys/kernel/realtime", "1\n");
        if (nohz_full)
                test_write(root, "sys/devices/system/cpu/nohz_full", "(null)\n");
        return root;
}

static char *plan(const char *root, const char *profile_text)
{
        char *search[] = {(char *)test_tmpdir(), NULL};
        _cleanup_topology_ Topology *t = NULL;
        _cleanup_policy_ Policy *p = NULL;
        _cleanup_free_ char *err = NULL;
        BootArgs b;
        char *s;

        test_write(test_tmpdir(), "profiles/p.conf", profile_text);
        sysroot_set(root);
        CHECK_INTEQ(topology_load(NULL, &t), 0);
        CHECK_INTEQ(policy_load(search, "p", &p, &err), 0);
        if (!t || !p)
                return xstrdup("(failed)");
        CHECK_INTEQ(bootargs_plan(p, t, &b), 0);
        for (size_t i = 0; i < b.n; i++)
                CHECK(!isempty(b.args[i].reason));
        s = bootargs_format(&b);
        bootargs_clear(&b);
        return s;
}

TEST(preempt_dynamic_kernel_gets_everything)
{
        _cleanup_free_ char *root = machine("dyn", "#1 SMP PREEMPT_DYNAMIC Debian 6.1.0\n", false, true);
        _cleanup_free_ char *s = plan(root, PROFILE_ISO);

        CHECK_STREQ(s, "isolcpus=managed_irq,2-3 nohz_full=2-3 rcu_nocbs=2-3 irqaffinity=0-1 threadirqs "
                       "preempt=full");
}

TEST(rt_kernel_needs_no_threadirqs_nor_preempt)
{
        _cleanup_free_ char *root = machine("rt", "#1 SMP PREEMPT_RT Debian 6.1.0-rt\n", true, true);
        _cleanup_free_ char *s = plan(root, PROFILE_ISO);

        CHECK_STREQ(s, "isolcpus=managed_irq,2-3 nohz_full=2-3 rcu_nocbs=2-3 irqaffinity=0-1");
}

TEST(plain_kernel_without_nohz_full)
{
        /* A PREEMPT_VOLUNTARY build without NO_HZ_FULL: nohz_full= would be ignored, preempt= too. */
        _cleanup_free_ char *root = machine("plain", "#1 SMP\n", false, false);
        _cleanup_free_ char *s = plan(root, PROFILE_ISO);

        CHECK_STREQ(s, "isolcpus=managed_irq,2-3 rcu_nocbs=2-3 irqaffinity=0-1 threadirqs");
}

/* cgroup v2 on the machine: mounted at /sys/fs/cgroup with the cpuset controller; partitions, whether
 * the kernel has isolated partitions (the root's cpuset.cpus.isolated, 6.8 and later). */
static void cgroup2(const char *root, bool partitions)
{
        test_write(root, "proc/self/mounts", "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0\n");
        test_write(root, "sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n");
        test_write(root, "sys/fs/cgroup/system.slice/cpuset.cpus", "\n");
        if (partitions)
                test_write(root, "sys/fs/cgroup/cpuset.cpus.isolated", "\n");
}

/* Debian 12's 6.1 on cgroup v2 has no isolated partition to make at run time: only isolcpus=domain
 * takes the isolated CPUs out of the load balancing. 6.7 and later (cpuset.cpus.exclusive), and v1, do
 * it at run time. */
TEST(domain_flag_only_where_no_run_time_partition_exists)
{
        _cleanup_free_ char *old = machine("v2-6.1", "#1 SMP PREEMPT_DYNAMIC Debian 6.1.0\n", false, true);
        _cleanup_free_ char *now = machine("v2-6.12", "#1 SMP PREEMPT_DYNAMIC Debian 6.12.0\n", false, true);
        _cleanup_free_ char *v1 = machine("v1", "#1 SMP PREEMPT_DYNAMIC Debian 6.1.0\n", false, true);

        /* 6.7: cpuset.cpus.exclusive in the cgroups, the root's cpuset.cpus.isolated only from 6.8. */
        _cleanup_free_ char *v67 = machine("v2-6.7", "#1 SMP PREEMPT_DYNAMIC 6.7.0\n", false, true);
        cgroup2(v67, false);
        test_write(v67, "sys/fs/cgroup/system.slice/cpuset.cpus.exclusive", "\n");
        _cleanup_free_ char *d = plan(v67, PROFILE_ISO);
        CHECK_STREQ(d, "isolcpus=managed_irq,2-3 nohz_full=2-3 rcu_nocbs=2-3 irqaffinity=0-1 threadirqs "
                       "preempt=full");

        cgroup2(old, false);
        cgroup2(now, true);
        test_write(v1, "proc/self/mounts", "cgroup /sys/fs/cgroup/cpuset cgroup rw,cpuset 0 0\n");
        _cleanup_free_ char *a = plan(old, PROFILE_ISO), *b = plan(now, PROFILE_ISO),
                            *c = plan(v1, PROFILE_ISO);
        CHECK_STREQ(a, "isolcpus=domain,managed_irq,2-3 nohz_full=2-3 rcu_nocbs=2-3 irqaffinity=0-1 "
                       "threadirqs preempt=full");
        CHECK_STREQ(b, "isolcpus=managed_irq,2-3 nohz_full=2-3 rcu_nocbs=2-3 irqaffinity=0-1 threadirqs "
                       "preempt=full");
        CHECK_STREQ(c, b);
}

TEST(profile_without_isolation_or_thread_priorities_wants_nothing)
{
        _cleanup_free_ char *root = machine("desk", "#1 SMP PREEMPT_DYNAMIC\n", false, true);
        _cleanup_free_ char *s = plan(root, "[Profile]\nDescription=d\n");

        CHECK_STREQ(s, "");
}

TEST(missing_compares_values_as_sets)
{
        BootArg args[] = {
            {.key = (char *)"isolcpus", .value = (char *)"managed_irq,2-3"},
            {.key = (char *)"nohz_full", .value = (char *)"2-3"},
            {.key = (char *)"threadirqs"},
        };
        BootArgs b = {.args = args, .n = ELEMENTSOF(args)};
        _cleanup_free_ char *m0 = NULL, *m1 = NULL, *m2 = NULL, *m3 = NULL, *m4 = NULL;

        m0 = bootargs_missing(&b, "root=/dev/vda isolcpus=managed_irq,2,3 nohz_full=2,3 threadirqs quiet");
        CHECK(m0 == NULL);
        /* A different value, a flag more (domain), or an argument after "--" (init's) is not it. */
        m1 = bootargs_missing(&b, "isolcpus=domain,managed_irq,2-3 nohz_full=3 threadirqs");
        CHECK_STREQ(m1, "isolcpus=managed_irq,2-3 nohz_full=2-3");
        m2 = bootargs_missing(&b, "root=/dev/vda -- isolcpus=managed_irq,2-3 nohz_full=2-3 threadirqs");
        CHECK_STREQ(m2, "isolcpus=managed_irq,2-3 nohz_full=2-3 threadirqs");
        /* The last occurrence wins. */
        m3 = bootargs_missing(&b, "nohz_full=1 isolcpus=managed_irq,2-3 nohz_full=2-3 threadirqs\n");
        CHECK(m3 == NULL);
        m4 = bootargs_missing(&b, "");
        CHECK_STREQ(m4, "isolcpus=managed_irq,2-3 nohz_full=2-3 threadirqs");
}

TEST(cmdline_find_handles_quotes_and_flags)
{
        _cleanup_free_ char *v = NULL, *w = NULL;

        CHECK_INTEQ(cmdline_find("a=1 dyndbg=\"file x +p\" threadirqs", "dyndbg", &v), 1);
        CHECK_STREQ(v, "file x +p");
        CHECK_INTEQ(cmdline_find("a=1 threadirqs", "threadirqs", &w), 1);
        CHECK(w == NULL);
        CHECK_INTEQ(cmdline_find("threadirqsx=1", "threadirqs", NULL), 0);
}

TEST_MAIN(T(domain_flag_only_where_no_run_time_partition_exists), T(preempt_dynamic_kernel_gets_everything),
          T(rt_kernel_needs_no_threadirqs_nor_preempt), T(plain_kernel_without_nohz_full),
          T(profile_without_isolation_or_thread_priorities_wants_nothing),
          T(missing_compares_values_as_sets), T(cmdline_find_handles_quotes_and_flags))
