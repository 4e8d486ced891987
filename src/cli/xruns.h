/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* Puts back what a killed `rtctl xruns` left in tracefs (its instance, a tracefs mount), from its journal
 * (XRUNS_TRACE_JOURNAL in the runtime directory), unless a run in progress holds it: `rtctl restore`
 * calls it. 0: nothing was left; 1: put back (said on stderr); < 0 with a sentence. */
int xruns_put_back_leftovers(char **ret_error);

/* The PipeWire source (xruns-pipewire.c): PipeWire's profiler, read in a thread of libpipewire's that
 * writes each xrun's time (a uint64_t, ns of CLOCK_MONOTONIC: the deadline the cycle missed) to fd. */
typedef struct PwSource PwSource;
int pw_source_open(int fd, PwSource **ret, char **ret_error);
/* The graph's rate and quantum as the profiler last told them, 0 before it did. */
void pw_source_params(PwSource *s, unsigned *ret_rate, unsigned *ret_frames);
void pw_source_close(PwSource *s);
