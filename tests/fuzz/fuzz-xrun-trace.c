/* SPDX-License-Identifier: GPL-2.0-or-later */
/* trace_pipe's text as rtctl xruns reads it (xrun_trace_feed(): whole lines, cut anywhere, forged comms,
 * lines of any event), fed whole and in two reads at a cut the input's first byte chooses; then the
 * causes over everything read, whose times cannot exceed the window, and the busy stretch. */
#include "core/xruns.h"
#include "fuzz.h"

static int odd_is_audio(unsigned tid, const char *comm, int prio, void *userdata)
{
        (void)comm;
        (void)userdata;
        return prio >= 0 && prio < 100 && tid % 2 == 1;
}

static uint64_t total(XrunTrace *t, uint64_t from, uint64_t to)
{
        unsigned cpus[] = {0, 1, 2, 3, 4095};
        XrunCause *c = NULL;
        size_t n = 0;
        uint64_t sum = 0;

        fuzz_check(xrun_trace_causes(t, cpus, 5, from, to, 0, odd_is_audio, NULL, &c, &n) == 0);
        for (size_t i = 0; i < n; i++) {
                fuzz_check(c[i].cpu < 4096 && c[i].actor < _XRUN_ACTOR_MAX);
                if (c[i].actor != XRUN_IDLE && c[i].actor != XRUN_FREQ && c[i].actor != XRUN_OVER)
                        fuzz_check(c[i].ns <= to - from + 1);
                sum += c[i].ns;
        }
        xrun_causes_free(c, n);
        return sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        XrunTrace *whole = xrun_trace_new(3000000000ULL), *split = xrun_trace_new(3000000000ULL);
        size_t cut = size ? data[0] % (size + 1) : 0;
        unsigned cpu = 1;

        xrun_trace_feed(whole, (const char *)data, size);
        xrun_trace_feed(split, (const char *)data, cut);
        xrun_trace_feed(split, (const char *)data + cut, size - cut);
        /* Where the reads are cut changes nothing. */
        fuzz_check(xrun_trace_now(whole) == xrun_trace_now(split));
        fuzz_check(xrun_trace_lost(whole) == xrun_trace_lost(split));
        uint64_t now = xrun_trace_now(whole), from = now > 1000000000ULL ? now - 1000000000ULL : 0;
        fuzz_check(total(whole, from, now) == total(split, from, now));
        fuzz_check(xrun_trace_busy_since(whole, &cpu, 1, now, 20000, 50000000ULL, odd_is_audio, NULL) <=
                   now);
        xrun_trace_free(whole);
        xrun_trace_free(split);
        return 0;
}
