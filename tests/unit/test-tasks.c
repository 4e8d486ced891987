/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The process scan's cache of kernel threads (src/core/tasks.c): held by pidfds, read once, forgotten
 * when they end. On this machine's /proc, whose kernel threads (kthreadd, PID 2, at least) are older
 * than a second by the time a test runs. */
#include <fcntl.h>
#include <signal.h>
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

        CHECK(c.n > 0);
        CHECK(c.n <= count_kthreads(&a));
        CHECK_INTEQ(c.reads, n_a); /* the first scan reads every process */
        CHECK_INTEQ(c.hits, 0);
        const TaskInfo *kthreadd = task_scan_cached_kthread(&a, 2);
        CHECK(kthreadd);
        CHECK(kthreadd->flags & PF_KTHREAD);
        CHECK_STREQ(kthreadd->comm, "kthreadd");
        /* A user process is never held: its name and flags change with exec and prctl. */
        CHECK(!task_scan_cached_kthread(&a, (unsigned)getpid()));
        (void)ta;

        unsigned long long held = c.n, reads = c.reads;
        /* A pass that has not scanned yet gets nothing from the cache: unpruned, it may be stale. */
        CHECK(!task_scan_cached_kthread(&b, 2));
        const TaskInfo *tb = task_scan_all(&b, &n_b);
        CHECK(task_scan_cached_kthread(&b, 2));
        const TaskInfo *tp = task_scan_all(&plain, &n_plain);
        /* Each process listed is either held or read; a kernel thread or two may end between. */
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

TEST_MAIN(T(kernel_threads_are_read_once_and_said_as_read), T(a_held_task_that_ended_is_forgotten))
