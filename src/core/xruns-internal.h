/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <glib.h>

#include "core/xruns.h"

/* What the files of rtctl xruns's trace reader share: the model (xruns.c: the causes, each CPU's
 * segments and its stack of frames), trace_pipe's lines (xruns-parse.c) and the window
 * (xruns-window.c). The API is xruns.h. */

#define NAME_MAX_LEN 40
#define DEPTH        6
#define LINE_MAX_LEN 1024

/* What runs on a CPU, one frame of its stack: the task at the bottom, what interrupted it above. */
typedef struct Frame {
        XrunActor actor;
        unsigned long long id;
        int prio;
        char name[NAME_MAX_LEN];
        uint64_t since;
        uint64_t on; /* the task's: when it was given the CPU (an interrupt's end resumes it, since) */
} Frame;

/* A stretch of one CPU's time, charged to one actor (or an instant: a wake-up, an idle exit, a
 * frequency change). */
typedef struct Seg {
        uint64_t start, end;
        XrunActor actor;
        unsigned long long id;
        int prio;
        uint64_t on; /* XRUN_TASK: when it was given the CPU, at or before start */
        bool slept;  /* XRUN_TASK: it left the CPU to sleep (not preempted) */
        bool unsure; /* its end is not what the trace showed: a switch went unlogged, or events were lost */
        char name[NAME_MAX_LEN];
        char comm[NAME_MAX_LEN]; /* XRUN_WORK: the task that ran it */
} Seg;

/* One CPU as the trace told it. */
typedef struct Cpu {
        Frame stack[DEPTH];
        size_t depth;
        GArray *segs; /* of Seg, oldest first from `first` on */
        size_t first;
        long long idle_state; /* -1: not idle */
        bool gap;             /* events were lost here since the last switch: the running task unknown */
        uint64_t last;        /* the latest time stamp of a line logged on this CPU */
        /* The last wake-ups aimed at this CPU: a switch the trace does not show (this kernel logs no
         * switch away from the idle task) is named by the wake-up of the task found running. */
        struct {
                unsigned pid;
                int prio;
                uint64_t at;
                char comm[NAME_MAX_LEN];
        } wakes[8];
        size_t next_wake;
} Cpu;

struct XrunTrace {
        uint64_t keep_ns, now, lost;
        Cpu *cpus;
        size_t n_cpus;
        char line[LINE_MAX_LEN];
        size_t line_len;
        bool line_overflow;
};

/* xruns.c: each CPU's stack and segments. */

/* CPU cpu, made on first use; NULL from MAX_CPUS (4096) on. */
Cpu *xrun_cpu_get(XrunTrace *t, unsigned long long cpu);
/* The len bytes at s as a name, cut to fit. */
void xrun_copy_name(char *dst, const char *s, size_t len);
/* Files s on c, the newest, and forgets what is older than the trace's keep_ns. */
void xrun_add_seg(XrunTrace *t, Cpu *c, const Seg *s);
/* The segment still open at end (what runs on c now, cut at end); all zero when nothing was. */
Seg xrun_open_seg(const Cpu *c, uint64_t end);
/* The top frame's time up to now, as a segment; the frame goes on from now. */
void xrun_close_top(XrunTrace *t, Cpu *c, uint64_t now, bool slept);
/* An interrupt, softirq, work item or timer entered on c at now, above what ran. */
void xrun_push(XrunTrace *t, Cpu *c, uint64_t now, XrunActor actor, unsigned long long id, const char *name,
               size_t name_len);
/* The innermost frame of actor (of id too, with match_id) left at now, and any above it. */
void xrun_pop(XrunTrace *t, Cpu *c, uint64_t now, XrunActor actor, unsigned long long id, bool match_id);
