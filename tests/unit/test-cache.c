/* SPDX-License-Identifier: GPL-2.0-or-later */
/* [CPU] CacheWays= on the generated shapes: Intel CAT with one L3 per socket (smp2x8), AMD L3 QoS with
 * one L3 per CCX (amd-workstation), resctrl not mounted (laptop-intel), no resctrl at all (vm2). This
 * host's kernel has no resctrl: tests/integration/test_cache.py checks the report there. */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "core/reconcile.h"
#include "core/resctrl.h"
#include "shared/sysfs.h"
#include "test.h"
#include "tuners/registry.h"

#define GROUP     RESCTRL_ROOT "/rtctl-isolated"
#define ROOT_SCH  RESCTRL_ROOT "/schemata"
#define GROUP_SCH GROUP "/schemata"
#define GROUP_CPU GROUP "/cpus_list"

/* A fixture is plain directories, where the kernel fills a new resctrl group with its files and takes
 * them along when the group goes. This test plays the kernel's part for the groups of a tree's
 * resctrl: a new group starts with the default group's schemata and no CPUs. */
static bool resctrl_group_path(const char *path)
{
        _cleanup_free_ char *base = xasprintf("%s" RESCTRL_ROOT "/", sysroot());
        const char *name = startswith(path, base);

        return !isempty(sysroot()) && name && *name && !strchr(name, '/');
}

int mkdir(const char *path, mode_t mode)
{
        _cleanup_free_ char *schemata = NULL;

        if (syscall(SYS_mkdirat, AT_FDCWD, path, mode) < 0)
                return -1;
        if (resctrl_group_path(path)) {
                CHECK_INTEQ(sys_read(ROOT_SCH, &schemata), 0);
                test_write(path, "schemata", strempty(schemata));
                test_write(path, "cpus_list", "\n");
                test_write(path, "tasks", "");
        }
        return 0;
}

int rmdir(const char *path)
{
        if (resctrl_group_path(path)) {
                static const char *const files[] = {"schemata", "cpus_list", "tasks"};
                for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                        _cleanup_free_ char *f = xasprintf("%s/%s", path, files[i]);
                        (void)unlink(f);
                }
        }
        return (int)syscall(SYS_unlinkat, AT_FDCWD, path, AT_REMOVEDIR);
}

static PassResult res;

/* A copy to write into, of what the cache tuner reads: the CPUs and resctrl. */
static char *copy(const char *shape)
{
        _cleanup_free_ char *src = test_fixture(shape);
        char *root = xasprintf("%s/%s-copy", test_tmpdir(), shape);
        _cleanup_free_ char *cmd =
            xasprintf("rm -rf '%s' && mkdir -p '%s' && tar -C '%s' -c --exclude=cpuidle "
                      "--exclude=cpufreq --exclude=power sys/devices/system/cpu "
                      "sys/devices/system/node sys/fs | tar -C '%s' -x",
                      root, root, src, root);

        CHECK_INTEQ(system(cmd), 0);
        return root;
}

/* One pass of the cache tuner alone (j NULL: a dry run). profile NULL: no policy, everything back. */
static void pass(const char *root, const char *profile, Journal *j)
{
        _cleanup_topology_ Topology *t = NULL;
        _cleanup_policy_ Policy *p = NULL;
        Dirty d = {};

        sysroot_set(root);
        pass_result_clear(&res);
        CHECK_INTEQ(topology_load(NULL, &t), 0);
        if (profile && !(p = test_profile(profile)))
                return;
        if (!t)
                return;
        dirty_mark_full(&d, TUNER_CACHE);
        reconcile_pass(p, t, j, &d, j == NULL, &res);
        dirty_clear(&d);
}

static void plan(const char *shape, const char *profile)
{
        _cleanup_free_ char *root = test_fixture(shape);
        pass(root, profile, NULL);
}

static char *value(const char *object)
{
        char *s = NULL;
        if (sys_read(object, &s) < 0)
                return xstrdup("(absent)");
        return s;
}

/* smp2x8: CPUs 0-7 and 16-23 share socket 0's L3 (cache id 0), 8-15 and 24-31 socket 1's. */
#define SOCKET0_CORES "[Profile]\nDescription=t\n[CPU]\nIsolate=6-7,22-23\n"
#define SOCKET1_CORES "[Profile]\nDescription=t\n[CPU]\nIsolate=14-15,30-31\n"

TEST(intel_ways_taken_from_the_isolated_cpus_l3_only)
{
        plan("smp2x8", SOCKET0_CORES "CacheWays=4\n");
        CHECK_INTEQ(res.stats.failed, 0);
        CHECK_STREQ(test_desired(&res, GROUP), "present");
        CHECK_STREQ(test_desired(&res, GROUP_SCH), "L3:0=f;1=f");
        /* Socket 1's L3 holds no isolated CPU: housekeeping keeps all of it. */
        CHECK_STREQ(test_desired(&res, ROOT_SCH), "L3:0=ffff0;1=fffff");
        CHECK_STREQ(test_desired(&res, GROUP_CPU), "6-7,22-23");
        CHECK_INTEQ(res.notes.n, 0);
}

TEST(percent_rounds_to_whole_ways)
{
        /* 25% of 20 ways: 5. */
        plan("smp2x8", SOCKET0_CORES "CacheWays=25%\n");
        CHECK_STREQ(test_desired(&res, GROUP_SCH), "L3:0=1f;1=1f");
        CHECK_STREQ(test_desired(&res, ROOT_SCH), "L3:0=fffe0;1=fffff");
        /* 1% of 20 ways rounds to 0: the smallest group there is, min_cbm_bits (1). */
        plan("smp2x8", SOCKET0_CORES "CacheWays=1%\n");
        CHECK_STREQ(test_desired(&res, GROUP_SCH), "L3:0=1;1=1");
        /* AMD, 16 ways per CCX, the isolated cores on the second CCX (L3 id 1): 30% is 4.8, so 5. */
        plan("amd-workstation", "[Profile]\nDescription=t\n[CPU]\nIsolate=6-7,14-15\nCacheWays=30%\n");
        CHECK_STREQ(test_desired(&res, GROUP_SCH), "L3:0=1f;1=1f");
        CHECK_STREQ(test_desired(&res, ROOT_SCH), "L3:0=ffff;1=ffe0");
        CHECK_STREQ(test_desired(&res, GROUP_CPU), "6-7,14-15");
        CHECK_INTEQ(res.stats.failed, 0);
}

TEST(the_default_group_keeps_its_minimum)
{
        const Unsupported *n;

        plan("smp2x8", SOCKET0_CORES "CacheWays=20\n");
        n = test_note(&res, "CacheWays=20");
        CHECK(n != NULL);
        if (n) {
                CHECK_INTEQ(n->error, EINVAL);
                CHECK_CONTAINS(n->reason, "/profiles/test.conf:5: CacheWays=20: the L3 has 20 ways");
                CHECK_CONTAINS(n->reason, "can be 1 to 19 here");
        }
        CHECK(test_desired(&res, GROUP) == NULL);
        CHECK(test_desired(&res, ROOT_SCH) == NULL);
        /* 99% of 20 ways is 20 again. */
        plan("smp2x8", SOCKET0_CORES "CacheWays=99%\n");
        CHECK(test_note(&res, "CacheWays=99%: the L3 has 20 ways") != NULL);
        plan("smp2x8", SOCKET0_CORES "CacheWays=19\n");
        CHECK_STREQ(test_desired(&res, ROOT_SCH), "L3:0=80000;1=fffff");
}

TEST(ways_shared_with_devices_are_avoided)
{
        _cleanup_free_ char *root = copy("smp2x8");

        /* The two lowest ways are shared with I/O: the group takes the top ones. */
        sysroot_set(root);
        test_write(root, RESCTRL_ROOT "/info/L3/shareable_bits", "3\n");
        pass(root, SOCKET0_CORES "CacheWays=4\n", NULL);
        CHECK_STREQ(test_desired(&res, GROUP_SCH), "L3:0=f0000;1=f0000");
        CHECK_STREQ(test_desired(&res, ROOT_SCH), "L3:0=ffff;1=fffff");
}

/* Nothing planned, no failure, and a note on /sys/fs/resctrl saying why and how to mount it. */
static void check_not_supported(const char *shape, const char *isolate, const char *why)
{
        _cleanup_free_ char *profile =
            xasprintf("[Profile]\nDescription=t\n[CPU]\nIsolate=%s\nCacheWays=2\n", isolate);
        const Unsupported *n;

        plan(shape, profile);
        n = test_note(&res, why);
        CHECK(n != NULL);
        if (n) {
                CHECK_INTEQ(n->error, 0);
                CHECK_STREQ(n->object, "/sys/fs/resctrl");
                CHECK_CONTAINS(n->reason, "mount -t resctrl resctrl /sys/fs/resctrl");
        }
        CHECK_INTEQ(res.plan.n, 0);
        CHECK_INTEQ(res.stats.failed, 0);
}

TEST(not_supported_says_how_to_mount)
{
        check_not_supported("laptop-intel", "3", "resctrl is not mounted");
        check_not_supported("vm2", "1", "/sys/fs/resctrl is absent");
}

TEST(cdp_or_one_class_is_not_supported)
{
        _cleanup_free_ char *root = copy("smp2x8");
        const Unsupported *n;

        /* One class of service is the default group's: nothing left for a group. */
        sysroot_set(root);
        test_write(root, RESCTRL_ROOT "/info/L3/num_closids", "1\n");
        pass(root, SOCKET0_CORES "CacheWays=4\n", NULL);
        n = test_note(&res, "one class of service");
        CHECK(n && n->error == 0);
        CHECK_INTEQ(res.plan.n, 0);
        /* Mounted with -o cdp: L3CODE and L3DATA instead of L3. */
        _cleanup_free_ char *cmd =
            xasprintf("mv '%s" RESCTRL_ROOT "/info/L3' '%s" RESCTRL_ROOT "/info/L3CODE'", root, root);
        CHECK_INTEQ(system(cmd), 0);
        pass(root, SOCKET0_CORES "CacheWays=4\n", NULL);
        n = test_note(&res, "code/data prioritization");
        CHECK(n && n->error == 0);
        CHECK_CONTAINS(n ? n->reason : NULL, "mount -t resctrl resctrl /sys/fs/resctrl");
        CHECK_INTEQ(res.plan.n, 0);
        CHECK_INTEQ(res.stats.failed, 0);
}

TEST(bad_cache_ways)
{
        char *search[] = {(char *)test_tmpdir(), NULL};
        _cleanup_policy_ Policy *p = NULL, *q = NULL, *off = NULL;
        _cleanup_free_ char *err = NULL, *err2 = NULL;

        test_write(test_tmpdir(), "profiles/bad.conf",
                   "[Profile]\nDescription=t\n[CPU]\nIsolate=3\nCacheWays=100%\n");
        CHECK_INTEQ(policy_load(search, "bad", &p, &err), -EINVAL);
        CHECK_CONTAINS(err, "bad.conf:5: CacheWays=100%: expected a number of L3 ways");
        test_write(test_tmpdir(), "profiles/noiso.conf",
                   "[Profile]\nDescription=t\n[CPU]\nCacheWays=four\n");
        free(err);
        err = NULL;
        CHECK_INTEQ(policy_load(search, "noiso", &p, &err), -EINVAL);
        CHECK_CONTAINS(err, "noiso.conf:4: CacheWays=four: expected a number");
        test_write(test_tmpdir(), "profiles/noiso2.conf", "[Profile]\nDescription=t\n[CPU]\nCacheWays=4\n");
        CHECK_INTEQ(policy_load(search, "noiso2", &q, &err2), -EINVAL);
        CHECK_CONTAINS(err2, "noiso2.conf:4: CacheWays=4: cache ways go to the isolated CPUs");
        /* 0 turns an included profile's partition off. */
        test_write(test_tmpdir(), "profiles/off.conf",
                   "[Profile]\nDescription=t\n[CPU]\nIsolate=3\nCacheWays=0\n");
        CHECK_INTEQ(policy_load(search, "off", &off, NULL), 0);
        CHECK(off && off->config[TUNER_CACHE] == NULL);
}

/* Restore by another process that only has the journal on disk, as after rtctld was killed. */
static void restore_in_fresh_process(const char *root, const char *jpath)
{
        pid_t pid = fork();
        int status = -1;

        CHECK(pid >= 0);
        if (pid == 0) {
                _cleanup_free_ char *err = NULL;
                Journal *j = NULL;
                int fails = 0;

                test_failures_ = 0;
                if (journal_open(jpath, JOURNAL_RUNTIME, &j, &err) < 0)
                        _exit(100);
                pass(root, NULL, j);
                fails = (int)res.stats.failed + test_failures_;
                for (size_t i = 0; i < res.plan.n; i++)
                        if (res.plan.settings[i].message)
                                printf("# child: %s: %s\n", res.plan.settings[i].object,
                                       res.plan.settings[i].message);
                pass_result_clear(&res);
                journal_free(j);
                _exit(fails ? 1 : 0);
        }
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(apply_then_restore_from_the_journal)
{
        _cleanup_free_ char *root = copy("smp2x8"),
                            *jpath = xasprintf("%s/journal-cache.json", test_tmpdir());
        _cleanup_free_ char *err = NULL, *before = NULL, *sch = NULL, *cpus = NULL, *mine = NULL;
        Journal *j = NULL;

        sysroot_set(root);
        before = value(ROOT_SCH);
        CHECK_STREQ(before, "L3:0=fffff;1=fffff");
        CHECK_INTEQ(journal_open(jpath, JOURNAL_RUNTIME, &j, &err), 0);
        if (!j)
                return;
        pass(root, SOCKET0_CORES "CacheWays=4\n", j);
        CHECK_INTEQ(res.stats.failed, 0);
        CHECK_INTEQ(res.stats.changed, 4);
        sch = value(ROOT_SCH);
        mine = value(GROUP_SCH);
        cpus = value(GROUP_CPU);
        CHECK_STREQ(sch, "L3:0=ffff0;1=fffff");
        CHECK_STREQ(mine, "L3:0=f;1=f");
        CHECK_STREQ(cpus, "6-7,22-23");
        /* Journalled: the group as absent (it takes its files along), the default schemata as it was. */
        CHECK_INTEQ(journal_size(j), 2);
        CHECK_STREQ(journal_find(j, GROUP) ? journal_find(j, GROUP)->original : NULL, "absent");
        CHECK_STREQ(journal_find(j, ROOT_SCH) ? journal_find(j, ROOT_SCH)->original : NULL,
                    "L3:0=fffff;1=fffff");

        /* In place: a second pass writes nothing. */
        pass(root, SOCKET0_CORES "CacheWays=4\n", j);
        CHECK_INTEQ(res.stats.changed, 0);
        CHECK_INTEQ(res.stats.failed, 0);
        journal_free(j); /* as if rtctld was killed */

        restore_in_fresh_process(root, jpath);
        free(sch);
        sch = value(ROOT_SCH);
        CHECK_STREQ(sch, before);
        CHECK(!sys_exists(GROUP));
        CHECK(access(jpath, F_OK) < 0);
}

TEST(group_follows_the_isolated_set)
{
        _cleanup_free_ char *root = copy("smp2x8"),
                            *jpath = xasprintf("%s/journal-cache2.json", test_tmpdir());
        _cleanup_free_ char *err = NULL, *sch = NULL, *cpus = NULL;
        Journal *j = NULL;

        CHECK_INTEQ(journal_open(jpath, JOURNAL_RUNTIME, &j, &err), 0);
        if (!j)
                return;
        pass(root, SOCKET0_CORES "CacheWays=4\n", j);
        CHECK_INTEQ(res.stats.failed, 0);

        /* The isolated cores move to socket 1: the ways go with them, socket 0's L3 is whole again. */
        pass(root, SOCKET1_CORES "CacheWays=4\n", j);
        CHECK_INTEQ(res.stats.failed, 0);
        sch = value(ROOT_SCH);
        cpus = value(GROUP_CPU);
        CHECK_STREQ(sch, "L3:0=fffff;1=ffff0");
        CHECK_STREQ(cpus, "14-15,30-31");
        CHECK_STREQ(journal_find(j, ROOT_SCH) ? journal_find(j, ROOT_SCH)->original : NULL,
                    "L3:0=fffff;1=fffff");

        /* CPU 31 goes offline (x86: its cache/ goes too; the kernel hands it to the default group). The
         * pass after the hotplug event plans the CPUs left. */
        test_write(root, "sys/devices/system/cpu/online", "0-30\n");
        CHECK_INTEQ(sys_write("/sys/devices/system/cpu/cpu31/online", "0\n"), 0);
        _cleanup_free_ char *rm = xasprintf("rm -rf '%s/sys/devices/system/cpu/cpu31/cache'", root);
        CHECK_INTEQ(system(rm), 0);
        CHECK_INTEQ(sys_write(GROUP_CPU, "14-15,30\n"), 0);
        pass(root, SOCKET1_CORES "CacheWays=4\n", j);
        CHECK_INTEQ(res.stats.failed, 0);
        CHECK_STREQ(test_desired(&res, GROUP_CPU), "14-15,30");
        CHECK_INTEQ(res.stats.changed, 0);

        /* The profile no longer partitions: everything back, from this process's journal. */
        pass(root, SOCKET1_CORES, j);
        CHECK_INTEQ(res.stats.failed, 0);
        free(sch);
        sch = value(ROOT_SCH);
        CHECK_STREQ(sch, "L3:0=fffff;1=fffff");
        CHECK(!sys_exists(GROUP));
        CHECK_INTEQ(journal_size(j), 0);
        journal_free(j);
}

TEST(schemata_values)
{
        Schemata s = {};

        /* As the kernel prints it: names padded to one width, masks zero-padded. */
        CHECK_INTEQ(schemata_parse("    L3:0=0fff0;1=fffff\n", &s), 0);
        CHECK_STREQ(s.resource, "L3");
        CHECK_INTEQ(s.n, 2);
        _cleanup_free_ char *f = schemata_format(&s);
        CHECK_STREQ(f, "L3:0=fff0;1=fffff");
        schemata_clear(&s);
        CHECK(schemata_parse("L3:", &s) < 0);
        CHECK(schemata_parse("L3:0=fg", &s) < 0);
        CHECK(schemata_parse("L3:0=f;0=f", &s) < 0);
        CHECK(setting_kind_schemata.equal("L3:0=0fff0;1=fffff", "L3:0=fff0;1=fffff"));
        CHECK(!setting_kind_schemata.equal("L3:0=fff0;1=fffff", "L3:0=fff0;1=ffff0"));
        /* A domain that is offline (absent from the file) cannot differ. */
        CHECK(setting_kind_schemata.equal("L3:0=fff0", "L3:0=fff0;1=ffff0"));
        CHECK(!setting_kind_schemata.equal("MB:0=fff0", "L3:0=fff0"));
}

TEST_MAIN(T(intel_ways_taken_from_the_isolated_cpus_l3_only), T(percent_rounds_to_whole_ways),
          T(the_default_group_keeps_its_minimum), T(ways_shared_with_devices_are_avoided),
          T(not_supported_says_how_to_mount), T(cdp_or_one_class_is_not_supported), T(bad_cache_ways),
          T(apply_then_restore_from_the_journal), T(group_follows_the_isolated_set), T(schemata_values))
