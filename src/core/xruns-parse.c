/* SPDX-License-Identifier: GPL-2.0-or-later */
/* rtctl xruns's trace_pipe parser: the kernel's text lines, whole or cut at any byte, into the per-CPU
 * stacks of xruns.c. A thread's comm holds anything; events the kernel lost are counted, a line out of
 * time order or not one of ours is passed over, and a switch the trace did not show is found from the
 * task a line names. */
#include <string.h>

#include "core/xruns-internal.h"
#include "shared/util.h"

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
        xrun_close_top(t, c, at, false);
        c->gap = false;
        c->stack[0] = (Frame){.actor = XRUN_TASK, .id = running, .prio = prio, .since = at, .on = at};
        xrun_copy_name(c->stack[0].name, comm, strlen(comm));
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
                        xrun_copy_name(c->stack[0].name, pcomm + strlen("prev_comm="),
                                       (size_t)(ppid - pcomm - strlen("prev_comm=")));
                        if (field_number(ppid, arrow, " prev_prio=", &pprio))
                                c->stack[0].prio = (int)pprio;
                }
        }
        xrun_close_top(t, c, now, slept && c->depth == 1);
        if (c->depth > 1) /* a work item that sleeps: its end, if it comes, finds the task only */
                xrun_close_top(t, c, now, false);
        c->gap = false; /* the next task is known again */
        nc = find(arrow, end, "next_comm=");
        npid = rfind(arrow, end, " next_pid=");
        pc = nc ? nc + strlen("next_comm=") : NULL;
        if (!pc || !npid || npid < pc || !number(npid + strlen(" next_pid="), end, 10, &pid))
                return;
        (void)field_number(npid, end, " next_prio=", &prio);
        c->depth = 1;
        c->stack[0] = (Frame){.actor = XRUN_TASK, .id = pid, .prio = (int)prio, .since = now, .on = now};
        xrun_copy_name(c->stack[0].name, pc, (size_t)(npid - pc));
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
                if (number(line + strlen("CPU:"), p, 10, &cpu_nr) && (c = xrun_cpu_get(t, cpu_nr)))
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
                if (!(c = xrun_cpu_get(t, cpu_nr)))
                        return false;
                if (IS("cpu_frequency")) {
                        Seg s = {.start = now, .end = now, .actor = XRUN_FREQ, .id = v, .prio = -1};
                        xrun_add_seg(t, c, &s);
                } else if (v == 4294967295ULL || (long long)v == -1) {
                        if (c->idle_state > 0) {
                                Seg s = {.start = now,
                                         .end = now,
                                         .actor = XRUN_IDLE,
                                         .id = (unsigned long long)c->idle_state,
                                         .prio = -1};
                                xrun_add_seg(t, c, &s);
                        }
                        c->idle_state = -1;
                } else
                        c->idle_state = (long long)v;
                return true;
        }
        if (!(c = xrun_cpu_get(t, cpu_nr)))
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
                    !field_number(pid, end, " target_cpu=", &target) || !(c = xrun_cpu_get(t, target)))
                        return false;
                Seg s = {.start = now, .end = now, .actor = XRUN_WAKE, .id = id, .prio = -1};
                xrun_add_seg(t, c, &s);
                unsigned long long prio = 120;
                const char *comm = find(f, pid, "comm=");
                (void)field_number(pid, end, " prio=", &prio);
                size_t w = c->next_wake++ % ELEMENTSOF(c->wakes);
                c->wakes[w].pid = (unsigned)id;
                c->wakes[w].prio = (int)prio;
                c->wakes[w].at = now;
                c->wakes[w].comm[0] = 0;
                if (comm)
                        xrun_copy_name(c->wakes[w].comm, comm + strlen("comm="),
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
                xrun_push(t, c, now, XRUN_IRQ, id, name, name_len);
                return true;
        }
        if (IS("irq_handler_exit")) {
                if (!field_number(f, end, "irq=", &id))
                        return false;
                xrun_pop(t, c, now, XRUN_IRQ, id, true);
                return true;
        }
        if (IS("softirq_entry") || IS("softirq_exit")) {
                const char *name = "?";
                size_t name_len = 1;
                if (!field_number(f, end, "vec=", &id))
                        return false;
                (void)field_word(f, end, "action=", ']', &name, &name_len);
                if (IS("softirq_entry"))
                        xrun_push(t, c, now, XRUN_SOFTIRQ, id, name, name_len);
                else
                        xrun_pop(t, c, now, XRUN_SOFTIRQ, id, true);
                return true;
        }
        if (IS("workqueue_execute_start") || IS("workqueue_execute_end")) {
                const char *name = "?";
                size_t name_len = 1;
                (void)field_word(f, end, "function ", 0, &name, &name_len);
                if (IS("workqueue_execute_start"))
                        xrun_push(t, c, now, XRUN_WORK, 0, name, name_len);
                else
                        xrun_pop(t, c, now, XRUN_WORK, 0, false);
                return true;
        }
        if (IS("hrtimer_expire_entry")) {
                const char *name = "?";
                size_t name_len = 1;
                (void)field_word(f, end, "function=", 0, &name, &name_len);
                xrun_push(t, c, now, XRUN_TIMER, 0, name, name_len);
                return true;
        }
        if (IS("hrtimer_expire_exit")) {
                xrun_pop(t, c, now, XRUN_TIMER, 0, false);
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
