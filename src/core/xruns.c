/* SPDX-License-Identifier: GPL-2.0-or-later */
/* rtctl xruns's trace reader: trace_pipe's lines into per-CPU segments, and the causes inside a window.
 * See xruns.h. */
#include <glib.h>
#include <string.h>

#include "core/tasks.h"
#include "core/xruns.h"
#include "shared/util.h"

#define NAME_MAX_LEN 40
#define DEPTH        6
#define LINE_MAX_LEN 1024
#define MAX_CPUS     4096

typedef struct Frame {
        XrunActor actor;
        unsigned long long id;
        int prio;
        char name[NAME_MAX_LEN];
        uint64_t since;
        uint64_t on; /* the task's: when it was given the CPU (an interrupt's end resumes it, since) */
} Frame;

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

static Cpu *cpu_get(XrunTrace *t, unsigned long long cpu)
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

static void copy_name(char *dst, const char *s, size_t len)
{
        len = MIN(len, (size_t)NAME_MAX_LEN - 1);
        memcpy(dst, s, len);
        dst[len] = 0;
}

static void add_seg(XrunTrace *t, Cpu *c, const Seg *s)
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

/* The top frame's time up to now, as a segment. */
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

/* The segment still open at end (what runs on c now, cut at end); all zero when nothing was. */
static Seg open_seg(const Cpu *c, uint64_t end)
{
        if (c->depth > 0 && c->stack[c->depth - 1].since < end)
                return top_seg(c, end, false);
        return (Seg){};
}

static void close_top(XrunTrace *t, Cpu *c, uint64_t now, bool slept)
{
        if (c->depth == 0)
                return;
        if (now > c->stack[c->depth - 1].since) {
                Seg s = top_seg(c, now, slept);
                s.unsure = c->gap;
                add_seg(t, c, &s);
        }
        c->stack[c->depth - 1].since = now;
}

static void push(XrunTrace *t, Cpu *c, uint64_t now, XrunActor actor, unsigned long long id,
                 const char *name, size_t name_len)
{
        close_top(t, c, now, false);
        if (c->depth == DEPTH) /* lost exits: start over from the task */
                c->depth = MIN(c->depth, (size_t)1);
        Frame *f = &c->stack[c->depth++];
        *f = (Frame){.actor = actor, .id = id, .prio = -1, .since = now};
        copy_name(f->name, name, name_len);
}

static void pop(XrunTrace *t, Cpu *c, uint64_t now, XrunActor actor, unsigned long long id, bool match_id)
{
        size_t at = c->depth;

        /* The task at the bottom is never popped by an exit. */
        while (at > 1 && !(c->stack[at - 1].actor == actor && (!match_id || c->stack[at - 1].id == id)))
                at--;
        if (at <= 1)
                return;
        close_top(t, c, now, false);
        c->depth = at - 1;
        if (c->depth > 0)
                c->stack[c->depth - 1].since = now;
}

/* ---- parsing --------------------------------------------------------------------------------------- */

static const char *find(const char *s, const char *end, const char *what)
{
        size_t n = strlen(what);

        for (const char *p = s; p + n <= end; p++)
                if (memcmp(p, what, n) == 0)
                        return p;
        return NULL;
}

static const char *rfind(const char *s, const char *end, const char *what)
{
        size_t n = strlen(what);

        for (const char *p = end - n; p >= s; p--)
                if (memcmp(p, what, n) == 0)
                        return p;
        return NULL;
}

static bool number(const char *p, const char *end, int base, unsigned long long *ret)
{
        unsigned long long v = 0;
        bool neg = false, any = false;

        if (p < end && *p == '-') {
                neg = true;
                p++;
        }
        for (; p < end; p++) {
                int d = *p >= '0' && *p <= '9'                 ? *p - '0'
                        : base == 16 && *p >= 'a' && *p <= 'f' ? *p - 'a' + 10
                                                               : -1;
                if (d < 0)
                        break;
                if (v > (ULLONG_MAX - (unsigned)d) / (unsigned)base)
                        return false;
                v = v * (unsigned)base + (unsigned)d;
                any = true;
        }
        *ret = neg ? (unsigned long long)-(long long)v : v;
        return any;
}

/* The number after key (" key=" or at the start), in fields [p, end). */
static bool field_number(const char *p, const char *end, const char *key, unsigned long long *ret)
{
        const char *k = find(p, end, key);

        return k && number(k + strlen(key), end, 10, ret);
}

/* The value after key up to the next space (or stop), as [*ret, *ret_end). */
static bool field_word(const char *p, const char *end, const char *key, char stop, const char **ret,
                       size_t *ret_len)
{
        const char *k = find(p, end, key), *e;

        if (!k)
                return false;
        k += strlen(key);
        for (e = k; e < end && *e != ' ' && *e != stop; e++)
                ;
        *ret = k;
        *ret_len = (size_t)(e - k);
        return true;
}

/* "12345.678901" (any number of decimals) in ns. */
static bool timestamp(const char *p, const char *end, uint64_t *ret)
{
        unsigned long long sec = 0, frac = 0;
        const char *dot = memchr(p, '.', (size_t)(end - p));
        size_t digits;

        if (!dot || !number(p, dot, 10, &sec) || !number(dot + 1, end, 10, &frac))
                return false;
        digits = (size_t)(end - dot - 1);
        if (digits == 0 || digits > 9)
                return false;
        for (size_t i = digits; i < 9; i++)
                frac *= 10;
        *ret = sec * 1000000000ULL + frac;
        return true;
}

/* A running task logs a line at least every scheduler tick (HZ 250: 4 ms), the tick's own. */
#define TICK_SLACK_NS 4500000ULL

static void missed_switch(XrunTrace *t, Cpu *c, uint64_t now, unsigned long long running)
{
        uint64_t at = now;
        int prio = 120;
        const char *comm = "<...>";

        /* Only between tasks: inside an IRQ the line's task is the one interrupted. Its wake-up tells
         * its name and priority, and, when it woke the idle CPU within a tick of this line, when it
         * came: the idle task gives way at once. Later than a tick, the CPU sat idle in between (real-
         * time throttling holds a woken real-time task so): it came with this line. */
        if (c->depth != 1 || c->stack[0].id == running)
                return;
        for (size_t i = 0; i < ELEMENTSOF(c->wakes); i++)
                if (c->wakes[i].pid == running && c->wakes[i].at <= now) {
                        prio = c->wakes[i].prio;
                        comm = c->wakes[i].comm;
                        if (c->stack[0].id == 0 && c->wakes[i].at >= c->stack[0].since &&
                            now - c->wakes[i].at <= TICK_SLACK_NS)
                                at = c->wakes[i].at;
                }
        /* When the task before went, and whether to sleep, the trace did not say. */
        c->gap = true;
        close_top(t, c, at, false);
        c->gap = false;
        c->stack[0] = (Frame){.actor = XRUN_TASK, .id = running, .prio = prio, .since = at, .on = at};
        copy_name(c->stack[0].name, comm, strlen(comm));
}

static void on_switch(XrunTrace *t, Cpu *c, uint64_t now, const char *f, const char *end)
{
        const char *arrow = find(f, end, " ==> "), *pc, *npid, *nc;
        const char *state;
        size_t state_len;
        unsigned long long pid = 0, prio = 120;
        bool slept;

        if (!arrow)
                return;
        /* prev_state=R (or R+) was preempted; anything else went to sleep. */
        slept = !(field_word(f, arrow, " prev_state=", 0, &state, &state_len) && state_len >= 1 &&
                  state[0] == 'R');
        /* The task leaving may have changed its name (exec) or priority since it came: the cause is
         * told with what it was when it left. */
        {
                const char *pcomm = find(f, arrow, "prev_comm="), *ppid = rfind(f, arrow, " prev_pid=");
                unsigned long long prev = 0, pprio = 0;
                if (c->depth >= 1 && pcomm && ppid && ppid > pcomm &&
                    number(ppid + strlen(" prev_pid="), arrow, 10, &prev) && prev == c->stack[0].id) {
                        copy_name(c->stack[0].name, pcomm + strlen("prev_comm="),
                                  (size_t)(ppid - pcomm - strlen("prev_comm=")));
                        if (field_number(ppid, arrow, " prev_prio=", &pprio))
                                c->stack[0].prio = (int)pprio;
                }
        }
        close_top(t, c, now, slept && c->depth == 1);
        if (c->depth > 1) /* a work item that sleeps: its end, if it comes, finds the task only */
                close_top(t, c, now, false);
        c->gap = false; /* the next task is known again */
        nc = find(arrow, end, "next_comm=");
        npid = rfind(arrow, end, " next_pid=");
        pc = nc ? nc + strlen("next_comm=") : NULL;
        if (!pc || !npid || npid < pc || !number(npid + strlen(" next_pid="), end, 10, &pid))
                return;
        (void)field_number(npid, end, " next_prio=", &prio);
        c->depth = 1;
        c->stack[0] = (Frame){.actor = XRUN_TASK, .id = pid, .prio = (int)prio, .since = now, .on = now};
        copy_name(c->stack[0].name, pc, (size_t)(npid - pc));
}

/* One line of trace_pipe, without its newline; false when it is not one of ours. */
static bool trace_line(XrunTrace *t, const char *line, size_t len)
{
        const char *end = line + len, *p, *colon, *ev, *f;
        unsigned long long cpu_nr, v, id;
        uint64_t now;
        Cpu *c;

        if ((p = find(line, end, "[LOST ")) && find(line, end, "CPU:") == line) {
                if (number(p + strlen("[LOST "), end, 10, &v))
                        t->lost += v;
                /* Whatever ran there meanwhile, its switches among it: what runs now ends unsure. */
                if (number(line + strlen("CPU:"), p, 10, &cpu_nr) && (c = cpu_get(t, cpu_nr)))
                        c->gap = true;
                return true;
        }
        /* "<comm>-<pid> [cpu] flags stamp: event: fields". The comm holds anything, " [000] " too: the
         * first " [digits] " after which a time stamp and one of our events follow is the one. */
        static const char *const known[] = {
            "sched_switch",
            "sched_wakeup",
            "irq_handler_entry",
            "irq_handler_exit",
            "softirq_entry",
            "softirq_exit",
            "workqueue_execute_start",
            "workqueue_execute_end",
            "hrtimer_expire_entry",
            "hrtimer_expire_exit",
            "cpu_idle",
            "cpu_frequency",
        };
        size_t ev_len = 0;
        bool ok = false;
        for (p = line; !ok && (p = find(p, end, " [")) != NULL; p += 2) {
                const char *q = p + 2;
                while (q < end && *q >= '0' && *q <= '9')
                        q++;
                if (!(q > p + 2 && q + 1 < end && q[0] == ']' && q[1] == ' ') ||
                    !number(p + 2, q, 10, &cpu_nr))
                        continue;
                colon = find(q, end, ": ");
                if (!colon)
                        return false;
                for (ev = colon; ev > q && ev[-1] != ' '; ev--)
                        ;
                /* Between "] " and the stamp: the flags ("d..2.") and spaces, nothing else. */
                const char *g = q + 2;
                while (g < ev && *g != ' ')
                        g++;
                while (g < ev && *g == ' ')
                        g++;
                if (g != ev || !timestamp(ev, colon, &now))
                        continue;
                ev = colon + 2;
                f = find(ev, end, ": ");
                if (!f)
                        continue;
                ev_len = (size_t)(f - ev);
                for (size_t i = 0; !ok && i < ELEMENTSOF(known); i++)
                        ok = ev_len == strlen(known[i]) && memcmp(ev, known[i], ev_len) == 0;
                if (ok)
                        break; /* p stays at the " [" */
        }
        if (!ok)
                return false;
        f += 2;
        if (now > t->now)
                t->now = now;
#define IS(name) (ev_len == strlen(name) && memcmp(ev, name, ev_len) == 0)
        if (IS("cpu_frequency") || IS("cpu_idle")) {
                /* Both name the CPU they are about, which need not be the one that logged them. */
                if (!field_number(f, end, "cpu_id=", &cpu_nr) || !field_number(f, end, "state=", &v))
                        return false;
                if (!(c = cpu_get(t, cpu_nr)))
                        return false;
                if (IS("cpu_frequency")) {
                        Seg s = {.start = now, .end = now, .actor = XRUN_FREQ, .id = v, .prio = -1};
                        add_seg(t, c, &s);
                } else if (v == 4294967295ULL || (long long)v == -1) {
                        if (c->idle_state > 0) {
                                Seg s = {.start = now,
                                         .end = now,
                                         .actor = XRUN_IDLE,
                                         .id = (unsigned long long)c->idle_state,
                                         .prio = -1};
                                add_seg(t, c, &s);
                        }
                        c->idle_state = -1;
                } else
                        c->idle_state = (long long)v;
                return true;
        }
        if (!(c = cpu_get(t, cpu_nr)))
                return false;
        /* A CPU's lines come in time order; one that does not was not the kernel's. */
        if (now < c->last)
                return false;
        c->last = now;
        /* The task the line was logged in ("<comm>-<pid>" before the CPU): when it is not the one the
         * last switch put there, a switch went unlogged. */
        {
                const char *q = p;
                unsigned long long running;
                while (q > line && q[-1] == ' ')
                        q--;
                const char *d = q;
                while (d > line && d[-1] >= '0' && d[-1] <= '9')
                        d--;
                if (d < q && d > line && d[-1] == '-' && number(d, q, 10, &running))
                        missed_switch(t, c, now, running);
        }
        if (IS("sched_switch")) {
                on_switch(t, c, now, f, end);
                return true;
        }
        if (IS("sched_wakeup")) {
                /* Filed under the CPU it will run on. */
                unsigned long long target;
                const char *pid = rfind(f, end, " pid=");
                if (!pid || !number(pid + strlen(" pid="), end, 10, &id) ||
                    !field_number(pid, end, " target_cpu=", &target) || !(c = cpu_get(t, target)))
                        return false;
                Seg s = {.start = now, .end = now, .actor = XRUN_WAKE, .id = id, .prio = -1};
                add_seg(t, c, &s);
                unsigned long long prio = 120;
                const char *comm = find(f, pid, "comm=");
                (void)field_number(pid, end, " prio=", &prio);
                size_t w = c->next_wake++ % ELEMENTSOF(c->wakes);
                c->wakes[w].pid = (unsigned)id;
                c->wakes[w].prio = (int)prio;
                c->wakes[w].at = now;
                c->wakes[w].comm[0] = 0;
                if (comm)
                        copy_name(c->wakes[w].comm, comm + strlen("comm="),
                                  (size_t)(pid - comm - strlen("comm=")));
                return true;
        }
        if (IS("irq_handler_entry")) {
                const char *name;
                size_t name_len;
                if (!field_number(f, end, "irq=", &id) || !(name = find(f, end, " name=")))
                        return false;
                name += strlen(" name=");
                name_len = (size_t)(end - name);
                push(t, c, now, XRUN_IRQ, id, name, name_len);
                return true;
        }
        if (IS("irq_handler_exit")) {
                if (!field_number(f, end, "irq=", &id))
                        return false;
                pop(t, c, now, XRUN_IRQ, id, true);
                return true;
        }
        if (IS("softirq_entry") || IS("softirq_exit")) {
                const char *name = "?";
                size_t name_len = 1;
                if (!field_number(f, end, "vec=", &id))
                        return false;
                (void)field_word(f, end, "action=", ']', &name, &name_len);
                if (IS("softirq_entry"))
                        push(t, c, now, XRUN_SOFTIRQ, id, name, name_len);
                else
                        pop(t, c, now, XRUN_SOFTIRQ, id, true);
                return true;
        }
        if (IS("workqueue_execute_start") || IS("workqueue_execute_end")) {
                const char *name = "?";
                size_t name_len = 1;
                (void)field_word(f, end, "function ", 0, &name, &name_len);
                if (IS("workqueue_execute_start"))
                        push(t, c, now, XRUN_WORK, 0, name, name_len);
                else
                        pop(t, c, now, XRUN_WORK, 0, false);
                return true;
        }
        if (IS("hrtimer_expire_entry")) {
                const char *name = "?";
                size_t name_len = 1;
                (void)field_word(f, end, "function=", 0, &name, &name_len);
                push(t, c, now, XRUN_TIMER, 0, name, name_len);
                return true;
        }
        if (IS("hrtimer_expire_exit")) {
                pop(t, c, now, XRUN_TIMER, 0, false);
                return true;
        }
#undef IS
        return false;
}

void xrun_trace_feed(XrunTrace *t, const char *buf, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                if (buf[i] != '\n') {
                        if (t->line_len < sizeof(t->line))
                                t->line[t->line_len++] = buf[i];
                        else
                                t->line_overflow = true;
                        continue;
                }
                if (!t->line_overflow && t->line_len > 0)
                        (void)trace_line(t, t->line, t->line_len);
                t->line_len = 0;
                t->line_overflow = false;
        }
}

/* ---- the window ----------------------------------------------------------------------------------- */

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
                Seg open = open_seg(c, to_ns);
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
        Seg open = open_seg(c, at);
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
