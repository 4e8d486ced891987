/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The member kind writes a process into a cgroup by its PID, and a PID is free for another process once
 * its own exited: a write goes to the process the plan named (its PID and start time) or to none, and
 * leaves nothing in the journal that would later "restore" a stranger (issue 37 item 8). A tree under a
 * root prefix, cgroup v2 without systemd, whose cgroup.procs files are plain files: what a move would
 * write shows there. The PID's reuse is a new /proc/PID/stat with a later start time, written by a
 * setting the applier writes just before the member's, as the kernel would let it happen between the
 * plan (or the read) and the write. */
#include "core/applier.h"
#include "core/reconcile.h"
#include "shared/sysfs.h"
#include "test.h"

#define OWN      "100 (pipewire) S 1 100 100 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 2 0 5000\n"
#define STRANGER "100 (sshd) S 1 100 100 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 7000\n"

static char *root, *journal_file;

static void setup(const char *name)
{
        free(root);
        free(journal_file);
        root = xasprintf("%s/%s", test_tmpdir(), name);
        journal_file = xasprintf("%s/%s.json", test_tmpdir(), name);
        test_write(root, "sys/devices/system/cpu/possible", "0-3\n");
        test_write(root, "sys/devices/system/cpu/online", "0-3\n");
        test_write(root, "proc/self/mounts", "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0\n");
        test_write(root, "proc/cmdline", "root=/dev/vda ro\n");
        test_write(root, "sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n");
        test_write(root, "sys/fs/cgroup/cgroup.procs", "100\n");
        test_write(root, "sys/fs/cgroup/user.slice/cgroup.procs", "");
        test_write(root, "sys/fs/cgroup/rtctl-attached/cgroup.procs", "");
        test_write(root, "sys/fs/cgroup/rtctl-attached/isolated/cgroup.procs", "");
        test_write(root, "proc/100/stat", OWN);
        test_write(root, "proc/100/status", "Name:\tpipewire\nUid:\t1000\t1000\t1000\t1000\n");
        test_write(root, "proc/100/cgroup", "0::/\n");
        unlink(journal_file);
        sysroot_set(root);
}

static char *procs_of(const char *dir)
{
        return test_cgroup_procs(root, dir);
}

static Journal *open_journal(void)
{
        _cleanup_free_ char *err = NULL;
        Journal *j = NULL;

        CHECK_INTEQ(journal_open(journal_file, JOURNAL_RUNTIME, &j, &err), 0);
        return j;
}

/* One phase: the PID changes hands (the setting that rewrites /proc/100/stat, when reused), then the
 * member write of process 100 as planned with start time 5000. */
static void apply(Journal *j, bool reused, bool restore, const char *desired, Setting **ret_member)
{
        static Plan plan;
        SettingContext ctx;
        ApplyStats stats;
        Setting *s;

        plan_clear(&plan);
        if (reused)
                plan_add(&plan, &setting_kind_file, "test", 0, xstrdup("/proc/100/stat"), xstrdup(STRANGER));
        s = plan_add(&plan, &setting_kind_member, "cpuset", 0, xstrdup("/proc/100/cgroup"),
                     xstrdup(desired));
        s->restore = restore;
        s->starttime = 5000;
        setting_context_init(&ctx, NULL);
        applier_apply(&plan, j, &ctx, &stats);
        setting_context_clear(&ctx);
        *ret_member = &plan.settings[plan.n - 1];
}

/* The attached process exited and its PID names another (a later start time) when the pass runs: that
 * one stays where it is, and the setting is gone, journalling nothing. */
TEST(a_reused_pid_is_not_moved_by_a_pass)
{
        _cleanup_policy_ Policy *p = test_profile("[Profile]\nDescription=i\n[CPU]\nIsolate=3\n");
        _cleanup_journal_ Journal *j = NULL;
        _cleanup_free_ char *iso = NULL;
        TaskId attached[] = {{100, 5000}};
        PassResult res = {};
        const Setting *s;

        setup("pass");
        test_write(root, "proc/100/stat", STRANGER);
        j = open_journal();
        test_pass_policy(root, p, j, &(PassInput){.attached = attached, .n_attached = 1}, &res);
        s = test_plan_find(&res.plan, "/proc/100/cgroup");
        CHECK(s != NULL);
        CHECK_INTEQ(s ? (int)s->result : -1, SETTING_GONE);
        CHECK_INTEQ(s ? s->error : 0, -ESRCH);
        iso = procs_of("/rtctl-attached/isolated");
        CHECK_STREQ(iso, "");
        CHECK(journal_find(j, "/proc/100/cgroup") == NULL);
        pass_result_clear(&res);
        sysroot_set("");
}

/* The PID changes hands between the read (which journalled the planned process's cgroup) and the
 * write: the write is refused, and the journal forgets the entry. */
TEST(a_pid_reused_before_the_write_is_not_moved)
{
        _cleanup_journal_ Journal *j = NULL;
        _cleanup_free_ char *iso = NULL;
        Setting *s;

        setup("write");
        j = open_journal();
        apply(j, true, false, "/rtctl-attached/isolated", &s);
        iso = procs_of("/rtctl-attached/isolated");
        CHECK_STREQ(iso, "");
        CHECK_INTEQ(s->result, SETTING_GONE);
        CHECK_INTEQ(s->error, -ESRCH);
        CHECK(journal_find(j, "/proc/100/cgroup") == NULL);
        sysroot_set("");
}

/* The same PID, still its own process: written. */
TEST(the_planned_process_is_moved)
{
        _cleanup_journal_ Journal *j = NULL;
        _cleanup_free_ char *iso = NULL;
        const JournalEntry *e;
        Setting *s;

        setup("own");
        j = open_journal();
        apply(j, false, false, "/rtctl-attached/isolated", &s);
        iso = procs_of("/rtctl-attached/isolated");
        CHECK_STREQ(iso, "100");
        /* The tree's kernel moves nothing: the read back finds the process where it was. */
        CHECK_INTEQ(s->result, SETTING_FAILED);
        e = journal_find(j, "/proc/100/cgroup");
        CHECK(e != NULL);
        CHECK_INTEQ(e ? e->starttime : 0, 5000);
        sysroot_set("");
}

/* A restore (a plain path, as cgroup v1 and v2 without systemd journal it) of a process whose PID changed
 * hands after the plan checked it: the stranger is not put into the original's cgroup. */
TEST(a_restore_does_not_move_a_stranger)
{
        _cleanup_journal_ Journal *j = NULL;
        _cleanup_free_ char *home = NULL;
        Setting *s;

        setup("restore");
        test_write(root, "proc/100/cgroup", "0::/rtctl-attached/isolated\n");
        j = open_journal();
        apply(j, true, true, "/user.slice", &s);
        home = procs_of("/user.slice");
        CHECK_STREQ(home, "");
        CHECK_INTEQ(s->result, SETTING_GONE);
        sysroot_set("");
}

TEST_MAIN(T(a_reused_pid_is_not_moved_by_a_pass), T(a_pid_reused_before_the_write_is_not_moved),
          T(the_planned_process_is_moved), T(a_restore_does_not_move_a_stranger))
