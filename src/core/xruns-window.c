/* SPDX-License-Identifier: GPL-2.0-or-later */
/* What the segments of xruns.c tell about a window: what took the time on its CPUs while an audio thread
 * ran or waited to run, each audio thread's stretches of work (xrun_trace_causes()), and where the busy
 * stretch that holds a late cycle began (xrun_trace_busy_since()). */
#include <glib.h>
#include <string.h>

#include "core/xruns-internal.h"
#include "shared/util.h"

typedef struct Stretch {
        uint64_t run, best, total;
        GArray *runs; /* of uint64_t: each finished stretch, and the one still going at the end */
        int prio;
        char name[NAME_MAX_LEN];
} Stretch;

static void stretch_free(void *p)
{
        Stretch *st = p;

        g_array_free(st->runs, true);
        free(st);
}

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

        return x < y ? -1 : x > y ? 1 : 0;
}

/* The lower median: of one long stretch and one short, the short. */
static uint64_t stretch_typical(Stretch *st)
{
        if (st->run > 0)
                g_array_append_val(st->runs, st->run);
        if (st->runs->len == 0)
                return 0;
        qsort(st->runs->data, st->runs->len, sizeof(uint64_t), cmp_u64);
        return g_array_index(st->runs, uint64_t, (st->runs->len - 1) / 2);
}

/* When an audio thread of one CPU was running or waiting to run, as sorted, merged intervals. */
typedef struct Span {
        uint64_t start, end;
} Span;

static int cmp_span(const void *a, const void *b)
{
        const Span *x = a, *y = b;

        return x->start < y->start ? -1 : x->start > y->start ? 1 : 0;
}

typedef struct Demand {
        uint64_t ready; /* runnable since (woken or preempted); 0: asleep */
        bool seen;
} Demand;

static GArray *audio_demand(const Cpu *c, uint64_t from_ns, uint64_t to_ns, const Seg *open,
                            XrunIsAudio is_audio, void *userdata, bool *ret_all_rt)
{
        *ret_all_rt = true;
        g_autoptr(GHashTable) state = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, free);
        GArray *spans = g_array_new(false, false, sizeof(Span)),
               *events = g_array_new(false, false, sizeof(Seg));
        size_t n = c->segs->len;

        /* The wake-ups and the audio threads' runs, in time order (segments are filed as they close). */
        for (size_t i = c->first; i <= n; i++) {
                const Seg *s = i < n ? &g_array_index(c->segs, Seg, i) : open->end ? open : NULL;
                if (!s || s->end + 1000000000ULL < from_ns || s->start > to_ns)
                        continue;
                if (s->actor == XRUN_WAKE || (s->actor == XRUN_TASK && s->id != 0))
                        g_array_append_vals(events, s, 1);
        }
        g_array_sort(events, cmp_span); /* by start: Seg begins with start */
        for (size_t i = 0; i < events->len; i++) {
                const Seg *s = &g_array_index(events, Seg, i);
                Demand *d = g_hash_table_lookup(state, GUINT_TO_POINTER((unsigned)s->id));
                if (s->actor == XRUN_WAKE) {
                        if (d && !d->ready)
                                d->ready = s->start;
                        else if (!d) {
                                /* Not known as audio yet: decided at its first run. */
                                d = xmalloc0(sizeof(Demand));
                                d->ready = s->start;
                                g_hash_table_insert(state, GUINT_TO_POINTER((unsigned)s->id), d);
                        }
                        continue;
                }
                if (!d) {
                        d = xmalloc0(sizeof(Demand));
                        g_hash_table_insert(state, GUINT_TO_POINTER((unsigned)s->id), d);
                }
                if (!d->seen) {
                        d->seen = true;
                        if (is_audio((unsigned)s->id, s->name, s->prio, userdata) <= 0) {
                                /* Not audio: never demand (a sentinel far in the future). */
                                d->ready = UINT64_MAX;
                                continue;
                        }
                        if (s->prio >= 100) /* the kernel's prio: 0-99 real-time */
                                *ret_all_rt = false;
                }
                if (d->ready == UINT64_MAX)
                        continue;
                Span sp = {.start = d->ready ? MIN(d->ready, s->start) : s->start, .end = s->end};
                g_array_append_val(spans, sp);
                d->ready = s->slept ? 0 : s->end;
        }
        /* Still waiting at the end. */
        GHashTableIter it;
        gpointer k, v;
        g_hash_table_iter_init(&it, state);
        while (g_hash_table_iter_next(&it, &k, &v)) {
                Demand *d = v;
                if (d->seen && d->ready && d->ready != UINT64_MAX && d->ready < to_ns) {
                        Span sp = {.start = d->ready, .end = to_ns};
                        g_array_append_val(spans, sp);
                }
        }
        g_array_free(events, true);
        g_array_sort(spans, cmp_span);
        /* Merge. */
        size_t w = 0;
        for (size_t i = 0; i < spans->len; i++) {
                Span sp = g_array_index(spans, Span, i);
                if (w > 0 && sp.start <= g_array_index(spans, Span, w - 1).end) {
                        Span *last = &g_array_index(spans, Span, w - 1);
                        last->end = MAX(last->end, sp.end);
                } else
                        g_array_index(spans, Span, w++) = sp;
        }
        g_array_set_size(spans, w);
        return spans;
}

/* How much of [a, b) the spans cover. */
static uint64_t covered(const GArray *spans, uint64_t a, uint64_t b)
{
        uint64_t sum = 0;
        size_t lo = 0, hi = spans->len;

        /* The first span that ends after a. */
        while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (g_array_index(spans, Span, mid).end <= a)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        for (size_t i = lo; i < spans->len; i++) {
                const Span *sp = &g_array_index(spans, Span, i);
                if (sp->start >= b)
                        break;
                uint64_t s = MAX(sp->start, a), e = MIN(sp->end, b);
                if (e > s)
                        sum += e - s;
        }
        return sum;
}

static int cmp_cause(const void *a, const void *b)
{
        const XrunCause *x = a, *y = b;

        return x->cost_ns < y->cost_ns ? 1 : x->cost_ns > y->cost_ns ? -1 : 0;
}

int xrun_trace_causes(XrunTrace *t, const unsigned *cpus, size_t n_cpus, uint64_t from_ns, uint64_t to_ns,
                      uint64_t min_ns, XrunIsAudio is_audio, void *userdata, XrunCause **ret, size_t *ret_n)
{
        g_autoptr(GHashTable) by_key = g_hash_table_new_full(g_str_hash, g_str_equal, free, free);
        GArray *out = g_array_new(false, true, sizeof(XrunCause));
        GHashTableIter it;
        gpointer key, value;

        for (size_t k = 0; k < n_cpus; k++) {
                unsigned cpu = cpus[k];
                if (cpu >= t->n_cpus || !t->cpus[cpu].segs)
                        continue;
                Cpu *c = &t->cpus[cpu];
                g_autoptr(GHashTable) stretches =
                    g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, stretch_free);
                /* The segment still open at to_ns counts too, up to to_ns. */
                Seg open = xrun_open_seg(c, to_ns);
                size_t n = c->segs->len;
                bool audio_rt = false;
                GArray *demand =
                    is_audio ? audio_demand(c, from_ns, to_ns, &open, is_audio, userdata, &audio_rt) : NULL;
                /* No audio thread ran or waited here (a burst held the CPU longer than the window, or
                 * the graph runs elsewhere): everything that ran counts. */
                if (demand && demand->len == 0) {
                        g_array_free(demand, true);
                        demand = NULL;
                }
                for (size_t i = c->first; i <= n; i++) {
                        const Seg *s = i < n ? &g_array_index(c->segs, Seg, i) : open.end ? &open : NULL;
                        if (!s || s->end < from_ns || s->start > to_ns || s->actor == XRUN_WAKE)
                                continue;
                        uint64_t a = MAX(s->start, from_ns), b = MIN(s->end, to_ns);
                        uint64_t ns = b - a;
                        _cleanup_free_ char *k2 = NULL;
                        /* Idle while an audio thread waited to run: a stall (real-time throttling, a
                         * wake-up the hypervisor held back). Idle otherwise is nobody's. */
                        Seg stall;
                        if (s->actor == XRUN_TASK && s->id == 0) {
                                if (!demand || (ns = covered(demand, a, b)) == 0)
                                        continue;
                                stall =
                                    (Seg){.start = s->start, .end = s->end, .actor = XRUN_STALL, .prio = -1};
                                memcpy(stall.name, "idle", 5);
                                s = &stall;
                        } else if (s->actor == XRUN_TASK && demand && audio_rt && s->prio >= 100 &&
                                   covered(demand, s->on, s->on + 1) > 0) {
                                /* A task that is not real-time was given the CPU while a real-time audio
                                 * thread waited on it: the scheduler picks no such task over a runnable
                                 * real-time one, so real-time throttling let it (the busy machine's
                                 * version of the idle stall above). A stall, named after it. One already
                                 * running when the audio thread woke is a task that held the CPU (a
                                 * kernel section that does not preempt), as before, also in the part of
                                 * its run after the interrupt that woke the audio thread: `on` is when
                                 * it got the CPU. (No audio thread is such a task here: audio_rt says
                                 * none of those in the window is.) */
                                if ((ns = covered(demand, a, b)) == 0)
                                        continue;
                                stall =
                                    (Seg){.start = s->start, .end = s->end, .actor = XRUN_STALL, .prio = -1};
                                memcpy(stall.name, s->name, sizeof(stall.name));
                                s = &stall;
                        }
                        if (s->actor == XRUN_TASK && is_audio &&
                            is_audio((unsigned)s->id, s->name, s->prio, userdata) > 0) {
                                Stretch *st =
                                    g_hash_table_lookup(stretches, GUINT_TO_POINTER((unsigned)s->id));
                                if (!st) {
                                        st = xmalloc0(sizeof(Stretch));
                                        st->runs = g_array_new(false, false, sizeof(uint64_t));
                                        st->prio = s->prio;
                                        memcpy(st->name, s->name, sizeof(st->name));
                                        g_hash_table_insert(stretches, GUINT_TO_POINTER((unsigned)s->id),
                                                            st);
                                }
                                st->total += ns;
                                /* A run whose end the trace did not show may be two with a sleep
                                 * between: it starts no over-budget stretch and ends the one before. */
                                if (s->unsure) {
                                        if (st->run > 0)
                                                g_array_append_val(st->runs, st->run);
                                        st->run = 0;
                                        continue;
                                }
                                st->run += ns;
                                st->best = MAX(st->best, st->run);
                                if (s->slept) {
                                        g_array_append_val(st->runs, st->run);
                                        st->run = 0;
                                }
                                continue;
                        }
                        if (s->actor == XRUN_IDLE || s->actor == XRUN_FREQ)
                                ns = 1; /* a count */
                        else if (demand && s->actor != XRUN_STALL)
                                ns = covered(demand, a, b);
                        if (ns == 0)
                                continue;
                        /* A task is one cause whatever it was called (exec renames it); the latest
                         * name and priority tell it. */
                        k2 = s->actor == XRUN_TASK
                                 ? xasprintf("%u|%d|%llu", cpu, (int)s->actor, s->id)
                                 : xasprintf("%u|%d|%llu|%s|%s", cpu, (int)s->actor,
                                             s->actor == XRUN_WORK || s->actor == XRUN_TIMER ? 0ULL : s->id,
                                             s->name, s->comm);
                        XrunCause *cause = g_hash_table_lookup(by_key, k2);
                        if (!cause) {
                                cause = xmalloc0(sizeof(XrunCause));
                                *cause = (XrunCause){.actor = s->actor,
                                                     .cpu = cpu,
                                                     .id = s->id,
                                                     .prio = s->actor == XRUN_TASK ? s->prio : -1,
                                                     .name = xstrdup(s->name),
                                                     .comm = isempty(s->comm) ? NULL : xstrdup(s->comm)};
                                g_hash_table_insert(by_key, TAKE_PTR(k2), cause);
                        }
                        if (s->actor == XRUN_FREQ)
                                cause->id = s->id; /* the last frequency */
                        if (s->actor == XRUN_TASK && s->end >= cause->last_ns) {
                                free(cause->name);
                                cause->name = xstrdup(s->name);
                                cause->prio = s->prio;
                                cause->last_ns = s->end;
                        }
                        cause->ns += ns;
                }
                if (demand)
                        g_array_free(demand, true);
                g_hash_table_iter_init(&it, stretches);
                while (g_hash_table_iter_next(&it, &key, &value)) {
                        Stretch *st = value;
                        if (st->best == 0) /* only runs the trace lost the end of */
                                continue;
                        XrunCause cause = {.actor = XRUN_OVER,
                                           .cpu = cpu,
                                           .id = GPOINTER_TO_UINT(key),
                                           .prio = st->prio,
                                           .name = xstrdup(st->name),
                                           .ns = st->best,
                                           .total_ns = st->total,
                                           .typical_ns = stretch_typical(st),
                                           .cost_ns = st->best};
                        g_array_append_val(out, cause);
                }
        }
        g_hash_table_iter_init(&it, by_key);
        while (g_hash_table_iter_next(&it, &key, &value)) {
                XrunCause *cause = value;
                bool counted = cause->actor == XRUN_IDLE || cause->actor == XRUN_FREQ;
                if (!counted && cause->ns < min_ns) {
                        xrun_cause_clear(cause);
                        continue;
                }
                cause->cost_ns = counted ? 0 : cause->ns;
                g_array_append_val(out, *cause);
                *cause = (XrunCause){};
        }
        if (out->len > 1)
                qsort(out->data, out->len, sizeof(XrunCause), cmp_cause);
        *ret_n = out->len;
        *ret = (XrunCause *)(void *)g_array_free(out, false);
        return 0;
}

/* Where the audio threads' demand (running or waiting) around at began, after its last gap of idle_ns
 * or more; at itself when none ran or waited then; UINT64_MAX when no audio thread is known here. */
static uint64_t demand_since(const Cpu *c, uint64_t floor, uint64_t at, uint64_t idle_ns,
                             XrunIsAudio is_audio, void *userdata)
{
        Seg open = xrun_open_seg(c, at);
        bool rt;
        uint64_t since = UINT64_MAX;

        GArray *spans = audio_demand(c, floor, at, &open, is_audio, userdata, &rt);
        if (spans->len > 0) {
                since = at;
                for (size_t i = spans->len; i-- > 0;) {
                        const Span *sp = &g_array_index(spans, Span, i);
                        if (sp->start > at)
                                continue;
                        if (sp->end < at)
                                break; /* asleep at at */
                        size_t j = i;
                        while (j > 0 &&
                               g_array_index(spans, Span, j).start - g_array_index(spans, Span, j - 1).end <
                                   idle_ns)
                                j--;
                        since = MAX(floor, g_array_index(spans, Span, j).start);
                        break;
                }
        }
        g_array_free(spans, true);
        return since;
}

uint64_t xrun_trace_busy_since(XrunTrace *t, const unsigned *cpus, size_t n_cpus, uint64_t at,
                               uint64_t idle_ns, uint64_t max_back_ns, XrunIsAudio is_audio, void *userdata)
{
        uint64_t floor = at > max_back_ns ? at - max_back_ns : 0, since = at;

        for (size_t k = 0; k < n_cpus; k++) {
                unsigned cpu = cpus[k];
                if (cpu >= t->n_cpus || !t->cpus[cpu].segs)
                        continue;
                const Cpu *c = &t->cpus[cpu];
                uint64_t begin = floor;
                /* Idle now (the open frame is the idle task's since before at): not busy. */
                if (c->depth > 0 && c->stack[c->depth - 1].actor == XRUN_TASK &&
                    c->stack[c->depth - 1].id == 0 && c->stack[c->depth - 1].since <= at)
                        continue;
                for (size_t i = c->segs->len; i-- > c->first;) {
                        const Seg *s = &g_array_index(c->segs, Seg, i);
                        if (s->start > at)
                                continue;
                        if (s->end < floor)
                                break;
                        if (s->actor == XRUN_TASK && s->id == 0 &&
                            (s->end - s->start >= idle_ns || s->end >= at)) {
                                begin = MAX(floor, MIN(s->end, at));
                                break;
                        }
                }
                /* A CPU that tasks of no concern to the graph keep busy (a build beside it, niced) is
                 * never idle: what the graph went through is as far back as its own demand goes. */
                if (is_audio) {
                        uint64_t d = demand_since(c, floor, at, idle_ns, is_audio, userdata);
                        if (d != UINT64_MAX)
                                begin = MAX(begin, d);
                }
                since = MIN(since, begin);
        }
        return since;
}
