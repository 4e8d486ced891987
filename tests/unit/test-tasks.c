/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The process scan's cache (src/core/tasks.c): kernel threads held by pidfds, read once, forgotten
 * when they end; user processes held only as "not a kernel thread", read again by a scan of them all.
 * On this machine's /proc, whose kernel threads (kthreadd, PID 2, at least) are older than a second by
 * the time a test runs. */
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "core/tasks.h"
#include "test.h"

static size_t count_kthreads(const TaskScan *s)
{
        size_t k = 0;

        for (size_t i = 0; i < s->n; i++)
                if (s->tasks[i].flags & PF_KTHREAD)
                        k++;
        return k;
}

TEST(kernel_threads_are_read_once_and_said_as_read)
{
        TaskCache c = {};
        TaskScan a = {.cache = &c}, b = {.cache = &c}, plain = {};
        size_t n_a, n_b, n_plain;
        const TaskInfo *ta = task_scan_all(&a, &n_a);

        CHECK(c.n > count_kthreads(&a) / 2);
        CHECK(c.n <= n_a);
        CHECK_INTEQ(c.reads, n_a); /* the first scan reads every process */
        CHECK_INTEQ(c.hits, 0);
        const TaskInfo *kthreadd = task_scan_cached_kthread(&a, 2);
        CHECK(kthreadd);
        CHECK(kthreadd->flags & PF_KTHREAD);
        CHECK_STREQ(kthreadd->comm, "kthreadd");
        /* A user process is never given as a kernel thread, held or not. */
        CHECK(!task_scan_cached_kthread(&a, (unsigned)getpid()));
        (void)ta;

        unsigned long long held = 0, reads = c.reads;
        for (size_t i = 0; i < c.n; i++)
                held += !!(c.entries[i].info.flags & PF_KTHREAD);
        /* A pass that has not scanned yet gets nothing from the cache: unpruned, it may be stale. */
        CHECK(!task_scan_cached_kthread(&b, 2));
        const TaskInfo *tb = task_scan_all(&b, &n_b);
        CHECK(task_scan_cached_kthread(&b, 2));
        const TaskInfo *tp = task_scan_all(&plain, &n_plain);
        /* Each process listed is either held (a kernel thread) or read (new, or a user process); a
         * kernel thread or two may end between. */
        CHECK_INTEQ(n_b, c.hits + (c.reads - reads));
        CHECK(c.hits + 2 >= held);
        CHECK(c.hits > 0);
        /* What the cache said is what /proc says: every kernel thread in both, alike. */
        for (size_t i = 0; i < n_b; i++) {
                if (!(tb[i].flags & PF_KTHREAD))
                        continue;
                for (size_t j = 0; j < n_plain; j++)
                        if (tp[j].pid == tb[i].pid) {
                                CHECK_INTEQ(tp[j].flags & (PF_KTHREAD | PF_NO_SETAFFINITY),
                                            tb[i].flags & (PF_KTHREAD | PF_NO_SETAFFINITY));
                                CHECK_INTEQ(tp[j].starttime, tb[i].starttime);
                                CHECK_INTEQ(tp[j].ppid, tb[i].ppid);
                        }
        }
        task_scan_clear(&a);
        task_scan_clear(&b);
        task_scan_clear(&plain);
        task_cache_clear(&c);
        CHECK_INTEQ(c.n, 0);
}

/* A held task that ended is forgotten by the next scan, its pidfd closed: its PID may be another's
 * next. (A user process stands in for a kernel thread here: the test cannot end one.) */
TEST(a_held_task_that_ended_is_forgotten)
{
        TaskCache c = {};
        TaskScan s = {.cache = &c}, again = {.cache = &c};
        size_t n;
        pid_t child = fork();

        if (child == 0) {
                pause();
                _exit(0);
        }
        CHECK(child > 0);
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
        CHECK(c.hits == 1);
        const TaskInfo *h = task_scan_cached_kthread(&s, (unsigned)child);
        CHECK(h);
        CHECK_STREQ(h->comm, "held-name");
        task_scan_clear(&s);

        CHECK_INTEQ(kill(child, SIGKILL), 0);
        CHECK_INTEQ(waitpid(child, NULL, 0), child);
        const TaskInfo *all = task_scan_all(&again, &n);
        CHECK(!task_scan_cached_kthread(&again, (unsigned)child));
        for (size_t i = 0; i < n; i++)
                CHECK(all[i].pid != (unsigned)child);
        CHECK(fcntl(fd, F_GETFD) < 0); /* closed */
        task_scan_clear(&again);
        task_cache_clear(&c);
}

/* A CPU event's pass asks for kernel threads only: a user process the cache holds costs it no read. A
 * scan of every process still reads each user process again: its name is the one it has now. */
TEST(user_processes_are_skipped_by_a_kernel_thread_scan_and_read_by_a_whole_one)
{
        TaskCache c = {};
        TaskScan first = {.cache = &c}, kthreads = {.cache = &c}, whole = {.cache = &c};
        int go[2], done[2];
        size_t n;
        char byte = 0;

        CHECK_INTEQ(pipe(go), 0);
        CHECK_INTEQ(pipe(done), 0);
        pid_t child = fork();
        if (child == 0) {
                (void)prctl(PR_SET_NAME, "before");
                (void)write(done[1], "r", 1);
                (void)read(go[0], &byte, 1);
                (void)prctl(PR_SET_NAME, "after");
                (void)write(done[1], "r", 1);
                pause();
                _exit(0);
        }
        CHECK(child > 0);
        CHECK_INTEQ(read(done[0], &byte, 1), 1);

        const TaskInfo *t = task_scan_all(&first, &n);
        bool seen = false;
        for (size_t i = 0; i < n; i++)
                if (t[i].pid == (unsigned)child) {
                        CHECK_STREQ(t[i].comm, "before");
                        seen = true;
                }
        CHECK(seen);
        CHECK(!task_scan_cached_kthread(&first, (unsigned)child));
        task_scan_clear(&first);

        unsigned long long reads = c.reads;
        t = task_scan_kthreads(&kthreads, &n);
        CHECK(n > 0);
        for (size_t i = 0; i < n; i++) {
                CHECK(t[i].flags & PF_KTHREAD);
                CHECK(t[i].pid != (unsigned)child);
        }
        /* Only what started since the first scan is read (a kworker or two, this test's own nothing). */
        CHECK(c.reads - reads <= 4);
        /* A process the kernel-thread scan did not list is read when asked for. */
        TaskInfo buf;
        const TaskInfo *found = task_scan_find(&kthreads, (unsigned)child, &buf);
        CHECK(found);
        CHECK_STREQ(found->comm, "before");
        task_scan_clear(&kthreads);

        CHECK_INTEQ(write(go[1], "g", 1), 1);
        CHECK_INTEQ(read(done[0], &byte, 1), 1);
        t = task_scan_all(&whole, &n);
        seen = false;
        for (size_t i = 0; i < n; i++)
                if (t[i].pid == (unsigned)child) {
                        CHECK_STREQ(t[i].comm, "after");
                        seen = true;
                }
        CHECK(seen);
        task_scan_clear(&whole);

        CHECK_INTEQ(kill(child, SIGKILL), 0);
        CHECK_INTEQ(waitpid(child, NULL, 0), child);
        task_cache_clear(&c);
        for (int i = 0; i < 2; i++) {
                close(go[i]);
                close(done[i]);
        }
}

TEST_MAIN(T(kernel_threads_are_read_once_and_said_as_read), T(a_held_task_that_ended_is_forgotten),
          T(user_processes_are_skipped_by_a_kernel_thread_scan_and_read_by_a_whole_one))
