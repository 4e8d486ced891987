/* SPDX-License-Identifier: GPL-2.0-or-later */
/* xruns-report.c: what rtctl xruns tells: for each cause the sentence and the profile line that would
 * prevent it, each xrun as text or JSON, and the summary at the end. */
#include "cli/xruns.h"
#include "core/irqs.h"
#include "core/smi.h"
#include "core/xruns.h"

/* The kernel's prio of a real-time task (0..98, lower is higher) as chrt's priority (99..1). */
static int rt_priority(int prio)
{
        return 99 - prio;
}

/* "real-time priority 50" or "nice 0", from the kernel's prio. */
static char *priority_text(int prio)
{
        if (prio >= 0 && prio < 100)
                return xasprintf("real-time priority %d", rt_priority(prio));
        return xasprintf("nice %d", prio - 120);
}

static bool cpu_isolated(const XrunsContext *ctx, unsigned cpu)
{
        return ctx->isolated && cpuset_has(ctx->isolated, cpu);
}

static char *not_isolated_fix(const XrunsContext *ctx, unsigned cpu)
{
        if (cpu_isolated(ctx, cpu))
                return NULL;
        return xasprintf("CPU %u is not isolated — `Isolate=` in the profile (the shipped audio profile: "
                         "`rtctl profile audio`)",
                         cpu);
}

/* The sentence and the fix for one cause. */
static void describe(const XrunsContext *ctx, const XrunCause *c, int audio_prio, char **ret_what,
                     char **ret_fix)
{
        double ms = (double)c->ns / 1e6;
        _cleanup_free_ char *esc = text_escape(strempty(c->name));

        switch (c->actor) {
        case XRUN_TASK: {
                bool above = c->prio >= 0 && c->prio < 100 && audio_prio >= 0 && c->prio <= audio_prio;
                _cleanup_free_ char *prio = priority_text(c->prio);
                *ret_what = xasprintf("task `%s` (TID %llu, %s) ran %.2f ms on CPU %u", esc, c->id, prio, ms,
                                      c->cpu);
                if (above)
                        *ret_fix = xasprintf(
                            "it runs at or above the audio threads' priority (%d): give it a priority below "
                            "them (chrt), or keep it off CPU %u%s",
                            rt_priority(audio_prio), c->cpu,
                            cpu_isolated(ctx, c->cpu)
                                ? " (nothing but the audio graph belongs on an isolated CPU)"
                                : ": `Isolate=` sets the CPU apart for the audio graph");
                else if (startswith(c->name, "kworker/"))
                        *ret_fix =
                            xasprintf("a kernel worker: `KernelThreads=housekeeping` moves the unbound "
                                      "ones; a per-CPU one follows whoever queues work on CPU %u",
                                      c->cpu);
                else
                        *ret_fix =
                            not_isolated_fix(ctx, c->cpu)
                                ?: xasprintf("it was let onto the isolated CPU %u: `rtctl attach` and "
                                             "[Attach] rules put only the audio threads there",
                                             c->cpu);
                return;
        }
        case XRUN_IRQ: {
                const Irq *irq = ctx->irqs ? irq_table_find(ctx->irqs, (unsigned)c->id) : NULL;
                _cleanup_free_ char *aff = irq && irq->affinity ? cpuset_format_list(irq->affinity) : NULL;
                /* /proc/interrupts has the handlers' whole names; a thread's comm is cut at 15 bytes. */
                _cleanup_free_ char *name = irq && !isempty(irq->actions) ? text_escape(irq->actions) : NULL,
                                    *thread = NULL;
                if (c->comm) {
                        _cleanup_free_ char *comm = text_escape(c->comm), *prio = priority_text(c->prio);
                        thread = xasprintf(", its thread `%s` at %s,", comm, prio);
                }
                *ret_what = xasprintf("IRQ %llu %s%s%s%s%s ran %.2f ms on CPU %u", c->id, name ?: esc,
                                      irq && irq->driver ? " (" : "", irq && irq->driver ? irq->driver : "",
                                      irq && irq->driver ? ")" : "", strempty(thread), ms, c->cpu);
                if (irq && irq->class == IRQ_CLASS_AUDIO)
                        *ret_fix =
                            xasprintf("it carries your audio interface%s%s, keep it — raise its thread "
                                      "priority (`[IRQ audio]`)",
                                      irq->sound_card ? " " : "", strempty(irq->sound_card));
                else if (irq && irq->unmovable)
                        *ret_fix =
                            xasprintf("only the kernel places it (%s): keep its device busy elsewhere, "
                                      "or choose another CPU to isolate (`Isolate=`)",
                                      irq->unmovable);
                else
                        *ret_fix =
                            xasprintf("move it to the housekeeping CPUs: `[IRQ] Balance=housekeeping` "
                                      "(its affinity now: %s)",
                                      aff ?: "?");
                return;
        }
        case XRUN_SOFTIRQ:
                *ret_what = xasprintf("softirq %s ran %.2f ms on CPU %u", esc, ms, c->cpu);
                if (streq(c->name, "TIMER") || streq(c->name, "HRTIMER"))
                        *ret_fix = xstrdup("timers queued on this CPU: `nohz_full=` (`rtctl bootargs`)");
                else if (streq(c->name, "RCU"))
                        *ret_fix = xstrdup("RCU callbacks: `rcu_nocbs=` (`rtctl bootargs`)");
                else
                        *ret_fix =
                            xasprintf("it follows a device IRQ on CPU %u: move the device IRQs off it "
                                      "(`[IRQ] Balance=housekeeping`)",
                                      c->cpu);
                return;
        case XRUN_WORK: {
                _cleanup_free_ char *comm = text_escape(strempty(c->comm));
                *ret_what = xasprintf("workqueue item %s (%s) ran %.2f ms on CPU %u", esc,
                                      isempty(comm) ? "kworker" : comm, ms, c->cpu);
                if (streq(c->name, "vmstat_update"))
                        *ret_fix = xstrdup("`vm.stat_interval` (a [Sysctl] line: vm.stat_interval=10)");
                else if (startswith(strempty(c->comm), "kworker/u"))
                        *ret_fix = xstrdup("an unbound workqueue: `KernelThreads=housekeeping`");
                else
                        *ret_fix = xasprintf("per-CPU work queued on CPU %u by whatever runs there", c->cpu);
                return;
        }
        case XRUN_TIMER:
                *ret_what = xasprintf("timer %s ran %.2f ms on CPU %u", esc, ms, c->cpu);
                *ret_fix = xstrdup(startswith(strempty(c->name), "tick_")
                                       ? "the scheduler tick: `nohz_full=` (`rtctl bootargs`)"
                                       : "a timer armed on this CPU: whoever armed it runs there");
                return;
        case XRUN_IDLE: {
                _cleanup_free_ char *state = NULL;
                unsigned us = xruns_idle_latency_us(c->cpu, c->id, &state);
                *ret_what = xasprintf("CPU %u woke from idle state %s %llu times (exit latency %u µs each)",
                                      c->cpu, state, (unsigned long long)c->ns, us);
                *ret_fix = xstrdup("`MaxExitLatencyUs=shallowest` in [Power] for the isolated CPUs (0 if "
                                   "even that state is too slow)");
                return;
        }
        case XRUN_FREQ:
                *ret_what = xasprintf("CPU %u changed frequency %llu times (last %.0f MHz)", c->cpu,
                                      (unsigned long long)c->ns, (double)c->id / 1000.0);
                *ret_fix = xstrdup("`Governor=performance` in [Power] for the isolated CPUs");
                return;
        case XRUN_STALL: {
                long long runtime = ctx->rt_runtime_us;
                *ret_what = streq(c->name, "idle")
                                ? xasprintf("CPU %u stayed idle %.2f ms while an audio thread waited to run",
                                            c->cpu, ms)
                                : xasprintf("CPU %u ran `%s`, which is not real-time, %.2f ms while a "
                                            "real-time audio thread waited to run",
                                            c->cpu, esc, ms);
                *ret_fix = runtime >= 0
                               ? xasprintf("real-time throttling holds real-time threads back once "
                                           "they took %lld µs of a second (kernel.sched_rt_runtime_us): "
                                           "`kernel.sched_rt_runtime_us = -1` in [Sysctl], as tuned's "
                                           "realtime profile sets it (a runaway real-time thread can "
                                           "then hold its CPU), or less work on this CPU",
                                           runtime)
                               : xstrdup("real-time throttling is off: the wake-up was held back "
                                         "outside the kernel (the hypervisor)");
                return;
        }
        case XRUN_OVER:
                *ret_what = xasprintf("the audio thread `%s` (TID %llu) worked %.2f ms without a break "
                                      "(%.2f ms typically), in a %.2f ms period",
                                      esc, c->id, ms, (double)c->typical_ns / 1e6, ctx->period_us / 1000.0);
                *ret_fix = xstrdup("its own work is over budget: a longer period (more frames) or less "
                                   "work per cycle");
                return;
        default:
                *ret_what = xstrdup("?");
                *ret_fix = xstrdup("");
        }
}

static void smi_note_describe(const XrunsSmiNote *n, char **ret_what, char **ret_fix)
{
        *ret_what = xasprintf("CPU %u took %u SMI%s in the %.0f ms since the reading before: firmware "
                              "time the kernel cannot see or time",
                              n->cpu, n->count, n->count == 1 ? "" : "s", n->since_us / 1000.0);
        *ret_fix = xstrdup("the firmware's own: its settings (legacy USB, power management, error "
                           "logging) or an update; `rtctl latency --method hwlat` measures the gaps");
}

json_object *xruns_finding_json(const XrunsContext *ctx, const XrunsServer *s, const XrunsFinding *f,
                                size_t index)
{
        json_object *o = json_object_new_object(), *arr = json_object_new_array();
        char when[64];
        struct tm tm;

        localtime_r(&f->wall, &tm);
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S%z", &tm);
        json_object_object_add(o, "index", json_object_new_int64((int64_t)index + 1));
        json_object_object_add(o, "time", json_object_new_string(when));
        json_object_object_add(o, "monotonic_ns", json_object_new_int64((int64_t)f->mono_ns));
        json_object_object_add(o, "server", json_object_new_string(s->kind));
        json_object_object_add(o, "rate", json_object_new_int64(s->rate));
        json_object_object_add(o, "frames", json_object_new_int64(s->frames));
        json_object_object_add(o, "period_us", json_object_new_int64(ctx->period_us));
        json_object_object_add(o, "audio_work_us", json_object_new_int64(f->audio_work_us));
        json_object_object_add(o, "window_us", json_object_new_int64(f->window_us));
        json_object_object_add(o, "audio_share", json_object_new_double(f->audio_share));
        if (f->same_stall_as)
                json_object_object_add(o, "same_stall_as", json_object_new_int64((int64_t)f->same_stall_as));
        for (size_t i = 0; i < f->n_causes; i++) {
                const XrunCause *c = &f->causes[i];
                _cleanup_free_ char *what = NULL, *fix = NULL;
                json_object *j = json_object_new_object();
                describe(ctx, c, f->audio_prio, &what, &fix);
                json_object_object_add(j, "kind", json_object_new_string(xrun_actor_name(c->actor)));
                json_object_object_add(j, "cpu", json_object_new_int64(c->cpu));
                json_object_object_add(j, "id", json_object_new_int64((int64_t)c->id));
                json_object_object_add(j, "name", json_object_new_string(strempty(c->name)));
                if (c->comm)
                        json_object_object_add(j, "comm", json_object_new_string(c->comm));
                if (c->actor == XRUN_IDLE)
                        json_object_object_add(j, "count", json_object_new_int64((int64_t)c->ns));
                json_object_object_add(j, "us", json_object_new_int64((int64_t)(c->cost_ns / 1000)));
                json_object_object_add(j, "what", json_object_new_string(what));
                json_object_object_add(j, "fix", json_object_new_string(fix));
                json_object_array_add(arr, j);
        }
        /* Notes after the timed causes: what the kernel could not time. */
        for (size_t i = 0; i < f->n_notes; i++) {
                _cleanup_free_ char *what = NULL, *fix = NULL;
                json_object *j = json_object_new_object();
                smi_note_describe(&f->notes[i], &what, &fix);
                json_object_object_add(j, "kind", json_object_new_string("smi"));
                json_object_object_add(j, "cpu", json_object_new_int64(f->notes[i].cpu));
                json_object_object_add(j, "count", json_object_new_int64(f->notes[i].count));
                json_object_object_add(j, "since_us", json_object_new_int64((int64_t)f->notes[i].since_us));
                json_object_object_add(j, "what", json_object_new_string(what));
                json_object_object_add(j, "fix", json_object_new_string(fix));
                json_object_array_add(arr, j);
        }
        json_object_object_add(o, "causes", arr);
        return o;
}

void xruns_finding_print(const XrunsContext *ctx, const XrunsServer *s, const XrunsFinding *f, size_t index,
                         const char *cpus_list)
{
        char when[64];
        struct tm tm;

        localtime_r(&f->wall, &tm);
        strftime(when, sizeof when, "%H:%M:%S", &tm);
        printf("xrun %zu at %s (%s, %u frames at %u Hz: %.2f ms period)\n", index + 1, when, s->kind,
               s->frames, s->rate, ctx->period_us / 1000.0);
        if (f->n_causes == 0) {
                printf("  no cause seen on CPU %s: nothing else took more than %u µs there in the %.1f ms "
                       "before; the audio threads worked at most %.2f ms at a time, %.0f %% of the CPU over "
                       "the last periods. Time taken where the kernel cannot see it (the hypervisor, SMIs: "
                       "those only counted, below) does not show here.\n",
                       cpus_list, MAX(20u, ctx->period_us / 20), f->window_us / 1000.0,
                       f->audio_work_us / 1000.0, f->audio_share * 100);
        }
        if (f->same_stall_as)
                printf("  the same stall as xrun %zu (%.1f ms before), nothing else seen since:\n",
                       f->same_stall_as, (double)(f->mono_ns - f->stall_ns) / 1e6);
        for (size_t i = 0; i < f->n_causes && i < 3; i++) {
                _cleanup_free_ char *what = NULL, *fix = NULL;
                describe(ctx, &f->causes[i], f->audio_prio, &what, &fix);
                printf("  %s %s\n    fix: %s\n", i == 0 ? "cause:" : "also: ", what, fix);
        }
        for (size_t i = 0; i < f->n_notes; i++) {
                _cleanup_free_ char *what = NULL, *fix = NULL;
                smi_note_describe(&f->notes[i], &what, &fix);
                printf("  note:  %s\n    fix: %s\n", what, fix);
        }
}

void xruns_summary(bool json, const XrunsContext *ctx, const XrunsServer *s, const GArray *findings,
                   const XrunsSmis *smis, const XrunTrace *trace, const char *cpus_list, unsigned window_ms,
                   uint64_t started)
{
        g_autoptr(GHashTable) by = g_hash_table_new_full(g_str_hash, g_str_equal, free, NULL);
        json_object *root = json ? json_object_new_object() : NULL, *arr = NULL;
        size_t unexplained = 0;
        if (root)
                arr = json_object_new_array();
        for (size_t i = 0; i < findings->len; i++) {
                const XrunsFinding *f = &g_array_index(findings, XrunsFinding, i);
                if (arr)
                        json_object_array_add(arr, xruns_finding_json(ctx, s, f, i));
                if (f->n_causes == 0) {
                        unexplained++;
                        continue;
                }
                const XrunCause *top = &f->causes[0];
                char *key = top->actor == XRUN_IRQ ? xasprintf("IRQ %llu %s", top->id, top->name)
                            : top->actor == XRUN_STALL
                                ? xstrdup("stall")
                                : xasprintf("%s %s", xrun_actor_name(top->actor), top->name);
                unsigned prev = GPOINTER_TO_UINT(g_hash_table_lookup(by, key));
                g_hash_table_replace(by, key, GUINT_TO_POINTER(prev + 1));
        }
        if (root) {
                json_object *sum = json_object_new_object();
                GHashTableIter it;
                gpointer k, v;
                json_object_object_add(root, "server", json_object_new_string(s->kind));
                json_object_object_add(root, "cpus", json_object_new_string(cpus_list));
                json_object_object_add(root, "window_ms", json_object_new_int64(window_ms));
                json_object_object_add(root, "lost_events",
                                       json_object_new_int64((int64_t)xrun_trace_lost(trace)));
                json_object_object_add(root, "xruns", arr);
                g_hash_table_iter_init(&it, by);
                while (g_hash_table_iter_next(&it, &k, &v))
                        json_object_object_add(sum, k, json_object_new_int64(GPOINTER_TO_UINT(v)));
                if (unexplained)
                        json_object_object_add(sum, "unexplained",
                                               json_object_new_int64((int64_t)unexplained));
                json_object_object_add(root, "summary", sum);
                json_object *smi = NULL;
                if (smis->error == 0) {
                        smi = json_object_new_object();
                        for (size_t i = 0; i < smis->n; i++) {
                                char cpu[16];
                                snprintf(cpu, sizeof cpu, "%u", smis->cpus[i].cpu);
                                json_object_object_add(smi, cpu,
                                                       json_object_new_int64((int64_t)smis->cpus[i].total));
                        }
                } else
                        json_object_object_add(root, "smis_missing",
                                               json_object_new_string(smi_missing_reason(smis->error)));
                json_object_object_add(root, "smis", smi);
                printf("%s\n", json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY |
                                                                        JSON_C_TO_STRING_NOSLASHESCAPE));
                json_object_put(root);
        } else {
                GHashTableIter it;
                gpointer k, v;
                printf("%u xrun%s in %.0f s", findings->len, findings->len == 1 ? "" : "s",
                       (double)(xruns_now_ns() - started) / 1e9);
                g_hash_table_iter_init(&it, by);
                const char *sep = ": ";
                while (g_hash_table_iter_next(&it, &k, &v)) {
                        _cleanup_free_ char *e = text_escape(k);
                        printf("%s%u by %s", sep, GPOINTER_TO_UINT(v), e);
                        sep = ", ";
                }
                if (unexplained)
                        printf("%s%zu with no cause seen", sep, unexplained);
                printf(".\n");
                for (size_t i = 0; smis->error == 0 && i < smis->n; i++)
                        printf("SMIs on CPU %u during the recording: %llu\n", smis->cpus[i].cpu,
                               (unsigned long long)smis->cpus[i].total);
                if (smis->error < 0)
                        printf("SMIs not counted: %s.\n", smi_missing_reason(smis->error));
                if (xrun_trace_lost(trace))
                        printf("The kernel dropped %llu trace events: some causes may be missing.\n",
                               (unsigned long long)xrun_trace_lost(trace));
        }
}
