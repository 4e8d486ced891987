/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

/* rtctl xruns's reading of its tracefs instance: what ran on each recorded CPU, kept for the last
 * seconds, and what took the time inside a late cycle.
 *
 * The instance's trace_pipe gives text lines, one per event, with CLOCK_MONOTONIC time stamps
 * (trace_clock mono): sched_switch, irq_handler_entry/exit, softirq_entry/exit,
 * workqueue_execute_start/end, hrtimer_expire_entry/exit, cpu_idle, cpu_frequency. Each CPU's time is
 * cut into segments, each charged to exactly one actor: the innermost of task < work item < softirq <
 * timer or IRQ handler; an IRQ's time is the IRQ's, not the task's it interrupted. Lines come whole or
 * cut at any byte; a thread's comm holds anything, so a forged line can at most put a wrong name in a
 * report. */

typedef enum XrunActor {
        XRUN_TASK,    /* a task that ran: id = TID, name = comm, prio = the kernel's prio (< 100: RT) */
        XRUN_IRQ,     /* an IRQ handler: id = IRQ number, name = the handler's name; once its threads
                       * are folded in (xrun_causes_fold_irq_threads), comm and prio are its thread's */
        XRUN_SOFTIRQ, /* id = the vector, name = TIMER, NET_RX, ... */
        XRUN_WORK,    /* a workqueue item: name = its function, comm = the kworker */
        XRUN_TIMER,   /* an hrtimer's expiry function: name = the function */
        XRUN_IDLE,    /* exits from idle state id (> 0: deeper than polling): ns = their count */
        XRUN_FREQ,    /* frequency changes: id = the last kHz, ns = their count */
        XRUN_OVER,    /* an audio thread's own work in one cycle: id = TID, name = comm */
        XRUN_WAKE,    /* (internal) a wake-up of task id aimed at this CPU */
        XRUN_STALL,   /* the CPU idle while an audio thread waited to run */
        _XRUN_ACTOR_MAX,
} XrunActor;

const char *xrun_actor_name(XrunActor a);

typedef struct XrunCause {
        XrunActor actor;
        unsigned cpu;
        unsigned long long id;
        int prio;            /* XRUN_TASK, XRUN_OVER, an IRQ's thread: the kernel's prio; -1 otherwise */
        char *name;          /* comm, IRQ name, softirq name, function */
        char *comm;          /* XRUN_WORK: the kworker that ran it; XRUN_IRQ: its thread, NULL for none */
        uint64_t ns;         /* time taken inside the window (XRUN_IDLE/XRUN_FREQ: a count) */
        uint64_t total_ns;   /* XRUN_OVER: all the thread's time inside the window */
        uint64_t typical_ns; /* XRUN_OVER: the median of its stretches inside the window (the lower one) */
        uint64_t cost_ns;    /* what ranks it: ns (0 for a count, whose time only the caller can tell) */
        uint64_t last_ns;    /* when its latest segment inside the window ended */
} XrunCause;

void xrun_cause_clear(XrunCause *c);

typedef struct XrunTrace XrunTrace;

/* keep_ns: how far back segments are kept, behind the newest time stamp seen. */
XrunTrace *xrun_trace_new(uint64_t keep_ns);
void xrun_trace_free(XrunTrace *t);
static inline void xrun_trace_freep(XrunTrace **t)
{
        if (*t)
                xrun_trace_free(*t);
}
#define _cleanup_xrun_trace_ __attribute__((cleanup(xrun_trace_freep)))

/* Feeds n bytes of trace_pipe. */
void xrun_trace_feed(XrunTrace *t, const char *buf, size_t n);
/* The newest time stamp seen, in ns of CLOCK_MONOTONIC; 0 before any. */
uint64_t xrun_trace_now(const XrunTrace *t);
/* Lines the kernel said it lost ("[LOST N EVENTS]"), and lines that did not parse. */
uint64_t xrun_trace_lost(const XrunTrace *t);

/* Decides whether TID is one of the audio graph's real-time threads (1) or not (0). */
typedef int (*XrunIsAudio)(unsigned tid, const char *comm, int prio, void *userdata);

/* What took the time on the CPUs cpus[0..n_cpus) between from_ns and to_ns, biggest first: every
 * actor other than an audio thread, by the time it took while an audio thread of that CPU was running or
 * waiting to run (woken, or preempted) — what delayed the graph, not what used the CPU while the graph
 * slept (where no audio thread ran or waited at all, by all its time); each audio thread's longest stretch
 * of work between two sleeps as XRUN_OVER (with all its time in total_ns and its typical stretch, the
 * median, in typical_ns: a thread over its budget is so every cycle, one held up once is not; listed
 * whatever min_ns); deep idle
 * exits and frequency changes by count. Nothing under min_ns of time (counts: none) is listed. The caller
 * frees *ret with xrun_causes_free(). */
int xrun_trace_causes(XrunTrace *t, const unsigned *cpus, size_t n_cpus, uint64_t from_ns, uint64_t to_ns,
                      uint64_t min_ns, XrunIsAudio is_audio, void *userdata, XrunCause **ret, size_t *ret_n);
void xrun_causes_free(XrunCause *c, size_t n);

/* Decides whether TID is a kernel thread (PF_KTHREAD): 1 yes, 0 no or gone. */
typedef int (*XrunIsKthread)(unsigned long long tid, void *userdata);

/* Threaded IRQ handlers as the IRQ they serve. Under `threadirqs` and on PREEMPT_RT a device IRQ's work
 * runs in the kernel thread irq/N-name (irq/N-s-name: a secondary handler's), which follows the IRQ's
 * affinity: the fix is the IRQ's, not a task's priority. Each such task cause of a kernel thread becomes
 * (or is added to) the XRUN_IRQ cause of IRQ N on its CPU, with the thread's comm and prio; a user task
 * that calls itself irq/1-x stays a task. The caller sorts again. */
void xrun_causes_fold_irq_threads(XrunCause *c, size_t *n, XrunIsKthread is_kthread, void *userdata);

/* Where the busy stretch that holds time at began, on the CPUs cpus[0..n_cpus): the end of the last idle
 * stretch of at least idle_ns before at, the earliest of the CPUs, at most max_back_ns back. at itself
 * when a CPU was idle then. A late cycle's cause can lie well before the xrun was told: a burst that held
 * the CPU, then the cycles that caught up without a break. With is_audio (NULL: none), not before the
 * audio threads' demand (running or waiting to run) began after its last gap of idle_ns: a CPU kept busy
 * by other tasks while the graph slept has nothing more to tell. */
uint64_t xrun_trace_busy_since(XrunTrace *t, const unsigned *cpus, size_t n_cpus, uint64_t at,
                               uint64_t idle_ns, uint64_t max_back_ns, XrunIsAudio is_audio, void *userdata);
