/* SPDX-License-Identifier: GPL-2.0-or-later */
/* What a runtime journal entry may name, and what its stored value may name (issue 20 item 9): an
 * entry planted in the journal must not make `rtctl restore` start any unit, write a kernel key that
 * runs a program or powers the machine off, or move processes out of a cgroup it names itself. Each is
 * reported by object and never restored. */
#include <json-c/json.h>

#include "core/reconcile.h"
#include "shared/sysfs.h"
#include "test.h"

static char *root, *jpath;

static Journal *open_one(const char *kind, const char *object, const char *original)
{
        _cleanup_free_ char *err = NULL;
        json_object *e = json_object_new_object(), *entries = json_object_new_array(),
                    *top = json_object_new_object();
        Journal *j = NULL;
        FILE *f;

        free(root);
        free(jpath);
        root = test_two_cpu_root();
        jpath = xasprintf("%s/run/journal.json", test_tmpdir());
        test_write(root, "proc/sys/kernel/rt1", "tuned\n");
        test_write(root, "sys/fs/cgroup/rtctl-isolated/cgroup.procs", "");
        json_object_object_add(e, "kind", json_object_new_string(kind));
        json_object_object_add(e, "tuner", json_object_new_string("x"));
        json_object_object_add(e, "object", json_object_new_string(object));
        json_object_object_add(e, "original", json_object_new_string(original));
        json_object_array_add(entries, e);
        json_object_object_add(top, "entries", entries);
        f = fopen(jpath, "we");
        CHECK(f != NULL);
        if (f) {
                fputs(json_object_to_json_string_ext(top, JSON_C_TO_STRING_PLAIN), f);
                fclose(f);
        }
        json_object_put(top);
        CHECK_INTEQ(journal_open(jpath, JOURNAL_RUNTIME, &j, &err), 0);
        return j;
}

/* Not kept, and reported once, by object, with why. */
static void check_refused(const char *kind, const char *object, const char *original, const char *why)
{
        _cleanup_journal_ Journal *j = open_one(kind, object, original);

        CHECK(j != NULL);
        if (!j)
                return;
        CHECK_INTEQ(journal_size(j), 0);
        CHECK_INTEQ(journal_n_lost(j), 1);
        if (journal_n_lost(j) != 1)
                return;
        _cleanup_free_ char *m = journal_loss_message(journal_lost(j, 0)),
                            *prefix = xasprintf("%s: original lost: ", object);
        CHECK(startswith(m, prefix) != NULL);
        CHECK_CONTAINS(m, why);
}

static void check_accepted(const char *kind, const char *object, const char *original)
{
        _cleanup_journal_ Journal *j = open_one(kind, object, original);

        CHECK_INTEQ(j ? journal_size(j) : 0, 1);
        CHECK_INTEQ(j ? journal_n_lost(j) : 1, 0);
}

/* The reproduction: a planted service entry made `rtctl restore` unmask and start any unit. */
TEST(service_only_rivals)
{
        static const char *const bad[] = {"systemd:debug-shell.service", "systemd:sshd.service",
                                          "systemd:tuned.socket", "systemd:emergency.target"};

        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                check_refused("service", bad[i], "active", "is not an object kind 'service' writes");
        check_accepted("service", "systemd:irqbalance.service", "active");
        check_accepted("service", "systemd:tuned.service", "active");
        check_accepted("service", "systemd:power-profiles-daemon.service", "inactive");
}

TEST(unit_kinds_only_cpuset_units)
{
        check_refused("unit-cpus", "systemd:debug-shell.service:AllowedCPUs", "0-1",
                      "is not an object kind 'unit-cpus' writes");
        check_refused("unit-cpus", "systemd:a.mount:AllowedCPUs", "0-1", "kind 'unit-cpus'");
        check_refused("unit-partition", "systemd:system.slice:CPUSetPartition", "member",
                      "is not an object kind 'unit-partition' writes");
        check_refused("unit-partition", "systemd:debug-shell.service:CPUSetPartition", "member",
                      "kind 'unit-partition'");
        check_refused("slice", "systemd:system.slice", "absent", "is not an object kind 'slice' writes");
        check_accepted("unit-cpus", "systemd:init.scope:AllowedCPUs", "0-1");
        check_accepted("unit-cpus", "systemd:user.slice:AllowedCPUs", "");
        check_accepted("unit-partition", "systemd:rtctl.slice:CPUSetPartition", "member");
        check_accepted("slice", "systemd:rtctl.slice", "absent");
}

/* Keys whose write runs a program as root, or powers off, or reaches firmware or the LSMs. */
TEST(denied_kernel_keys)
{
        static const struct {
                const char *kind, *object;
        } bad[] = {
            {"file", "/proc/sys/kernel/core_pattern"},
            {"file", "/proc/sys/kernel/modprobe"},
            {"file", "/proc/sys/kernel/hotplug"},
            {"file", "/proc/sys/kernel/usermodehelper/bset"},
            {"file", "/proc/sys/kernel/poweroff_cmd"},
            {"file", "/proc/sys/fs/binfmt_misc/register"},
            {"file", "/sys/kernel/uevent_helper"},
            {"file", "/sys/power/state"},
            {"choice", "/sys/power/disk"},
            {"file", "/sys/firmware/efi/efivars/x"},
            {"cpulist", "/sys/kernel/security/apparmor/x"},
            {"cpumask", "/sys/power/pm_test"},
            {"cpulist", "/proc/sys/kernel/core_pattern"},
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_free_ char *why = xasprintf("kind '%s'", bad[i].kind);
                check_refused(bad[i].kind, bad[i].object, "x", why);
        }
        check_accepted("file", "/proc/sys/kernel/rt1", "orig");
        check_accepted("file", "/sys/devices/system/cpu/cpu0/power/energy_perf_bias", "6");
}

/* Stored values that name a cgroup: under the cgroup mount, no ".." anywhere. */
TEST(procs_source_checked)
{
        const char *obj = "/sys/fs/cgroup/rtctl-isolated/cgroup.procs";

        check_refused("procs", obj, "all from /etc", "'all from /etc' is not a value kind 'procs' restores");
        check_refused("procs", obj, "all from /sys/fs/cgroup/../../etc", "kind 'procs'");
        check_refused("procs", obj, "all from /proc/1", "kind 'procs'");
        check_accepted("procs", obj, "all from /sys/fs/cgroup");
        check_accepted("procs", obj, "all from /sys/fs/cgroup/rtctl-isolated");
        check_accepted("procs", obj, "");
}

TEST(member_and_thread_values_checked)
{
        check_refused("member", "/proc/12/cgroup", "/../../../etc", "is not a value kind 'member' restores");
        check_refused("member", "/proc/12/cpuset", "/a/../..", "kind 'member'");
        check_refused("member", "/proc/12/cgroup", "relative", "kind 'member'");
        check_refused("member", "/proc/12/cgroup", "cgroup:1 start:2 unit:a.scope /../x", "kind 'member'");
        check_refused("thread", "/proc/12/task/13/cpuset", "/../../etc 0-1", "kind 'thread'");
        check_accepted("member", "/proc/12/cgroup", "/");
        check_accepted("member", "/proc/12/cgroup", "/user.slice/user-1000.slice/session-2.scope");
        check_accepted("member", "/proc/12/cgroup", "cgroup:7 start:9 unit:a.scope /system.slice/a.scope");
        check_accepted("thread", "/proc/12/task/13/cpuset", "/ 0-1");
        check_accepted("thread", "/proc/12/task/13/cpuset", "/rtctl-isolated");
}

/* The daemon never writes them either: a profile naming one does not load. */
TEST(sysctl_denied_in_profile)
{
        static const char *const keys[] = {"kernel.core_pattern",        "kernel/core_pattern",
                                           "kernel//core_pattern",       "kernel/./modprobe",
                                           "kernel.usermodehelper.bset", "fs.binfmt_misc.register",
                                           "kernel.poweroff_cmd"};

        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                _cleanup_free_ char *text = xasprintf("[Profile]\nDescription=t\n[Sysctl]\n%s=|/bin/sh\n",
                                                      keys[i]),
                                    *err = test_profile_errors("bad", text),
                                    *want = xasprintf("bad.conf:4: %s", keys[i]);
                CHECK_CONTAINS(err, want);
                CHECK_CONTAINS(err, "rtctl never writes it: it runs a program as root");
        }
        _cleanup_free_ char *ok =
            test_profile_errors("good", "[Profile]\nDescription=t\n[Sysctl]\nkernel.timer_migration=0\n");
        CHECK_STREQ(ok, "");
}

TEST_MAIN(T(service_only_rivals), T(unit_kinds_only_cpuset_units), T(denied_kernel_keys),
          T(procs_source_checked), T(member_and_thread_values_checked), T(sysctl_denied_in_profile))
