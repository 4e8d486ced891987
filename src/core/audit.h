/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include "shared/util.h"

/* What an audio user needs from this machine, audited without changing anything, through the root
 * prefix: `rtctl check` runs it in place, rtctld answers Check() with it. */

typedef struct AuditFinding {
        const char *check;  /* "irq-threads", "preemption", "irqbalance", "rt-throttling", "cpufreq",
                               "inversion" */
        const char *status; /* "ok", "warn" (something to fix), "info" */
        char *detail;       /* a sentence a person can act on */
} AuditFinding;

typedef struct Audit {
        AuditFinding *items;
        size_t n;
} Audit;

void audit_run(Audit *ret);
bool audit_warns(const Audit *a);
void audit_clear(Audit *a);

/* A thread's scheduling as /proc/PID/task/TID/stat shows it. */
typedef struct ThreadSched {
        unsigned pid;
        unsigned tid;
        char comm[16];         /* the thread's own name */
        char process_comm[16]; /* its process's */
        unsigned flags;
        unsigned policy; /* SCHED_OTHER 0, SCHED_FIFO 1, SCHED_RR 2, ... */
        unsigned rt_priority;
} ThreadSched;

/* Parses a /proc/PID/task/TID/stat line. */
int thread_sched_parse(const char *stat, ThreadSched *ret);

/* The audio priority inversion check on threads already read: audio IRQ threads (irq/N-snd_*, or those
 * of IRQs in audio_irqs) against the real-time threads of audio servers (PipeWire's data-loop.N, every
 * real-time thread of jackd and jackdbus). */
void audit_inversion(Audit *a, const ThreadSched *threads, size_t n, const unsigned *audio_irqs,
                     size_t n_audio_irqs);
