/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdint.h>

#include "core/tracefs.h"
#include "shared/cpuset.h"

/* The kernel's latency tracers as rtctl latency drives them. Every path goes through the root prefix, so
 * a fixture tracefs can stand in.
 * - timerlat (Documentation/trace/timerlat-tracer.rst): a kernel thread per CPU at SCHED_FIFO woken by a
 *   periodic timer, its wake-up latency printed to the trace buffer;
 * - osnoise (osnoise-tracer.rst): a kernel thread per CPU that runs for a window and reports what took
 *   the CPU from it (the longest single interruption, the sum, and how often hardware, NMIs, IRQs,
 *   softirqs and threads did);
 * - hwlat (hwlat_detector.rst): a kernel thread that spins with interrupts off on one CPU at a time, so
 *   that any gap it sees is the hardware's: SMIs, firmware, a hypervisor. */

typedef enum LatencyTracer {
        TRACER_TIMERLAT,
        TRACER_OSNOISE,
        TRACER_HWLAT,
        _TRACER_MAX,
} LatencyTracer;

const char *latency_tracer_name(LatencyTracer t);

/* The tracefs files rtctl latency writes or depends on, relative to the tracefs directory. Each is
 * saved before the first write and put back after, even when rtctl only depends on it. */
enum {
        TIMERLAT_TRACER,
        TIMERLAT_TRACING_ON,
        TIMERLAT_CPUS,
        TIMERLAT_PERIOD,
        TIMERLAT_STOP_US,
        TIMERLAT_STOP_TOTAL_US,
        TIMERLAT_OPTIONS,
        TIMERLAT_OSNOISE_PERIOD, /* osnoise's window: period before runtime, so a restore fits */
        TIMERLAT_OSNOISE_RUNTIME,
        TIMERLAT_CPUMASK, /* hwlat's CPUs */
        TIMERLAT_THRESH,  /* read only: hwlat's and osnoise's threshold */
        _TIMERLAT_FILES,
};

typedef struct TimerlatState {
        LatencyTracer tracer;
        char *dir;                    /* the tracefs directory, as the kernel names it */
        char *saved[_TIMERLAT_FILES]; /* NULL: the kernel has no such file */
} TimerlatState;

/* 0 when the tracefs at dir offers the tracer; -EOPNOTSUPP with a sentence saying why not. */
int timerlat_probe(const char *dir, LatencyTracer tracer, char **ret_why);

/* Saves what the run changes. -EBUSY when another tracer than nop is in use: someone is tracing, and
 * rtctl does not take the buffer from them. */
int timerlat_save(const char *dir, LatencyTracer tracer, TimerlatState *ret, char **ret_error);
/* The tracer on cpus: timerlat with one wake-up every period_us; osnoise in windows of
 * OSNOISE_WINDOW_US, the whole window busy; hwlat with the kernel's width and window, on one of cpus at a
 * time. On failure what was written stays written: call timerlat_restore. */
#define OSNOISE_WINDOW_US 100000u
int timerlat_start(const TimerlatState *st, const CpuSet *cpus, unsigned period_us, char **ret_error);
/* Puts every saved file back that differs now, the tracer first (which stops the measuring threads).
 * Returns the first error, having tried every file. */
int timerlat_restore(const TimerlatState *st, char **ret_error);
void timerlat_state_clear(TimerlatState *st);

/* rtctl latency journals what timerlat_save() read before its first write, so that a run killed before
 * its restore (SIGKILL, a crash) costs nothing: the next `rtctl latency` or `rtctl restore` puts it back.
 * The file (TIMERLAT_JOURNAL, in the runtime directory) names the run by PID and start time. */
#define TIMERLAT_JOURNAL "latency-tracefs.json"
int timerlat_journal_write(const TimerlatState *st, const char *path);
/* Whether the journal at path names a run that is still measuring: its PID, else 0. */
unsigned timerlat_journal_owner(const char *path);
/* Puts back into the tracefs at dir what the journal at path holds (a killed run's), then removes the
 * journal. 0: there was none; 1: put back (*ret_error set when damaged entries were not); 2: another
 * tracer than timerlat is in use now, tracefs left alone and the journal removed (*ret_error says so);
 * -EBADMSG: the journal is damaged where it matters (not JSON, no tracer value): nothing put back, the
 * journal removed, *ret_error says what it cost; other < 0: what could not be put back, the journal
 * kept for the next try. */
int timerlat_journal_restore(const char *path, const char *dir, char **ret_error);

/* The threshold under which hwlat and osnoise count nothing, in µs: tracing_thresh, or the tracer's own
 * default when that is 0: 10 µs for hwlat; for osnoise 0, "the kernel's default" (5 µs before 6.11,
 * 1 µs since), which rtctl does not guess. */
unsigned timerlat_threshold_us(const TimerlatState *st);

/* One line of trace output; true for a thread-context sample ("... [001] .... 54.029339: #1 context
 * thread timer_latency 11700 ns"), the wake-up latency cyclictest measures too. */
bool timerlat_parse_line(const char *line, unsigned *ret_cpu, uint64_t *ret_ns);

/* One osnoise window of one CPU, as its trace line gives it ("<...>-859 [000] .... 81.637220: 1000000
 * 190 99.98100 9 18 0 1007 18 1"). */
typedef struct OsnoiseSample {
        uint64_t runtime_us, noise_us, max_single_us;
        uint64_t hw, nmi, irq, softirq, thread; /* interference counts */
} OsnoiseSample;

bool osnoise_parse_line(const char *line, unsigned *ret_cpu, OsnoiseSample *ret);
/* Adds a window to a CPU's totals (max_single_us becomes the worst of all). */
void osnoise_sample_add(OsnoiseSample *into, const OsnoiseSample *s);

/* One hwlat gap ("<...>-1729 [001] d... 678.473449: #1 inner/outer(us): 11/12 ts:... count:6"): the
 * larger of inner and outer, in ns; *ret_nmi whether NMIs ran during it. */
bool hwlat_parse_line(const char *line, unsigned *ret_cpu, uint64_t *ret_ns, bool *ret_nmi);
