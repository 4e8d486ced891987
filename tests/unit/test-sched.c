/* SPDX-License-Identifier: GPL-2.0-or-later */
/* [Scheduler] on the generated shapes: an EEVDF kernel (laptop-intel: base_slice_ns), a CFS kernel
 * (smp2x8: latency_ns, min_granularity_ns, wakeup_granularity_ns) and no debugfs at all (vm2). The real
 * kernel's side is tests/integration/test_sched.py. */
#include <stdlib.h>

#include "core/reconcile.h"
#include "shared/sysfs.h"
#include "test.h"

#define SCHED "/sys/kernel/debug/sched/"

static PassResult res;
static SettingContext kinds;

static void dry_run(const char *shape, const char *scheduler_section)
{
        _cleanup_free_ char *root = test_fixture(shape);
        _cleanup_free_ char *profile =
            xasprintf("[Profile]\nDescription=t\n[Scheduler]\n%s", scheduler_section);

        test_pass(root, profile, NULL, &kinds, &res);
}

static const char *wanted(const char *object)
{
        return test_plan_desired(&res.plan, object);
}

/* Why object is not supported here, or NULL when it is. */
static const char *why_not(const char *object)
{
        for (size_t i = 0; i < res.notes.n; i++)
                if (streq(res.notes.items[i].object, object))
                        return res.notes.items[i].reason;
        return NULL;
}

static char *read_fixture(const char *root, const char *rel)
{
        _cleanup_free_ char *path = xasprintf("%s/%s", root, rel);
        char *s = NULL;

        sysroot_set("");
        if (sys_read(path, &s) < 0)
                return NULL;
        return s;
}

TEST(eevdf_kernel)
{
        dry_run("laptop-intel", "base_slice_ns=3000000\nmigration_cost_ns=250000\nnr_migrate=8\n"
                                "features=NO_TTWU_QUEUE HRTICK\n");
        CHECK_STREQ(wanted(SCHED "base_slice_ns"), "3000000");
        CHECK_STREQ(wanted(SCHED "migration_cost_ns"), "250000");
        CHECK_STREQ(wanted(SCHED "nr_migrate"), "8");
        CHECK_STREQ(wanted(SCHED "features/TTWU_QUEUE"), "off");
        CHECK_STREQ(wanted(SCHED "features/HRTICK"), "on");
        CHECK_INTEQ(res.notes.n, 0);
        /* The dry run read what is there now: the kernel's default for 8 CPUs. */
        CHECK_STREQ(test_plan_find(&res.plan, SCHED "base_slice_ns")
                        ? test_plan_find(&res.plan, SCHED "base_slice_ns")->current
                        : NULL,
                    "2800000");
}

TEST(cfs_knobs_on_eevdf_name_the_successor)
{
        dry_run("laptop-intel",
                "latency_ns=4000000\nmin_granularity_ns=500000\nwakeup_granularity_ns=1000000\n");
        CHECK_STREQ(why_not(SCHED "latency_ns"),
                    "not supported: use base_slice_ns (this kernel schedules with EEVDF)");
        CHECK_STREQ(why_not(SCHED "min_granularity_ns"),
                    "not supported: use base_slice_ns (this kernel schedules with EEVDF)");
        /* Nothing replaced it: nothing is named, and nothing is written under another name. */
        CHECK_STREQ(why_not(SCHED "wakeup_granularity_ns"), "not supported by this kernel");
        CHECK_INTEQ(res.plan.n, 0);
}

TEST(cfs_kernel)
{
        dry_run("smp2x8", "base_slice_ns=3000000\nlatency_ns=4000000\nwakeup_granularity_ns=1000000\n"
                          "features=NO_GENTLE_FAIR_SLEEPERS PLACE_LAG\n");
        CHECK_STREQ(why_not(SCHED "base_slice_ns"), "not supported by this kernel");
        CHECK(wanted(SCHED "base_slice_ns") == NULL);
        CHECK(wanted(SCHED "min_granularity_ns") == NULL);
        CHECK_STREQ(wanted(SCHED "latency_ns"), "4000000");
        CHECK_STREQ(wanted(SCHED "wakeup_granularity_ns"), "1000000");
        CHECK_STREQ(wanted(SCHED "features/GENTLE_FAIR_SLEEPERS"), "off");
        /* PLACE_LAG came with EEVDF. */
        CHECK_CONTAINS(why_not(SCHED "features/PLACE_LAG"), "not a feature of this kernel's scheduler");
        CHECK(wanted(SCHED "features/PLACE_LAG") == NULL);
}

TEST(debugfs_not_mounted)
{
        dry_run("vm2", "base_slice_ns=3000000\nfeatures=NO_HRTICK\n");
        CHECK_STREQ(why_not(SCHED "base_slice_ns"),
                    "not supported: debugfs is not mounted (mount -t debugfs none /sys/kernel/debug)");
        CHECK_STREQ(why_not(SCHED "features/HRTICK"),
                    "not supported: debugfs is not mounted (mount -t debugfs none /sys/kernel/debug)");
        CHECK_INTEQ(res.plan.n, 0);
}

/* Applied and restored through the journal. The fixture's features file is a plain file: each write
 * replaces it, so what it holds afterwards is the one word the kind wrote. */
TEST(applied_and_restored)
{
        _cleanup_free_ char *root = test_fixture_copy("laptop-intel");
        _cleanup_free_ char *jpath = xasprintf("%s/journal-sched.json", test_tmpdir()), *err = NULL;
        _cleanup_free_ char *slice = NULL, *features = NULL;
        Journal *j = NULL;

        CHECK_INTEQ(journal_open(jpath, JOURNAL_RUNTIME, &j, &err), 0);
        if (!j)
                return;
        test_pass(root,
                  "[Profile]\nDescription=t\n[Scheduler]\nbase_slice_ns=3000000\nfeatures=NO_TTWU_QUEUE\n",
                  j, &kinds, &res);
        CHECK_INTEQ(res.stats.failed, 0);
        CHECK_STREQ(journal_find(j, SCHED "base_slice_ns") ? journal_find(j, SCHED "base_slice_ns")->original
                                                           : NULL,
                    "2800000");
        CHECK_STREQ(journal_find(j, SCHED "features/TTWU_QUEUE")
                        ? journal_find(j, SCHED "features/TTWU_QUEUE")->original
                        : NULL,
                    "on");
        slice = read_fixture(root, "sys/kernel/debug/sched/base_slice_ns");
        features = read_fixture(root, "sys/kernel/debug/sched/features");
        CHECK_STREQ(slice, "3000000");
        CHECK_STREQ(features, "NO_TTWU_QUEUE");
        free(slice);
        free(features);

        test_pass(root, NULL, j, &kinds, &res);
        CHECK_INTEQ(res.stats.failed, 0);
        slice = read_fixture(root, "sys/kernel/debug/sched/base_slice_ns");
        features = read_fixture(root, "sys/kernel/debug/sched/features");
        CHECK_STREQ(slice, "2800000");
        CHECK_STREQ(features, "TTWU_QUEUE");
        CHECK(journal_find(j, SCHED "features/TTWU_QUEUE") == NULL);
        journal_free(j);
}

TEST(bad_scheduler_section)
{
        _cleanup_free_ char *err =
            test_profile_errors("bad", "[Profile]\nDescription=t\n[Scheduler]\nsched_latency_ns=1\n"
                                       "base_slice_ns=fast\nfeatures=no_hrtick NO_HRTICK HRTICK\n"
                                       "sched_wakeup_granularity_ns=1\n");

        CHECK_CONTAINS(err, "bad.conf:4: sched_latency_ns=1: not a scheduler knob (base_slice_ns");
        CHECK_CONTAINS(err, "bad.conf:5: base_slice_ns=fast: expected a whole number");
        CHECK_CONTAINS(
            err, "bad.conf:6: features=no_hrtick NO_HRTICK HRTICK: 'no_hrtick' is not a scheduler feature");
        CHECK_CONTAINS(err, "bad.conf:6: features=no_hrtick NO_HRTICK HRTICK: 'HRTICK' is named twice");
        /* The knobs are listed once; a second unknown key is one of the loader's counted unknowns. */
        CHECK_CONTAINS(err, "bad.conf:7: sched_wakeup_granularity_ns=1: unknown key in [Scheduler]");
}

/* The shipped realtime profile: its [Scheduler] and [Sysctl] lines are planned on an EEVDF kernel. */
TEST(realtime_profile)
{
        _cleanup_free_ char *root = test_fixture("laptop-intel");

        test_pass(root, "[Profile]\nDescription=t\nInclude=realtime\n", NULL, &kinds, &res);
        CHECK_STREQ(wanted(SCHED "nr_migrate"), "8");
        CHECK_STREQ(wanted(SCHED "features/TTWU_QUEUE"), "off");
        CHECK_STREQ(wanted("/proc/sys/kernel/sched_rt_runtime_us"), "-1");
        CHECK_STREQ(wanted("/proc/sys/kernel/hung_task_timeout_secs"), "600");
        CHECK_STREQ(wanted("/proc/sys/vm/stat_interval"), "10");
        CHECK_STREQ(wanted("/proc/sys/kernel/numa_balancing"), "0");
        CHECK(res.error == NULL);
        /* Everything of the two is supported on this machine (the CPU split and IRQs have notes of their
         * own). */
        for (size_t i = 0; i < res.notes.n; i++)
                CHECK(!streq(res.notes.items[i].tuner, "scheduler") &&
                      !streq(res.notes.items[i].tuner, "sysctl"));
}

TEST_MAIN(T(eevdf_kernel), T(cfs_knobs_on_eevdf_name_the_successor), T(cfs_kernel), T(debugfs_not_mounted),
          T(applied_and_restored), T(bad_scheduler_section), T(realtime_profile))
