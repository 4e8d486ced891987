/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Putting an attached process back (core/member-origin.c) on a tree under a root prefix: only into the
 * directory it came from, checked by id; a process is gone only by its PID and start time; a path with
 * "..", or an old plain path into a directory a user made, is never written. The process is this test
 * itself, whose cgroup.procs under the prefix is a plain file: what a restore would write shows there. */
#include <sys/stat.h>
#include <unistd.h>

#include "core/cgroupfs.h"
#include "core/member-origin.h"
#include "core/tasks.h"
#include "shared/sysfs.h"
#include "test.h"

static char *root;

static char *procs_of(const char *dir)
{
        return test_cgroup_procs(root, dir);
}

static char *origin(const char *dir, unsigned long long starttime)
{
        _cleanup_free_ char *path = xasprintf("%s/sys/fs/cgroup%s", root, dir);
        struct stat st;

        if (stat(path, &st) < 0)
                abort();
        return xasprintf("cgroup:%llu start:%llu unit:? %s", (unsigned long long)st.st_ino, starttime, dir);
}

static void setup(void)
{
        root = xasprintf("%s/m", test_tmpdir());
        test_write(root, "sys/fs/cgroup/user.slice/user@1000.service/app.slice/a/cgroup.procs", "");
        test_write(root,
                   "sys/fs/cgroup/user.slice/user@1000.service/app.slice/x/user@1001.service/cgroup.procs",
                   "");
        test_write(root, "sys/fs/cgroup/user.slice/user@1001.service/x/cgroup.procs", "");
        /* The process's own /proc/PID/stat, which the kinds read under the prefix too. */
        _cleanup_free_ char *stat = NULL, *rel = xasprintf("proc/%d/stat", (int)getpid());
        if (read_full_file("/proc/self/stat", &stat, NULL) < 0)
                abort();
        test_write(root, rel, stat);
        sysroot_set(root);
}

TEST(parses_what_it_writes)
{
        MemberOrigin o;

        CHECK_INTEQ(member_origin_parse("cgroup:42 start:7 unit:user@1000.service /a b/c", &o), 0);
        CHECK_INTEQ(o.id, 42);
        CHECK_INTEQ(o.starttime, 7);
        CHECK_STREQ(o.unit, "user@1000.service");
        CHECK_STREQ(o.path, "/a b/c");
        member_origin_clear(&o);
        CHECK_INTEQ(member_origin_parse("cgroup:42 start:7 unit:? /a", &o), 0);
        CHECK(!o.unit);
        member_origin_clear(&o);
        CHECK_INTEQ(member_origin_parse("/user.slice/user@1000.service", &o), -EINVAL);
        CHECK_INTEQ(member_origin_parse("cgroup:42 start:7 unit:x relative", &o), -EINVAL);
        CHECK(member_origin_equal("/a b/c", "cgroup:42 start:7 unit:? /a b/c"));
        CHECK(!member_origin_equal("/a", "cgroup:42 start:7 unit:? /a/b"));
}

TEST(back_only_into_the_directory_it_came_from)
{
        const char *a = "/user.slice/user@1000.service/app.slice/a";
        const char *planted = "/user.slice/user@1000.service/app.slice/x/user@1001.service";
        _cleanup_free_ char *object = xasprintf("/proc/%d/cgroup", (int)getpid()), *me = NULL, *v = NULL,
                            *other = NULL, *replaced = NULL, *old = NULL, *dots = NULL, *got = NULL;
        TaskInfo t;

        CHECK_INTEQ(task_info((unsigned)getpid(), &t), 0);
        setup();
        me = xasprintf("%d", (int)getpid());

        /* The recorded directory, by id: written there. */
        v = origin(a, t.starttime);
        CHECK_INTEQ(member_write_systemd(NULL, object, (unsigned)getpid(), v), 0);
        got = procs_of(a);
        CHECK_STREQ(got, me);

        /* The planted directory is written, and nothing lands in the tree its name suggests. */
        other = origin(planted, t.starttime);
        CHECK_INTEQ(member_write_systemd(NULL, object, (unsigned)getpid(), other), 0);
        free(got);
        got = procs_of("/user.slice/user@1001.service/x");
        CHECK_STREQ(got, "");

        free(got);
        got = procs_of(planted);
        CHECK_STREQ(got, me);

        /* The same name, another directory: not where it came from. */
        free(got);
        got = xasprintf("%s/sys/fs/cgroup%s", root, a);
        replaced = xasprintf("%s.old", got);
        CHECK_INTEQ(rename(got, replaced), 0);
        test_write(root, "sys/fs/cgroup/user.slice/user@1000.service/app.slice/a/cgroup.procs", "");
        CHECK_INTEQ(member_write_systemd(NULL, object, (unsigned)getpid(), v), -ESTALE);
        free(got);
        got = procs_of(a);
        CHECK_STREQ(got, "");

        /* Another start time: the PID is another process's, so the one attached is gone. */
        old = origin(a, t.starttime + 1);
        CHECK_INTEQ(member_write_systemd(NULL, object, (unsigned)getpid(), old), -ENOENT);
        free(got);
        got = procs_of(a);
        CHECK_STREQ(got, "");

        /* No "..", even with the right id. */
        dots = xasprintf("cgroup:1 start:%llu unit:? /user.slice/../user.slice", t.starttime);
        CHECK_INTEQ(member_write_systemd(NULL, object, (unsigned)getpid(), dots), -EINVAL);

        /* An old plain path into a directory a user owns is not replayed as root. */
        _cleanup_free_ char *dir = xasprintf("%s/sys/fs/cgroup%s", root, planted);
        CHECK_INTEQ(chown(dir, 1000, 1000), 0);
        CHECK_INTEQ(member_write_systemd(NULL, object, (unsigned)getpid(), planted), -EPERM);
        sysroot_set("");
}

/* A process leaving rtctl's threaded subtree through cgroup.procs has its threads gathered first
 * (cgroup_gather_threads()): on 6.2 and later the kernel sets no thread's CPUs when the leader's cpuset
 * has the destination's, and a thread left on the isolated CPUs would keep them at home. Each case here
 * needs one write at most, and a fixture's cgroup.threads is a plain file that keeps the last. */
static char *threads_of(const char *dir)
{
        _cleanup_free_ char *path =
            xasprintf("%s/sys/fs/cgroup/rtctl.slice/s.scope%s/cgroup.threads", root, dir);
        char *s = NULL;

        if (read_full_file(path, &s, NULL) < 0)
                return xstrdup("(unreadable)");
        return s;
}

static void put_thread(unsigned pid, unsigned tid, const char *dir)
{
        _cleanup_free_ char *rel = xasprintf("proc/%u/task/%u/cgroup", pid, tid),
                            *line = xasprintf("0::/rtctl.slice/s.scope%s\n", dir);
        test_write(root, rel, line);
}

static void empty_threads(void)
{
        test_write(root, "sys/fs/cgroup/rtctl.slice/s.scope/housekeeping/cgroup.threads", "");
        test_write(root, "sys/fs/cgroup/rtctl.slice/s.scope/isolated/cgroup.threads", "");
        test_write(root, "sys/fs/cgroup/rtctl.slice/t.scope/isolated/cgroup.threads", "");
}

/* What the housekeeping and isolated cgroups' cgroup.threads got written. */
static void check_written(const char *housekeeping, const char *isolated)
{
        _cleanup_free_ char *hk = threads_of("/housekeeping"), *iso = threads_of("/isolated");

        CHECK_STREQ(hk, housekeeping);
        CHECK_STREQ(iso, isolated);
}

TEST(threads_gathered_before_their_process_leaves_the_subtree)
{
        _cleanup_free_ char *lone = NULL, *lone_path = NULL;

        free(root); /* the other test's tree */
        root = xasprintf("%s/g", test_tmpdir());
        empty_threads();
        sysroot_set(root);

        /* Leader and one thread on housekeeping, the real-time one isolated: it joins them. */
        put_thread(100, 100, "/housekeeping");
        put_thread(100, 101, "/isolated");
        put_thread(100, 102, "/housekeeping");
        CHECK_INTEQ(cgroup_gather_threads("/sys/fs/cgroup", 100), 0);
        check_written("101", "");

        /* A real-time leader: the threads gather on housekeeping all the same, never on the isolated
         * CPUs. */
        empty_threads();
        put_thread(200, 200, "/isolated");
        put_thread(200, 201, "/housekeeping");
        CHECK_INTEQ(cgroup_gather_threads("/sys/fs/cgroup", 200), 0);
        check_written("200", "");

        /* Threads in one cgroup already: nothing written. */
        empty_threads();
        put_thread(300, 300, "/isolated");
        put_thread(300, 301, "/isolated");
        CHECK_INTEQ(cgroup_gather_threads("/sys/fs/cgroup", 300), 0);
        check_written("", "");

        /* No housekeeping sibling: the leader's cgroup. */
        test_write(root, "proc/400/task/400/cgroup", "0::/rtctl.slice/t.scope/isolated\n");
        test_write(root, "proc/400/task/401/cgroup", "0::/rtctl.slice/t.scope\n");
        CHECK_INTEQ(cgroup_gather_threads("/sys/fs/cgroup", 400), 0);
        lone_path = xasprintf("%s/sys/fs/cgroup/rtctl.slice/t.scope/isolated/cgroup.threads", root);
        CHECK_INTEQ(read_full_file(lone_path, &lone, NULL), 0);
        CHECK_STREQ(lone, "401");

        /* A process that is gone: nothing to do, no error. */
        CHECK_INTEQ(cgroup_gather_threads("/sys/fs/cgroup", 999), 0);
        sysroot_set("");
}

TEST_MAIN(T(parses_what_it_writes), T(back_only_into_the_directory_it_came_from),
          T(threads_gathered_before_their_process_leaves_the_subtree))
