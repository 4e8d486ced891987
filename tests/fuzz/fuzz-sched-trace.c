/* SPDX-License-Identifier: GPL-2.0-or-later */
/* trace_pipe's text as rtctld reads it for Threads=realtime (sched_events_parse(): whole lines, cut
 * anywhere, forged comms), fed whole and in two reads at a cut the input's first byte chooses; and, as
 * the same untrusted text, a /proc stat line's policy field and a memory map's graph markers. */
#include "core/attach.h"
#include "core/tracefs.h"
#include "fuzz.h"

static void on_done(unsigned tid, void *userdata)
{
        unsigned *n = userdata;

        fuzz_check(tid != 0);
        (*n)++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        _cleanup_free_ char *s = fuzz_string(data, size);
        SchedTrace whole = {}, split = {};
        unsigned n_whole = 0, n_split = 0;
        size_t cut = size ? data[0] % (size + 1) : 0;
        int policy;

        fuzz_check(sched_events_parse(&whole, (const char *)data, size, on_done, &n_whole) == n_whole);
        fuzz_check(whole.n_pending <= SCHED_TRACE_PENDING && whole.line_len <= SCHED_TRACE_LINE);
        /* Where the reads are cut changes nothing. */
        sched_events_parse(&split, (const char *)data, cut, on_done, &n_split);
        sched_events_parse(&split, (const char *)data + cut, size - cut, on_done, &n_split);
        fuzz_check(n_split == n_whole);
        fuzz_check(split.n_pending == whole.n_pending);

        if (attach_stat_policy(s, &policy) >= 0)
                fuzz_check(policy >= 0);
        fuzz_check((attach_maps_graphs(s) & ~(unsigned)(ATTACH_GRAPH_PIPEWIRE | ATTACH_GRAPH_JACK)) == 0);
        return 0;
}
