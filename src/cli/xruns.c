/* SPDX-License-Identifier: GPL-2.0-or-later */
/* xruns: follows the audio server's xruns and names, for each, what took the time on the audio CPUs
 * during the late cycle, with the profile line that would prevent it.
 *
 * The xruns come from the server: PipeWire's profiler (xruns-pipewire.c), or JACK's xrun callback
 * (jack2's server, or PipeWire's JACK interface under pw-jack), read in a child process that runs as the
 * user under sudo and passes back fixed-size records (xruns-server.c); the COMMAND runs as that user too
 * (xruns-user.c). This process, root, keeps what needs root: tracefs, the SMI counters, /proc.
 *
 * What ran comes from a private tracefs instance (XRUNS_TRACE_INSTANCE), recording only the audio CPUs:
 * context switches and wake-ups, IRQ and softirq handlers, workqueue items, hrtimer expiries, idle exits
 * and frequency changes, time-stamped with CLOCK_MONOTONIC (trace_clock mono) as the xruns are. The
 * instance and a tracefs mount it needed are journalled first (XRUNS_TRACE_JOURNAL), so that a killed
 * run's leftovers go with the next run or `rtctl restore`. */
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <time.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/xruns.h"
#include "core/attach.h"
#include "core/daemon-conf.h"
#include "core/irqs.h"
#include "core/journal.h"
#include "core/smi.h"
#include "core/tasks.h"
#include "core/topology.h"
#include "core/tracefs.h"
#include "core/xruns.h"
#include "shared/sysfs.h"

#define USAGE                                                                                               \
        "xruns [--server auto|pipewire|jack] [--cpus LIST] [--window MS] [--json] [-- COMMAND [ARG...]]"

/* Seconds of the CPUs' history kept. */
#define KEEP_NS (3ULL * 1000000000ULL)
/* How long after joining the graph xruns are not counted. */
#define SETTLE_START_NS (1000ULL * 1000000ULL)
/* How long after an xrun the trace is read: the last events reach trace_pipe by then. */
#define SETTLE_NS (60ULL * 1000000ULL)
/* Xruns waiting for their trace, at most. */
#define MAX_PENDING 4096

static const char *const trace_events[] = {
    "sched/sched_switch",
    "sched/sched_wakeup",
    "irq/irq_handler_entry",
    "irq/irq_handler_exit",
    "irq/softirq_entry",
    "irq/softirq_exit",
    "workqueue/workqueue_execute_start",
    "workqueue/workqueue_execute_end",
    "timer/hrtimer_expire_entry",
    "timer/hrtimer_expire_exit",
    "power/cpu_idle",
    "power/cpu_frequency",
};

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
        interrupted = sig;
}

/* The clock the trace has (trace_clock mono), in ns. */
static uint64_t now_ns(void)
{
        return now_usec(CLOCK_MONOTONIC) * 1000ULL;
}

/* ---- the recording ------------------------------------------------------------------------------ */

typedef struct Recording {
        Journal *journal;
        char *inst;
        int fd;
        int lock;
} Recording;

static int inst_write(const char *inst, const char *file, const char *value)
{
        _cleanup_free_ char *p = xasprintf("%s/%s", inst, file);

        return sys_write(p, value);
}

static void recording_stop(Recording *rec)
{
        int r;

        if (!rec->journal)
                return;
        r = sched_trace_restore(rec->journal, rec->fd);
        rec->fd = -EBADF;
        if (r < 0)
                fprintf(stderr,
                        "Could not put tracefs back as it was: %s (kept in the journal for `rtctl "
                        "restore`).\n",
                        strerror(-r));
        journal_free(rec->journal);
        rec->journal = NULL;
        if (rec->lock >= 0)
                close(rec->lock);
        rec->lock = -EBADF;
}

/* Puts back what the journal at path holds (a killed run's instance and mount), saying so. 0: nothing
 * was there; 1: put back; < 0 with a sentence. */
static int put_back(Journal *j, const char *path, char **ret_error)
{
        int r;

        if (journal_size(j) == 0)
                return 0;
        r = sched_trace_restore(j, -EBADF);
        if (r < 0) {
                *ret_error =
                    xasprintf("cannot put back what a killed rtctl xruns left in tracefs (journal %s): %s",
                              path, strerror(-r));
                return r;
        }
        fprintf(stderr, "Put back what an interrupted rtctl xruns left in tracefs (journal %s).\n", path);
        return 1;
}

static int recording_start(Recording *rec, const CpuSet *cpus, char **ret_error)
{
        _cleanup_free_ char *runtime = rtctl_runtime_dir(), *path = NULL, *lockp = NULL, *dir = NULL,
                            *mask = NULL, *pipe = NULL;
        int r;

        *rec = (Recording){.fd = -EBADF, .lock = -EBADF};
        r = mkdir_p(runtime, 0755);
        if (r < 0) {
                *ret_error = xasprintf("cannot make %s: %s", runtime, strerror(-r));
                return r;
        }
        /* One recording at a time: a second would take the first's instance. */
        lockp = xasprintf("%s/xruns.lock", runtime);
        rec->lock = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (rec->lock < 0 || flock(rec->lock, LOCK_EX | LOCK_NB) < 0) {
                r = -errno;
                *ret_error = r == -EWOULDBLOCK ? xstrdup("another rtctl xruns is recording")
                                               : xasprintf("cannot lock %s: %s", lockp, strerror(-r));
                return r;
        }
        path = xasprintf("%s/" XRUNS_TRACE_JOURNAL, runtime);
        r = journal_open(path, JOURNAL_RUNTIME, &rec->journal, ret_error);
        if (r < 0)
                return r;
        /* What a killed run left goes first. */
        r = put_back(rec->journal, path, ret_error);
        if (r < 0)
                return r;
        r = tracefs_instance_create(rec->journal, "rtctl xruns", XRUNS_TRACE_INSTANCE, &dir, &rec->inst,
                                    ret_error);
        if (r < 0)
                return r;
        /* The audio CPUs alone, a buffer big enough for a few seconds of them, the clock the xruns have. */
        mask = cpuset_format_mask(cpus);
        if ((r = inst_write(rec->inst, "trace_clock", "mono")) < 0 ||
            (r = inst_write(rec->inst, "tracing_cpumask", mask)) < 0 ||
            (r = inst_write(rec->inst, "buffer_size_kb", "4096")) < 0) {
                *ret_error = xasprintf("cannot set up %s: %s", rec->inst, strerror(-r));
                return r;
        }
        for (size_t i = 0; i < ELEMENTSOF(trace_events); i++) {
                _cleanup_free_ char *f = xasprintf("events/%s/enable", trace_events[i]);
                r = inst_write(rec->inst, f, "1");
                /* Only the context switches are essential; a kernel without the rest records less. */
                if (r < 0 && i == 0) {
                        *ret_error = xasprintf("cannot enable %s in %s: %s", trace_events[i], rec->inst,
                                               strerror(-r));
                        return r;
                }
        }
        pipe = xasprintf("%s/trace_pipe", rec->inst);
        {
                _cleanup_free_ char *p = sys_path(pipe);
                rec->fd = open(p, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        }
        if (rec->fd < 0) {
                r = -errno;
                *ret_error = xasprintf("cannot open %s: %s", pipe, strerror(-r));
                return r;
        }
        return 0;
}

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

/* ---- findings ------------------------------------------------------------------------------------ */

typedef struct Context {
        CpuSet *isolated; /* rtctld's isolated CPUs, NULL when unknown */
        IrqTable *irqs;
        unsigned period_us;
        long long rt_runtime_us; /* kernel.sched_rt_runtime_us at the start (-1: no throttling) */
        /* How far past an xrun's time its late cycle reaches: PipeWire's profiler dates an xrun by the
         * deadline the cycle missed, and what held the driver past it runs after that (one period);
         * jack2 tells an xrun once it happened (0). */
        uint64_t late_ns;
} Context;

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

static unsigned idle_latency_us(unsigned cpu, unsigned long long state, char **ret_name)
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

static bool cpu_isolated(const Context *ctx, unsigned cpu)
{
        return ctx->isolated && cpuset_has(ctx->isolated, cpu);
}

static char *not_isolated_fix(const Context *ctx, unsigned cpu)
{
        if (cpu_isolated(ctx, cpu))
                return NULL;
        return xasprintf("CPU %u is not isolated — `Isolate=` in the profile (the shipped audio profile: "
                         "`rtctl profile audio`)",
                         cpu);
}

/* The sentence and the fix for one cause. */
static void describe(const Context *ctx, const XrunCause *c, int audio_prio, char **ret_what, char **ret_fix)
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
                unsigned us = idle_latency_us(c->cpu, c->id, &state);
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

/* ---- one xrun ------------------------------------------------------------------------------------ */

/* SMIs a CPU took since the reading before: no time the kernel could see, so a note after the timed
 * causes, never a cause itself (a machine with periodic SMIs would else have every xrun "explained"). */
typedef struct SmiNote {
        unsigned cpu;
        uint32_t count;
        uint64_t since_us;
} SmiNote;

typedef struct Finding {
        uint64_t mono_ns;
        time_t wall;
        XrunCause *causes;
        size_t n_causes;
        SmiNote *notes;
        size_t n_notes;
        unsigned audio_work_us; /* the audio threads' longest stretch */
        unsigned window_us;     /* how far back from the xrun was looked */
        double audio_share;     /* of their CPUs the audio threads took in the last 10 periods */
        int audio_prio;
        size_t same_stall_as; /* 1-based: the xrun whose causes these are (same_stall()), 0 for none */
        uint64_t stall_ns;    /* when that xrun was */
} Finding;

/* An xrun with nothing of its own to show, told soon after one that had a cause, is that stall's: a
 * server tells several xruns for one stall (PipeWire: a follower unfinished, its count rising, the driver
 * late), and the cycles that catch up after it run without a gap to read back over. Within 8 periods
 * (25 ms at least) of the first xrun of the stall, it takes that xrun's causes and says so. */
static void same_stall(const GArray *findings, const Context *ctx, Finding *f)
{
        const Finding *prev;
        uint64_t within = MAX(8ULL * ctx->period_us * 1000ULL, 25000000ULL), since;

        if (f->n_causes > 0 || findings->len == 0)
                return;
        prev = &g_array_index(findings, Finding, findings->len - 1);
        since = prev->same_stall_as ? prev->stall_ns : prev->mono_ns;
        if (prev->n_causes == 0 || f->mono_ns < since || f->mono_ns - since > within)
                return;
        f->same_stall_as = prev->same_stall_as ?: findings->len;
        f->stall_ns = since;
        /* analyse() may have kept an array it emptied. */
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

static void analyse(XrunTrace *trace, const CpuSet *cpus, const Context *ctx, uint64_t window_ns,
                    uint64_t at, Finding *f)
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
                            (uint64_t)idle_latency_us(f->causes[i].cpu, f->causes[i].id, &name) * 1000ULL *
                            f->causes[i].ns;
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

/* ---- SMIs ---------------------------------------------------------------------------------------- */

typedef struct SmiCounter {
        unsigned cpu;
        bool read;     /* has a reading */
        uint32_t last; /* the latest reading, and when */
        uint64_t last_ns;
        uint64_t total; /* since the start */
} SmiCounter;

typedef struct Smis {
        SmiCounter *cpus;
        size_t n;
        int error; /* < 0: not counted, smi_missing_reason() says why */
} Smis;

/* The counts at the start. Read only at the start, after each xrun and at the end: each reading is an
 * IPI to the recorded CPU. */
static void smis_start(Smis *s, const CpuSet *cpus)
{
        s->cpus = xreallocarray(NULL, cpuset_count(cpus) + 1, sizeof(SmiCounter));
        FOREACH_CPU (cpu, cpus)
                s->cpus[s->n++] = (SmiCounter){.cpu = (unsigned)cpu};
        for (size_t i = 0; i < s->n; i++) {
                int r = smi_count_read(s->cpus[i].cpu, &s->cpus[i].last);
                if (r < 0) {
                        s->error = r;
                        return;
                }
                s->cpus[i].read = true;
                s->cpus[i].last_ns = now_ns();
        }
}

/* Reads them again; with f, a note for each CPU that took any since the reading before. */
static void smis_read(Smis *s, Finding *f)
{
        if (s->error < 0)
                return;
        for (size_t i = 0; i < s->n; i++) {
                SmiCounter *c = &s->cpus[i];
                uint64_t now = now_ns();
                uint32_t v;
                if (smi_count_read(c->cpu, &v) < 0) /* gone offline: counted again when back */
                        continue;
                uint32_t since = c->read ? smi_count_since(c->last, v) : 0;
                c->total += since;
                if (f && since > 0) {
                        f->notes = xreallocarray(f->notes, f->n_notes + 1, sizeof(SmiNote));
                        f->notes[f->n_notes++] =
                            (SmiNote){.cpu = c->cpu, .count = since, .since_us = (now - c->last_ns) / 1000};
                }
                c->read = true;
                c->last = v;
                c->last_ns = now;
        }
}

static void smi_note_describe(const SmiNote *n, char **ret_what, char **ret_fix)
{
        *ret_what = xasprintf("CPU %u took %u SMI%s in the %.0f ms since the reading before: firmware "
                              "time the kernel cannot see or time",
                              n->cpu, n->count, n->count == 1 ? "" : "s", n->since_us / 1000.0);
        *ret_fix = xstrdup("the firmware's own: its settings (legacy USB, power management, error "
                           "logging) or an update; `rtctl latency --method hwlat` measures the gaps");
}

static json_object *finding_json(const Context *ctx, const XrunsServer *s, const Finding *f, size_t index)
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

static void finding_print(const Context *ctx, const XrunsServer *s, const Finding *f, size_t index,
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

/* ---- the verb ------------------------------------------------------------------------------------- */

static CpuSet *isolated_cpus(Cli *c, unsigned size)
{
        sd_bus_message *reply = NULL;
        const char *s;
        CpuSet *set = NULL;

        if (cli_get_property(c, "IsolatedCPUs", "s", &reply, true) != EXIT_OK)
                return NULL;
        if (sd_bus_message_read(reply, "s", &s) > 0 && !isempty(s))
                (void)cpuset_parse_list(s, size, &set, NULL);
        sd_bus_message_unref(reply);
        return set;
}

/* The CPUs the audio threads may run on: rtctld's isolated ones, else every online CPU. */
static CpuSet *audio_cpus(const Topology *topo, const char *given, const CpuSet *isolated, char **ret_error)
{
        CpuSet *set = NULL;

        if (given) {
                _cleanup_free_ char *err = NULL;
                if (cpuset_parse_list(given, topo->n_cpus, &set, &err) < 0 || cpuset_empty(set)) {
                        *ret_error = xasprintf("--cpus: %s is not a CPU list%s%s", given, err ? ": " : "",
                                               strempty(err));
                        cpuset_free(set);
                        return NULL;
                }
                return set;
        }
        return cpuset_dup(isolated ?: topo->online);
}

int verb_xruns(Cli *c, int argc, char *argv[])
{
        enum { ARG_CPUS = CLI_OPT_VERB, ARG_WINDOW, ARG_SERVER };
        static const struct option options[] = {
            {"server", required_argument, NULL, ARG_SERVER},
            {"cpus", required_argument, NULL, ARG_CPUS},
            {"window", required_argument, NULL, ARG_WINDOW},
            {},
        };
        int dashdash = cli_find_dashdash(argc, argv);
        CliArgs args = {.cli = c, .argc = dashdash, .argv = argv, .usage = USAGE, .options = options};
        const char *cpus_arg = NULL, *server_arg = "auto";
        unsigned window_ms = 0;
        _cleanup_topology_ Topology *topo = NULL;
        _cleanup_cpuset_ CpuSet *cpus = NULL;
        _cleanup_free_ char *err = NULL, *cpus_list = NULL;
        _cleanup_xrun_trace_ XrunTrace *trace = NULL;
        Context ctx = {.rt_runtime_us = -1};
        XrunsServer server = XRUNS_SERVER_NULL;
        XrunsUser user = {};
        Recording rec = {.fd = -EBADF, .lock = -EBADF};
        Smis smis = {};
        GArray *findings = g_array_new(false, true, sizeof(Finding));
        GArray *pending = g_array_new(false, false, sizeof(uint64_t));
        pid_t child = 0;
        FILE *raw = NULL;
        int status = 0, code = EXIT_OK, r, for_user = 0;
        bool server_gone = false;
        uint64_t started;

        while ((r = cli_next_option(&args)) > 0)
                if (r == ARG_CPUS)
                        cpus_arg = args.value;
                else if (r == ARG_SERVER && !streq(args.value, "auto") && !streq(args.value, "pipewire") &&
                         !streq(args.value, "jack")) {
                        code =
                            cli_usage_error(&args, "--server is auto, pipewire or jack, not %s", args.value);
                        goto out;
                } else if (r == ARG_SERVER)
                        server_arg = args.value;
                else if (r == ARG_WINDOW &&
                         (safe_atou(args.value, &window_ms) < 0 || window_ms == 0 || window_ms > 2000)) {
                        code = cli_usage_error(&args, "--window takes milliseconds from 1 to 2000, not %s",
                                               args.value);
                        goto out;
                }
        if (r < 0 || !cli_args_count(&args, 0, 0)) {
                code = args.exit;
                goto out;
        }
        if (dashdash < argc && dashdash + 1 >= argc) {
                code = cli_usage_error(&args, "no command: give it after \"--\"");
                goto out;
        }
        if (geteuid() != 0) {
                fprintf(stderr, "rtctl xruns records with tracefs, which needs root: run it with sudo.\n");
                code = EXIT_FAILED;
                goto out;
        }
        r = topology_load(NULL, &topo);
        if (r < 0) {
                fprintf(stderr, "Cannot read the CPU topology: %s\n", strerror(-r));
                code = EXIT_FAILED;
                goto out;
        }
        ctx.isolated = isolated_cpus(c, topo->n_cpus);
        cpus = audio_cpus(topo, cpus_arg, ctx.isolated, &err);
        if (!cpus) {
                fprintf(stderr, "%s\n", err);
                code = EXIT_USAGE;
                goto out;
        }
        cpus_list = cpuset_format_list(cpus);
        /* rtctl itself, its JACK or PipeWire threads and the trace's reading stay off the CPUs it records,
         * where they would be among the causes (threads made later inherit this). */
        {
                cpu_set_t mask;
                unsigned n = 0;
                CPU_ZERO(&mask);
                FOREACH_CPU (cpu, topo->online)
                        if (!cpuset_has(cpus, (unsigned)cpu) && cpu < CPU_SETSIZE) {
                                CPU_SET(cpu, &mask);
                                n++;
                        }
                if (n > 0)
                        (void)sched_setaffinity(0, sizeof mask, &mask);
        }
        /* Under sudo, the command and the server's client run as the user who ran it (xruns-user.c). */
        for_user = xruns_user_find(&user, &err);
        if (for_user < 0) {
                fprintf(stderr, "rtctl xruns: %s\n", err);
                code = EXIT_FAILED;
                goto out;
        }
        r = xruns_server_start(&server, server_arg, for_user ? &user : NULL, &err);
        if (r < 0) {
                if (err) /* else the server's client said why */
                        fprintf(stderr, "rtctl xruns: %s\n", err);
                code = EXIT_FAILED;
                goto out;
        }
        ctx.period_us = server.rate ? (unsigned)((uint64_t)server.frames * 1000000ULL / server.rate) : 0;
        if (streq(server.kind, "pipewire"))
                ctx.late_ns = (uint64_t)ctx.period_us * 1000ULL;
        if (window_ms == 0) /* the late cycle and the one before it, and time for the news to arrive */
                window_ms = MAX(10u, (4 * ctx.period_us + 999) / 1000);
        (void)irq_table_load(0, topo->n_cpus, &ctx.irqs);
        {
                _cleanup_free_ char *rt = NULL;
                if (sys_read("/proc/sys/kernel/sched_rt_runtime_us", &rt) >= 0)
                        ctx.rt_runtime_us = strtoll(strstrip(rt), NULL, 10);
        }

        struct sigaction sa = {.sa_handler = on_signal};
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);

        r = recording_start(&rec, cpus, &err);
        if (r < 0) {
                fprintf(stderr, "rtctl xruns: %s\n", err);
                code = EXIT_FAILED;
                goto out;
        }
        trace = xrun_trace_new(KEEP_NS);
        smis_start(&smis, cpus);
        /* RTCTL_XRUNS_RAW=FILE keeps the trace as read, to look into a finding by hand. */
        if (getenv("RTCTL_XRUNS_RAW"))
                raw = fopen(getenv("RTCTL_XRUNS_RAW"), "we");
        started = now_ns();
        if (!c->json)
                fprintf(stderr,
                        "Following %s's xruns (%u frames at %u Hz), recording CPU %s; Ctrl-C ends.\n",
                        server.kind, server.frames, server.rate, cpus_list);
        if (dashdash < argc) {
                child = fork();
                if (child < 0) {
                        fprintf(stderr, "Cannot start %s: %m\n", argv[dashdash + 1]);
                        code = EXIT_FAILED;
                        goto out;
                }
                if (child == 0) {
                        signal(SIGINT, SIG_DFL);
                        signal(SIGTERM, SIG_DFL);
                        signal(SIGHUP, SIG_DFL);
                        if (for_user && (r = xruns_user_become(&user, true)) < 0) {
                                fprintf(stderr, "Cannot become %s to run %s: %s\n", user.name,
                                        argv[dashdash + 1], strerror(-r));
                                _exit(127);
                        }
                        execvp(argv[dashdash + 1], argv + dashdash + 1);
                        fprintf(stderr, "Cannot run %s: %m\n", argv[dashdash + 1]);
                        _exit(127);
                }
        }

        for (;;) {
                char buf[65536];
                ssize_t n;
                uint64_t t;
                bool done = interrupted != 0 || server_gone;

                if (child > 0 && waitpid(child, &status, WNOHANG) == child) {
                        child = 0;
                        done = true;
                }
                while ((n = read(rec.fd, buf, sizeof buf)) > 0) {
                        xrun_trace_feed(trace, buf, (size_t)n);
                        if (raw)
                                (void)fwrite(buf, 1, (size_t)n, raw);
                }
                while ((r = xruns_server_next(&server, &t)) > 0)
                        /* Joining can itself make an xrun (jack2 reorders its graph for a new client;
                         * PipeWire starts its profiler): the first second is not counted. A flood is
                         * not kept past what the analysis can follow. */
                        if (t > started + SETTLE_START_NS && pending->len < MAX_PENDING)
                                g_array_append_val(pending, t);
                if (r < 0) /* the server went, or its client did */
                        server_gone = done = true;
                /* An xrun is read once the trace has passed it, or SETTLE_NS after. */
                while (pending->len > 0) {
                        uint64_t at = g_array_index(pending, uint64_t, 0), now = now_ns();
                        if (!done && xrun_trace_now(trace) < at + SETTLE_NS && now < at + 4 * SETTLE_NS)
                                break;
                        Finding f = {.mono_ns = at,
                                     .wall = time(NULL) - (time_t)((now - at) / 1000000000ULL)};
                        analyse(trace, cpus, &ctx, (uint64_t)window_ms * 1000000ULL, at, &f);
                        same_stall(findings, &ctx, &f);
                        smis_read(&smis, &f);
                        g_array_append_val(findings, f);
                        if (!c->json) {
                                finding_print(&ctx, &server, &f, findings->len - 1, cpus_list);
                                fflush(stdout);
                        }
                        g_array_remove_index(pending, 0);
                }
                if (done && pending->len == 0)
                        break;
                struct pollfd p = {.fd = server.fd, .events = POLLIN};
                (void)poll(&p, 1, 20);
        }

        smis_read(&smis, NULL);
        /* The summary: xruns by their first cause. */
        {
                g_autoptr(GHashTable) by = g_hash_table_new_full(g_str_hash, g_str_equal, free, NULL);
                json_object *root = c->json ? json_object_new_object() : NULL, *arr = NULL;
                size_t unexplained = 0;
                if (root)
                        arr = json_object_new_array();
                for (size_t i = 0; i < findings->len; i++) {
                        const Finding *f = &g_array_index(findings, Finding, i);
                        if (arr)
                                json_object_array_add(arr, finding_json(&ctx, &server, f, i));
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
                        json_object_object_add(root, "server", json_object_new_string(server.kind));
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
                        if (smis.error == 0) {
                                smi = json_object_new_object();
                                for (size_t i = 0; i < smis.n; i++) {
                                        char cpu[16];
                                        snprintf(cpu, sizeof cpu, "%u", smis.cpus[i].cpu);
                                        json_object_object_add(
                                            smi, cpu, json_object_new_int64((int64_t)smis.cpus[i].total));
                                }
                        } else
                                json_object_object_add(
                                    root, "smis_missing",
                                    json_object_new_string(smi_missing_reason(smis.error)));
                        json_object_object_add(root, "smis", smi);
                        printf("%s\n", json_object_to_json_string_ext(
                                           root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
                        json_object_put(root);
                } else {
                        GHashTableIter it;
                        gpointer k, v;
                        printf("%u xrun%s in %.0f s", findings->len, findings->len == 1 ? "" : "s",
                               (double)(now_ns() - started) / 1e9);
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
                        for (size_t i = 0; smis.error == 0 && i < smis.n; i++)
                                printf("SMIs on CPU %u during the recording: %llu\n", smis.cpus[i].cpu,
                                       (unsigned long long)smis.cpus[i].total);
                        if (smis.error < 0)
                                printf("SMIs not counted: %s.\n", smi_missing_reason(smis.error));
                        if (xrun_trace_lost(trace))
                                printf("The kernel dropped %llu trace events: some causes may be missing.\n",
                                       (unsigned long long)xrun_trace_lost(trace));
                }
        }
        if (dashdash < argc)
                code = WIFEXITED(status) ? WEXITSTATUS(status)
                                         : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);

out:
        if (child > 0) {
                kill(child, SIGTERM);
                (void)waitpid(child, NULL, 0);
        }
        xruns_server_stop(&server);
        xruns_user_clear(&user);
        recording_stop(&rec);
        if (raw)
                fclose(raw);
        for (size_t i = 0; i < findings->len; i++) {
                Finding *f = &g_array_index(findings, Finding, i);
                xrun_causes_free(f->causes, f->n_causes);
                free(f->notes);
        }
        free(smis.cpus);
        g_array_free(findings, true);
        g_array_free(pending, true);
        cpuset_free(ctx.isolated);
        if (ctx.irqs)
                irq_table_free(ctx.irqs);
        free(rec.inst);
        return code;
}

int xruns_put_back_leftovers(char **ret_error)
{
        _cleanup_free_ char *runtime = rtctl_runtime_dir(),
                            *path = xasprintf("%s/" XRUNS_TRACE_JOURNAL, runtime),
                            *lockp = xasprintf("%s/xruns.lock", runtime);
        _cleanup_journal_ Journal *j = NULL;
        _cleanup_close_ int lock = -EBADF;
        int r;

        if (access(path, F_OK) < 0)
                return 0;
        /* A run in progress keeps its own. */
        lock = open(lockp, O_RDWR | O_CLOEXEC);
        if (lock >= 0 && flock(lock, LOCK_EX | LOCK_NB) < 0)
                return 0;
        r = journal_open(path, JOURNAL_RUNTIME, &j, ret_error);
        if (r < 0)
                return r;
        return put_back(j, path, ret_error);
}
