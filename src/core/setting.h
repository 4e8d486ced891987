/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <glib.h>
#include <systemd/sd-event.h>

#include "core/tasks.h"
#include "shared/util.h"

typedef struct SystemdClient SystemdClient;

/* What setting kinds keep between calls. Whoever runs passes owns one (the Manager for the daemon's
 * life; the CLI and tests one per run) and hands it to every read and write: no kind keeps state in
 * statics. */
typedef struct SettingContext {
        /* Processes the kernel refused to move between cgroups for a reason their flags do not show,
         * as "PID:starttime": a PID reused by a new process is not skipped. */
        GHashTable *refused;
        /* The /dev/cpu_dma_latency request: it lives as long as this descriptor (-EBADF: none). */
        int pmqos_fd;
        int pmqos_value;
        /* systemd's manager, connected on first use. */
        SystemdClient *systemd;
        /* Objects whose restore is a systemd job still under way: they stay in the journal until the
         * job ended "done" (reconcile_jobs_ended()), and stay for a later restore when it failed. */
        GHashTable *queued_restores;
        /* The pass's one reading of /proc (NULL outside a pass: kinds then read what they need). */
        TaskScan *tasks;
} SettingContext;

/* event: the loop systemd's jobs are followed on (NULL: waited for where needed, as the CLI does). */
void setting_context_init(SettingContext *c, sd_event *event);
void setting_context_clear(SettingContext *c);

/* The refused table is bounded: at most REFUSED_MAX processes; when full, the gone ones are dropped
 * first, and a process that finds it full still is not remembered (it is only tried again). */
#define REFUSED_MAX 1024
bool setting_context_refused(const SettingContext *c, const TaskInfo *t);
void setting_context_refuse(SettingContext *c, const TaskInfo *t);
/* Forgets the refused processes that are gone: their PID is free, or another process's now. Returns how
 * many it forgot. The Manager calls it after every pass. */
unsigned setting_context_prune_refused(SettingContext *c);

/* How a kernel object is read, written and compared. Each kind is one small ops table; the journal
 * stores the kind's name, so restore after a restart knows how to put a value back. */
typedef struct SettingKind {
        const char *name;
        /* -ENOENT when the object does not exist. hint is the value about to be compared with (the desired
         * value, or the original on restore): a kind whose state depends on it (where processes come
         * from) reads it from there. */
        int (*read)(SettingContext *ctx, const char *object, const char *hint, char **ret);
        int (*write)(SettingContext *ctx, const char *object, const char *value);
        /* A kind of one process's objects (/proc/PID/...): the write, reaching the process that started
         * at starttime (Setting.starttime; 0: whichever has the PID) or none, -ESRCH then. The applier
         * uses it where a kind has it. */
        int (*write_task)(SettingContext *ctx, const char *object, const char *value,
                          unsigned long long starttime);
        bool (*equal)(const char *current, const char *desired);
        /* Created by rtctl, it takes everything below it when it goes: objects under it are not
         * journalled. */
        bool owns_children;
        /* Errors (positive errno, 0-terminated) with which the kernel says it places this object itself
         * (an IRQ's affinity: EIO, EPERM): the setting is refused, not failed, and not tried again. */
        const int *refusals;
        /* A kind of the boot arguments journal (bootargs.json) says which objects it writes, so that an
         * entry naming any other is damage, never replayed; NULL for the runtime journal's kinds. */
        bool (*boot_object)(const char *object);
} SettingKind;

/* A plain sysfs/procfs attribute; values compare with white space folded. */
extern const SettingKind setting_kind_file;
/* An attribute listing choices with the active one in brackets: "none [mq-deadline] kyber". */
extern const SettingKind setting_kind_choice;

/* A CPU list file ("0-3,8"), compared as a set. */
extern const SettingKind setting_kind_cpulist;
/* /proc/irq/N/smp_affinity_list: a CPU list the kernel may refuse for good (EIO, EPERM: an IRQ only it
 * places). */
extern const SettingKind setting_kind_irq_affinity;
/* A hex CPU mask file (workqueue cpumask), shown and planned as a CPU list. */
extern const SettingKind setting_kind_cpumask;
/* A cgroup directory: "present" or "absent". Removing it moves its processes to its parent first. */
extern const SettingKind setting_kind_cgroup;
/* DIR/cgroup.procs, desired "all from SRC": every process of cgroup SRC that can move is in DIR.
 * Processes that cannot (per-CPU kernel threads, PF_NO_SETAFFINITY) do not count. */
extern const SettingKind setting_kind_procs;
/* /proc/PID/cpuset (v1) or /proc/PID/cgroup (v2): the cgroup of one process, relative to the cpuset
 * hierarchy's mount ("/rtctl-isolated"). */
extern const SettingKind setting_kind_member;
/* /proc/PID/affinity (a name, not a file): a task's CPU affinity, read from /proc/PID/status and set
 * with sched_setaffinity(2). Only on the live system, never under a root prefix. */
extern const SettingKind setting_kind_affinity;

/* /proc/PID/task/TID/cpuset (cgroup v1): one thread's cpuset and CPUs as "CPUSET CPULIST"
 * ("/rtctl-housekeeping 0"). A value without CPUs leaves them to the cpuset; restore names both, so the
 * thread gets the cpuset and the affinity it had. */
extern const SettingKind setting_kind_thread;

/* cgroup v2 DIR/cgroup.subtree_control: "cpuset" (enabled for the children) or "no cpuset". */
extern const SettingKind setting_kind_subtree;
/* cgroup v2 cpuset.cpus.partition; an invalid partition is made member first, then checked anew. */
extern const SettingKind setting_kind_partition;
/* systemd:UNIT:AllowedCPUs, set at run time through systemd's D-Bus API. */
extern const SettingKind setting_kind_unit_cpus;
/* systemd:UNIT:CPUSetPartition, through systemd's D-Bus API at run time. No tuner plans it any more
 * (the isolated partition is a threaded cgroup below rtctl's delegated scope, which systemd leaves to
 * rtctl): the kind is kept so that a journal an earlier rtctld wrote is still put back. */
extern const SettingKind setting_kind_unit_partition;
/* systemd:NAME.slice, a transient slice: "present" or "absent". */
extern const SettingKind setting_kind_slice;

/* /proc/PID/sched (a name, not a file): a thread's scheduling as "fifo:90", "rr:50" or "other:0", read
 * and set with sched_getscheduler(2)/sched_setscheduler(2). Only on the live system. */
extern const SettingKind setting_kind_sched;
/* systemd:UNIT: a service "active", "inactive", "masked" (stopped and masked until reboot, so nothing
 * starts it again meanwhile) or "absent" (not installed), through systemd's D-Bus API. */
extern const SettingKind setting_kind_service;

/* /sys/kernel/debug/sched/features/NAME (a name, not a file): one scheduler feature, "on" or "off",
 * read from the features file's NAME or NO_NAME and written as one of them: each feature is set and
 * restored on its own. */
extern const SettingKind setting_kind_sched_feature;

/* /dev/cpu_dma_latency: a PM QoS request in µs held through an open descriptor, or "none". */
extern const SettingKind setting_kind_pmqos;

/* A resctrl group directory (/sys/fs/resctrl/NAME): "present" or "absent". */
extern const SettingKind setting_kind_resctrl_group;
/* One resource's line of a resctrl schemata file, "L3:0=ff0;1=fffff"; masks compare as numbers, domains
 * where both values name them. */
extern const SettingKind setting_kind_schemata;

/* The kinds the core knows, and those the binary registered (rtctl: the boot arguments'); NULL for any
 * other name, which the journal then reads as damage. */
const SettingKind *setting_kind_from_name(const char *name);
/* Adds the kinds a binary uses beyond the core's (at start, once): rtctld registers none, so its journal
 * refuses the boot arguments' kinds by name. */
void setting_kinds_register(const SettingKind *const *kinds, size_t n);

/* For kinds built on plain files. */
int setting_file_read(SettingContext *ctx, const char *object, const char *hint, char **ret);
int setting_file_write(SettingContext *ctx, const char *object, const char *value);
bool setting_equal_folded(const char *a, const char *b);
/* For kinds of directories rtctl makes: "present" or "absent"; removing one that holds something the
 * kernel does not take along with it (files a user put there) leaves it, and the read back says so. */
int setting_dir_read(SettingContext *ctx, const char *object, const char *hint, char **ret);
int setting_dir_write(SettingContext *ctx, const char *object, const char *value);

typedef enum SettingResult {
        SETTING_PENDING,
        SETTING_UNCHANGED, /* already at the desired value: nothing written */
        SETTING_CHANGED,
        /* What a write's error meant, sorted in one place (applier.c): */
        SETTING_GONE,     /* the object went with its device or process: nothing to set or restore */
        SETTING_BUSY,     /* EBUSY/EAGAIN: tried again shortly */
        SETTING_REFUSED,  /* the kernel will not take it for this object (a kind's refusals): left alone */
        SETTING_FAILED,   /* anything else: a failure in status */
        SETTING_DEFERRED, /* a later phase while systemd still runs jobs an earlier one queued */
} SettingResult;

/* One desired value of one kernel object. Tuners fill object, desired, kind and phase; the applier
 * fills the rest. */
typedef struct Setting {
        const SettingKind *kind;
        const char *tuner;
        char *object; /* the kernel path, without root prefix */
        char *desired;
        bool restore;   /* puts a journalled original back: the policy no longer wants this object */
        unsigned phase; /* applied in phase order: a block queue's iosched/ tunables only exist after
                           its scheduler switch */
        SettingResult result;
        char *current; /* as read before writing (or instead of writing, in a dry run); a tuner that read
                          the object in this same pass may fill it, and the applier does not read again */
        int error;     /* negative errno when FAILED */
        bool queued;   /* CHANGED by a systemd job still under way: how it ends is not known yet */
        char *message; /* a sentence for the status when FAILED */
        /* The start time of the process a /proc/PID/... object names, as the plan knew it (the
         * Manager's record of an attached or matched process, the journal's on restore); 0: not known.
         * The PID alone may name another process by the time it is written. */
        unsigned long long starttime;
} Setting;

typedef struct Plan {
        Setting *settings;
        size_t n;
        size_t alloc;
} Plan;

void plan_clear(Plan *p);
Setting *plan_add(Plan *p, const SettingKind *kind, const char *tuner, unsigned phase, char *object,
                  char *desired); /* takes object and desired */
