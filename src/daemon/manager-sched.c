/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Scheduling-policy changes, for [Attach] rules with Threads=realtime. No kernel event announces one;
 * the syscall tracepoints of sched_setscheduler(2) and sched_setattr(2) do, in a tracefs instance of
 * rtctld's own (core/tracefs.c) whose trace_pipe is an event source here: every finished call that
 * succeeded makes its target thread's process be evaluated against the rules. Where the kernel has no
 * such tracepoints (or no tracefs), a process that creates a thread is looked at again 10 ms, 100 ms
 * and 1 s later, and then no more: with nothing pending there is no timer. */
#include <sched.h>

#include "daemon/bus-signals.h"
#include "daemon/manager.h"
#include "shared/log.h"

static const uint64_t recheck_usec[] = {10 * 1000, 100 * 1000, 1000 * 1000};
/* Processes waiting for a re-check: a fork storm costs at most this many. */
#define RECHECKS_MAX 256

/* Whether policy changes are followed: a profile needs them that is in force, or that comes back into
 * force when a hold ends without anyone choosing it (the base profile beneath a hold, a held one that
 * may outrank it). Turning the tracepoints on or off patches kernel text on every CPU and flags every
 * task (the Debian guests oopsed in the syscall tracepoint path right after it), so it happens when the
 * chosen rules change, not each time a hold without such rules comes and goes over them. */
static bool wanted(const Manager *m)
{
        if (m->stopping)
                return false;
        if (policy_uses_realtime(m->policy) || (m->base_profile && m->base_realtime))
                return true;
        for (size_t i = 0; i < m->n_holds; i++)
                if (m->holds[i]->realtime && (!m->base_profile || m->holds[i]->rank >= m->base_rank))
                        return true;
        return false;
}

/* Whether the profile in force has such a rule: only then is an event acted on. What changed while
 * it was not in force is found by the /proc scan that its coming back into force makes. */
static bool in_force(const Manager *m)
{
        return !m->stopping && policy_uses_realtime(m->policy);
}

static void on_finished_call(unsigned tid, void *userdata)
{
        if (in_force(userdata))
                manager_rules_policy_changed(userdata, tid);
}

static int on_trace(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        Manager *m = userdata;
        PolicyWatch *w = &m->policy_watch;
        char buf[16384];

        for (unsigned i = 0; i < 64; i++) {
                ssize_t n = read(fd, buf, sizeof buf);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        if (n < 0 && errno != EAGAIN)
                                log_warning_errno(-errno, "Reading the policy-change events failed: %m");
                        break;
                }
                (void)sched_events_parse(&w->trace, buf, (size_t)n, on_finished_call, m);
        }
        if (w->trace.lost) {
                w->trace.lost = false;
                if (!in_force(m))
                        return 0;
                log_warning(
                    "Policy-change events were lost (the trace buffer overflowed); scanning /proc again.");
                manager_rules_rescan(m, "policy-change events lost");
        }
        return 0;
}

static void use_recheck(Manager *m, char *why)
{
        PolicyWatch *w = &m->policy_watch;

        log_info("Following real-time threads by re-checking a process after it creates a thread, as %s.",
                 why);
        free(w->why);
        w->why = why;
        w->method = POLICY_WATCH_RECHECK;
        bus_emit_policy_events_changed(m);
}

static int start_tracepoints(Manager *m)
{
        PolicyWatch *w = &m->policy_watch;
        _cleanup_free_ char *path = xasprintf("%s/" SCHED_TRACE_JOURNAL, m->runtime_dir), *err = NULL;
        int r;

        if (!w->journal) {
                r = journal_open(path, JOURNAL_RUNTIME, &w->journal, &err);
                if (r < 0) {
                        use_recheck(m, xasprintf("the tracefs journal cannot be opened (%s)", err));
                        return r;
                }
        }
        /* What a daemon killed before it could stop left in tracefs goes first. */
        (void)sched_trace_restore(w->journal, -EBADF);
        r = sched_trace_start(w->journal, &w->fd, &err);
        if (r < 0) {
                use_recheck(m, TAKE_PTR(err));
                return r;
        }
        w->trace = (SchedTrace){};
        r = sd_event_add_io(m->event, &w->source, w->fd, EPOLLIN, on_trace, m);
        if (r < 0) {
                (void)sched_trace_restore(w->journal, w->fd);
                w->fd = -EBADF;
                use_recheck(m, xasprintf("its events cannot be followed (%s)", strerror(-r)));
                return r;
        }
        /* Where the proc connector's events are, below the pass: a storm of policy changes (a
         * program that toggles one in a loop) delays no pass, and each match costs one. */
        (void)sd_event_source_set_priority(w->source, SD_EVENT_PRIORITY_IDLE + 10);
        (void)sd_event_source_set_description(w->source, "policy-events");
        /* One call that tells how this kernel prints a syscall's arguments (core/tracefs.h). */
        sched_trace_probe();
        free(w->why);
        w->why = NULL;
        w->method = POLICY_WATCH_TRACEPOINTS;
        bus_emit_policy_events_changed(m);
        log_info("Following real-time threads through the sched_setscheduler/sched_setattr tracepoints "
                 "(tracefs instance " SCHED_TRACE_INSTANCE ").");
        return 0;
}

void manager_sched_stop(Manager *m)
{
        PolicyWatch *w;
        int r;

        assert(m);
        w = &m->policy_watch;

        w->source = sd_event_source_disable_unref(w->source);
        w->linger = sd_event_source_disable_unref(w->linger);
        w->timer = sd_event_source_disable_unref(w->timer);
        free(w->rechecks);
        w->rechecks = NULL;
        w->n_rechecks = w->rechecks_allocated = 0;
        if (w->journal) {
                r = sched_trace_restore(w->journal, w->fd);
                if (r < 0)
                        log_warning_errno(
                            r, "Failed to remove what rtctld made in tracefs: %m; `rtctl restore` "
                               "tries again");
        } else if (w->fd >= 0)
                close(w->fd);
        w->fd = -EBADF;
        journal_free(w->journal);
        w->journal = NULL;
        free(w->why);
        w->why = NULL;
        if (w->method == POLICY_WATCH_TRACEPOINTS)
                log_info("No longer following policy changes through the tracepoints (%s); tracefs "
                         "instance " SCHED_TRACE_INSTANCE " removed.",
                         m->stopping ? "rtctld stops"
                                     : "no profile in force or held has a Threads=realtime rule");
        if (w->method != POLICY_WATCH_NONE) {
                w->method = POLICY_WATCH_NONE;
                bus_emit_policy_events_changed(m);
        }
}

/* How long the tracing stays on after the last hold that wanted it ended, where the base profile does
 * not: HoldProfile is the active session's without a password, and a loop of holds and releases must
 * not patch kernel text at its own pace. At most one switch off (and on) a minute this way. */
#define HOLD_LINGER_USEC (60 * 1000 * 1000ULL)

static int on_linger(sd_event_source *s, uint64_t usec, void *userdata)
{
        Manager *m = userdata;

        m->policy_watch.linger = sd_event_source_disable_unref(m->policy_watch.linger);
        if (!wanted(m))
                manager_sched_stop(m);
        return 0;
}

void manager_sched_update(Manager *m)
{
        PolicyWatch *w;
        int r;

        assert(m);
        w = &m->policy_watch;

        if (!wanted(m)) {
                if (m->stopping || w->method == POLICY_WATCH_NONE || !w->for_holds) {
                        manager_sched_stop(m);
                        return;
                }
                if (!w->linger) {
                        r = sd_event_add_time_relative(m->event, &w->linger, CLOCK_MONOTONIC,
                                                       HOLD_LINGER_USEC, 1000 * 1000, on_linger, m);
                        if (r < 0) {
                                log_warning_errno(r, "Failed to arm the tracing's linger: %m, ignoring");
                                manager_sched_stop(m);
                        } else
                                (void)sd_event_source_set_description(w->linger, "policy-linger");
                }
                return;
        }
        w->linger = sd_event_source_disable_unref(w->linger);
        /* Wanted for a hold only: its end lingers (above). */
        w->for_holds = !(m->base_profile && m->base_realtime);
        if (w->method == POLICY_WATCH_NONE)
                (void)start_tracepoints(m);
}

static int on_recheck(sd_event_source *s, uint64_t usec, void *userdata);

/* The timer runs for the earliest re-check, and not at all when none is pending. */
static void arm(Manager *m)
{
        PolicyWatch *w = &m->policy_watch;
        uint64_t due = UINT64_MAX;
        int r;

        for (size_t i = 0; i < w->n_rechecks; i++)
                due = MIN(due, w->rechecks[i].due);
        if (due == UINT64_MAX) {
                w->timer = sd_event_source_disable_unref(w->timer);
                return;
        }
        if (w->timer) {
                (void)sd_event_source_set_time(w->timer, due);
                (void)sd_event_source_set_enabled(w->timer, SD_EVENT_ONESHOT);
                return;
        }
        r = sd_event_add_time(m->event, &w->timer, CLOCK_MONOTONIC, due, 1000, on_recheck, m);
        if (r < 0)
                log_warning_errno(r, "Failed to arm the policy re-check: %m, ignoring");
        else
                (void)sd_event_source_set_description(w->timer, "policy-recheck");
}

static int on_recheck(sd_event_source *s, uint64_t usec, void *userdata)
{
        Manager *m = userdata;
        PolicyWatch *w = &m->policy_watch;
        uint64_t now = now_usec(CLOCK_MONOTONIC);

        for (size_t i = 0; i < w->n_rechecks;) {
                PolicyRecheck *c = &w->rechecks[i];
                unsigned pid = c->pid;
                if (c->due > now) {
                        i++;
                        continue;
                }
                if (++c->stage < ELEMENTSOF(recheck_usec)) {
                        c->due = now + recheck_usec[c->stage] - recheck_usec[c->stage - 1];
                        i++;
                } else
                        w->rechecks[i] = w->rechecks[--w->n_rechecks];
                manager_rules_recheck(m, pid);
        }
        arm(m);
        return 0;
}

/* A thread born real-time (created by a real-time thread with the default PTHREAD_INHERIT_SCHED, or
 * with SCHED_RESET_ON_FORK clear) makes no policy call the tracepoints could see: its process is
 * evaluated when it is created, so that a rule matching on a real-time thread sees it as well. One
 * sched_getscheduler() per thread created in an unmatched process, and an evaluation for a real-time
 * one. */
static bool born_realtime(unsigned pid, unsigned tid)
{
        int policy;

        if (tid == 0 || tid == pid) /* 0 would be rtctld itself */
                return false;
        policy = sched_getscheduler((pid_t)tid);
        return policy >= 0 && attach_policy_realtime(policy);
}

void manager_sched_thread_created(Manager *m, unsigned pid, unsigned tid, bool matched)
{
        PolicyWatch *w;

        assert(m);
        w = &m->policy_watch;

        if (w->method == POLICY_WATCH_TRACEPOINTS) {
                /* Only a graph: term can start to hold without an event of its own (exec, comm and
                 * policy changes have theirs): without one, a thread's birth tells nothing new. */
                if (!matched && in_force(m) && m->policy->attach->uses_graph && born_realtime(pid, tid)) {
                        log_debug("Thread %u of process %u was born real-time.", tid, pid);
                        if (!manager_rules_recheck(m, pid))
                                manager_sched_recheck_later(m, pid);
                }
                return;
        }
        if (w->method == POLICY_WATCH_RECHECK && in_force(m))
                manager_sched_recheck_later(m, pid);
}

void manager_sched_recheck_later(Manager *m, unsigned pid)
{
        PolicyWatch *w;
        PolicyRecheck *c = NULL;

        assert(m);
        w = &m->policy_watch;

        for (size_t i = 0; i < w->n_rechecks && !c; i++)
                if (w->rechecks[i].pid == pid)
                        c = &w->rechecks[i];
        if (!c) {
                if (w->n_rechecks >= RECHECKS_MAX)
                        return;
                GREEDY_REALLOC(w->rechecks, w->rechecks_allocated, w->n_rechecks + 1);
                c = &w->rechecks[w->n_rechecks++];
        }
        /* A new thread, or a new real-time one, starts the count again. */
        *c = (PolicyRecheck){.pid = pid, .due = now_usec(CLOCK_MONOTONIC) + recheck_usec[0]};
        arm(m);
}

char *manager_sched_method(const Manager *m)
{
        assert(m);

        switch (m->policy_watch.method) {
        case POLICY_WATCH_TRACEPOINTS:
                return xstrdup("tracepoints");
        case POLICY_WATCH_RECHECK:
                return xasprintf("re-check after thread creation: %s", strempty(m->policy_watch.why));
        case POLICY_WATCH_NONE:
                break;
        }
        return xstrdup("");
}
