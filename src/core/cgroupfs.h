/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include "core/tasks.h"

/* Where the cpuset controller lives. Found from /proc/self/mounts through the root prefix; libcgroup's
 * discovery reads the live /proc/mounts and cannot honour RTCTL_SYSROOT, and its create/attach calls
 * write whole controllers at once where every write here must be one journalled Setting, so cgroupfs
 * is driven through the sysfs layer. */
typedef enum CgroupMode {
        CGROUP_NONE,
        CGROUP_V1, /* a cpuset hierarchy of its own */
        CGROUP_V2, /* the unified hierarchy with the cpuset controller available */
} CgroupMode;

typedef struct CgroupInfo {
        CgroupMode mode;
        char *mount;  /* "/sys/fs/cgroup/cpuset" or "/sys/fs/cgroup" */
        bool systemd; /* systemd is PID 1 (it owns the v2 tree's top-level cgroups) */
} CgroupInfo;

int cgroup_discover(CgroupInfo *ret);
void cgroup_info_clear(CgroupInfo *c);

/* The processes of a cgroup directory (kernel path), from cgroup.procs. */
int cgroup_procs(const char *dir, unsigned **ret, size_t *ret_n);
/* The threads of a cgroup directory, from cgroup.threads (v2). */
int cgroup_threads(const char *dir, unsigned **ret, size_t *ret_n);
/* The unified hierarchy's line of a /proc/PID[/task/TID]/cgroup file ("0::/path"): the path;
 * -ENODATA when it has none. */
int cgroup_read_unified(const char *path, char **ret);
/* Moves one process into the cgroup directory. */
int cgroup_move(const char *dir, unsigned pid);
/* Moves one thread into the cgroup directory (v1's tasks file: v1 lets the threads of a process sit in
 * different cpusets). */
int cgroup_move_thread(const char *dir, unsigned tid);
/* Moves one thread within its threaded subtree (v2's cgroup.threads). */
int cgroup_move_thread_v2(const char *dir, unsigned tid);
/* Before a process whose threads rtctl spread over a threaded subtree (mount: the v2 mount) leaves it
 * through cgroup.procs: its threads gathered into one cgroup of the subtree, the housekeeping one where
 * the leader is in an "isolated" cgroup, else the leader's. Since 6.2 the kernel sets the CPUs of a
 * moving process's threads only when the cpuset of the one it moves first (the leader) differs from the
 * destination's, so a thread left on the isolated CPUs would keep them in its home cgroup. 0 also when
 * nothing needed gathering or the process is gone. */
int cgroup_gather_threads(const char *mount, unsigned pid);

/* The transient slice of rtctl's that holds the attached processes' scope (cgroup v2 with systemd). */
#define CGROUP_RTCTL_SLICE "rtctl.slice"

/* True when the cgroup of slice unit ("a-b.slice": /a.slice/a-b.slice) still holds a process: stopping
 * the slice would kill it (logged). */
bool cgroup_slice_populated(const char *unit);
