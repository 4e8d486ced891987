/* SPDX-License-Identifier: GPL-2.0-or-later */
/* rtctl xruns's trace reader (src/core/xruns*.c): trace_pipe's text, in the kernel's format, into what
 * took the time on an audio CPU while the audio thread waited. The host tests (tests/integration/
 * test_xruns.py) make the disturbances for real; this host cannot drive a device IRQ on the audio CPU
 * hard enough to cause xruns (see there), so the IRQ's attribution is checked here on a trace. */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/smi.h"
#include "core/xruns.h"
#include "shared/sysfs.h"
#include "test.h"

/* TID 600 is the audio thread (SCHED_FIFO 10: kernel prio 89). */
static int audio_600(unsigned tid, const char *comm, int prio, void *userdata)
{
        (void)comm;
        (void)prio;
        (void)userdata;
        return tid == 600;
}

#define SW(cpu, t, pcomm, ppid, pprio, pstate, ncomm, npid, nprio)                                          \
        "           " pcomm "-" #ppid "     [00" #cpu "] d..2.   " t ": sched_switch: prev_comm=" pcomm     \
        " prev_pid=" #ppid " prev_prio=" #pprio " prev_state=" pstate " ==> next_comm=" ncomm               \
        " next_pid=" #npid " next_prio=" #nprio "\n"
#define WAKE(cpu, t, comm, pid, prio) WAKE_IN(cpu, t, "<idle>-0", comm, pid, prio)
/* A wake-up logged while running (the line's prefix): the task that runs, and the one woken. */
#define WAKE_IN(cpu, t, running, comm, pid, prio)                                                           \
        "          " running "       [00" #cpu "] dNh4.   " t ": sched_wakeup: comm=" comm " pid=" #pid     \
        " prio=" #prio " target_cpu=00" #cpu "\n"

static XrunCause *causes(XrunTrace *t, uint64_t from, uint64_t to, size_t *n)
{
        XrunCause *c = NULL;
        unsigned cpu = 1;

        CHECK_INTEQ(xrun_trace_causes(t, &cpu, 1, from, to, 20000, audio_600, NULL, &c, n), 0);
        return c;
}

static const XrunCause *find(XrunCause *c, size_t n, XrunActor a)
{
        for (size_t i = 0; i < n; i++)
                if (c[i].actor == a)
                        return &c[i];
        return NULL;
}

#define S(sec) ((uint64_t)(sec)*1000000000ULL)

/* c is there, and is id (name, when given) with ns. */
static void check_cause(const XrunCause *c, unsigned long long id, const char *name, uint64_t ns)
{
        CHECK(c);
        if (!c)
                return;
        CHECK_INTEQ(c->id, id);
        if (name)
                CHECK_STREQ(c->name, name);
        CHECK_INTEQ(c->ns, ns);
}

TEST(a_higher_priority_task_that_preempts_the_audio_thread)
{
        _cleanup_xrun_trace_ XrunTrace *t = xrun_trace_new(S(3));
        const char *trace = SW(1, "100.000000", "swapper/1", 0, 120, "R", "jackd", 600, 89)
            /* 1 ms in, the burst preempts it for 5 ms (prev_state R: preempted, still runnable) */
            SW(1, "100.001000", "jackd", 600, 89, "R", "burst", 700, 49)
                SW(1, "100.006000", "burst", 700, 49, "S", "jackd", 600, 89)
                    SW(1, "100.007000", "jackd", 600, 89, "S", "swapper/1", 0, 120);
        size_t n;

        xrun_trace_feed(t, trace, strlen(trace));
        XrunCause *c = causes(t, S(100), S(100) + 8000000, &n);
        CHECK(n >= 1);
        CHECK_INTEQ(c[0].actor, XRUN_TASK);
        CHECK_INTEQ(c[0].id, 700);
        CHECK_STREQ(c[0].name, "burst");
        CHECK_INTEQ(c[0].prio, 49);
        CHECK_INTEQ(c[0].ns, 5000000);
        /* The audio thread's own work: 2 ms between its wake-up and its sleep, the burst left out. */
        check_cause(find(c, n, XRUN_OVER), 600, NULL, 2000000);
        xrun_causes_free(c, n);
}

TEST(an_irq_inside_the_audio_threads_run_is_the_irqs)
{
        _cleanup_xrun_trace_ XrunTrace *t = xrun_trace_new(S(3));
        const char *trace = SW(
            1, "100.000000", "swapper/1", 0, 120, "R", "jackd", 600,
            89) "           jackd-600     [001] d.h1.   100.000500: irq_handler_entry: irq=45 "
                "name=xhci_hcd\n"
                "           jackd-600     [001] d.h1.   100.000810: irq_handler_exit: irq=45 ret=handled\n"
                "           jackd-600     [001] ..s1.   100.000810: softirq_entry: vec=4 [action=BLOCK]\n"
                "           jackd-600     [001] ..s1.   100.000900: softirq_exit: vec=4 [action=BLOCK]\n" SW(
                    1, "100.002000", "jackd", 600, 89, "S", "swapper/1", 0, 120);
        size_t n;

        xrun_trace_feed(t, trace, strlen(trace));
        XrunCause *c = causes(t, S(100), S(100) + 3000000, &n);
        check_cause(find(c, n, XRUN_IRQ), 45, "xhci_hcd", 310000);
        const XrunCause *soft = find(c, n, XRUN_SOFTIRQ);
        CHECK(soft);
        CHECK_STREQ(soft->name, "BLOCK");
        CHECK_INTEQ(soft->ns, 90000);
        /* 2 ms of run, 400 µs of it the IRQ's and the softirq's. */
        CHECK_INTEQ(find(c, n, XRUN_OVER)->ns, 1600000);
        xrun_causes_free(c, n);
}

TEST(a_task_counts_only_while_the_audio_thread_waits)
{
        _cleanup_xrun_trace_ XrunTrace *t = xrun_trace_new(S(3));
        /* updatedb runs 4 ms while the audio thread sleeps: no delay. Then the audio thread is woken
         * at 100.005 and updatedb keeps the CPU 700 µs more (a kernel section that does not preempt). */
        const char *trace = SW(1, "100.000000", "swapper/1", 0, 120, "R", "updatedb", 800, 120)
            WAKE_IN(1, "100.005000", "updatedb-800", "jackd", 600, 89)
                SW(1, "100.005700", "updatedb", 800, 120, "R", "jackd", 600, 89)
                    SW(1, "100.006000", "jackd", 600, 89, "S", "swapper/1", 0, 120);
        size_t n;

        xrun_trace_feed(t, trace, strlen(trace));
        XrunCause *c = causes(t, S(100), S(100) + 7000000, &n);
        CHECK(n >= 1);
        CHECK_INTEQ(c[0].actor, XRUN_TASK);
        CHECK_STREQ(c[0].name, "updatedb");
        CHECK_INTEQ(c[0].ns, 700000);
        xrun_causes_free(c, n);
}

TEST(work_items_idle_exits_and_exec_renames)
{
        _cleanup_xrun_trace_ XrunTrace *t = xrun_trace_new(S(3));
        const char *trace =
            "          <idle>-0       [001] d..1.   99.999000: cpu_idle: state=3 cpu_id=1\n" WAKE(
                1, "100.000000", "kworker/1:1", 900, 120)
                WAKE(1, "100.000000", "jackd", 600,
                     89) "          <idle>-0       [001] d..1.   100.000050: cpu_idle: state=4294967295 "
                         "cpu_id=1\n" SW(1, "100.000100", "swapper/1", 0, 120, "R", "kworker/1:1", 900,
                                         120) "     kworker/1:1-900     [001] ...1.   100.000100: "
                                              "workqueue_execute_start: work struct "
                                              "00000000a1b2c3d4: function vmstat_update\n"
                                              "     kworker/1:1-900     [001] ...1.   100.000400: "
                                              "workqueue_execute_end: work struct "
                                              "00000000a1b2c3d4: function vmstat_update\n" SW(
                                                  1, "100.000400", "kworker/1:1", 900, 120, "I", "jackd",
                                                  600, 89)
            /* it execs and comes back under another name: one task */
            SW(1, "100.000500", "jackd", 600, 89, "R", "chrt", 950, 120)
                SW(1, "100.000700", "python3", 950, 49, "R", "jackd", 600, 89)
                    SW(1, "100.001000", "jackd", 600, 89, "S", "swapper/1", 0, 120);
        size_t n;

        xrun_trace_feed(t, trace, strlen(trace));
        XrunCause *c = causes(t, S(100) - 2000000, S(100) + 2000000, &n);
        const XrunCause *work = find(c, n, XRUN_WORK), *idle = find(c, n, XRUN_IDLE),
                        *task = find(c, n, XRUN_TASK);
        CHECK(work);
        CHECK_STREQ(work->name, "vmstat_update");
        CHECK_STREQ(work->comm, "kworker/1:1");
        CHECK_INTEQ(work->ns, 300000);
        check_cause(idle, 3, NULL, 1); /* a count */
        check_cause(task, 950, "python3", 200000);
        CHECK(task && task->prio == 49);
        xrun_causes_free(c, n);
}

/* The causes of a 6 ms window of trace on a trace of its own. */
static XrunCause *causes_of(const char *trace, size_t *n)
{
        _cleanup_xrun_trace_ XrunTrace *t = xrun_trace_new(S(3));

        xrun_trace_feed(t, trace, strlen(trace));
        return causes(t, S(100), S(100) + 6000000, n);
}

/* jackd (kernel prio p) preempted and runnable at 100.001; a SCHED_OTHER task, make, runs 3 ms. */
#define JACKD_PREEMPTED_BY_MAKE(p)                                                                          \
        SW(1, "100.000000", "swapper/1", 0, 120, "R", "jackd", 600, p)                                      \
        SW(1, "100.001000", "jackd", 600, p, "R", "make", 951, 120)                                         \
        SW(1, "100.004000", "make", 951, 120, "R", "jackd", 600, p)                                         \
        SW(1, "100.005000", "jackd", 600, p, "S", "swapper/1", 0, 120)

TEST(a_task_that_is_not_realtime_running_while_one_waits_is_a_stall)
{
        /* jackd real-time (FIFO 10): only real-time throttling lets make run, so it is a stall named
         * after it, not a task that took the time. */
        size_t n;
        XrunCause *c = causes_of(JACKD_PREEMPTED_BY_MAKE(89), &n);
        check_cause(find(c, n, XRUN_STALL), 0, "make", 3000000);
        CHECK(!find(c, n, XRUN_TASK));
        xrun_causes_free(c, n);

        /* jackd of SCHED_OTHER: make competes with it for real. */
        c = causes_of(JACKD_PREEMPTED_BY_MAKE(120), &n);
        check_cause(find(c, n, XRUN_TASK), 951, "make", 3000000);
        CHECK(!find(c, n, XRUN_STALL));
        xrun_causes_free(c, n);
}

/* A kernel without preemption (PREEMPT_NONE, as this host's): make, niced, was running when the timer
 * woke jackd (FIFO 10) and kept the CPU 1 ms more, inside a system call, before it switched. The timer's
 * interrupt splits make's run in two, and the second half starts while jackd waits; but make was given
 * the CPU before jackd woke: it held the CPU, a task, not a stall that only throttling allows. */
TEST(a_task_that_held_the_cpu_when_the_audio_thread_woke_is_no_stall)
{
        const char *trace = SW(
            1, "100.000000", "jackd", 600, 89, "S", "make", 951,
            130) "          make-951       [001] d.h2.   "
                 "100.000500: hrtimer_expire_entry: "
                 "hrtimer=00000000aa function="
                 "hrtimer_wakeup now=100000500000\n" WAKE_IN(
                     1, "100.000501", "make-951", "jackd", 600,
                     89) "          make-951       [001] d.h1.   100.000502: hrtimer_expire_exit: "
                         "hrtimer=00000000aa\n" SW(1, "100.001500", "make", 951, 130, "R", "jackd", 600, 89)
                             SW(1, "100.002000", "jackd", 600, 89, "S", "swapper/1", 0, 120);
        size_t n;
        XrunCause *c = causes_of(trace, &n);
        check_cause(find(c, n, XRUN_TASK), 951, "make", 998000);
        CHECK(!find(c, n, XRUN_STALL));
        xrun_causes_free(c, n);
}

TEST(a_switch_away_from_idle_the_trace_leaves_out)
{
        _cleanup_xrun_trace_ XrunTrace *t = xrun_trace_new(S(3));
        /* 6.18 here logs no switch away from the idle task: the burst is seen by the lines logged in it,
         * its time from its wake-up on the idle CPU (within a tick of its first line), its name from its
         * wake-up. The audio thread waits from 100.0015. */
        const char *trace = SW(1, "100.000000", "jackd", 600, 89, "S", "swapper/1", 0, 120)
            WAKE(1, "100.001000", "burst", 700, 4) WAKE_IN(1, "100.001500", "<...>-700", "jackd", 600, 89)
                SW(1, "100.006000", "burst", 700, 4, "S", "jackd", 600, 89)
                    SW(1, "100.007000", "jackd", 600, 89, "S", "swapper/1", 0, 120);
        size_t n;

        xrun_trace_feed(t, trace, strlen(trace));
        XrunCause *c = causes(t, S(100), S(100) + 8000000, &n);
        const XrunCause *burst = find(c, n, XRUN_TASK);
        /* Charged while the audio thread waited: 100.0015 to 100.006. */
        check_cause(burst, 700, "burst", 4500000);
        CHECK(burst && burst->prio == 4);
        xrun_causes_free(c, n);

        /* Woken, then nothing for 40 ms (throttled: no tick came), then its first line: the CPU was
         * idle while the audio thread waited, a stall. */
        const char *stall =
            WAKE(1, "100.010000", "jackd", 600, 89) WAKE_IN(1, "100.050000", "<...>-600", "other", 650, 120)
                SW(1, "100.051000", "jackd", 600, 89, "S", "swapper/1", 0, 120);
        xrun_trace_feed(t, stall, strlen(stall));
        c = causes(t, S(100) + 9000000, S(100) + 52000000, &n);
        check_cause(find(c, n, XRUN_STALL), 0, "idle", 40000000);
        xrun_causes_free(c, n);
}

TEST(lines_cut_anywhere_forged_comms_and_lost_events)
{
        _cleanup_xrun_trace_ XrunTrace *t = xrun_trace_new(S(3));
        /* A comm that looks like the start of a line ("x [001] d 1.0: ") must not move the time. */
        const char *trace = SW(
            1, "100.000000", "swapper/1", 0, 120, "R", "jackd", 600,
            89) "           x [000] d 1.0: -601     [001] d..2.   100.001000: sched_switch: prev_comm=jackd "
                "prev_pid=600 prev_prio=89 prev_state=R ==> next_comm=x [000] d 1.0: next_pid=601 "
                "next_prio=9\n" SW(1, "100.003000", "x [000] d 1.0:", 601, 9, "S", "jackd", 600,
                                   89) "CPU:1 [LOST 17 EVENTS]\n"
                                       "garbage without a cpu\n";
        size_t n;

        /* Byte by byte. */
        for (size_t i = 0; i < strlen(trace); i++)
                xrun_trace_feed(t, trace + i, 1);
        CHECK_INTEQ(xrun_trace_lost(t), 17);
        CHECK_INTEQ(xrun_trace_now(t), S(100) + 3000000);
        XrunCause *c = causes(t, S(100), S(100) + 4000000, &n);
        check_cause(find(c, n, XRUN_TASK), 601, "x [000] d 1.0:", 2000000);
        xrun_causes_free(c, n);
}

/* A reader that falls behind (a busy machine: rtctl's own CPU shared with a build) loses events, and
 * then a switch the trace does not show can make two runs of a server thread that each ended in sleep
 * look like one: that is no over-budget run. */
TEST(a_run_the_trace_lost_the_end_of_is_no_over_budget_run)
{
        /* The server, TID 600, works 1 ms a cycle; the ring buffer lost what came between its first
         * run's start and its second's end, both sleeps and wake-ups among it: 3 ms that were not one
         * run. */
        _cleanup_xrun_trace_ XrunTrace *t = xrun_trace_new(S(3));
        const char *trace =
            SW(1, "100.000000", "swapper/1", 0, 120, "R", "pipewire", 600, 89) "CPU:1 [LOST 4 EVENTS]\n" SW(
                1, "100.003000", "pipewire", 600, 89, "S", "swapper/1", 0, 120)
                SW(1, "100.004000", "swapper/1", 0, 120, "R", "pipewire", 600, 89)
                    SW(1, "100.005000", "pipewire", 600, 89, "S", "swapper/1", 0, 120);
        size_t n;

        xrun_trace_feed(t, trace, strlen(trace));
        CHECK_INTEQ(xrun_trace_lost(t), 4);
        XrunCause *c = causes(t, S(100), S(100) + 6000000, &n);
        check_cause(find(c, n, XRUN_OVER), 600, NULL, 1000000);
        xrun_causes_free(c, n);
        /* Only the lost stretch in the window: no over-budget cause at all, not one of 0 µs. */
        c = causes(t, S(100), S(100) + 3000000, &n);
        CHECK(!find(c, n, XRUN_OVER));
        xrun_causes_free(c, n);

        /* No event lost, but the switch of its first sleep unlogged all the same (the line of another
         * task is the first sign): that run's end is unsure too, and no run goes across it. */
        _cleanup_xrun_trace_ XrunTrace *u = xrun_trace_new(S(3));
        const char *unlogged = SW(1, "200.000000", "swapper/1", 0, 120, "R", "pipewire", 600, 89)
            WAKE_IN(1, "200.002000", "other-650", "kworker/1:1", 40, 120)
                SW(1, "200.002500", "other", 650, 120, "S", "pipewire", 600, 89)
                    SW(1, "200.003500", "pipewire", 600, 89, "S", "swapper/1", 0, 120);
        xrun_trace_feed(u, unlogged, strlen(unlogged));
        c = causes(u, S(200), S(200) + 4000000, &n);
        check_cause(find(c, n, XRUN_OVER), 600, NULL, 1000000);
        xrun_causes_free(c, n);
}

/* TIDs 600 (a server's data loop) and 601 (its client's process thread) are the graph's. */
static int audio_600_601(unsigned tid, const char *comm, int prio, void *userdata)
{
        (void)comm;
        (void)prio;
        (void)userdata;
        return tid == 600 || tid == 601;
}

/* A switch on cpu 1 at t µs (since 100 s): prev sleeps, next runs; both at kernel prio 11 (FIFO 88). */
static void switch_at(XrunTrace *t, uint64_t us, const char *prev, unsigned ppid, const char *next,
                      unsigned npid)
{
        char line[512];

        snprintf(line, sizeof line,
                 "           %s-%u     [001] d..2.   %llu.%06llu: sched_switch: prev_comm=%s prev_pid=%u "
                 "prev_prio=11 prev_state=S ==> next_comm=%s next_pid=%u next_prio=11\n",
                 prev, ppid, (unsigned long long)(100 + us / 1000000), (unsigned long long)(us % 1000000),
                 prev, ppid, next, npid);
        xrun_trace_feed(t, line, strlen(line));
}

/* A client over its budget works 3.5 ms of a 2.67 ms period every cycle; its server 20 µs a cycle, but
 * once 5 ms (on a busy machine's VM: the server's one run that the host stretched). Each thread's
 * typical run tells them apart: the client's is its longest, the server's a fraction of the period. */
TEST(a_thread_over_its_budget_every_cycle_and_one_long_run_once)
{
        _cleanup_xrun_trace_ XrunTrace *t = xrun_trace_new(S(3));
        uint64_t us = 0;
        size_t n;

        switch_at(t, us, "swapper/1", 0, "xrun-client", 601);
        for (unsigned cycle = 0; cycle < 8; cycle++) {
                us += 3500;
                switch_at(t, us, "xrun-client", 601, "pipewire", 600);
                us += cycle == 5 ? 5000 : 20;
                switch_at(t, us, "pipewire", 600, "xrun-client", 601);
        }
        XrunCause *c = NULL;
        unsigned cpu = 1;
        CHECK_INTEQ(
            xrun_trace_causes(t, &cpu, 1, S(100), S(100) + us * 1000, 20000, audio_600_601, NULL, &c, &n),
            0);
        const XrunCause *client = NULL, *server = NULL;
        for (size_t i = 0; i < n; i++)
                if (c[i].actor == XRUN_OVER)
                        *(c[i].id == 601 ? &client : &server) = &c[i];
        CHECK(client && server);
        if (client && server) {
                CHECK_INTEQ(client->ns, 3500000);
                CHECK_INTEQ(client->typical_ns, 3500000);
                CHECK_INTEQ(server->ns, 5000000);
                CHECK_INTEQ(server->typical_ns, 20000);
        }
        xrun_causes_free(c, n);
}

TEST(the_busy_stretch_before_a_window)
{
        _cleanup_xrun_trace_ XrunTrace *t = xrun_trace_new(S(3));
        /* Idle until 100.000, then busy without a break (a burst, then the catch-up) to 100.030. */
        const char *trace = SW(1, "99.990000", "jackd", 600, 89, "S", "swapper/1", 0, 120)
            SW(1, "100.000000", "swapper/1", 0, 120, "R", "burst", 700, 49)
                SW(1, "100.020000", "burst", 700, 49, "S", "jackd", 600, 89)
                    SW(1, "100.030000", "jackd", 600, 89, "S", "swapper/1", 0, 120);
        unsigned cpu = 1;

        xrun_trace_feed(t, trace, strlen(trace));
        CHECK_INTEQ(xrun_trace_busy_since(t, &cpu, 1, S(100) + 25000000, 20000, S(1), NULL, NULL), S(100));
        /* Idle at the time asked: it stays. */
        CHECK_INTEQ(xrun_trace_busy_since(t, &cpu, 1, S(100) + 35000000, 20000, S(1), NULL, NULL),
                    S(100) + 35000000);
        /* Never further back than asked. */
        CHECK_INTEQ(xrun_trace_busy_since(t, &cpu, 1, S(100) + 25000000, 20000, 10000000, NULL, NULL),
                    S(100) + 15000000);
}

/* A niced build keeps the CPU busy around a graph that sleeps between its cycles: the CPU is never idle
 * (without the graph, the stretch goes as far back as asked),
 * but what delayed the cycle told at 100.024 goes back to jackd's wake-up at 100.020, not to the build's
 * start 30 ms before. Where the audio thread is known, its demand says how far back. */
TEST(the_busy_stretch_is_the_graphs_beside_a_busy_build)
{
        _cleanup_xrun_trace_ XrunTrace *t = xrun_trace_new(S(3));
        const char *trace = SW(1, "99.990000", "swapper/1", 0, 120, "R", "make", 951, 130)
            WAKE_IN(1, "100.000000", "make-951", "jackd", 600, 89) SW(1, "100.000010", "make", 951, 130, "R",
                                                                      "jackd", 600, 89)
                SW(1, "100.001000", "jackd", 600, 89, "S", "make", 951, 130)
                    WAKE_IN(1, "100.010000", "make-951", "jackd", 600, 89)
                        SW(1, "100.010010", "make", 951, 130, "R", "jackd", 600, 89)
                            SW(1, "100.011000", "jackd", 600, 89, "S", "make", 951, 130)
                                WAKE_IN(1, "100.020000", "make-951", "jackd", 600, 89)
                                    SW(1, "100.020010", "make", 951, 130, "R", "jackd", 600, 89)
                                        SW(1, "100.025000", "jackd", 600, 89, "S", "make", 951, 130)
                                            SW(1, "100.030000", "make", 951, 130, "S", "swapper/1", 0, 120);
        unsigned cpu = 1;

        xrun_trace_feed(t, trace, strlen(trace));
        CHECK_INTEQ(xrun_trace_busy_since(t, &cpu, 1, S(100) + 24000000, 20000, S(1), NULL, NULL),
                    S(99) + 24000000);
        CHECK_INTEQ(xrun_trace_busy_since(t, &cpu, 1, S(100) + 24000000, 20000, S(1), audio_600, NULL),
                    S(100) + 20000000);
        /* Asleep at the time asked, the build running: nothing before it is the graph's. */
        CHECK_INTEQ(xrun_trace_busy_since(t, &cpu, 1, S(100) + 15000000, 20000, S(1), audio_600, NULL),
                    S(100) + 15000000);
}

TEST(old_segments_are_forgotten)
{
        _cleanup_xrun_trace_ XrunTrace *t = xrun_trace_new(S(1));
        char line[512];
        size_t n;

        /* 10 s of a task switching every ms: only the last second is kept. */
        for (unsigned i = 0; i < 10000; i++) {
                snprintf(line, sizeof line,
                         "           a-%u     [001] d..2.   %u.%06u: sched_switch: prev_comm=a prev_pid=%u "
                         "prev_prio=120 prev_state=S ==> next_comm=a next_pid=%u next_prio=120\n",
                         700 + i % 2, 100 + i / 1000, (i % 1000) * 1000, 700 + i % 2, 700 + (i + 1) % 2);
                xrun_trace_feed(t, line, strlen(line));
        }
        XrunCause *c = causes(t, S(100), S(110), &n);
        uint64_t sum = 0;
        for (size_t i = 0; i < n; i++)
                sum += c[i].ns;
        /* No audio thread: no demand is known, so every task counts; about 1 s of them is left. */
        CHECK(sum <= S(1) + 2000000);
        CHECK(sum >= S(1) - 2000000);
        xrun_causes_free(c, n);
}

/* TIDs 300..302 are kernel threads; 400 is a user task that calls itself irq/1-fake. */
static int kthreads_300(unsigned long long tid, void *userdata)
{
        (void)userdata;
        return tid >= 300 && tid < 400;
}

static XrunCause cause(XrunActor actor, unsigned long long id, int prio, const char *name, uint64_t ns)
{
        return (XrunCause){.actor = actor,
                           .cpu = 3,
                           .id = id,
                           .prio = prio,
                           .name = xstrdup(name),
                           .ns = ns,
                           .cost_ns = ns,
                           .last_ns = ns};
}

TEST(threaded_irq_handlers_are_their_irq)
{
        /* Biggest first, as xrun_trace_causes gives them: the hard handler after its thread. */
        XrunCause *c = xreallocarray(NULL, 5, sizeof(XrunCause));
        size_t n = 0;

        c[n++] = cause(XRUN_TASK, 300, 49, "irq/11-virtio5", 5000000);
        c[n++] = cause(XRUN_TASK, 400, 120, "irq/1-fake", 3000000);
        c[n++] = cause(XRUN_TASK, 302, 49, "irq/24-nvme0q1", 2000000);
        c[n++] = cause(XRUN_TASK, 301, 49, "irq/11-s-virtio5", 1000000);
        c[n++] = cause(XRUN_IRQ, 11, -1, "virtio5-requests", 100000);
        xrun_causes_fold_irq_threads(c, &n, kthreads_300, NULL);
        CHECK_INTEQ(n, 3);
        /* IRQ 11: both threads and the hard handler, told by the handler's whole name and the first
         * thread with its priority. */
        CHECK_INTEQ(c[0].actor, XRUN_IRQ);
        check_cause(&c[0], 11, "virtio5-requests", 6100000);
        CHECK_INTEQ(c[0].cost_ns, 6100000);
        CHECK_STREQ(c[0].comm, "irq/11-virtio5");
        CHECK_INTEQ(c[0].prio, 49);
        /* A user task's name proves nothing. */
        CHECK_INTEQ(c[1].actor, XRUN_TASK);
        check_cause(&c[1], 400, "irq/1-fake", 3000000);
        CHECK(!c[1].comm);
        /* A thread whose hard handler took too little to be listed is its IRQ all the same. */
        CHECK_INTEQ(c[2].actor, XRUN_IRQ);
        check_cause(&c[2], 24, "nvme0q1", 2000000);
        CHECK_STREQ(c[2].comm, "irq/24-nvme0q1");
        xrun_causes_free(c, n);
}

/* A /dev/cpu/N/msr as the msr driver gives it: the register at its own offset. */
static void msr_file(const char *root, unsigned cpu, off_t size, uint64_t smis)
{
        _cleanup_free_ char *dir = xasprintf("%s/dev/cpu/%u", root, cpu), *path = xasprintf("%s/msr", dir);
        int fd;

        CHECK_INTEQ(mkdir_p(dir, 0755), 0);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        CHECK(fd >= 0);
        CHECK_INTEQ(ftruncate(fd, size), 0);
        if (size >= MSR_SMI_COUNT + 8)
                CHECK_INTEQ(pwrite(fd, &smis, sizeof smis, MSR_SMI_COUNT), 8);
        close(fd);
}

TEST(the_smi_count_through_the_msr_driver)
{
        _cleanup_free_ char *root = xasprintf("%s/smi", test_tmpdir());
        uint32_t v = 0;

        sysroot_set(root);
        /* No driver: /dev/cpu/N/msr is not there at all. */
        CHECK_INTEQ(smi_count_read(0, &v), -ENOENT);
        CHECK(strstr(smi_missing_reason(-ENOENT), "modprobe msr"));
        /* The upper half is not the count's. */
        msr_file(root, 0, 4096, 0xabcd00000007ULL);
        CHECK_INTEQ(smi_count_read(0, &v), 0);
        CHECK_INTEQ(v, 7);
        /* A CPU the driver has no file for while others have one is offline. */
        CHECK_INTEQ(smi_count_read(1, &v), -ENXIO);
        /* A CPU without the register: the read comes short (the driver says EIO). */
        msr_file(root, 2, 16, 0);
        CHECK_INTEQ(smi_count_read(2, &v), -EIO);
        CHECK(strstr(smi_missing_reason(-EIO), "Intel"));
        /* The counter wraps at 32 bits: 3 SMIs across the wrap are 3. */
        CHECK_INTEQ(smi_count_since(0xfffffffeU, 1), 3);
        sysroot_set("");
}

TEST_MAIN(T(a_higher_priority_task_that_preempts_the_audio_thread),
          T(an_irq_inside_the_audio_threads_run_is_the_irqs),
          T(a_task_counts_only_while_the_audio_thread_waits), T(work_items_idle_exits_and_exec_renames),
          T(a_switch_away_from_idle_the_trace_leaves_out),
          T(a_task_that_is_not_realtime_running_while_one_waits_is_a_stall),
          T(a_task_that_held_the_cpu_when_the_audio_thread_woke_is_no_stall),
          T(lines_cut_anywhere_forged_comms_and_lost_events),
          T(a_run_the_trace_lost_the_end_of_is_no_over_budget_run),
          T(a_thread_over_its_budget_every_cycle_and_one_long_run_once), T(the_busy_stretch_before_a_window),
          T(the_busy_stretch_is_the_graphs_beside_a_busy_build), T(old_segments_are_forgotten),
          T(threaded_irq_handlers_are_their_irq), T(the_smi_count_through_the_msr_driver))
