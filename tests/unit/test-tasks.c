/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The process scan's cache (src/core/tasks.c): kernel threads held by pidfds, read once, forgotten
 * when they end; user processes held only as "not a kernel thread", read again by a scan of them all.
 *
 * Each test scans a /proc of its own choosing: a root prefix whose proc/ lists only the processes the
 * test names, each a link to the live /proc/PID (so the stat files and the pidfds are real). The counts
 * asserted are then exact, and nothing else on the machine (a build beside this one under fakeroot, a
 * desktop's hundreds of processes, kworkers coming and going) can change them. The kernel threads named
 * are ones that never end while their CPU is online and are older than a second by the time a test
 * runs: kthreadd, and the first CPU's ksoftirqd and migration threads. */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "core/tasks.h"
#include "shared/sysfs.h"
#include "test.h"

/* A fresh root prefix whose /proc lists nothing yet, set as the root prefix. */
static char *chosen_proc(void)
{
        char *root = xasprintf("%s/chosen", test_tmpdir());
        _cleanup_free_ char *cmd = xasprintf("rm -rf '%s' && mkdir -p '%s/proc'", root, root);

        CHECK_INTEQ(system(cmd), 0);
        sysroot_set(root);
        return root;
}

static void list(const char *root, unsigned pid)
{
        _cleanup_free_ char *link = xasprintf("%s/proc/%u", root, pid), *target = xasprintf("/proc/%u", pid);

        CHECK_INTEQ(symlink(target, link), 0);
}

/* The PID of the live kernel thread named comm (one that never ends), 0 when there is none. */
static unsigned live_kthread(const char *comm)
{
        TaskScan s = {};
        size_t n;
        const TaskInfo *t;
        unsigned pid;

        sysroot_set("");
        t = task_scan_all(&s, &n);
        pid = 0;
        for (size_t i = 0; i < n && !pid; i++)
                if ((t[i].flags & PF_KTHREAD) && streq(t[i].comm, comm))
                        pid = t[i].pid;
        task_scan_clear(&s);
        return pid;
}

static size_t count_kthreads(const TaskInfo *t, size_t n)
{
        size_t k = 0;

        for (size_t i = 0; i < n; i++)
                k += !!(t[i].flags & PF_KTHREAD);
        return k;
}

TEST(kernel_threads_are_read_once_and_said_as_read)
{
        unsigned ksoftirqd = live_kthread("ksoftirqd/0"), migration = live_kthread("migration/0");
        CHECK(ksoftirqd > 0 && migration > 0);
        _cleanup_free_ char *root = chosen_proc();
        list(root, 2);
        list(root, ksoftirqd);
        list(root, migration);
        list(root, (unsigned)getpid());

        TaskCache c = {};
        TaskScan a = {.cache = &c}, b = {.cache = &c}, plain = {};
        size_t n_a, n_b, n_plain;
        const TaskInfo *ta = task_scan_all(&a, &n_a);

        CHECK_INTEQ(n_a, 4);
        CHECK_INTEQ(count_kthreads(ta, n_a), 3);
        CHECK_INTEQ(c.reads, 4); /* the first scan reads every process */
        CHECK_INTEQ(c.hits, 0);
        CHECK_INTEQ(c.n, 4); /* each held, the user process as "not a kernel thread" */
        const TaskInfo *kthreadd = task_scan_cached_kthread(&a, 2);
        CHECK(kthreadd);
        CHECK(kthreadd->flags & PF_KTHREAD);
        CHECK_STREQ(kthreadd->comm, "kthreadd");
        /* A user process is never given as a kernel thread, held or not. */
        CHECK(!task_scan_cached_kthread(&a, (unsigned)getpid()));

        /* A pass that has not scanned yet gets nothing from the cache: unpruned, it may be stale. */
        CHECK(!task_scan_cached_kthread(&b, 2));
        const TaskInfo *tb = task_scan_all(&b, &n_b);
        CHECK(task_scan_cached_kthread(&b, 2));
        /* The three kernel threads come from the cache; the user process is read again (its name and
         * flags change with exec and prctl). */
        CHECK_INTEQ(n_b, 4);
        CHECK_INTEQ(c.hits, 3);
        CHECK_INTEQ(c.reads, 5);
        /* What the cache said is what /proc says: every kernel thread in both, alike. */
        const TaskInfo *tp = task_scan_all(&plain, &n_plain);
        CHECK_INTEQ(n_plain, n_b);
        for (size_t i = 0; i < n_b; i++) {
                CHECK_INTEQ(tp[i].pid, tb[i].pid);
                CHECK_STREQ(tp[i].comm, tb[i].comm);
                CHECK_INTEQ(tp[i].flags & (PF_KTHREAD | PF_NO_SETAFFINITY),
                            tb[i].flags & (PF_KTHREAD | PF_NO_SETAFFINITY));
                CHECK_INTEQ(tp[i].starttime, tb[i].starttime);
                CHECK_INTEQ(tp[i].ppid, tb[i].ppid);
        }
        task_scan_clear(&a);
        task_scan_clear(&b);
        task_scan_clear(&plain);
        task_cache_clear(&c);
        CHECK_INTEQ(c.n, 0);
        sysroot_set("");
}

/* A held task that ended is forgotten by the next scan, its pidfd closed: its PID may be another's
 * next. (A user process stands in for a kernel thread here: the test cannot end one.) */
TEST(a_held_task_that_ended_is_forgotten)
{
        _cleanup_free_ char *root = chosen_proc();
        TaskCache c = {};
        TaskScan s = {.cache = &c}, again = {.cache = &c};
        size_t n;
        pid_t child = fork();

        if (child == 0) {
                pause();
                _exit(0);
        }
        CHECK(child > 0);
        list(root, (unsigned)child);
        TaskInfo t;
        CHECK_INTEQ(task_info((unsigned)child, &t), 0);
        int fd = (int)syscall(SYS_pidfd_open, child, 0);
        CHECK(fd >= 0);
        c.entries = xmalloc0(sizeof(TaskCacheEntry));
        c.entries[0] = (TaskCacheEntry){.info = t, .pidfd = fd};
        c.n = 1;
        strcpy(c.entries[0].info.comm, "held-name");
        c.entries[0].info.flags |= PF_KTHREAD;

        /* Alive: the held entry is what the scan gives, not a read. */
        (void)task_scan_all(&s, &n);
        CHECK_INTEQ(n, 1);
        CHECK_INTEQ(c.hits, 1);
        CHECK_INTEQ(c.reads, 0);
        const TaskInfo *h = task_scan_cached_kthread(&s, (unsigned)child);
        CHECK(h);
        CHECK_STREQ(h->comm, "held-name");
        task_scan_clear(&s);

        CHECK_INTEQ(kill(child, SIGKILL), 0);
        CHECK_INTEQ(waitpid(child, NULL, 0), child);
        /* Its entry in this /proc stays (a link to nothing now), as a PID that readdir listed just
         * before the process went. */
        (void)task_scan_all(&again, &n);
        CHECK_INTEQ(n, 0);
        CHECK(!task_scan_cached_kthread(&again, (unsigned)child));
        CHECK_INTEQ(c.n, 0);
        CHECK(fcntl(fd, F_GETFD) < 0); /* closed */
        task_scan_clear(&again);
        task_cache_clear(&c);
        sysroot_set("");
}

/* A child named before that renames itself after once go is written; returns once it has its name. */
static pid_t named_child(const int go[2], const int done[2], const char *before, const char *after)
{
        char byte = 0;
        pid_t child = fork();

        if (child == 0) {
                (void)prctl(PR_SET_NAME, before);
                if (write(done[1], "r", 1) != 1 || read(go[0], &byte, 1) != 1)
                        _exit(1);
                (void)prctl(PR_SET_NAME, after);
                if (write(done[1], "r", 1) != 1)
                        _exit(1);
                pause();
                _exit(0);
        }
        CHECK(child > 0);
        CHECK_INTEQ(read(done[0], &byte, 1), 1);
        return child;
}

/* A CPU event's pass asks for kernel threads only: a user process the cache holds costs it no read, a
 * process new since the last scan costs one. A scan of every process still reads each user process
 * again: its name is the one it has now. */
TEST(user_processes_are_skipped_by_a_kernel_thread_scan_and_read_by_a_whole_one)
{
        unsigned ksoftirqd = live_kthread("ksoftirqd/0");
        CHECK(ksoftirqd > 0);
        _cleanup_free_ char *root = chosen_proc();
        TaskCache c = {};
        TaskScan first = {.cache = &c}, kthreads = {.cache = &c}, whole = {.cache = &c};
        int go[2], done[2];
        size_t n;
        char byte = 0;

        CHECK_INTEQ(pipe(go), 0);
        CHECK_INTEQ(pipe(done), 0);
        pid_t child = named_child(go, done, "before", "after");
        list(root, 2);
        list(root, ksoftirqd);
        list(root, (unsigned)child);

        const TaskInfo *t = task_scan_all(&first, &n);
        CHECK_INTEQ(n, 3);
        CHECK_INTEQ(t[n - 1].pid, (unsigned)child);
        CHECK_STREQ(t[n - 1].comm, "before");
        CHECK(!task_scan_cached_kthread(&first, (unsigned)child));
        CHECK_INTEQ(c.reads, 3);
        task_scan_clear(&first);

        /* One process more since the first scan: the kernel-thread scan reads it, and nothing held. */
        int go2[2], done2[2];
        CHECK_INTEQ(pipe(go2), 0);
        CHECK_INTEQ(pipe(done2), 0);
        pid_t newer = named_child(go2, done2, "newer", "newer");
        list(root, (unsigned)newer);
        t = task_scan_kthreads(&kthreads, &n);
        CHECK_INTEQ(n, 2);
        for (size_t i = 0; i < n; i++)
                CHECK(t[i].flags & PF_KTHREAD);
        CHECK_INTEQ(c.reads, 4);
        CHECK_INTEQ(c.hits, 3); /* kthreadd, ksoftirqd/0 and the held child */
        /* A process the kernel-thread scan did not list is read when asked for. */
        TaskInfo buf;
        const TaskInfo *found = task_scan_find(&kthreads, (unsigned)child, &buf);
        CHECK(found);
        CHECK_STREQ(found->comm, "before");
        task_scan_clear(&kthreads);

        CHECK_INTEQ(write(go[1], "g", 1), 1);
        CHECK_INTEQ(read(done[0], &byte, 1), 1);
        t = task_scan_all(&whole, &n);
        CHECK_INTEQ(n, 4);
        bool seen = false;
        for (size_t i = 0; i < n; i++)
                if (t[i].pid == (unsigned)child) {
                        CHECK_STREQ(t[i].comm, "after");
                        seen = true;
                }
        CHECK(seen);
        task_scan_clear(&whole);

        CHECK_INTEQ(kill(child, SIGKILL), 0);
        CHECK_INTEQ(waitpid(child, NULL, 0), child);
        CHECK_INTEQ(kill(newer, SIGKILL), 0);
        CHECK_INTEQ(waitpid(newer, NULL, 0), newer);
        task_cache_clear(&c);
        for (int i = 0; i < 2; i++) {
                close(go[i]);
                close(done[i]);
                close(go2[i]);
                close(done2[i]);
        }
        sysroot_set("");
}

static void *run_on(void *arg)
{
        (void)arg;
        pause();
        return NULL;
}

/* A program whose main thread called pthread_exit() runs on in its other threads: its leader is
 * PF_EXITING, and the program has not ended. A zombie has. */
TEST(a_leader_gone_before_its_threads_is_no_ended_process)
{
        int ready[2];
        char byte = 0;
        TaskInfo t;

        CHECK_INTEQ(pipe(ready), 0);
        pid_t child = fork();
        if (child == 0) {
                pthread_t th;
                if (pthread_create(&th, NULL, run_on, NULL) != 0)
                        _exit(1);
                (void)!write(ready[1], "r", 1);
                pthread_exit(NULL);
        }
        CHECK(child > 0);
        CHECK_INTEQ(read(ready[0], &byte, 1), 1);
        /* The leader's exit is done once its stat says so. */
        for (int i = 0; i < 2000 && task_info((unsigned)child, &t) == 0 && !(t.flags & PF_EXITING); i++)
                usleep(1000);
        CHECK_INTEQ(task_info((unsigned)child, &t), 0);
        CHECK(t.flags & PF_EXITING);
        CHECK_INTEQ(t.threads, 2);
        CHECK(!task_info_ended(&t));

        CHECK_INTEQ(kill(child, SIGKILL), 0);
        /* A zombie, not reaped yet: ended. */
        siginfo_t si;
        CHECK_INTEQ(waitid(P_PID, (id_t)child, &si, WEXITED | WNOWAIT), 0);
        CHECK_INTEQ(task_info((unsigned)child, &t), 0);
        CHECK(task_info_ended(&t));
        CHECK_INTEQ(waitpid(child, NULL, 0), child);
        close(ready[0]);
        close(ready[1]);
}

TEST_MAIN(T(kernel_threads_are_read_once_and_said_as_read), T(a_held_task_that_ended_is_forgotten),
          T(user_processes_are_skipped_by_a_kernel_thread_scan_and_read_by_a_whole_one),
          T(a_leader_gone_before_its_threads_is_no_ended_process))
