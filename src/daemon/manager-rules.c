/* SPDX-License-Identifier: GPL-2.0-or-later */
/* [Attach] rules at run time: processes found by one /proc scan when a profile is applied (and after
 * events were lost), then followed through the kernel's process events. An event costs a look-up, or
 * one read of /proc/PID/comm for an exec; only a match schedules a pass, and that pass plans the
 * attached processes and threads alone. What rules matched is recomputed, never saved: a restarted
 * daemon scans again. */
#include <sched.h>
#include <systemd/sd-login.h>

#include "daemon/bus-signals.h"
#include "daemon/manager.h"
#include "shared/log.h"

static const AttachRules *rules(const Manager *m)
{
        return m->policy ? m->policy->attach : NULL;
}

static const AttachRule *rule_of(const Manager *m, const RuleMatch *x)
{
        return &rules(m)->rules[x->rule];
}

static RuleMatch *find_match(Manager *m, unsigned pid)
{
        for (size_t i = 0; i < m->n_matches; i++)
                if (m->matches[i].pid == pid)
                        return &m->matches[i];
        return NULL;
}

static void drop_match(Manager *m, RuleMatch *x)
{
        size_t i = (size_t)(x - m->matches);

        memmove(x, x + 1, sizeof(RuleMatch) * (m->n_matches - i - 1));
        m->n_matches--;
        m->matches_full = false;
}

static void schedule_attach(Manager *m, const char *rule)
{
        _cleanup_free_ char *reason = xasprintf("attach rule %s", rule);

        dirty_mark_device(&m->dirty, TUNER_CPUSET, CPUSET_ATTACH_DEVICE);
        manager_schedule_pass(m, reason);
}

/* A process that leaves a rule (or a thread of it that leaves the isolated CPUs) needs its journalled
 * originals back: a whole replan of the cpusets restores what no longer is wanted. */
static void schedule_restore(Manager *m, const char *reason)
{
        dirty_mark_full(&m->dirty, TUNER_CPUSET);
        manager_schedule_pass(m, reason);
}

/* Whether pid matches a rule now; adds, updates or drops its match and schedules what that takes. */
/* Whether pid matches a rule now. */
static bool evaluate(Manager *m, unsigned pid, const char *comm)
{
        RuleMatch *x = find_match(m, pid);
        AttachProc p;
        TaskInfo t;
        int rule;

        attach_proc_init(&p, pid, comm);
        rule = attach_rules_match(rules(m), &p, m->active_uids, m->n_active_uids);
        attach_proc_clear(&p);
        if (rule < 0 || task_info(pid, &t) < 0 || (t.flags & PF_KTHREAD) || pid == 1) {
                if (x) {
                        _cleanup_free_ char *reason = xasprintf("rule %s left %u", rule_of(m, x)->name, pid);
                        _cleanup_free_ char *was = text_escape(x->comm);
                        log_info("Process %u (%s) no longer matches rule %s.", pid, was,
                                 rule_of(m, x)->name);
                        drop_match(m, x);
                        schedule_restore(m, reason);
                }
                return false;
        }
        if (x && x->rule == (unsigned)rule && x->starttime == t.starttime) {
                /* Renamed, or a policy changed, but still matched: its threads may say something new. */
                if (!rule_of(m, x)->all)
                        schedule_attach(m, rule_of(m, x)->name);
                return true;
        }
        if (x) {
                x->rule = (unsigned)rule;
                x->starttime = t.starttime;
                x->reported = false;
                schedule_restore(m, "attach rule changed");
        } else if (m->n_matches >= RULE_MATCHES_MAX) {
                if (!m->matches_full) {
                        _cleanup_free_ char *shown = text_escape(t.comm);
                        log_warning("Process %u (%s) matches rule %s, but %d processes matched already, the "
                                    "most rtctld follows: it and further matches are ignored until some go.",
                                    pid, shown, rules(m)->rules[rule].name, RULE_MATCHES_MAX);
                        m->matches_full = true;
                }
                return false;
        } else {
                GREEDY_REALLOC(m->matches, m->matches_allocated, m->n_matches + 1);
                x = &m->matches[m->n_matches++];
                *x = (RuleMatch){.pid = pid, .starttime = t.starttime, .rule = (unsigned)rule};
        }
        snprintf(x->comm, sizeof x->comm, "%.15s", t.comm);
        _cleanup_free_ char *name = text_escape(t.comm);
        log_info("Process %u (%s) matches rule %s: %s.", pid, name, rule_of(m, x)->name,
                 rule_of(m, x)->all ? "the whole process" : "by thread");
        schedule_attach(m, rule_of(m, x)->name);
        return true;
}

static void rescan(Manager *m, const char *why)
{
        TaskScan scan = {};
        const TaskInfo *t;
        size_t n;

        m->n_matches = 0;
        m->matches_full = false;
        if (!rules(m))
                return;
        log_debug("Scanning /proc for [Attach] rules (%s).", why);
        t = task_scan_all(&scan, &n);
        for (size_t i = 0; i < n; i++)
                if (!(t[i].flags & PF_KTHREAD))
                        evaluate(m, t[i].pid, t[i].comm);
        task_scan_clear(&scan);
        /* Whatever the old matches were, a whole replan puts back what none wants any more. */
        schedule_restore(m, why);
}

static void refresh_active_users(Manager *m)
{
        _cleanup_strv_free_ char **seats = NULL;
        int n;

        m->n_active_uids = 0;
        n = sd_get_seats(&seats);
        for (int i = 0; i < n; i++) {
                uid_t uid;
                if (sd_seat_get_active(seats[i], NULL, &uid) < 0)
                        continue;
                GREEDY_REALLOC(m->active_uids, m->active_uids_allocated, m->n_active_uids + 1);
                m->active_uids[m->n_active_uids++] = uid;
        }
}

static void on_proc_event(const ProcEvent *ev, void *userdata)
{
        Manager *m = userdata;
        RuleMatch *x;

        if (m->stopping)
                return;
        /* Once per overflow: the kernel says no more until the queue is read (proc-events.c). */
        if (ev->type == PROC_EV_OVERRUN)
                log_warning("Process events were lost (the socket overflowed); /proc is scanned again once "
                            "the backlog is read.");
        manager_hold_rules_event(m, ev);
        if (!rules(m))
                return;
        switch (ev->type) {
        case PROC_EV_EXEC:
                evaluate(m, ev->pid, NULL);
                break;
        case PROC_EV_COMM:
                if (ev->tid == ev->pid)
                        evaluate(m, ev->pid, ev->comm);
                else if ((x = find_match(m, ev->pid)) && !rule_of(m, x)->all)
                        schedule_attach(m, rule_of(m, x)->name);
                break;
        case PROC_EV_FORK:
                if (ev->pid == ev->tid) {
                        /* A child runs its parent's program until it execs: it may match the same rule. */
                        if (find_match(m, ev->parent_pid))
                                evaluate(m, ev->pid, NULL);
                } else {
                        /* A thread inherits its creator's policy: the pass reads the new one's at once. */
                        if ((x = find_match(m, ev->pid)) && !rule_of(m, x)->all)
                                schedule_attach(m, rule_of(m, x)->name);
                        manager_sched_thread_created(m, ev->pid, ev->tid, x != NULL);
                }
                break;
        case PROC_EV_EXIT:
                if (ev->tid == ev->pid && (x = find_match(m, ev->pid))) {
                        _cleanup_free_ char *reason =
                            xasprintf("rule %s: %u exited", rule_of(m, x)->name, ev->pid);
                        drop_match(m, x);
                        schedule_restore(m, reason);
                } else
                        manager_rules_thread_gone(m, ev->pid, ev->tid);
                break;
        case PROC_EV_OVERRUN:
                break;
        case PROC_EV_CAUGHT_UP:
                rescan(m, "process events lost");
                break;
        }
}

static int on_login_change(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        Manager *m = userdata;
        _cleanup_free_ uid_t *before = NULL;
        size_t n_before = m->n_active_uids;

        (void)sd_login_monitor_flush(m->login);
        if (n_before) {
                before = xmalloc0(sizeof(uid_t) * n_before);
                memcpy(before, m->active_uids, sizeof(uid_t) * n_before);
        }
        refresh_active_users(m);
        if (n_before == m->n_active_uids &&
            (!n_before || memcmp(before, m->active_uids, sizeof(uid_t) * n_before) == 0))
                return 0;
        if (rules(m) && rules(m)->uses_active)
                rescan(m, "active session changed");
        if (manager_hold_rules_use_active(m))
                manager_hold_rules_rescan(m, "active session changed");
        return 0;
}

/* logind's state files, watched with inotify through sd-login; where there is no logind nothing is
 * watched and user:active matches nobody. */
static void watch_logins(Manager *m)
{
        int r;

        if (m->login)
                return;
        r = sd_login_monitor_new("seat", &m->login);
        if (r < 0) {
                log_debug_errno(r, "No logind seats to watch (%m): user:active matches nobody.");
                return;
        }
        r = sd_event_add_io(m->event, &m->login_source, sd_login_monitor_get_fd(m->login),
                            (uint32_t)sd_login_monitor_get_events(m->login), on_login_change, m);
        if (r < 0) {
                log_warning_errno(r, "Failed to watch logind's seats: %m, ignoring");
                m->login = sd_login_monitor_unref(m->login);
        }
}

static void stop_watching(Manager *m)
{
        proc_monitor_free(m->procs);
        m->procs = NULL;
        m->login_source = sd_event_source_disable_unref(m->login_source);
        m->login = sd_login_monitor_unref(m->login);
}

void manager_rules_follow(Manager *m)
{
        int r;

        assert(m);

        if (!rules(m) && !m->hold_rules) {
                stop_watching(m);
                manager_sched_update(m);
                return;
        }
        /* Subscribed before a scan, so that nothing started between the two is missed. */
        if (!m->procs) {
                r = proc_monitor_new(m->event, on_proc_event, m, &m->procs);
                if (r < 0)
                        log_warning_errno(
                            r, "Cannot follow process events (%m): [Attach] rules apply to what runs "
                               "when a profile is applied only, [Hold] rules not at all.");
        }
        if ((rules(m) && rules(m)->uses_active) || manager_hold_rules_use_active(m))
                watch_logins(m);
        else {
                m->login_source = sd_event_source_disable_unref(m->login_source);
                m->login = sd_login_monitor_unref(m->login);
        }
        refresh_active_users(m);
}

void manager_rules_apply(Manager *m)
{
        assert(m);

        free(m->rule_threads);
        m->rule_threads = NULL;
        m->n_rule_threads = m->rule_threads_allocated = 0;
        m->n_matches = 0;
        manager_rules_follow(m);
        /* On before the scan, so that nothing changed between the two is missed. */
        manager_sched_update(m);
        if (rules(m))
                rescan(m, "attach rules");
}

void manager_rules_free(Manager *m)
{
        assert(m);

        manager_sched_stop(m);
        stop_watching(m);
        free(m->matches);
        free(m->active_uids);
        free(m->rule_threads);
}

void manager_rules_thread_gone(Manager *m, unsigned pid, unsigned tid)
{
        assert(m);

        for (size_t i = 0; i < m->n_rule_threads; i++) {
                AttachedThread *t = &m->rule_threads[i];
                if (t->pid != pid || t->tid != tid)
                        continue;
                /* Its cpuset went with it; a later thread with its TID is nothing of ours. */
                _cleanup_free_ char *prefix = xasprintf("/proc/%u/task/%u/", pid, tid);
                journal_forget_prefix(m->journal, prefix);
                (void)journal_save(m->journal);
                memmove(t, t + 1, sizeof(AttachedThread) * (m->n_rule_threads - i - 1));
                m->n_rule_threads--;
                bus_emit_attached_threads_changed(m);
                return;
        }
}

static bool has_pid(const TaskId *pids, size_t n, unsigned pid)
{
        for (size_t i = 0; i < n; i++)
                if (pids[i].pid == pid)
                        return true;
        return false;
}

void manager_attach_input(Manager *m, AttachInput *ret)
{
        size_t w = 0;

        assert(m);
        assert(ret);

        *ret = (AttachInput){};
        manager_prune_attached(m);
        ret->pids = manager_attached_pids(m);
        ret->n_pids = ret->pids_allocated = m->n_attached;
        /* A process whose PID now belongs to another is no longer matched. */
        for (size_t i = 0; i < m->n_matches; i++) {
                TaskInfo t;
                if (task_info(m->matches[i].pid, &t) >= 0 && t.starttime == m->matches[i].starttime)
                        m->matches[w++] = m->matches[i];
        }
        if (w != m->n_matches)
                m->matches_full = false;
        m->n_matches = w;
        for (size_t i = 0; i < m->n_matches; i++) {
                const RuleMatch *x = &m->matches[i];
                if (!rule_of(m, x)->all || has_pid(ret->pids, ret->n_pids, x->pid))
                        continue;
                GREEDY_REALLOC(ret->pids, ret->pids_allocated, ret->n_pids + 1);
                ret->pids[ret->n_pids++] = (TaskId){x->pid, x->starttime};
        }
        /* A process attached whole (by the user or a rule) needs no thread of it placed. */
        for (size_t i = 0; i < m->n_matches; i++) {
                const RuleMatch *x = &m->matches[i];
                size_t first = ret->n_threads;

                if (rule_of(m, x)->all || has_pid(ret->pids, ret->n_pids, x->pid))
                        continue;
                (void)attach_list_threads(rule_of(m, x), x->pid, &ret->threads, &ret->n_threads,
                                          &ret->threads_allocated);
                for (size_t j = first; j < ret->n_threads; j++)
                        ret->threads[j].starttime = x->starttime;
        }
}

/* One line at info when a pass first sends threads of a by-thread match to the isolated CPUs, and
 * whenever their count changes, down to none: "matches rule" alone does not say whether anything moved.
 * A match that has no wanted thread yet (PipeWire before its data loop exists) says so at debug only.
 * A process attached whole (rtctl attach, rtctl run) has no threads listed: it is all there. */
static void report_placed(Manager *m, const AttachInput *in)
{
        for (size_t i = 0; i < m->n_matches; i++) {
                RuleMatch *x = &m->matches[i];
                const AttachRule *r = rule_of(m, x);
                const char *wanted = r->names_need_realtime && (r->realtime || !r->thread_globs)
                                         ? "real-time"
                                     : r->names_need_realtime ? "real-time and named as Threads= says"
                                     : r->realtime && r->thread_globs ? "real-time or named as Threads= says"
                                     : r->realtime                    ? "real-time"
                                                                      : "named as Threads= says";
                unsigned n = 0;

                if (r->all || has_pid(in->pids, in->n_pids, x->pid))
                        continue;
                for (size_t j = 0; j < m->n_rule_threads; j++)
                        n += m->rule_threads[j].pid == x->pid;
                if (x->reported && n == x->placed)
                        continue;
                _cleanup_free_ char *name = text_escape(x->comm);
                if (n > 0)
                        log_info("Process %u (%s), rule %s: %u of its threads go to the isolated CPUs.",
                                 x->pid, name, r->name, n);
                else if (x->reported)
                        log_info(
                            "Process %u (%s), rule %s: none of its threads goes to the isolated CPUs any "
                            "more (none is %s).",
                            x->pid, name, r->name, wanted);
                else
                        log_debug(
                            "Process %u (%s), rule %s: none of its threads goes to the isolated CPUs yet "
                            "(none is %s).",
                            x->pid, name, r->name, wanted);
                x->reported = true;
                x->placed = n;
        }
}

/* What the pass placed is what status shows: the isolated threads it planned. */
void manager_rules_note_pass(Manager *m, const AttachInput *in)
{
        assert(m);
        assert(in);

        free(m->rule_threads);
        m->rule_threads = NULL;
        m->n_rule_threads = m->rule_threads_allocated = 0;
        for (size_t i = 0; i < in->n_threads; i++) {
                if (!in->threads[i].isolate)
                        continue;
                GREEDY_REALLOC(m->rule_threads, m->rule_threads_allocated, m->n_rule_threads + 1);
                m->rule_threads[m->n_rule_threads++] = in->threads[i];
        }
        report_placed(m, in);
}

void attach_input_clear(AttachInput *a)
{
        assert(a);

        free(a->pids);
        free(a->threads);
        *a = (AttachInput){};
}

const char *manager_rule_name(const Manager *m, const RuleMatch *x)
{
        assert(m);
        assert(x);

        return rule_of(m, x)->name;
}

bool manager_rule_whole(const Manager *m, const RuleMatch *x)
{
        assert(m);
        assert(x);

        return rule_of(m, x)->all;
}

void manager_rules_policy_changed(Manager *m, unsigned tid)
{
        unsigned pid;

        assert(m);

        if (m->stopping || !rules(m) || attach_thread_tgid(tid, &pid) < 0)
                return;
        int policy = sched_getscheduler((pid_t)tid);
        log_debug("Thread %u of process %u changed its scheduling policy (now %s).", tid, pid,
                  sched_policy_name(policy));
        /* A native PipeWire client's data loop turns real-time when its node is made, before the
         * client maps the graph's memory: a graph: term cannot match yet, and no later event of its
         * own says when it can. Looked at again 10 ms, 100 ms and 1 s later. */
        if (!evaluate(m, pid, NULL) && policy >= 0 && attach_policy_realtime(policy) && rules(m)->uses_graph)
                manager_sched_recheck_later(m, pid);
}

void manager_rules_rescan(Manager *m, const char *why)
{
        assert(m);
        assert(why);

        if (!m->stopping)
                rescan(m, why);
}

bool manager_rules_recheck(Manager *m, unsigned pid)
{
        assert(m);

        return !m->stopping && rules(m) && evaluate(m, pid, NULL);
}
