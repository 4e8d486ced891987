/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include "shared/util.h"

#define PF_EXITING        0x00000004u
#define PF_KTHREAD        0x00200000u
#define PF_NO_SETAFFINITY 0x04000000u

typedef struct TaskInfo {
        unsigned pid;
        unsigned ppid;
        unsigned flags;
        unsigned threads; /* the thread group's, the leader's zombie included */
        unsigned long long starttime;
        char comm[32];
} TaskInfo;

/* A process by PID and start time: a later process with its PID is another one. */
typedef struct TaskId {
        unsigned pid;
        unsigned long long starttime;
} TaskId;

/* Parses /proc/PID/stat. */
int task_info(unsigned pid, TaskInfo *ret);

/* Whether the process t tells of has ended: its leader is exiting and no other thread runs on. A leader
 * that called pthread_exit() is PF_EXITING too while the program's other threads go on. */
bool task_info_ended(const TaskInfo *t);

/* True when the process is gone or exiting, a zombie its parent has not reaped among them: signal 0
 * still finds one, but it runs nothing and no cgroup takes it. */
bool task_exited(unsigned pid);

/* The real and effective uid of a process, from /proc/PID/status. */
int task_uids(unsigned pid, uid_t *ret_uid, uid_t *ret_euid);

/* The PID a pidfd refers to, from /proc/self/fdinfo: 0 when the process has exited (the kernel says -1
 * or 0), -EBADF when fd is no pidfd. */
int pidfd_get_pid(int fd);

/* A process held for a write that names it by PID (cgroup.procs and cgroup.threads take no pidfd): its
 * pidfd, opened before its start time was read, so that a start time that matches makes the pidfd that
 * very process's. A pidfd does not keep the PID from going to another process once its own exited;
 * it says that it exited, which is what task_hold_alive() asks after the write. Without one (a kernel
 * before 5.3, a thread's TID before PIDFD_THREAD in 6.9, or a root prefix, whose PIDs are not this
 * machine's) the start time is read again instead. */
typedef struct TaskHold {
        unsigned pid;
        unsigned long long starttime;
        int pidfd;
} TaskHold;

/* -ESRCH unless pid (a process or a thread) is the task that started at starttime (0: whichever has
 * the PID now). */
int task_hold(unsigned pid, unsigned long long starttime, TaskHold *ret);
/* True while the held task has not exited: whatever was written with its PID since task_hold() went
 * to it. */
bool task_hold_alive(const TaskHold *h);
void task_hold_clear(TaskHold *h);

/* Processes as read in earlier passes, each held by a pidfd. A kernel thread's flags are set once,
 * right after it is created (its name too, but a kworker's comm in /proc/PID/stat carries the
 * workqueue it last ran, which the cache does not follow: nothing reads it); only its going changes,
 * and a pidfd says that exactly (it polls readable once the thread ended). A user process is held only
 * as "not a kernel thread": a PID held alive is the same process, which never becomes one, but its
 * name and flags change with exec and prctl, so a scan of every process reads it again. A scan with a
 * cache reads /proc/PID/stat only of processes it does not hold yet, and of user processes when it
 * wants them: after a CPU event, the dozens to thousands of per-CPU kernel threads and a desktop's
 * hundreds of processes cost one poll(2) instead of a file each. A kernel thread younger than a second
 * is not kept (it may not have its name and binding yet), and a process is kept only when a read after
 * its pidfd was opened finds the same start time, so the pidfd is the one read. */
typedef struct TaskCacheEntry {
        TaskInfo info;
        int pidfd;
} TaskCacheEntry;

typedef struct TaskCache {
        TaskCacheEntry *entries; /* sorted by PID */
        size_t n;
        unsigned long long hits, reads; /* over the cache's life: threads found held, stat files read */
} TaskCache;

void task_cache_clear(TaskCache *c);

/* One reading of every process in /proc, taken at most once per pass however many tuners and setting
 * kinds ask: kernel threads for the kthread and IRQ thread tuners, rival services by name, the flags of
 * processes in a cgroup. Loaded on first use, of kernel threads only where that is all a pass asks for
 * (a CPU event's); a pass that needs no process list reads none. */
typedef struct TaskScan {
        TaskInfo *tasks; /* sorted by PID */
        size_t n;
        bool loaded;
        bool all;         /* every process read; else kernel threads only (task_scan_kthreads) */
        TaskCache *cache; /* kept between passes by the daemon; NULL: every process is read */
} TaskScan;

const TaskInfo *task_scan_all(TaskScan *s, size_t *ret_n);
/* Every kernel thread, sorted by PID; user processes too where this pass already read them all (so
 * callers still test PF_KTHREAD). With a cache, reads no user process it holds. A scan taken this way
 * and then asked for every process (task_scan_all) is read again: pointers into the earlier list, and
 * task_scan_cached_kthread()'s, end then. Within a pass the tuners that want all (conflict) run first. */
const TaskInfo *task_scan_kthreads(TaskScan *s, size_t *ret_n);
/* The process as the scan saw it; one it did not list (newer, or a user process in a scan of kernel
 * threads) is read now. NULL: no such process. */
const TaskInfo *task_scan_find(TaskScan *s, unsigned pid, TaskInfo *buf);
/* The PID of a process whose comm is exactly comm (cut at 15 characters, as the kernel does), 0 when
 * none runs. */
unsigned task_scan_find_comm(TaskScan *s, const char *comm);
/* A kernel thread as the scan's cache holds it (checked alive by this pass's scan), without a read. NULL
 * where there is no cache, the pass has not scanned yet, or the cache does not hold pid. */
const TaskInfo *task_scan_cached_kthread(const TaskScan *s, unsigned pid);
void task_scan_clear(TaskScan *s);

/* "irq/38-virtio2-i": the IRQ number, and where the handler's (cut) name starts; "irq/24-s-name" is the
 * thread of a secondary handler. False for anything else. */
bool irq_thread_parse(const char *comm, unsigned *ret_irq, const char **ret_name);
