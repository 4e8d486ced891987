/* SPDX-License-Identifier: GPL-2.0-or-later */
/* rtctl xruns's trace model: the causes it reports, and each CPU's time cut into segments, each charged
 * to the innermost frame of its stack (task < work item < softirq < timer or IRQ handler). trace_pipe's
 * lines are read into it in xruns-parse.c, a window's causes found in xruns-window.c. See xruns.h. */
#include <glib.h>
#include <string.h>

#include "core/tasks.h"
#include "core/xruns-internal.h"
#include "shared/util.h"

#define MAX_CPUS 4096

static const char *const actor_names[_XRUN_ACTOR_MAX] = {
    [XRUN_TASK] = "task",   [XRUN_IRQ] = "irq",     [XRUN_SOFTIRQ] = "softirq", [XRUN_WORK] = "work",
    [XRUN_TIMER] = "timer", [XRUN_IDLE] = "idle",   [XRUN_FREQ] = "cpufreq",    [XRUN_OVER] = "over-budget",
    [XRUN_WAKE] = "wake",   [XRUN_STALL] = "stall",
};

const char *xrun_actor_name(XrunActor a)
{
        return a < _XRUN_ACTOR_MAX ? actor_names[a] : "?";
}

void xrun_cause_clear(XrunCause *c)
{
        free(c->name);
        free(c->comm);
        *c = (XrunCause){};
}

void xrun_causes_free(XrunCause *c, size_t n)
{
        for (size_t i = 0; c && i < n; i++)
                xrun_cause_clear(&c[i]);
        free(c);
}

static XrunCause *irq_cause_find(XrunCause *c, size_t n, unsigned cpu, unsigned irq)
{
        for (size_t i = 0; i < n; i++)
                if (c[i].actor == XRUN_IRQ && c[i].cpu == cpu && c[i].id == irq)
                        return &c[i];
        return NULL;
}

void xrun_causes_fold_irq_threads(XrunCause *c, size_t *n, XrunIsKthread is_kthread, void *userdata)
{
        size_t keep = 0;

        assert(n);
        assert(is_kthread);
        for (size_t i = 0; i < *n; i++) {
                XrunCause t = c[i];
                const char *name = NULL;
                unsigned irq;
                if (t.actor == XRUN_TASK && irq_thread_parse(strempty(t.name), &irq, &name) &&
                    is_kthread(t.id, userdata) > 0)
                        /* The thread's cause as its IRQ's: the thread told in comm and prio. */
                        t = (XrunCause){.actor = XRUN_IRQ,
                                        .cpu = t.cpu,
                                        .id = irq,
                                        .prio = t.prio,
                                        .name = xstrdup(startswith(name, "s-") ?: name),
                                        .comm = t.name,
                                        .ns = t.ns,
                                        .cost_ns = t.cost_ns,
                                        .last_ns = t.last_ns};
                XrunCause *into =
                    t.actor == XRUN_IRQ ? irq_cause_find(c, keep, t.cpu, (unsigned)t.id) : NULL;
                if (!into) {
                        c[keep++] = t;
                        continue;
                }
                /* The hard handler and the threads of one IRQ on one CPU: one cause. The hard handler's
                 * name is whole (a thread's comm is cut at 15 bytes); the first thread is told. */
                into->ns += t.ns;
                into->cost_ns += t.cost_ns;
                into->last_ns = MAX(into->last_ns, t.last_ns);
                if (!t.comm) {
                        free(into->name);
                        into->name = TAKE_PTR(t.name);
                } else if (!into->comm) {
                        into->comm = TAKE_PTR(t.comm);
                        into->prio = t.prio;
                }
                xrun_cause_clear(&t);
        }
        *n = keep;
}

XrunTrace *xrun_trace_new(uint64_t keep_ns)
{
        XrunTrace *t = xmalloc0(sizeof(XrunTrace));

        t->keep_ns = keep_ns;
        return t;
}

void xrun_trace_free(XrunTrace *t)
{
        for (size_t i = 0; i < t->n_cpus; i++)
                if (t->cpus[i].segs)
                        g_array_free(t->cpus[i].segs, true);
        free(t->cpus);
        free(t);
}

uint64_t xrun_trace_now(const XrunTrace *t)
{
        return t->now;
}

uint64_t xrun_trace_lost(const XrunTrace *t)
{
        return t->lost;
}

Cpu *xrun_cpu_get(XrunTrace *t, unsigned long long cpu)
{
        if (cpu >= MAX_CPUS)
                return NULL;
        if (cpu >= t->n_cpus) {
                size_t n = cpu + 1;
                t->cpus = xreallocarray(t->cpus, n, sizeof(Cpu));
                memset(t->cpus + t->n_cpus, 0, (n - t->n_cpus) * sizeof(Cpu));
                for (size_t i = t->n_cpus; i < n; i++)
                        t->cpus[i].idle_state = -1;
                t->n_cpus = n;
        }
        if (!t->cpus[cpu].segs)
                t->cpus[cpu].segs = g_array_new(false, false, sizeof(Seg));
        return &t->cpus[cpu];
}

void xrun_copy_name(char *dst, const char *s, size_t len)
{
        len = MIN(len, (size_t)NAME_MAX_LEN - 1);
        memcpy(dst, s, len);
        dst[len] = 0;
}

void xrun_add_seg(XrunTrace *t, Cpu *c, const Seg *s)
{
        g_array_append_vals(c->segs, s, 1);
        /* Forget what is older than keep_ns; the array is compacted once half of it is forgotten. */
        while (c->first < c->segs->len && g_array_index(c->segs, Seg, c->first).end + t->keep_ns < t->now)
                c->first++;
        if (c->first > 256 && c->first * 2 > c->segs->len) {
                g_array_remove_range(c->segs, 0, c->first);
                c->first = 0;
        }
}

/* The top frame's time from its start to end, as a segment (a work item's with its kworker). */
static Seg top_seg(const Cpu *c, uint64_t end, bool slept)
{
        const Frame *f = &c->stack[c->depth - 1];
        Seg s = {.start = f->since,
                 .end = end,
                 .actor = f->actor,
                 .id = f->id,
                 .prio = f->prio,
                 .slept = slept,
                 .on = f->actor == XRUN_TASK ? f->on : f->since};

        memcpy(s.name, f->name, sizeof(s.name));
        if (f->actor == XRUN_WORK && c->depth > 1)
                memcpy(s.comm, c->stack[0].name, sizeof(s.comm));
        return s;
}

Seg xrun_open_seg(const Cpu *c, uint64_t end)
{
        if (c->depth > 0 && c->stack[c->depth - 1].since < end)
                return top_seg(c, end, false);
        return (Seg){};
}

void xrun_close_top(XrunTrace *t, Cpu *c, uint64_t now, bool slept)
{
        if (c->depth == 0)
                return;
        if (now > c->stack[c->depth - 1].since) {
                Seg s = top_seg(c, now, slept);
                s.unsure = c->gap;
                xrun_add_seg(t, c, &s);
        }
        c->stack[c->depth - 1].since = now;
}

void xrun_push(XrunTrace *t, Cpu *c, uint64_t now, XrunActor actor, unsigned long long id, const char *name,
               size_t name_len)
{
        xrun_close_top(t, c, now, false);
        if (c->depth == DEPTH) /* lost exits: start over from the task */
                c->depth = MIN(c->depth, (size_t)1);
        Frame *f = &c->stack[c->depth++];
        *f = (Frame){.actor = actor, .id = id, .prio = -1, .since = now};
        xrun_copy_name(f->name, name, name_len);
}

void xrun_pop(XrunTrace *t, Cpu *c, uint64_t now, XrunActor actor, unsigned long long id, bool match_id)
{
        size_t at = c->depth;

        /* The task at the bottom is never popped by an exit. */
        while (at > 1 && !(c->stack[at - 1].actor == actor && (!match_id || c->stack[at - 1].id == id)))
                at--;
        if (at <= 1)
                return;
        xrun_close_top(t, c, now, false);
        c->depth = at - 1;
        if (c->depth > 0)
                c->stack[c->depth - 1].since = now;
}
