/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The loop: one pass at a time, run when the event queue drained, and what follows a pass (a retry, a
 * pass after systemd's jobs, answering the callers that wait for it). */
#include <inttypes.h>
#include <signal.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "core/systemd.h"
#include "core/tasks.h"
#include "daemon/bus-signals.h"
#include "daemon/bus-reads.h"
#include "daemon/bus.h"
#include "daemon/manager.h"
#include "daemon/polkit.h"
#include "shared/log.h"

/* The kernel's cpuset hotplug work runs asynchronously after a CPU comes online and hands the root
 * cpuset's tasks (the kernel threads that cannot leave it) every online CPU again, sometimes after the
 * pass that answered the uevent. One more pass a little later puts them back. */
#define SETTLE_USEC (100 * 1000)
/* Busy settings (EBUSY, EAGAIN) and tuners that could not plan: tried again after 100 ms, doubling, five
 * times; then they stay failures in status until the next event. */
#define RETRY_FIRST_USEC (100 * 1000)
#define RETRY_MAX        5
/* Stopping waits for the restore pass and the systemd jobs it queued, but not forever. */
#define STOP_TIMEOUT_USEC (30 * 1000 * 1000)

static void on_systemd_settled(void *userdata);

void manager_wait_for_pass(Manager *m, sd_bus_message *call)
{
        assert(m);
        assert(call);

        manager_wait_for_pass_cookie(m, call, 0);
}

int manager_new(Manager **ret)
{
        Manager *m = xmalloc0(sizeof(Manager));
        int r;

        r = sd_event_default(&m->event);
        if (r < 0) {
                free(m);
                return r;
        }
        status_init(&m->status);
        m->journal_lock = -EBADF;
        m->policy_watch.fd = -EBADF;
        m->polkit = polkit_new();
        setting_context_init(&m->kinds, m->event);
        for (size_t i = 0; i < tuners_n(); i++)
                if (tuner_nth(i)->state_new)
                        m->tuner_state[i] = tuner_nth(i)->state_new();
        systemd_client_on_settled(m->kinds.systemd, on_systemd_settled, m);
        *ret = m;
        return 0;
}

void manager_free(Manager *m)
{
        if (!m)
                return;
        for (size_t i = 0; i < m->n_waiting; i++)
                sd_bus_message_unref(m->waiting[i].reply);
        free(m->waiting);
        manager_holds_free(m);
        polkit_free(m->polkit);
        bus_reads_free(m->bus_reads);
        sd_bus_slot_unref(m->name_slot);
        sd_bus_slot_unref(m->ppd_watch);
        sd_event_source_unref(m->ppd_timer);
        sd_bus_flush_close_unref(m->bus);
        uevent_monitor_free(m->uevents);
        manager_hold_rules_free(m);
        manager_rules_free(m);
        sd_event_source_disable_unref(m->pass_source);
        sd_event_source_disable_unref(m->settle_source);
        sd_event_source_disable_unref(m->rebalance_source);
        sd_event_source_disable_unref(m->quiet_source);
        sd_event_source_disable_unref(m->retry_source);
        sd_event_source_disable_unref(m->stop_timeout);
        sd_bus_slot_unref(m->sleep_slot);
        setting_context_clear(&m->kinds);
        for (size_t i = 0; i < tuners_n(); i++)
                if (m->tuner_state[i])
                        tuner_nth(i)->state_free(m->tuner_state[i]);
        sd_event_unref(m->event);
        policy_free(m->policy);
        journal_free(m->journal);
        if (m->journal_lock >= 0)
                close(m->journal_lock);
        topology_cache_clear(&m->topology);
        task_cache_clear(&m->task_cache);
        dirty_clear(&m->dirty);
        dirty_clear(&m->retry);
        status_clear(&m->status);
        read_cache_clear(&m->reads);
        daemon_conf_clear(&m->conf);
        strv_free(m->search_path);
        free(m->runtime_dir);
        free(m->state_dir);
        free(m->base_profile);
        free(m->profile_override);
        free(m->pass_reason);
        free(m->attached);
        free(m);
}

void manager_schedule_pass(Manager *m, const char *reason)
{
        assert(m);

        /* The model is about to change: cached answers would describe the old one. */
        read_cache_clear(&m->reads);
        if (!m->pass_reason)
                m->pass_reason = xstrdup(reason);
        else if (!strstr(m->pass_reason, reason) && strlen(m->pass_reason) < 200) {
                char *n = xasprintf("%s, %s", m->pass_reason, reason);
                free(m->pass_reason);
                m->pass_reason = n;
        }
        (void)sd_event_source_set_enabled(m->pass_source, SD_EVENT_ONESHOT);
}

void manager_mark_cpu_tuners(Manager *m)
{
        assert(m);

        for (size_t i = 0; i < tuners_n(); i++)
                if (tuner_nth(i)->cpu_dependent)
                        dirty_mark_full(&m->dirty, (int)i);
}

void manager_mark_resume_tuners(Manager *m)
{
        assert(m);

        for (size_t i = 0; i < tuners_n(); i++)
                if (tuner_nth(i)->cpu_dependent || tuner_nth(i)->after_resume)
                        dirty_mark_full(&m->dirty, (int)i);
}

static bool enabled(sd_event_source *s)
{
        return s && sd_event_source_get_enabled(s, NULL) > 0;
}

/* Whether the work a caller waits for is still under way: a pass to run, a retry, systemd's jobs. */
static bool outstanding(Manager *m)
{
        if (enabled(m->pass_source) || enabled(m->retry_source) ||
            systemd_client_pending(m->kinds.systemd) > 0)
                return true;
        for (int i = 0; i < _TUNER_MAX; i++)
                if (m->after_jobs[i])
                        return true;
        return false;
}

/* While a caller waits for it, the pass runs ahead of everything else on the loop, a flood of calls on
 * the bus included (the bus is served at SD_EVENT_PRIORITY_NORMAL, one message per iteration, and a busy
 * bus would otherwise hold back a pass at IDLE for as long as the flood lasts). With no one waiting it
 * runs once the event queue drained, so bursts of uevents coalesce into one pass. */
#define PASS_PRIORITY_AWAITED (SD_EVENT_PRIORITY_NORMAL - 10)

static void set_pass_awaited(Manager *m, bool awaited)
{
        if (m->pass_source)
                (void)sd_event_source_set_priority(m->pass_source,
                                                   awaited ? PASS_PRIORITY_AWAITED : SD_EVENT_PRIORITY_IDLE);
}

static void answer_waiting(Manager *m)
{
        set_pass_awaited(m, false);
        for (size_t i = 0; i < m->n_waiting; i++) {
                Waiter *w = &m->waiting[i];
                int r = w->cookie ? sd_bus_message_append(w->reply, "u", w->cookie)
                                  : sd_bus_message_append(w->reply, "uu", m->status.last_pass.changes,
                                                          m->status.last_pass.failures);
                if (r >= 0)
                        (void)sd_bus_send(NULL, w->reply, NULL);
                sd_bus_message_unref(w->reply);
        }
        free(m->waiting);
        m->waiting = NULL;
        m->n_waiting = m->waiting_allocated = 0;
}

void manager_wait_for_pass_cookie(Manager *m, sd_bus_message *call, uint32_t cookie)
{
        sd_bus_message *reply;
        int r;

        assert(m);

        /* The reply, made now, is what waits: not the call, with whatever descriptors came with it. */
        r = sd_bus_message_new_method_return(call, &reply);
        if (r < 0) {
                (void)sd_bus_reply_method_errno(call, r, NULL);
                return;
        }
        GREEDY_REALLOC(m->waiting, m->waiting_allocated, m->n_waiting + 1);
        m->waiting[m->n_waiting++] = (Waiter){.reply = reply, .cookie = cookie};
        /* Every call gets an answer: with nothing under way, the state it asked for is already there. */
        if (!outstanding(m))
                answer_waiting(m);
        else
                set_pass_awaited(m, true);
}

/* When nothing more is under way: callers get their answer, and a stopping daemon exits. */
static void finish(Manager *m)
{
        _cleanup_free_ char *holds = NULL;

        if (outstanding(m))
                return;
        answer_waiting(m);
        holds = manager_holds_summary(m);
        status_notify(&m->status, manager_active_profile(m), holds);
        if (m->stopping) {
                unsigned n = status_n_failures(&m->status);
                if (n)
                        log_error("Restore left %u values changed; they stay in %s for `rtctl restore`.", n,
                                  journal_path(m->journal));
                else
                        log_info("Restored every value.");
                (void)sd_event_exit(m->event, 0);
        }
}

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata)
{
        Manager *m = userdata;

        for (int i = 0; i < _TUNER_MAX; i++)
                if (m->retry.full[i])
                        dirty_mark_full(&m->dirty, i);
        dirty_clear(&m->retry);
        manager_schedule_pass(m, "retry");
        return 0;
}

static void arm_retry(Manager *m)
{
        uint64_t delay = RETRY_FIRST_USEC << m->retries;
        int r;

        m->retries++;
        if (m->retry_source) {
                (void)sd_event_source_set_time_relative(m->retry_source, delay);
                (void)sd_event_source_set_enabled(m->retry_source, SD_EVENT_ONESHOT);
                return;
        }
        r = sd_event_add_time_relative(m->event, &m->retry_source, CLOCK_MONOTONIC, delay, 10 * 1000,
                                       on_retry, m);
        if (r < 0)
                log_warning_errno(r, "Failed to arm the retry timer: %m, ignoring");
}

/* A restore of a journal entry whose tuner is unknown (a damaged journal's) belongs to no tuner: any full
 * pass plans it, so every tuner is marked. */
static void mark_tuner(bool *marks, const char *name)
{
        int t = tuner_index_by_name(name);

        for (int i = 0; i < _TUNER_MAX; i++)
                if (t < 0 || i == t)
                        marks[i] = true;
}

/* Busy settings and failed plans are tried again shortly (a bounded number of times); settings deferred
 * behind systemd's jobs follow when systemd is done. */
static void follow_up(Manager *m, const PassResult *res)
{
        bool retry = false;

        for (int i = 0; i < _TUNER_MAX; i++)
                if (res->plan_failed[i]) {
                        m->retry.full[i] = true;
                        retry = true;
                }
        for (size_t i = 0; i < res->plan.n; i++) {
                const Setting *s = &res->plan.settings[i];
                if (s->result == SETTING_BUSY) {
                        mark_tuner(m->retry.full, s->tuner);
                        retry = true;
                } else if (s->result == SETTING_DEFERRED)
                        mark_tuner(m->after_jobs, s->tuner);
        }
        if (!retry) {
                m->retries = 0;
                dirty_clear(&m->retry);
        } else if (m->retries < RETRY_MAX)
                arm_retry(m);
        else {
                log_warning("Busy settings or failed plans did not clear after %d tries; they stay failures "
                            "until the next event.",
                            RETRY_MAX);
                m->retries = 0;
                dirty_clear(&m->retry);
        }
}

static void on_systemd_settled(void *userdata)
{
        Manager *m = userdata;
        SystemdFailure *f;
        size_t n;
        bool again = false;

        reconcile_jobs_ended(m->journal, &m->kinds);
        f = systemd_client_take_failures(m->kinds.systemd, &n);
        for (size_t i = 0; i < n; i++) {
                const JournalEntry *e = journal_find(m->journal, f[i].label);
                unsigned pid;
                /* A scope's job fails when its process exited before systemd started it (a client
                 * killed mid-attach): nothing is left to place, so no failure; the cpuset tuner's next
                 * pass drops the attachment. Exited includes a zombie its parent has not reaped yet,
                 * which signal 0 still finds but no cgroup can take (PF_EXITING). */
                if (sscanf(f[i].label, "/proc/%u/", &pid) == 1 && task_exited(pid)) {
                        log_object(LOG_DEBUG, 0, e ? e->tuner : "systemd", f[i].label,
                                   "%s; the process is gone", f[i].message);
                        m->after_jobs[TUNER_CPUSET] = true;
                        continue;
                }
                status_set_failure(&m->status, LOG_WARNING, e ? e->tuner : "systemd", f[i].label, EIO,
                                   f[i].message);
        }
        systemd_failures_free(f, n);
        for (int i = 0; i < _TUNER_MAX; i++)
                if (m->after_jobs[i]) {
                        m->after_jobs[i] = false;
                        dirty_mark_full(&m->dirty, i);
                        again = true;
                }
        if (again)
                manager_schedule_pass(m, "systemd jobs done");
        else
                finish(m);
}

static int on_rebalance(sd_event_source *s, uint64_t usec, void *userdata)
{
        Manager *m = userdata;

        for (size_t i = 0; i < tuners_n(); i++)
                if (tuner_nth(i)->interval_sec && m->policy && m->policy->config[i] &&
                    tuner_nth(i)->interval_sec(m->policy->config[i]) > 0)
                        dirty_mark_full(&m->dirty, (int)i);
        manager_schedule_pass(m, "rebalance");
        return 0;
}

/* A timer only while the profile asks for periodic rebalancing: with RebalanceSec=0 there is none, and
 * the daemon sleeps until an event. */
static void arm_rebalance(Manager *m)
{
        unsigned sec = 0;
        int r;

        for (size_t i = 0; i < tuners_n() && m->policy; i++)
                if (tuner_nth(i)->interval_sec && m->policy->config[i]) {
                        unsigned v = tuner_nth(i)->interval_sec(m->policy->config[i]);
                        if (v > 0 && (sec == 0 || v < sec))
                                sec = v;
                }
        if (sec == 0) {
                if (m->rebalance_source)
                        (void)sd_event_source_set_enabled(m->rebalance_source, SD_EVENT_OFF);
                return;
        }
        /* Armed already: passes for other reasons (a disk, an attach) must not keep pushing it back. */
        if (enabled(m->rebalance_source))
                return;
        if (!m->rebalance_source) {
                r = sd_event_add_time_relative(m->event, &m->rebalance_source, CLOCK_MONOTONIC,
                                               (uint64_t)sec * 1000000, 100 * 1000, on_rebalance, m);
                if (r < 0) {
                        log_warning_errno(r, "Failed to arm the rebalance timer: %m, ignoring");
                        return;
                }
        } else
                (void)sd_event_source_set_time_relative(m->rebalance_source, (uint64_t)sec * 1000000);
        (void)sd_event_source_set_enabled(m->rebalance_source, SD_EVENT_ONESHOT);
}

static bool touches_cpus(const Dirty *dirty)
{
        for (size_t i = 0; i < tuners_n(); i++)
                if (dirty->full[i] && tuner_nth(i)->cpu_dependent)
                        return true;
        return false;
}

static unsigned planning_failures(const PassResult *res)
{
        unsigned n = 0;

        for (size_t i = 0; i < res->notes.n; i++)
                n += res->notes.items[i].error != 0;
        return n;
}

/* A pass with no policy is a restore: it is what reports the originals a damaged journal lost (they
 * count as its failures, and status keeps listing them until a profile is applied); the journal then
 * forgets them, so the next restore is clean. */
static unsigned report_lost(Manager *m)
{
        unsigned n = (unsigned)journal_n_lost(m->journal);

        if (m->policy || n == 0)
                return 0;
        journal_forget_lost(m->journal);
        (void)journal_save(m->journal);
        return n;
}

static int on_pass(sd_event_source *s, void *userdata)
{
        Manager *m = userdata;
        _cleanup_free_ char *reason = TAKE_PTR(m->pass_reason);
        Dirty dirty = m->dirty;
        AttachInput attach;
        PassResult res;
        unsigned logged;

        m->dirty = (Dirty){};
        manager_attach_input(m, &attach);
        reconcile_pass_with(m->policy, manager_topology(m), m->journal, &dirty, false,
                            &(PassInput){.attached = attach.pids,
                                         .n_attached = attach.n_pids,
                                         .threads = attach.threads,
                                         .n_threads = attach.n_threads,
                                         .states = m->tuner_state,
                                         .stop_conflicts = m->conf.stop_conflicts,
                                         .kinds = &m->kinds,
                                         .task_cache = &m->task_cache},
                            &res);
        manager_rules_note_pass(m, &attach);
        attach_input_clear(&attach);
        /* With no profile in force no pass scans /proc, and none would prune what the cache holds: the
         * processes it holds are let go (up to half the cache's pidfds are user processes'). */
        if (!m->policy)
                task_cache_clear(&m->task_cache);
        (void)setting_context_prune_refused(&m->kinds);
        logged = status_update(&m->status, &dirty, &res);
        /* The profile changed, or the CPUs: the boot arguments it wants may have too. */
        if (touches_cpus(&dirty) || !m->policy)
                status_update_boot(&m->status, m->policy, manager_topology(m));
        if (touches_cpus(&dirty) || !m->status.power)
                status_refresh_power(&m->status, manager_topology(m)->online);
        follow_up(m, &res);

        m->status.last_pass =
            (LastPass){.timestamp_usec = now_usec(CLOCK_REALTIME),
                       .changes = res.stats.changed,
                       .failures = res.stats.failed + res.stats.busy + (res.error ? 1 : 0) +
                                   planning_failures(&res) + report_lost(m),
                       .duration_usec = res.duration_usec};
        /* A pass whose failures all stand as they were logged is not news (a rebalance timer would repeat
         * it every interval): only one that changed something or logged a failure is. */
        if (res.stats.changed || logged)
                log_info("Pass (%s): %u changed, %u failed, %u busy, %u already in place, %" PRIu64
                         " µs (%" PRIu64 " µs of it in the kernel's writes)",
                         strempty(reason), res.stats.changed, res.stats.failed, res.stats.busy,
                         res.stats.unchanged, res.duration_usec, res.stats.write_usec);
        else
                log_debug("Pass (%s): everything in place, %" PRIu64 " µs", strempty(reason),
                          res.duration_usec);
        pass_result_clear(&res);
        dirty_clear(&dirty);
        arm_rebalance(m);

        read_cache_clear(&m->reads);
        bus_emit_applied(m, strempty(reason));
        bus_emit_attached_threads_changed(m);
        finish(m);
        manager_release_memory_after_pass(m);
        return 0;
}

void manager_dry_run(Manager *m, const Policy *p, PassResult *ret)
{
        assert(m);

        /* The IRQ tuner's state, read only: the pass sets only seen, which is this copy's. */
        IrqState irq = *manager_irq_state(m);
        void *states[_TUNER_MAX];
        AttachInput attach;
        Dirty all = {};

        memcpy(states, m->tuner_state, sizeof(states));
        states[TUNER_IRQ] = &irq;
        irq.seen = NULL;
        if (p != m->policy) {
                irq.pins = NULL;
                irq.n_pins = irq.pins_allocated = 0;
        }
        dirty_mark_all(&all);
        manager_attach_input(m, &attach);
        /* Behind Plan, Verify and Check, which anyone may call: PID 1 is never waited for there. */
        systemd_client_cache_only(m->kinds.systemd, true);
        reconcile_pass_with(p, manager_topology(m), m->journal, &all, true,
                            &(PassInput){.attached = attach.pids,
                                         .n_attached = attach.n_pids,
                                         .threads = attach.threads,
                                         .n_threads = attach.n_threads,
                                         .states = states,
                                         .stop_conflicts = m->conf.stop_conflicts,
                                         .kinds = &m->kinds,
                                         .task_cache = &m->task_cache},
                            ret);
        systemd_client_cache_only(m->kinds.systemd, false);
        dirty_clear(&all);
        attach_input_clear(&attach);
        irq_table_free(irq.seen);
}

static int on_stop_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
        Manager *m = userdata;

        log_error("Restore did not finish within %d s (systemd's jobs or busy settings); exiting. What is "
                  "left stays in %s for `rtctl restore`.",
                  STOP_TIMEOUT_USEC / 1000000, journal_path(m->journal));
        return sd_event_exit(m->event, 0);
}

static int on_stop_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
        Manager *m = userdata;
        int r;

        if (m->stopping)
                return 0;
        (void)sd_notify(false, "STOPPING=1\nSTATUS=Restoring");
        m->stopping = true;
        if (manager_handover_requested(m))
                return sd_event_exit(m->event, 0);
        if (m->conf.keep_on_stop) {
                log_info(
                    "Stopping; OnStop=keep leaves the tuning in place (the journal keeps the originals).");
                return sd_event_exit(m->event, 0);
        }
        /* The restore is an ordinary pass with no policy; the loop exits when it and what it started are
         * done (finish()). */
        manager_restore(m);
        r = sd_event_add_time_relative(m->event, &m->stop_timeout, CLOCK_MONOTONIC, STOP_TIMEOUT_USEC, 0,
                                       on_stop_timeout, m);
        if (r < 0)
                log_warning_errno(r, "Failed to arm the stop timeout: %m, ignoring");
        return 0;
}

static int on_reload_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
        Manager *m = userdata;
        _cleanup_free_ char *err = NULL;

        if (m->stopping)
                return 0;
        /* MONOTONIC_USEC= is what Type=notify-reload (systemd 253) matches the reload by; older
         * systemd ignores it. */
        (void)sd_notifyf(false, "RELOADING=1\nMONOTONIC_USEC=%" PRIu64, now_usec(CLOCK_MONOTONIC));
        if (manager_reload(m, &err) < 0)
                log_error("Reload failed, keeping the last good configuration:\n%s", err);
        (void)sd_notify(false, "READY=1");
        return 0;
}

static int on_settle(sd_event_source *s, uint64_t usec, void *userdata)
{
        Manager *m = userdata;

        manager_mark_cpu_tuners(m);
        manager_schedule_pass(m, "cpu settle");
        return 0;
}

/* A one-shot timer, armed only by CPU events: an idle daemon still has no wakeups. */
void manager_schedule_settle(Manager *m)
{
        int r;

        assert(m);

        if (m->settle_source) {
                (void)sd_event_source_set_time_relative(m->settle_source, SETTLE_USEC);
                (void)sd_event_source_set_enabled(m->settle_source, SD_EVENT_ONESHOT);
                return;
        }
        r = sd_event_add_time_relative(m->event, &m->settle_source, CLOCK_MONOTONIC, SETTLE_USEC, 10 * 1000,
                                       on_settle, m);
        if (r < 0)
                log_warning_errno(r, "Failed to arm the settle pass after a CPU event: %m, ignoring");
}

static int open_journal(Manager *m)
{
        _cleanup_free_ char *path = xasprintf("%s/journal.json", m->runtime_dir);
        _cleanup_free_ char *err = NULL, *holder = NULL;
        int r;

        r = mkdir_p(m->runtime_dir, 0755);
        if (r < 0)
                return log_error_errno(r, "Failed to create %s: %m", m->runtime_dir);
        r = journal_lock(m->runtime_dir, "rtctld", false, &m->journal_lock, &holder);
        if (r == -EWOULDBLOCK) {
                /* `rtctl restore` started while no daemon was on the bus: its restore ends first. */
                log_info("Waiting for %s to finish with the journal.", holder ?: "another process");
                r = journal_lock(m->runtime_dir, "rtctld", true, &m->journal_lock, NULL);
        }
        if (r < 0)
                return log_error_errno(r, "Failed to lock the journal in %s: %m", m->runtime_dir);
        /* A damaged journal is read as far as it can be and kept beside as it was: never overwritten. */
        r = journal_open(path, JOURNAL_RUNTIME, &m->journal, &err);
        if (r < 0)
                return log_error_errno(r, "%s", err ?: "Failed to open the journal");
        for (size_t i = 0; i < journal_n_lost(m->journal); i++) {
                const JournalLoss *l = journal_lost(m->journal, i);
                _cleanup_free_ char *object =
                    l->object ? xstrdup(l->object) : xasprintf("journal: %s", l->reason);
                status_set_failure(&m->status, LOG_ERR, "journal", object, EBADMSG, l->reason);
        }
        if (journal_damaged_copy(m->journal))
                log_error("The damaged journal is kept as %s; %s.", journal_damaged_copy(m->journal),
                          journal_n_lost(m->journal) > 0
                              ? "what the lines above name stays changed until set by hand"
                              : "every original in it could be read");
        if (journal_size(m->journal) > 0)
                log_info("Found %zu original values in %s from an earlier run; keeping them for restore.",
                         journal_size(m->journal), path);
        return 0;
}

static int setup_loop(Manager *m)
{
        sigset_t mask;
        int r;

        r = sd_event_add_defer(m->event, &m->pass_source, on_pass, m);
        if (r < 0)
                return log_error_errno(r, "Failed to add the pass source: %m");
        (void)sd_event_source_set_priority(m->pass_source, SD_EVENT_PRIORITY_IDLE);
        (void)sd_event_source_set_enabled(m->pass_source, SD_EVENT_OFF);
        (void)sd_event_source_set_description(m->pass_source, "reconcile-pass");

        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        if ((r = sd_event_add_signal(m->event, NULL, SIGTERM, on_stop_signal, m)) < 0 ||
            (r = sd_event_add_signal(m->event, NULL, SIGINT, on_stop_signal, m)) < 0 ||
            (r = sd_event_add_signal(m->event, NULL, SIGHUP, on_reload_signal, m)) < 0)
                return log_error_errno(r, "Failed to handle signals: %m");
        (void)sd_event_set_watchdog(m->event, true);

        r = uevent_monitor_new(m->event, m->conf.uevents, manager_on_uevent, m, &m->uevents);
        if (r < 0)
                return log_error_errno(r, "Failed to listen for uevents: %m");
        log_debug("Listening for %s uevents.", uevent_monitor_backend_name(m->uevents));
        return 0;
}

int manager_start(Manager *m)
{
        _cleanup_free_ char *err = NULL, *profile = NULL;
        int r;

        assert(m);

        m->search_path = conf_search_path();
        r = daemon_conf_load(m->search_path, &m->conf, &err);
        if (r < 0) {
                log_error("Invalid daemon configuration, using defaults:\n%s", err);
                free(err);
                err = NULL;
                m->conf = daemon_conf_defaults();
        }

        r = open_journal(m);
        if (r < 0)
                return r;
        /* A marker left from before this start is never a request to this daemon. */
        manager_handover_clear(m);
        /* A killed daemon's tracefs instance (and mount) go now; a realtime rule makes them anew. */
        if (sched_trace_restore_dir(m->runtime_dir, &err) < 0) {
                log_warning("%s", err);
                free(err);
                err = NULL;
        }
        r = topology_cache_load(&m->topology);
        if (r < 0)
                return log_error_errno(r, "Failed to read the CPU topology: %m");
        manager_load_attached(m);

        r = setup_loop(m);
        if (r < 0)
                return r;

        profile = m->profile_override ? xstrdup(m->profile_override)
                                      : rtctl_initial_profile(m->state_dir, m->conf.default_profile);
        r = manager_use_profile(m, profile, &err);
        if (r < 0)
                log_error("Cannot use profile %s, running without a profile until one is set:\n%s", profile,
                          err);

        if (!m->no_bus) {
                r = bus_setup(m);
                if (r < 0)
                        return r;
                r = sd_bus_match_signal_async(m->bus, &m->sleep_slot, "org.freedesktop.login1",
                                              "/org/freedesktop/login1", "org.freedesktop.login1.Manager",
                                              "PrepareForSleep", manager_on_sleep, NULL, m);
                if (r < 0)
                        log_warning_errno(r, "Failed to watch for resume from suspend: %m, ignoring");
        }
        if (!m->policy)
                manager_schedule_pass(m, "start");
        return 0;
}

int manager_run(Manager *m)
{
        assert(m);

        return sd_event_loop(m->event);
}
