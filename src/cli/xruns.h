/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* Puts back what a killed `rtctl xruns` left in tracefs (its instance, a tracefs mount), from its journal
 * (XRUNS_TRACE_JOURNAL in the runtime directory), unless a run in progress holds it: `rtctl restore`
 * calls it. 0: nothing was left; 1: put back (said on stderr); < 0 with a sentence. */
int xruns_put_back_leftovers(char **ret_error);
