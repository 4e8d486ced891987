/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include "core/journal.h"

/* tracefs, as rtctl latency (timerlat.c) and rtctld's policy-change events (below) use it. */

/* Where tracefs is mounted (from /proc/mounts; else /sys/kernel/tracing if it holds tracefs's files).
 * -ENOENT when it is not mounted anywhere. */
int tracefs_find(char **ret_dir);

/* ---- rtctld's scheduling-policy events --------------------------------------------------------------
 *
 * No kernel event announces that a thread's scheduling policy changed. The syscall tracepoints do: in a
 * private tracefs instance of its own (SCHED_TRACE_INSTANCE, its buffer separate from everyone's),
 * rtctld enables sys_enter_/sys_exit_ of sched_setscheduler and sched_setattr and reads the instance's
 * trace_pipe. Everything it changes in tracefs (a mount of its own, the instance) is journalled first,
 * in its own journal file (SCHED_TRACE_JOURNAL in the runtime directory: the pass's journal restores its
 * unknown entries in every pass), so that a SIGKILLed daemon's leftovers go with `rtctl restore` or at
 * the next start. */
#define SCHED_TRACE_INSTANCE "rtctl-attach"
#define SCHED_TRACE_JOURNAL  "tracefs.json"
#define TRACEFS_MOUNT        "/sys/kernel/tracing"
/* rtctl xruns's recording: its own instance and journal, the same kinds. */
#define XRUNS_TRACE_INSTANCE "rtctl-xruns"
#define XRUNS_TRACE_JOURNAL  "xruns-tracefs.json"

/* DIR/instances/rtctl-attach: "present" or "absent" (rmdir takes its events and buffer along). */
extern const SettingKind setting_kind_tracefs_instance;
/* /sys/kernel/tracing: "mounted" (tracefs) or "unmounted". Only on the live system. */
extern const SettingKind setting_kind_tracefs_mount;
/* Whether object is one that kind writes: the instance under either usual tracefs directory, the
 * mount point. */
bool tracefs_journal_object(const SettingKind *kind, const char *object);

/* Makes DIR/instances/NAME (one of the names tracefs_journal_object() knows), journalled first in j
 * under owner, mounting tracefs on TRACEFS_MOUNT when it is nowhere to be found (also journalled).
 * *ret_dir: the tracefs directory (optional), *ret_inst: the instance's. -EOPNOTSUPP with a sentence;
 * whatever it did before failing is undone. */
int tracefs_instance_create(Journal *j, const char *owner, const char *name, char **ret_dir, char **ret_inst,
                            char **ret_why);

/* Creates the instance, journalled first in j (mounting tracefs when it is nowhere to be found, also
 * journalled), enables the four events and opens trace_pipe (non-blocking) into *ret_fd. -EOPNOTSUPP
 * with a sentence in *ret_why when the kernel has no syscall tracepoints or no tracefs; whatever it did
 * before failing is undone. */
int sched_trace_start(Journal *j, int *ret_fd, char **ret_why);
/* Puts back everything j holds (the instance, then the mount); fd (the open trace_pipe, or -EBADF) is
 * closed first, as the kernel keeps an instance that is open. Returns the first error; what could not
 * be restored stays in j. */
int sched_trace_restore(Journal *j, int fd);
/* Opens the journal in runtime_dir, puts back what it holds, closes it: `rtctl restore` and the
 * daemon's start. 0 when there was nothing. */
int sched_trace_restore_dir(const char *runtime_dir, char **ret_error);

/* The parser of trace_pipe's text. Lines come whole or cut at any byte; a call is "finished" when its
 * exit line follows its enter line on the same thread. Forged lines (a thread's comm holds anything)
 * can at most make rtctld look at a thread: what it does is decided by reading the thread. The same holds
 * for a pid argument given inside another PID namespace (a container's), which names another thread here. */
#define SCHED_TRACE_PENDING 64
#define SCHED_TRACE_LINE    512
typedef struct SchedTrace {
        struct {
                unsigned caller; /* TID of the caller */
                unsigned target; /* the pid argument, 0: the caller */
        } pending[SCHED_TRACE_PENDING];
        size_t n_pending, next_evict;
        char line[SCHED_TRACE_LINE];
        size_t line_len;
        bool line_overflow; /* the line being gathered is longer than any of ours: skipped */
        int radix; /* of a bare number in an argument: 0 until the probe call told (below), 16, 10 */
        bool lost; /* the buffer overflowed ("CPU:N [LOST M EVENTS]"): the reader resets it */
} SchedTrace;

/* How the kernel prints a syscall's arguments changed: "pid: 14b" (hex, no prefix) up to 6.17, "0x14b"
 * or plain decimal since. A bare number cannot tell, so rtctld calls sched_setscheduler() once on a
 * PID no kernel hands out (SCHED_TRACE_PROBE_PID, above pid_max's ceiling: ESRCH, nothing changes) right
 * after the events are on, and the line it makes says which: "75bcd15" or "123456789". Until then a
 * bare number is not trusted (the /proc scan made with the events on covers that moment). */
#define SCHED_TRACE_PROBE_PID 123456789u
void sched_trace_probe(void);

/* One line, without its newline. 1: enter (caller, target set), 2: exit (caller, ret set), 0: neither.
 * Bare numbers are read in radix 10 (see sched_trace_parse_line_radix()). */
int sched_trace_parse_line(const char *line, size_t len, unsigned *ret_caller, unsigned *ret_target,
                           long long *ret_ret);
/* Feeds n bytes of trace_pipe; calls done(tid) with the thread whose policy a call that succeeded may
 * have changed. Returns how many calls finished. */
/* The same with a bare number read in radix (16 or 10); radix 0: unknown, and an enter line with a bare
 * pid returns 3 with *ret_target its decimal and *ret_ret its hex reading (0 where that fails). */
int sched_trace_parse_line_radix(const char *line, size_t len, int radix, unsigned *ret_caller,
                                 unsigned *ret_target, long long *ret_ret);
size_t sched_events_parse(SchedTrace *st, const char *buf, size_t n,
                          void (*done)(unsigned tid, void *userdata), void *userdata);
