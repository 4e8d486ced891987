/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include "shared/util.h"

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
/* Moves one process into the cgroup directory. */
int cgroup_move(const char *dir, unsigned pid);

#define PF_EXITING        0x00000004u
#define PF_KTHREAD        0x00200000u
#define PF_NO_SETAFFINITY 0x04000000u

typedef struct TaskInfo {
        unsigned pid;
        unsigned ppid;
        unsigned flags;
        unsigned long long starttime;
        char comm[32];
} TaskInfo;

/* Parses /proc/PID/stat. */
int task_info(unsigned pid, TaskInfo *ret);
/* Whether the task is an IRQ thread, "irq/24-ACPI:Ged" ("irq/24-s-NAME" for a secondary handler), and
 * of which IRQ (ret_irq may be NULL). */
bool task_irq_thread(const TaskInfo *t, unsigned *ret_irq);
/* The PID of a process whose comm is exactly comm (cut at 15 characters, as the kernel does), 0 when
 * none runs. */
unsigned process_find(const char *comm);
/* The same, reading /proc once for every call with the same stamp (a pass's start time). */
unsigned process_find_in(uint64_t stamp, const char *comm);
