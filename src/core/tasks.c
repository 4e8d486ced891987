/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "core/tasks.h"
#include "shared/sysfs.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int task_info(unsigned pid, TaskInfo *ret)
{
        _cleanup_free_ char *path = xasprintf("/proc/%u/stat", pid), *s = NULL;
        char *open, *close, state;
        unsigned long long field[23] = {};
        int r, n;

        assert(ret);

        r = sys_read(path, &s);
        if (r < 0)
                return r;
        /* "pid (comm) state ppid ..." and comm may hold spaces and parentheses. */
        open = strchr(s, '(');
        close = strrchr(s, ')');
        if (!open || !close || close < open || close[1] != ' ')
                return -EBADMSG;
        *ret = (TaskInfo){.pid = pid};
        snprintf(ret->comm, sizeof ret->comm, "%.*s",
                 (int)MIN((size_t)(close - open - 1), sizeof ret->comm - 1), open + 1);
        /* fields 4.. : ppid pgrp session tty_nr tpgid flags ... starttime is field 22 */
        n = sscanf(close + 2,
                   "%c %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu "
                   "%llu %llu",
                   &state, &field[4], &field[5], &field[6], &field[7], &field[8], &field[9], &field[10],
                   &field[11], &field[12], &field[13], &field[14], &field[15], &field[16], &field[17],
                   &field[18], &field[19], &field[20], &field[21], &field[22]);
        if (n < 20)
                return -EBADMSG;
        ret->ppid = (unsigned)field[4];
        ret->flags = (unsigned)field[9];
        ret->threads = (unsigned)field[20];
        ret->starttime = field[22];
        return 0;
}

bool task_info_ended(const TaskInfo *t)
{
        assert(t);

        return (t->flags & PF_EXITING) && t->threads <= 1;
}

bool task_exited(unsigned pid)
{
        TaskInfo t;

        return task_info(pid, &t) < 0 || (t.flags & PF_EXITING);
}

int task_uids(unsigned pid, uid_t *ret_uid, uid_t *ret_euid)
{
        _cleanup_free_ char *path = xasprintf("/proc/%u/status", pid), *s = NULL;
        const char *line;
        unsigned uid, euid;
        int r;

        r = sys_read(path, &s);
        if (r < 0)
                return r;
        line = strstr(s, "\nUid:");
        if (!line || sscanf(line + 5, "%u %u", &uid, &euid) != 2)
                return -EBADMSG;
        *ret_uid = uid;
        *ret_euid = euid;
        return 0;
}

int pidfd_get_pid(int fd)
{
        _cleanup_free_ char *path = xasprintf("/proc/self/fdinfo/%d", fd), *s = NULL;
        const char *line;
        int pid;

        if (read_full_file(path, &s, NULL) < 0)
                return -EBADF;
        line = strstr(s, "\nPid:");
        if (!line || sscanf(line + 5, "%d", &pid) != 1)
                return -EBADF;
        return MAX(pid, 0);
}

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif

int task_hold(unsigned pid, unsigned long long starttime, TaskHold *ret)
{
        TaskInfo t;
        int fd = -EBADF;

        assert(ret);

        if (isempty(sysroot())) {
                fd = (int)syscall(SYS_pidfd_open, pid, 0);
                /* A thread that leads no process: its own pidfd, where the kernel has them. */
                if (fd < 0 && errno == EINVAL)
                        fd = (int)syscall(SYS_pidfd_open, pid, PIDFD_THREAD);
                if (fd < 0 && errno == ESRCH)
                        return -ESRCH;
        }
        if (task_info(pid, &t) < 0 || (starttime && t.starttime != starttime)) {
                if (fd >= 0)
                        (void)close(fd);
                return -ESRCH;
        }
        *ret = (TaskHold){.pid = pid, .starttime = t.starttime, .pidfd = fd < 0 ? -EBADF : fd};
        return 0;
}

bool task_hold_alive(const TaskHold *h)
{
        TaskInfo t;

        assert(h);

        if (h->pidfd >= 0) {
                struct pollfd p = {.fd = h->pidfd, .events = POLLIN};
                return poll(&p, 1, 0) == 0; /* readable once it exited */
        }
        return task_info(h->pid, &t) >= 0 && t.starttime == h->starttime && !(t.flags & PF_EXITING);
}

void task_hold_clear(TaskHold *h)
{
        assert(h);

        if (h->pidfd >= 0)
                (void)close(h->pidfd);
        *h = (TaskHold){.pidfd = -EBADF};
}

static int cmp_pid(const void *a, const void *b)
{
        unsigned x = ((const TaskInfo *)a)->pid, y = ((const TaskInfo *)b)->pid;
        return x < y ? -1 : x > y;
}

static void close_fd(int fd)
{
        if (fd >= 0)
                (void)close(fd);
}

/* Clock ticks since boot: what /proc/PID/stat counts a task's start in. */
static unsigned long long boot_ticks(long hz)
{
        struct timespec ts;

        if (clock_gettime(CLOCK_BOOTTIME, &ts) < 0)
                return 0;
        return (unsigned long long)ts.tv_sec * (unsigned long long)hz +
               (unsigned long long)ts.tv_nsec / (1000000000ULL / (unsigned long long)hz);
}

static int cmp_entry(const void *a, const void *b)
{
        return cmp_pid(&((const TaskCacheEntry *)a)->info, &((const TaskCacheEntry *)b)->info);
}

static TaskCacheEntry *cache_find(const TaskCache *c, unsigned pid)
{
        TaskCacheEntry key = {.info.pid = pid};

        return c && c->n ? bsearch(&key, c->entries, c->n, sizeof(TaskCacheEntry), cmp_entry) : NULL;
}

/* Forgets the kernel threads that ended since the last scan: one poll(2) over every pidfd held. */
static void cache_prune_ended(TaskCache *c)
{
        _cleanup_free_ struct pollfd *p = NULL;
        size_t k = 0;

        if (c->n == 0)
                return;
        p = xmalloc0(sizeof(struct pollfd) * c->n);
        for (size_t i = 0; i < c->n; i++)
                p[i] = (struct pollfd){.fd = c->entries[i].pidfd, .events = POLLIN};
        if (poll(p, c->n, 0) < 0) {
                task_cache_clear(c);
                return;
        }
        for (size_t i = 0; i < c->n; i++) {
                if (p[i].revents)
                        close_fd(c->entries[i].pidfd);
                else
                        c->entries[k++] = c->entries[i];
        }
        c->n = k;
}

/* At most this many pidfds, and never more than a quarter of the descriptors rtctld may open. */
#define TASK_CACHE_MAX 8192

static size_t cache_limit(void)
{
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
                return TASK_CACHE_MAX;
        return MIN((size_t)TASK_CACHE_MAX, (size_t)(rl.rlim_cur / 4));
}

/* A kernel thread that is not exiting and at least a second old: named and bound by now. A user
 * process that is not exiting: held only to know, without a read, that it is none. */
static bool keepable(const TaskInfo *t, unsigned long long now, long hz)
{
        if (t->flags & PF_EXITING)
                return false;
        return !(t->flags & PF_KTHREAD) || now >= t->starttime + (unsigned long long)hz;
}

static void load(TaskScan *s, bool all)
{
        _cleanup_closedir_ DIR *d = sys_opendir("/proc");
        TaskCache *c = s->cache;
        TaskCacheEntry *kept = NULL;
        size_t alloc = 0, kept_alloc = 0, n_kept = 0, n_user = 0, limit = 0;
        long hz = sysconf(_SC_CLK_TCK);
        unsigned long long now = 0;
        struct dirent *de;

        free(s->tasks);
        s->tasks = NULL;
        s->n = 0;
        s->loaded = true;
        s->all = all;
        if (c) {
                cache_prune_ended(c);
                limit = cache_limit();
                now = hz > 0 ? boot_ticks(hz) : 0;
        }
        while (d && (de = readdir(d))) {
                TaskCacheEntry *e;
                TaskInfo t;
                unsigned pid;

                if (safe_atou(de->d_name, &pid) < 0)
                        continue;
                if ((e = cache_find(c, pid))) {
                        bool kthread = e->info.flags & PF_KTHREAD;
                        t = e->info;
                        GREEDY_REALLOC(kept, kept_alloc, n_kept + 1);
                        kept[n_kept++] = *e;
                        e->pidfd = -EBADF; /* moved to kept */
                        if (kthread || !all) {
                                c->hits++;
                                if (!kthread)
                                        continue; /* a user process, and only kernel threads asked for */
                        } else {
                                /* Its name and flags change with exec and prctl: read it. A different
                                 * start time is another process under the PID (the held one ended after
                                 * the prune): let go of the pidfd, the next scan holds the new one. */
                                if (task_info(pid, &t) < 0)
                                        continue;
                                c->reads++;
                                if (t.starttime != e->info.starttime)
                                        close_fd(kept[--n_kept].pidfd);
                        }
                } else {
                        if (task_info(pid, &t) < 0)
                                continue; /* it exited meanwhile */
                        if (c) {
                                c->reads++;
                                /* The pidfd holds the process that has this PID when it is opened;
                                 * a second read after it proves that is the one read (same start). */
                                TaskInfo again;
                                int fd;
                                /* Kernel threads first: user processes take at most half. */
                                bool user = !(t.flags & PF_KTHREAD);
                                if (now && n_kept < limit && (!user || n_user < limit / 2) &&
                                    keepable(&t, now, hz) &&
                                    (fd = (int)syscall(SYS_pidfd_open, pid, 0)) >= 0) {
                                        if (task_info(pid, &again) >= 0 && again.starttime == t.starttime) {
                                                GREEDY_REALLOC(kept, kept_alloc, n_kept + 1);
                                                kept[n_kept++] = (TaskCacheEntry){.info = t, .pidfd = fd};
                                                n_user += user;
                                        } else
                                                close_fd(fd);
                                }
                        }
                        if (!all && !(t.flags & PF_KTHREAD))
                                continue;
                }
                GREEDY_REALLOC(s->tasks, alloc, s->n + 1);
                s->tasks[s->n++] = t;
        }
        /* readdir(/proc) lists PIDs in order already; a sort keeps lookups right if it ever does not. */
        if (s->n > 1)
                qsort(s->tasks, s->n, sizeof(TaskInfo), cmp_pid);
        if (c) {
                if (!d) { /* /proc unreadable: nothing is known, nothing kept */
                        for (size_t i = 0; i < n_kept; i++)
                                close_fd(kept[i].pidfd);
                        n_kept = 0;
                }
                task_cache_clear(c); /* what readdir did not list is gone */
                if (n_kept > 1)
                        qsort(kept, n_kept, sizeof(TaskCacheEntry), cmp_entry);
                unsigned long long hits = c->hits, reads = c->reads;
                *c = (TaskCache){.entries = kept, .n = n_kept, .hits = hits, .reads = reads};
                kept = NULL;
        }
        free(kept);
}

void task_cache_clear(TaskCache *c)
{
        if (!c)
                return;
        for (size_t i = 0; i < c->n; i++)
                close_fd(c->entries[i].pidfd);
        free(c->entries);
        c->entries = NULL;
        c->n = 0;
}

const TaskInfo *task_scan_cached_kthread(const TaskScan *s, unsigned pid)
{
        /* Only once this pass's scan pruned the cache: before it, a held thread may have ended and its
         * PID be another's. */
        const TaskCacheEntry *e = s && s->loaded ? cache_find(s->cache, pid) : NULL;

        return e && (e->info.flags & PF_KTHREAD) ? &e->info : NULL;
}

const TaskInfo *task_scan_all(TaskScan *s, size_t *ret_n)
{
        assert(s);

        if (!s->loaded || !s->all)
                load(s, true);
        *ret_n = s->n;
        return s->tasks;
}

const TaskInfo *task_scan_kthreads(TaskScan *s, size_t *ret_n)
{
        assert(s);

        if (!s->loaded)
                load(s, false);
        *ret_n = s->n;
        return s->tasks;
}

const TaskInfo *task_scan_find(TaskScan *s, unsigned pid, TaskInfo *buf)
{
        TaskInfo key = {.pid = pid};
        const TaskInfo *t;

        assert(s);

        /* A kernel thread is in the list however the scan was taken; anything else not in it is read. */
        if (!s->loaded)
                load(s, false);
        t = bsearch(&key, s->tasks, s->n, sizeof(TaskInfo), cmp_pid);
        if (t)
                return t;
        return task_info(pid, buf) >= 0 ? buf : NULL;
}

unsigned task_scan_find_comm(TaskScan *s, const char *comm)
{
        assert(s);
        assert(comm);

        char want[16];
        size_t n;
        const TaskInfo *t = task_scan_all(s, &n);

        snprintf(want, sizeof want, "%s", comm);
        for (size_t i = 0; i < n; i++)
                if (streq(t[i].comm, want))
                        return t[i].pid;
        return 0;
}

void task_scan_clear(TaskScan *s)
{
        assert(s);

        free(s->tasks);
        *s = (TaskScan){};
}

bool irq_thread_parse(const char *comm, unsigned *ret_irq, const char **ret_name)
{
        assert(comm);

        const char *p = startswith(comm, "irq/");
        char *end;
        unsigned long n;

        if (!p || *p < '0' || *p > '9')
                return false;
        n = strtoul(p, &end, 10);
        if ((*end != '-' && *end != 0) || n > UINT32_MAX)
                return false;
        *ret_irq = (unsigned)n;
        if (ret_name)
                *ret_name = *end == '-' ? end + 1 : end;
        return true;
}
