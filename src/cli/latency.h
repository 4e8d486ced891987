/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <signal.h>

#include "core/latency.h"
#include "core/timerlat.h"

/* How rtctl latency measures: one slice at a time, each with its own set-up and tear-down, so that a
 * profile switch between slices (--compare) finds nothing of the measurement running. */

typedef enum LatencyMethod {
        LATENCY_AUTO,
        LATENCY_TIMERLAT, /* the kernel's timerlat tracer */
        LATENCY_TIMER,    /* rtctl's own SCHED_FIFO thread per CPU */
        LATENCY_OSNOISE,  /* the kernel's osnoise tracer: what interrupts a busy thread */
        LATENCY_HWLAT,    /* the kernel's hwlat tracer: the hardware's own gaps, beneath every profile */
} LatencyMethod;

/* The tracer behind a method; _TRACER_MAX for the timer method. */
LatencyTracer latency_method_tracer(LatencyMethod m);

#define LATENCY_PRIORITY 90

/* Set by the SIGINT/SIGTERM/SIGHUP handler: every wait returns early and the cleanup path runs. */
extern volatile sig_atomic_t latency_interrupted;
void latency_catch_signals(void);
/* For the way back: a second Ctrl-C must not cut short the switch to the starting profile. */
void latency_block_signals(void);

typedef struct LatencySlice {
        LatencyMethod method;
        const CpuSet *cpus;
        unsigned period_us;
        unsigned ms;
        const char *tracefs;   /* the tracers: the tracefs directory */
        OsnoiseSample *noise;  /* osnoise: one per CPU, added to */
        unsigned threshold_us; /* hwlat, osnoise: set by the measurement from tracefs */
        /* timer: called with each measuring process before it pins itself, for those CPUs that need it
         * (isolated by rtctld: the process must be attached first). */
        const CpuSet *attach_cpus;
        int (*attach)(pid_t pid, void *userdata, char **ret_error);
        void *userdata;
} LatencySlice;

/* Measures each CPU of slice->cpus into hists (one per CPU, in CPU order), adding to what they hold:
 * wake-up latencies (timerlat, timer), each window's longest interruption (osnoise), each gap (hwlat).
 * -EINTR when a signal ended it (what was measured is kept); other errors with a sentence. */
int latency_measure(LatencySlice *slice, LatencyHist *hists, char **ret_error);

/* Where tracefs is, mounting it in a private mount namespace of this process when nothing mounted it
 * (the machine's mounts stay as they were). */
int latency_tracefs(char **ret_dir, char **ret_error);

/* Puts back what a killed `rtctl latency` with a tracer left in tracefs, from the journal it wrote
 * before its first write (TIMERLAT_JOURNAL in the runtime directory): `rtctl restore` calls it. 0:
 * nothing was left; 1: put back (said on stderr); < 0 with a sentence. */
int latency_put_back_leftovers(char **ret_error);
