/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Block plans on machine fixtures: the shipped desktop profile, rule matching, skips. */
#include "core/reconcile.h"
#include "shared/sysfs.h"
#include "test.h"

static PassResult res;

/* A dry-run pass of profile on the tree at root. */
static void plan_root(const char *root, const char *profile, char **search)
{
        _cleanup_policy_ Policy *p = NULL;
        _cleanup_free_ char *err = NULL;

        pass_result_clear(&res);
        CHECK_INTEQ(policy_load(search, profile, &p, &err), 0);
        CHECK_STREQ(err, NULL);
        if (p)
                test_pass_policy(root, p, NULL, NULL, &res);
}

static void plan_shape(const char *shape, const char *profile, char **search)
{
        _cleanup_free_ char *root = test_fixture(shape);
        plan_root(root, profile, search);
}

static const char *desired(const char *object)
{
        return test_plan_desired(&res.plan, object);
}

static const Setting *setting(const char *object)
{
        for (size_t i = 0; i < res.plan.n; i++)
                if (streq(res.plan.settings[i].object, object))
                        return &res.plan.settings[i];
        return NULL;
}

TEST(desktop_on_amd_workstation)
{
        char *search[] = {(char *)RTCTL_SOURCE_CONFDIR, NULL};

        plan_shape("amd-workstation", "desktop", search);
        CHECK_STREQ(desired("/sys/block/nvme0n1/queue/scheduler"), "none");
        CHECK_STREQ(desired("/sys/block/sda/queue/scheduler"), "mq-deadline");
        CHECK_STREQ(desired("/sys/block/sdb/queue/scheduler"), "bfq");
        CHECK_STREQ(desired("/sys/block/sdb/queue/iosched/low_latency"), "1");
        /* The USB stick is non-rotational, but the usb rule comes first. */
        CHECK_STREQ(desired("/sys/block/sdc/queue/scheduler"), "bfq");
        /* Tunables follow the scheduler switch. */
        const Setting *sched = setting("/sys/block/sdb/queue/scheduler");
        const Setting *tun = setting("/sys/block/sdb/queue/iosched/low_latency");
        CHECK(sched && tun && tun->phase > sched->phase);
        /* Partitions have no entry of their own. */
        for (size_t i = 0; i < res.plan.n; i++)
                CHECK(!strstr(res.plan.settings[i].object, "nvme0n1p") &&
                      !strstr(res.plan.settings[i].object, "sda1"));
        CHECK_INTEQ(res.notes.n, 0);
}

TEST(desktop_on_vm2_skips_zram)
{
        char *search[] = {(char *)RTCTL_SOURCE_CONFDIR, NULL};

        plan_shape("vm2", "desktop", search);
        /* virtio vda reports rotational=1 */
        CHECK_STREQ(desired("/sys/block/vda/queue/scheduler"), "bfq");
        CHECK_STREQ(desired("/sys/block/loop0/queue/scheduler"), "mq-deadline");
        for (size_t i = 0; i < res.plan.n; i++)
                CHECK(!strstr(res.plan.settings[i].object, "zram"));
        CHECK_INTEQ(res.stats.failed, 0);
        /* bfq's tunable does not exist before the switch: the dry run says it would be written. */
        const Setting *tun = setting("/sys/block/vda/queue/iosched/low_latency");
        CHECK(tun && tun->result == SETTING_PENDING);
        CHECK_STREQ(tun ? tun->current : NULL, "(absent until the earlier change)");
}

TEST(matching_conditions)
{
        const char *conf = test_tmpdir();
        char *search[] = {(char *)conf, NULL};

        test_write(conf, "profiles/m.conf",
                   "[Profile]\nDescription=m\n"
                   "[Block hdd-by-model]\nMatch=transport:sata|scsi rotational:1 model:*\nScheduler=kyber\n"
                   "[Block removable]\nMatch=removable:1\nScheduler=mq-deadline\nReadAheadKB=4096\n"
                   "[Block nvme-name]\nMatch=name:nvme*\nScheduler=kyber none\nNrRequests=1023\n"
                   "[Block missing]\nMatch=transport:sata rotational:0\nScheduler=kyber\n");
        plan_shape("amd-workstation", "m", search);
        CHECK_STREQ(desired("/sys/block/sdb/queue/scheduler"), "kyber");
        CHECK_STREQ(desired("/sys/block/sdc/queue/scheduler"), "mq-deadline");
        CHECK_STREQ(desired("/sys/block/sdc/queue/read_ahead_kb"), "4096");
        CHECK_STREQ(desired("/sys/block/sda/queue/scheduler"), "kyber");
        /* The first offered of a preference list. */
        CHECK(desired("/sys/block/nvme0n1/queue/scheduler") != NULL);
        CHECK_STREQ(desired("/sys/block/nvme0n1/queue/nr_requests"), "1023");
}

TEST(unoffered_scheduler_is_a_note_not_a_failure)
{
        const char *tmp = test_tmpdir();
        _cleanup_free_ char *root = xasprintf("%s/tiny", tmp),
                            *link = xasprintf("%s/tiny/sys/block/sdz", tmp);
        char *search[] = {(char *)tmp, NULL};

        test_write(root, "sys/devices/system/cpu/possible", "0\n");
        test_write(root, "sys/devices/system/cpu/online", "0\n");
        test_write(
            root,
            "sys/devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sdz/queue/scheduler",
            "none [mq-deadline]\n");
        test_write(
            root,
            "sys/devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sdz/queue/rotational",
            "1\n");
        test_write(root, "sys/block/.keep", "");
        CHECK_INTEQ(
            symlink("../devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sdz", link), 0);
        test_write(tmp, "profiles/n.conf",
                   "[Profile]\nDescription=n\n[Block x]\nMatch=transport:sata\nScheduler=bfq kyber\n");

        plan_root(root, "n", search);
        CHECK_INTEQ(res.plan.n, 0);
        CHECK_INTEQ(res.stats.failed, 0);
        CHECK_INTEQ(res.notes.n, 1);
        CHECK_STREQ(res.notes.n ? res.notes.items[0].object : NULL, "/sys/block/sdz/queue/scheduler");
        CHECK_CONTAINS(res.notes.n ? res.notes.items[0].reason : NULL,
                       "[Block x]: the kernel offers none of 'bfq kyber' (it has: none [mq-deadline])");
}

TEST(scheduler_built_as_module_counts_as_offered)
{
        const char *tmp = test_tmpdir();
        _cleanup_free_ char *root = xasprintf("%s/tiny", tmp);
        char *search[] = {(char *)tmp, NULL};

        /* The tree of the previous test, now with a kernel that has bfq as a module (Debian's). */
        test_write(root, "proc/sys/kernel/osrelease", "6.1.0-28-amd64\n");
        test_write(root, "lib/modules/6.1.0-28-amd64/modules.dep",
                   "kernel/block/bfq.ko.xz:\nkernel/block/kyber-iosched.ko.xz:\n");
        plan_root(root, "n", search);
        CHECK_INTEQ(res.notes.n, 0);
        CHECK_STREQ(desired("/sys/block/sdz/queue/scheduler"), "bfq");
}

TEST_MAIN(T(desktop_on_amd_workstation), T(desktop_on_vm2_skips_zram), T(matching_conditions),
          T(unoffered_scheduler_is_a_note_not_a_failure), T(scheduler_built_as_module_counts_as_offered))
