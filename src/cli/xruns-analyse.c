/* SPDX-License-Identifier: GPL-2.0-or-later */
/* xruns-analyse.c: one xrun of rtctl xruns, read back over the trace: who is who (the audio threads
 * are the real-time threads of the server and of the processes that have the graph mapped), what else
 * ran on the audio CPUs in the window and its cost, a stall told twice, and the SMIs the CPUs took. */
#include "cli/xruns.h"
#include "core/attach.h"
#include "core/smi.h"
#include "core/tasks.h"
#include "core/xruns.h"
#include "shared/sysfs.h"

/* ---- who is who ---------------------------------------------------------------------------------- */

typedef struct Lookup {
        GHashTable *audio; /* TID -> 1 audio, 2 not */
        GHashTable *graph; /* TGID -> 1 of the graph, 2 not: a process's maps read once */
} Lookup;

static bool graph_process(unsigned tgid)
{
        _cleanup_free_ char *comm = NULL, *maps = NULL, *cp = xasprintf("/proc/%u/comm", tgid),
                            *mp = xasprintf("/proc/%u/maps", tgid);

        if (sys_read(cp, &comm) >= 0) {
                strstrip(comm);
                if (streq(comm, "jackd") || streq(comm, "jackdbus") || streq(comm, "pipewire"))
                        return true;
        }
        return sys_read(mp, &maps) >= 0 && attach_maps_graphs(maps) != 0;
}

/* An audio thread is a real-time thread (prio < 100 in the trace) of the server or of a process that
 * has the graph mapped. */
static int is_audio(unsigned tid, const char *comm, int prio, void *userdata)
{
        Lookup *l = userdata;
        unsigned tgid;
        gpointer v;

        (void)comm;
        if (prio < 0 || prio >= 100)
                return 0;
        v = g_hash_table_lookup(l->audio, GUINT_TO_POINTER(tid));
        if (v)
                return GPOINTER_TO_INT(v) == 1;
        bool yes = false;
        if (attach_thread_tgid(tid, &tgid) >= 0) {
                v = g_hash_table_lookup(l->graph, GUINT_TO_POINTER(tgid));
                yes = v ? GPOINTER_TO_INT(v) == 1 : graph_process(tgid);
                g_hash_table_insert(l->graph, GUINT_TO_POINTER(tgid), GINT_TO_POINTER(yes ? 1 : 2));
        }
        g_hash_table_insert(l->audio, GUINT_TO_POINTER(tid), GINT_TO_POINTER(yes ? 1 : 2));
        return yes;
}

static int is_kthread(unsigned long long tid, void *userdata)
{
        TaskInfo info;

        (void)userdata;
        return tid <= UINT_MAX && task_info((unsigned)tid, &info) >= 0 && (info.flags & PF_KTHREAD);
}

unsigned xruns_idle_latency_us(unsigned cpu, unsigned long long state, char **ret_name)
{
        _cleanup_free_ char *lat = NULL, *name = NULL,
                            *lp = xasprintf("/sys/devices/system/cpu/cpu%u/cpuidle/state%llu/latency", cpu,
                                            state),
                            *np = xasprintf("/sys/devices/system/cpu/cpu%u/cpuidle/state%llu/name", cpu,
                                            state);
        unsigned v = 0;

        if (sys_read(lp, &lat) >= 0)
                (void)safe_atou(strstrip(lat), &v);
        *ret_name = sys_read(np, &name) >= 0 ? xstrdup(strstrip(name)) : xasprintf("state%llu", state);
        return v;
}

/* An xrun with nothing of its own to show, told soon after one that had a cause, is that stall's: a
 * server tells several xruns for one stall (PipeWire: a follower unfinished, its count rising, the driver
 * late), and the cycles that catch up after it run without a gap to read back over. Within 8 periods
 * (25 ms at least) of the first xrun of the stall, it takes that xrun's causes and says so. */
void xruns_same_stall(const GArray *findings, const XrunsContext *ctx, XrunsFinding *f)
{
        const XrunsFinding *prev;
        uint64_t within = MAX(8ULL * ctx->period_us * 1000ULL, 25000000ULL), since;

        if (f->n_causes > 0 || findings->len == 0)
                return;
        prev = &g_array_index(findings, XrunsFinding, findings->len - 1);
        since = prev->same_stall_as ? prev->stall_ns : prev->mono_ns;
        if (prev->n_causes == 0 || f->mono_ns < since || f->mono_ns - since > within)
                return;
        f->same_stall_as = prev->same_stall_as ?: findings->len;
        f->stall_ns = since;
        /* xruns_analyse() may have kept an array it emptied. */
        xrun_causes_free(f->causes, f->n_causes);
        f->causes = xreallocarray(NULL, prev->n_causes, sizeof(XrunCause));
        for (size_t i = 0; i < prev->n_causes; i++) {
                f->causes[i] = prev->causes[i];
                f->causes[i].name = prev->causes[i].name ? xstrdup(prev->causes[i].name) : NULL;
                f->causes[i].comm = prev->causes[i].comm ? xstrdup(prev->causes[i].comm) : NULL;
        }
        f->n_causes = prev->n_causes;
}

static int cmp_cost(const void *a, const void *b)
{
        uint64_t x = ((const XrunCause *)a)->cost_ns, y = ((const XrunCause *)b)->cost_ns;

        return x < y ? 1 : x > y ? -1 : 0;
}

/* The audio threads' share of their CPUs over the span before at: a client over its budget keeps its
 * CPU saturated period after period; one held up once catches up and sleeps again. */
static double audio_share(XrunTrace *trace, const unsigned *list, size_t n, uint64_t at, uint64_t span,
                          Lookup *l)
{
        XrunCause *c = NULL;
        size_t nc = 0;
        uint64_t total = 0;

        if (at <= span || n == 0)
                return 0;
        (void)xrun_trace_causes(trace, list, n, at - span, at, UINT64_MAX, is_audio, l, &c, &nc);
        for (size_t i = 0; i < nc; i++)
                if (c[i].actor == XRUN_OVER)
                        total += c[i].total_ns;
        xrun_causes_free(c, nc);
        return (double)total / (double)(span * n);
}

void xruns_analyse(XrunTrace *trace, const CpuSet *cpus, const XrunsContext *ctx, uint64_t window_ns,
                   uint64_t at, XrunsFinding *f)
{
        _cleanup_free_ unsigned *list = NULL;
        Lookup l = {.audio = g_hash_table_new(g_direct_hash, g_direct_equal),
                    .graph = g_hash_table_new(g_direct_hash, g_direct_equal)};
        size_t n = 0, keep = 0;
        uint64_t period_ns = (uint64_t)ctx->period_us * 1000ULL;
        uint64_t min_ns = MAX(20000ULL, period_ns / 20);

        list = xreallocarray(NULL, cpuset_count(cpus) + 1, sizeof(unsigned));
        for (unsigned cpu = 0; cpu < cpus->size; cpu++)
                if (cpuset_has(cpus, cpu))
                        list[n++] = cpu;
        /* The window, and before it the busy stretch it starts in: the cycles that caught up after
         * whatever held the CPU ran without a break since (20 periods, 50 ms at least, further back: a
         * saturated CPU would otherwise add up every tick of a second). */
        uint64_t from = at > window_ns ? at - window_ns : 0, to = at + ctx->late_ns;
        from = xrun_trace_busy_since(trace, list, n, from, 20000, MAX(20 * period_ns, 50000000ULL), is_audio,
                                     &l);
        f->window_us = (unsigned)((to - from) / 1000);
        (void)xrun_trace_causes(trace, list, n, from, to, min_ns, is_audio, &l, &f->causes, &f->n_causes);
        xrun_causes_fold_irq_threads(f->causes, &f->n_causes, is_kthread, NULL);
        /* Idle exits are counted: each costs the exit latency its state declares (read once here). */
        for (size_t i = 0; i < f->n_causes; i++)
                if (f->causes[i].actor == XRUN_IDLE) {
                        _cleanup_free_ char *name = NULL;
                        f->causes[i].cost_ns =
                            (uint64_t)xruns_idle_latency_us(f->causes[i].cpu, f->causes[i].id, &name) *
                            1000ULL * f->causes[i].ns;
                }
        /* Over budget: an audio thread whose typical stretch of its own work (the median of those in the
         * window) passed the period, while the audio threads kept the CPU 90 % busy over the last 10
         * periods (20 ms at least). A thread held up works through the cycles it missed without a break
         * once, and time the hypervisor takes inside a thread's run looks like the thread's own: one long
         * stretch, which is not what the thread does every cycle. Other causes in the window are told
         * beside it, by what they took. */
        f->audio_share = audio_share(trace, list, n, at, MAX(10 * period_ns, 20000000ULL), &l);
        g_hash_table_unref(l.audio);
        g_hash_table_unref(l.graph);
        /* The highest audio priority seen tells which tasks ran above the graph. */
        f->audio_prio = -1;
        for (size_t i = 0; i < f->n_causes; i++) {
                XrunCause *c = &f->causes[i];
                if (c->actor == XRUN_OVER) {
                        f->audio_work_us = MAX(f->audio_work_us, (unsigned)(c->ns / 1000));
                        if (f->audio_prio < 0 || c->prio < f->audio_prio)
                                f->audio_prio = c->prio;
                        if (c->typical_ns * 100 < period_ns * 95 || f->audio_share < 0.9) {
                                xrun_cause_clear(c);
                                continue;
                        }
                }
                if (c->actor == XRUN_FREQ || (c->actor == XRUN_IDLE && c->cost_ns < min_ns)) {
                        xrun_cause_clear(c);
                        continue;
                }
                f->causes[keep++] = *c;
        }
        f->n_causes = keep;
        if (f->n_causes > 1)
                qsort(f->causes, f->n_causes, sizeof(XrunCause), cmp_cost);
}

/* The counts at the start. Read only at the start, after each xrun and at the end: each reading is an
 * IPI to the recorded CPU. */
void xruns_smis_start(XrunsSmis *s, const CpuSet *cpus)
{
        s->cpus = xreallocarray(NULL, cpuset_count(cpus) + 1, sizeof(XrunsSmiCounter));
        FOREACH_CPU (cpu, cpus)
                s->cpus[s->n++] = (XrunsSmiCounter){.cpu = (unsigned)cpu};
        for (size_t i = 0; i < s->n; i++) {
                int r = smi_count_read(s->cpus[i].cpu, &s->cpus[i].last);
                if (r < 0) {
                        s->error = r;
                        return;
                }
                s->cpus[i].read = true;
                s->cpus[i].last_ns = xruns_now_ns();
        }
}

/* Reads them again; with f, a note for each CPU that took any since the reading before. */
void xruns_smis_read(XrunsSmis *s, XrunsFinding *f)
{
        if (s->error < 0)
                return;
        for (size_t i = 0; i < s->n; i++) {
                XrunsSmiCounter *c = &s->cpus[i];
                uint64_t now = xruns_now_ns();
                uint32_t v;
                if (smi_count_read(c->cpu, &v) < 0) /* gone offline: counted again when back */
                        continue;
                uint32_t since = c->read ? smi_count_since(c->last, v) : 0;
                c->total += since;
                if (f && since > 0) {
                        f->notes = xreallocarray(f->notes, f->n_notes + 1, sizeof(XrunsSmiNote));
                        f->notes[f->n_notes++] = (XrunsSmiNote){
                            .cpu = c->cpu, .count = since, .since_us = (now - c->last_ns) / 1000};
                }
                c->read = true;
                c->last = v;
                c->last_ns = now;
        }
}
