/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <signal.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "core/cgroupfs.h"
#include "daemon/bus.h"
#include "daemon/manager.h"
#include "shared/log.h"

static void failure_free(gpointer p)
{
        Failure *f = p;

        free(f->tuner);
        free(f->object);
        free(f->message);
        free(f);
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
        m->failures = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, failure_free);
        m->unsupported = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, failure_free);
        *ret = m;
        return 0;
}

void manager_free(Manager *m)
{
        if (!m)
                return;
        for (size_t i = 0; i < m->n_waiting; i++)
                sd_bus_message_unref(m->waiting[i]);
        free(m->waiting);
        sd_bus_flush_close_unref(m->bus);
        uevent_monitor_free(m->uevents);
        sd_event_source_disable_unref(m->pass_source);
        sd_event_source_disable_unref(m->settle_source);
        sd_event_source_disable_unref(m->rebalance_source);
        sd_bus_slot_unref(m->sleep_slot);
        irq_state_clear(&m->irq);
        sd_event_unref(m->event);
        policy_free(m->policy);
        journal_free(m->journal);
        topology_free(m->topology);
        dirty_clear(&m->dirty);
        g_hash_table_destroy(m->failures);
        g_hash_table_destroy(m->unsupported);
        cpuset_free(m->isolated);
        cpuset_free(m->housekeeping);
        daemon_conf_clear(&m->conf);
        strv_free(m->search_path);
        free(m->runtime_dir);
        free(m->state_dir);
        free(m->profile_override);
        free(m->pass_reason);
        free(m->last_status);
        free(m->attached);
        free(m);
}

const char *manager_active_profile(const Manager *m)
{
        return m->policy ? m->policy->name : "";
}

const char *manager_state(const Manager *m)
{
        if (!m->policy)
                return "off";
        if (g_hash_table_size(m->failures) > 0)
                return "degraded";
        return "applied";
}

void manager_schedule_pass(Manager *m, const char *reason)
{
        if (!m->pass_reason)
                m->pass_reason = xstrdup(reason);
        else if (!strstr(m->pass_reason, reason) && strlen(m->pass_reason) < 200) {
                char *n = xasprintf("%s, %s", m->pass_reason, reason);
                free(m->pass_reason);
                m->pass_reason = n;
        }
        (void)sd_event_source_set_enabled(m->pass_source, SD_EVENT_ONESHOT);
}

static void set_failure(GHashTable *table, const char *tuner, const char *object, int error,
                        const char *message)
{
        Failure *f = xmalloc0(sizeof(Failure));

        *f = (Failure){.tuner = xstrdup(tuner),
                       .object = xstrdup(object),
                       .error = error < 0 ? -error : error,
                       .message = xstrdup(message)};
        g_hash_table_replace(table, f->object, f);
}

static gboolean failure_of_tuner(gpointer key, gpointer value, gpointer tuner)
{
        return streq(((Failure *)value)->tuner, tuner);
}

static gboolean failure_under(gpointer key, gpointer value, gpointer prefix)
{
        return startswith(key, prefix) != NULL;
}

/* Failures and notes of wholly replanned tuners start over; those of single devices are replaced
 * object by object. */
static void update_status(Manager *m, const Dirty *dirty, PassResult *res)
{
        for (int i = 0; i < N_TUNERS; i++)
                if (dirty->full[i]) {
                        g_hash_table_foreach_remove(m->failures, failure_of_tuner,
                                                    (gpointer)tuners[i]->name);
                        g_hash_table_foreach_remove(m->unsupported, failure_of_tuner,
                                                    (gpointer)tuners[i]->name);
                }
        g_hash_table_foreach_remove(m->failures, failure_of_tuner, (gpointer) "policy");

        for (size_t i = 0; i < res->plan.n; i++) {
                Setting *s = &res->plan.settings[i];
                if (s->result == SETTING_FAILED) {
                        set_failure(m->failures, s->tuner, s->object, s->error, s->message);
                        log_warning("%s: %s", s->object, s->message);
                } else
                        g_hash_table_remove(m->failures, s->object);
        }
        for (size_t i = 0; i < res->notes.n; i++) {
                const Unsupported *u = &res->notes.items[i];
                if (u->error) {
                        set_failure(m->failures, u->tuner, u->object, u->error, u->reason);
                        log_warning("%s: %s", u->object, u->reason);
                } else
                        set_failure(m->unsupported, u->tuner, u->object, 0, u->reason);
        }
        if (res->error) {
                set_failure(m->failures, "policy", "Isolate", EINVAL, res->error);
                log_warning("Profile %s cannot be placed on this machine: %s", manager_active_profile(m),
                            res->error);
        }
        if (res->isolated) {
                cpuset_free(m->isolated);
                cpuset_free(m->housekeeping);
                m->isolated = TAKE_PTR(res->isolated);
                m->housekeeping = TAKE_PTR(res->housekeeping);
        }
}

static void answer_waiting(Manager *m)
{
        for (size_t i = 0; i < m->n_waiting; i++) {
                (void)sd_bus_reply_method_return(m->waiting[i], "uu", m->last_pass.changes,
                                                 m->last_pass.failures);
                sd_bus_message_unref(m->waiting[i]);
        }
        free(m->waiting);
        m->waiting = NULL;
        m->n_waiting = 0;
}

/* PID 1 hears from us only when the status line changes, not on every pass: a pass for each uevent must
 * not wake systemd too. */
static void notify_status(Manager *m)
{
        const char *profile = manager_active_profile(m);
        _cleanup_free_ char *status = NULL;
        unsigned n = g_hash_table_size(m->failures);

        if (!*profile)
                status = xstrdup("No profile: nothing tuned");
        else if (n > 0)
                status = xasprintf("Profile %s: %u settings failed (rtctl status)", profile, n);
        else
                status = xasprintf("Profile %s applied", profile);
        if (m->ready_sent && streq_ptr(status, m->last_status))
                return;
        (void)sd_notifyf(false, "%sSTATUS=%s", m->ready_sent ? "" : "READY=1\n", status);
        m->ready_sent = true;
        free(m->last_status);
        m->last_status = TAKE_PTR(status);
}

static void save_attached(Manager *m)
{
        _cleanup_free_ char *path = xasprintf("%s/attached", m->runtime_dir), *content = xstrdup("");
        int r;

        for (size_t i = 0; i < m->n_attached; i++) {
                char *c = xasprintf("%s%u %llu\n", content, m->attached[i].pid, m->attached[i].starttime);
                free(content);
                content = c;
        }
        r = m->n_attached ? write_file_atomic(path, content, false)
                          : (unlink(path) < 0 && errno != ENOENT ? -errno : 0);
        if (r < 0)
                log_warning_errno(r, "Failed to save the attached processes to %s: %m, ignoring", path);
}

/* A process that exited (or whose PID now belongs to another) is no longer attached. */
static void prune_attached(Manager *m)
{
        size_t w = 0;

        for (size_t i = 0; i < m->n_attached; i++) {
                TaskInfo t;
                if (task_info(m->attached[i].pid, &t) >= 0 && t.starttime == m->attached[i].starttime)
                        m->attached[w++] = m->attached[i];
                else
                        log_info("Attached process %u is gone.", m->attached[i].pid);
        }
        if (w != m->n_attached) {
                m->n_attached = w;
                save_attached(m);
        }
}

static void load_attached(Manager *m)
{
        _cleanup_free_ char *path = xasprintf("%s/attached", m->runtime_dir), *s = NULL;
        _cleanup_strv_free_ char **lines = NULL;

        if (read_full_file(path, &s, NULL) < 0)
                return;
        lines = strv_split(s, "\n");
        for (char **l = lines; *l; l++) {
                Attached a;
                if (sscanf(*l, "%u %llu", &a.pid, &a.starttime) != 2)
                        continue;
                m->attached = realloc(m->attached, sizeof(Attached) * (m->n_attached + 1));
                if (!m->attached)
                        abort();
                m->attached[m->n_attached++] = a;
        }
        prune_attached(m);
        if (m->n_attached)
                log_info("%zu processes stay attached to the isolated CPUs from an earlier run.",
                         m->n_attached);
}

static void mark_cpu_tuners(Manager *m)
{
        for (int i = 0; i < N_TUNERS; i++)
                if (tuners[i]->cpu_dependent)
                        dirty_mark_full(&m->dirty, i);
}

int manager_attach(Manager *m, unsigned pid)
{
        TaskInfo t;
        int r;

        if (pid == 0)
                return -ESRCH;
        r = task_info(pid, &t);
        if (r < 0)
                return -ESRCH;
        if (pid == 1 || (t.flags & PF_KTHREAD))
                return -EPERM;
        for (size_t i = 0; i < m->n_attached; i++)
                if (m->attached[i].pid == pid)
                        return -EEXIST;
        if (!m->isolated || cpuset_empty(m->isolated))
                return -ENXIO;
        m->attached = realloc(m->attached, sizeof(Attached) * (m->n_attached + 1));
        if (!m->attached)
                abort();
        m->attached[m->n_attached++] = (Attached){.pid = pid, .starttime = t.starttime};
        save_attached(m);
        log_info("Attaching process %u (%s) to the isolated CPUs.", pid, t.comm);
        mark_cpu_tuners(m);
        manager_schedule_pass(m, "attach");
        return 0;
}

int manager_detach(Manager *m, unsigned pid)
{
        for (size_t i = 0; i < m->n_attached; i++)
                if (m->attached[i].pid == pid) {
                        memmove(&m->attached[i], &m->attached[i + 1],
                                sizeof(Attached) * (m->n_attached - i - 1));
                        m->n_attached--;
                        save_attached(m);
                        log_info("Detaching process %u.", pid);
                        mark_cpu_tuners(m);
                        manager_schedule_pass(m, "detach");
                        return 0;
                }
        return -ENOENT;
}

/* An IRQ whose affinity write the kernel refused with EIO or EPERM is one only the kernel places (other
 * kernels than this VM's answer a managed IRQ's write that way, or a chip that cannot move it): it is
 * not tried again under this profile. EBUSY and EAGAIN are tried on the next pass. */
static void note_refusals(Manager *m, PassResult *res)
{
        for (size_t i = 0; i < res->plan.n; i++) {
                Setting *s = &res->plan.settings[i];
                unsigned irq;

                if (s->result != SETTING_FAILED || s->restore || !streq(s->tuner, "irq") ||
                    (s->error != -EIO && s->error != -EPERM) ||
                    sscanf(s->object, "/proc/irq/%u/", &irq) != 1)
                        continue;
                log_info("The kernel refused to move IRQ %u (%s); leaving it where it is.", irq,
                         strerror(-s->error));
                irq_state_refuse(&m->irq, irq);
                /* Not a failure: an IRQ only the kernel places, as the next plan will say. */
                plan_notes_add(
                    &res->notes, "irq", xstrdup(s->object),
                    xasprintf("the kernel refused to move IRQ %u (%s): kernel-managed on this kernel, "
                              "or a chip that cannot move it; placed by the kernel",
                              irq, strerror(-s->error)));
                s->result = SETTING_UNCHANGED;
                free(s->message);
                s->message = xstrdup("refused by the kernel");
                res->stats.failed--;
                res->stats.unchanged++;
        }
}

static int on_rebalance(sd_event_source *s, uint64_t usec, void *userdata)
{
        Manager *m = userdata;

        for (int i = 0; i < N_TUNERS; i++)
                if (tuners[i]->interval_sec && m->policy && m->policy->config[i] &&
                    tuners[i]->interval_sec(m->policy->config[i]) > 0)
                        dirty_mark_full(&m->dirty, i);
        manager_schedule_pass(m, "rebalance");
        return 0;
}

/* A timer only while the profile asks for periodic rebalancing: with RebalanceSec=0 there is none, and
 * the daemon sleeps until an event. */
static void arm_rebalance(Manager *m)
{
        unsigned sec = 0;
        int r;

        for (int i = 0; i < N_TUNERS && m->policy; i++)
                if (tuners[i]->interval_sec && m->policy->config[i]) {
                        unsigned v = tuners[i]->interval_sec(m->policy->config[i]);
                        if (v > 0 && (sec == 0 || v < sec))
                                sec = v;
                }
        if (sec == 0) {
                if (m->rebalance_source)
                        (void)sd_event_source_set_enabled(m->rebalance_source, SD_EVENT_OFF);
                return;
        }
        /* Armed already: passes for other reasons (a disk, an attach) must not keep pushing it back. */
        if (m->rebalance_source && sd_event_source_get_enabled(m->rebalance_source, NULL) > 0)
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

int manager_pin_irq(Manager *m, unsigned irq, const char *cpus, bool allow_isolated, char **ret_error)
{
        _cleanup_irq_table_ IrqTable *t = NULL;
        _cleanup_cpuset_ CpuSet *set = NULL, *online = NULL;
        const Irq *i;
        int r;

        if (isempty(cpus) && irq_state_pin(&m->irq, irq)) {
                /* Unpinning works for an IRQ that is gone too: its number may come back with another
                 * device. */
                irq_state_set_pin(&m->irq, irq, NULL);
                log_info("IRQ %u is no longer pinned.", irq);
                dirty_mark_full(&m->dirty, tuner_index("irq"));
                manager_schedule_pass(m, "unpin");
                return 0;
        }
        r = irq_table_load(0, m->topology->n_cpus, &t);
        if (r < 0) {
                *ret_error = xasprintf("Cannot read /proc/interrupts: %s", strerror(-r));
                return r;
        }
        i = irq_table_find(t, irq);
        if (!i) {
                *ret_error = xasprintf("No IRQ %u on this machine", irq);
                return -ENOENT;
        }
        if (isempty(cpus))
                return 0; /* not pinned: nothing to drop */
        if (!m->policy || !m->policy->config[tuner_index("irq")]) {
                *ret_error =
                    xasprintf("The active profile %s places no IRQs (it has no [IRQ] section): a pin "
                              "would not be kept",
                              manager_active_profile(m));
                return -EOPNOTSUPP;
        }
        if (i->unmovable) {
                *ret_error = xasprintf("IRQ %u (%s) cannot be moved: %s", irq, i->actions, i->unmovable);
                return -EPERM;
        }
        if (irq_state_refused(&m->irq, irq)) {
                *ret_error = xasprintf("IRQ %u (%s) cannot be moved: the kernel refused", irq, i->actions);
                return -EPERM;
        }
        if ((streq(cpus, "isolated") || streq(cpus, "housekeeping")) && (!m->isolated || !m->housekeeping)) {
                *ret_error =
                    xasprintf("The CPU split of profile %s is not in place", manager_active_profile(m));
                return -EINVAL;
        }
        if (streq(cpus, "isolated") || streq(cpus, "housekeeping") || streq(cpus, "all")) {
                set = cpuset_dup(streq(cpus, "isolated")       ? m->isolated
                                 : streq(cpus, "housekeeping") ? m->housekeeping
                                                               : m->topology->online);
                allow_isolated = allow_isolated || streq(cpus, "isolated");
        } else if (cpuset_parse_list(cpus, m->topology->n_cpus, &set, ret_error) < 0)
                return -EINVAL;
        if (!set || cpuset_empty(set)) {
                *ret_error = xasprintf("'%s' names no CPU here", cpus);
                return -EINVAL;
        }
        if (!allow_isolated && m->isolated && cpuset_intersects(set, m->isolated)) {
                _cleanup_free_ char *iso = cpuset_format_list(m->isolated);
                *ret_error = xasprintf("CPUs %s are isolated; pin there only when asked explicitly "
                                       "(rtctl irq pin --isolated, or PinIrqWithFlags with flag 1)",
                                       iso);
                return -EXDEV;
        }
        online = cpuset_dup(set);
        cpuset_and(online, m->topology->online);
        if (cpuset_empty(online)) {
                *ret_error = xasprintf("CPUs %s are offline", cpus);
                return -ENXIO;
        }
        log_info("Pinning IRQ %u (%s) to CPUs %s.", irq, i->actions, cpus);
        irq_state_set_pin(&m->irq, irq, TAKE_PTR(set));
        dirty_mark_full(&m->dirty, tuner_index("irq"));
        manager_schedule_pass(m, "pin");
        return 0;
}

void manager_dry_run(Manager *m, const Policy *p, PassResult *ret)
{
        _cleanup_free_ unsigned *pids = xmalloc0(sizeof(unsigned) * (m->n_attached + 1));
        IrqState irq = m->irq; /* read only: the pass sets only seen, which is this copy's */
        Dirty all = {};

        for (size_t i = 0; i < m->n_attached; i++)
                pids[i] = m->attached[i].pid;
        irq.seen = NULL;
        if (p != m->policy) {
                irq.pins = NULL;
                irq.n_pins = 0;
        }
        dirty_mark_all(&all);
        reconcile_pass_with(p, m->topology, m->journal, &all, true,
                            &(PassInput){.attached = pids,
                                         .n_attached = m->n_attached,
                                         .irq = &irq,
                                         .stop_conflicts = m->conf.stop_conflicts},
                            ret);
        dirty_clear(&all);
        irq_table_free(irq.seen);
}

int manager_irqs(Manager *m, IrqTable **ret, double **ret_rates)
{
        IrqTable *t = NULL;
        double *rates;
        int r;

        r = irq_table_load(IRQ_LOAD_EFFECTIVE, m->topology->n_cpus, &t);
        if (r < 0)
                return r;
        rates = xmalloc0(sizeof(double) * (t->n + 1));
        for (size_t i = 0; i < t->n; i++) {
                const Irq *prev = irq_table_find(m->irq.previous, t->irqs[i].num);
                uint64_t dt = m->irq.previous ? t->timestamp_usec - m->irq.previous->timestamp_usec : 0;
                if (prev && dt > 0 && streq(prev->actions, t->irqs[i].actions) &&
                    prev->count <= t->irqs[i].count)
                        rates[i] = (double)(t->irqs[i].count - prev->count) * 1e6 / (double)dt;
        }
        *ret = t;
        *ret_rates = rates;
        return 0;
}

static unsigned planning_failures(const PassResult *res)
{
        unsigned n = 0;

        for (size_t i = 0; i < res->notes.n; i++)
                n += res->notes.items[i].error != 0;
        return n;
}

static int on_pass(sd_event_source *s, void *userdata)
{
        Manager *m = userdata;
        _cleanup_free_ char *reason = TAKE_PTR(m->pass_reason);
        Dirty dirty = m->dirty;
        PassResult res;

        m->dirty = (Dirty){};
        prune_attached(m);
        _cleanup_free_ unsigned *pids = xmalloc0(sizeof(unsigned) * (m->n_attached + 1));
        for (size_t i = 0; i < m->n_attached; i++)
                pids[i] = m->attached[i].pid;
        reconcile_pass_with(m->policy, m->topology, m->journal, &dirty, false,
                            &(PassInput){.attached = pids,
                                         .n_attached = m->n_attached,
                                         .irq = &m->irq,
                                         .stop_conflicts = m->conf.stop_conflicts},
                            &res);
        note_refusals(m, &res);
        irq_state_commit(&m->irq);
        update_status(m, &dirty, &res);
        dirty_clear(&dirty);

        m->last_pass =
            (LastPass){.timestamp_usec = now_usec(CLOCK_REALTIME),
                       .changes = res.stats.changed,
                       .failures = res.stats.failed + (res.error ? 1 : 0) + planning_failures(&res),
                       .duration_usec = res.duration_usec};
        if (res.stats.changed || res.stats.failed || res.error)
                log_info("Pass (%s): %u changed, %u failed, %u already in place, %" PRIu64 " µs",
                         strempty(reason), res.stats.changed, res.stats.failed, res.stats.unchanged,
                         res.duration_usec);
        else
                log_debug("Pass (%s): everything in place, %" PRIu64 " µs", strempty(reason),
                          res.duration_usec);
        pass_result_clear(&res);
        arm_rebalance(m);

        bus_emit_applied(m, strempty(reason));
        answer_waiting(m);
        notify_status(m);
        return 0;
}

void manager_wait_for_pass(Manager *m, sd_bus_message *call)
{
        m->waiting = realloc(m->waiting, sizeof(sd_bus_message *) * (m->n_waiting + 1));
        if (!m->waiting)
                abort();
        m->waiting[m->n_waiting++] = sd_bus_message_ref(call);
}

static void persist_profile(Manager *m, const char *name)
{
        _cleanup_free_ char *path = xasprintf("%s/active-profile", m->state_dir);
        _cleanup_free_ char *content = xasprintf("%s\n", name);
        int r;

        r = mkdir_p(m->state_dir, 0755);
        if (r >= 0)
                r = write_file_atomic(path, content, true);
        if (r < 0)
                log_warning_errno(r, "Failed to remember the active profile in %s: %m, ignoring", path);
}

static int load_checked(Manager *m, const char *name, Policy **ret, char **ret_error)
{
        _cleanup_policy_ Policy *p = NULL;
        _cleanup_cpuset_ CpuSet *iso = NULL, *hk = NULL;
        int r;

        r = policy_load(m->search_path, name, &p, ret_error);
        if (r < 0)
                return r;
        r = policy_cpus(p, m->topology, &iso, &hk, ret_error);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(p);
        return 0;
}

static void activate(Manager *m, Policy *p, const char *reason)
{
        /* Pins and refusals belong to the profile they were made under; a reload keeps them. */
        if (!p || !m->policy || !streq(p->name, m->policy->name))
                irq_state_forget(&m->irq);
        policy_free(m->policy);
        m->policy = p;
        dirty_mark_all(&m->dirty);
        manager_schedule_pass(m, reason);
}

static int switch_profile(Manager *m, const char *name, bool persist, char **ret_error)
{
        Policy *p = NULL;
        int r;

        r = load_checked(m, name, &p, ret_error);
        if (r < 0)
                return r;
        log_info("Switching to profile %s.", name);
        activate(m, p, "profile");
        if (persist)
                persist_profile(m, name);
        return 0;
}

int manager_set_profile(Manager *m, const char *name, char **ret_error)
{
        return switch_profile(m, name, true, ret_error);
}

int manager_reload(Manager *m, char **ret_error)
{
        _cleanup_strv_free_ char **path = conf_search_path();
        DaemonConf conf;
        Policy *p = NULL;
        int r;

        r = daemon_conf_load(path, &conf, ret_error);
        if (r < 0)
                return r;
        strv_free(m->search_path);
        m->search_path = TAKE_PTR(path);
        if (m->policy) {
                r = load_checked(m, m->policy->name, &p, ret_error);
                if (r < 0) {
                        daemon_conf_clear(&conf);
                        return r;
                }
        }
        daemon_conf_clear(&m->conf);
        m->conf = conf;
        if (p)
                activate(m, p, "reload");
        bus_emit_profiles_changed(m);
        log_info("Configuration reloaded.");
        return 0;
}

void manager_restore(Manager *m)
{
        log_info("Restoring every value rtctl changed.");
        activate(m, NULL, "restore");
}

static void restore_now(Manager *m)
{
        Dirty all = {};
        PassResult res;

        dirty_mark_all(&all);
        reconcile_pass(NULL, m->topology, m->journal, &all, false, &res);
        if (res.stats.failed)
                log_error("Restore left %u values changed; they stay in %s for `rtctl restore`.",
                          res.stats.failed, journal_path(m->journal));
        else
                log_info("Restored %u values.", res.stats.changed);
        pass_result_clear(&res);
        dirty_clear(&all);
}

static int on_stop_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
        Manager *m = userdata;

        (void)sd_notify(false, "STOPPING=1\nSTATUS=Restoring");
        m->stopping = true;
        if (m->conf.keep_on_stop)
                log_info(
                    "Stopping; OnStop=keep leaves the tuning in place (the journal keeps the originals).");
        else
                restore_now(m);
        return sd_event_exit(m->event, 0);
}

static int on_reload_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
        Manager *m = userdata;
        _cleanup_free_ char *err = NULL;

        (void)sd_notify(false, "RELOADING=1");
        if (manager_reload(m, &err) < 0)
                log_error("Reload failed, keeping the last good configuration:\n%s", err);
        (void)sd_notify(false, "READY=1");
        return 0;
}

/* The kernel's cpuset hotplug work runs asynchronously after a CPU comes online and hands the root
 * cpuset's tasks (the kernel threads that cannot leave it) every online CPU again, sometimes after the
 * pass that answered the uevent. One more pass a little later puts them back. A one-shot timer, armed
 * only by CPU events: an idle daemon still has no wakeups. */
#define SETTLE_USEC (100 * 1000)

static int on_settle(sd_event_source *s, uint64_t usec, void *userdata)
{
        Manager *m = userdata;

        mark_cpu_tuners(m);
        manager_schedule_pass(m, "cpu settle");
        return 0;
}

static void schedule_settle_pass(Manager *m)
{
        int r;

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

static void on_uevent(const Uevent *ev, void *userdata)
{
        Manager *m = userdata;
        _cleanup_free_ char *reason = xasprintf("%s %s %s", ev->subsystem, ev->action, ev->sysname);

        if (streq(ev->subsystem, "cpu") && (streq(ev->action, "online") || streq(ev->action, "offline") ||
                                            streq(ev->action, "add") || streq(ev->action, "remove"))) {
                Topology *t = NULL;
                int r = topology_load(m->topology, &t);
                if (r < 0) {
                        log_warning_errno(r, "Failed to reread the CPU topology after %s: %m, ignoring",
                                          reason);
                        return;
                }
                topology_free(m->topology);
                m->topology = t;
                mark_cpu_tuners(m);
                manager_schedule_pass(m, reason);
                schedule_settle_pass(m);
                return;
        }

        for (int i = 0; i < N_TUNERS; i++) {
                bool cares = false;
                for (const char *const *sub = tuners[i]->subsystems; sub && *sub; sub++)
                        cares = cares || streq(*sub, ev->subsystem);
                if (!cares)
                        continue;
                if (tuners[i]->replan_whole) {
                        /* New or departed devices bring or take IRQs: a driver's bind (or unbind)
                         * requests or frees them. */
                        if (streq(ev->action, "add") || streq(ev->action, "remove") ||
                            streq(ev->action, "bind") || streq(ev->action, "unbind")) {
                                dirty_mark_full(&m->dirty, i);
                                manager_schedule_pass(m, reason);
                        }
                        continue;
                }
                if (streq(ev->subsystem, "block") && !streq(strempty(ev->devtype), "disk"))
                        continue;
                if (streq(ev->action, "remove")) {
                        /* The kernel forgot the device's values with it. */
                        _cleanup_free_ char *prefix = xasprintf("/sys/block/%s/", ev->sysname);
                        journal_forget_prefix(m->journal, prefix);
                        (void)journal_save(m->journal);
                        g_hash_table_foreach_remove(m->failures, failure_under, prefix);
                        g_hash_table_foreach_remove(m->unsupported, failure_under, prefix);
                        continue;
                }
                if (!streq(ev->action, "add") && !streq(ev->action, "change") && !streq(ev->action, "bind"))
                        continue;
                dirty_mark_device(&m->dirty, i, ev->sysname);
                manager_schedule_pass(m, reason);
        }
}

/* Firmware and drivers may reset IRQ affinities, cpufreq and idle states across suspend: re-apply every
 * CPU-dependent setting when logind says the machine woke up. */
static int on_sleep(sd_bus_message *msg, void *userdata, sd_bus_error *error)
{
        Manager *m = userdata;
        int going;

        if (sd_bus_message_read(msg, "b", &going) < 0 || going)
                return 0;
        log_info("Resumed from suspend; re-applying.");
        mark_cpu_tuners(m);
        manager_schedule_pass(m, "resume");
        return 0;
}

static int open_journal(Manager *m)
{
        _cleanup_free_ char *path = xasprintf("%s/journal.json", m->runtime_dir);
        _cleanup_free_ char *err = NULL;
        int r;

        r = mkdir_p(m->runtime_dir, 0755);
        if (r < 0)
                return log_error_errno(r, "Failed to create %s: %m", m->runtime_dir);
        /* A damaged journal is read as far as it can be and kept beside as it was: never overwritten. */
        r = journal_open(path, &m->journal, &err);
        if (r < 0)
                return log_error_errno(r, "%s", err ?: "Failed to open the journal");
        for (size_t i = 0; i < journal_n_lost(m->journal); i++) {
                _cleanup_free_ char *loss = journal_loss_message(journal_lost(m->journal, i));
                log_error("%s", loss);
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

static char *initial_profile(Manager *m)
{
        _cleanup_free_ char *path = xasprintf("%s/active-profile", m->state_dir);
        char *s = NULL;

        if (m->profile_override)
                return xstrdup(m->profile_override);
        if (read_full_file(path, &s, NULL) >= 0) {
                strstrip(s);
                if (profile_name_valid(s)) {
                        char *n = xstrdup(strstrip(s));
                        free(s);
                        return n;
                }
                free(s);
        }
        return xstrdup(m->conf.default_profile);
}

int manager_start(Manager *m)
{
        _cleanup_free_ char *err = NULL, *profile = NULL;
        int r;

        m->search_path = conf_search_path();
        r = daemon_conf_load(m->search_path, &m->conf, &err);
        if (r < 0) {
                log_error("Invalid daemon configuration, using defaults:\n%s", err);
                free(err);
                err = NULL;
                m->conf = (DaemonConf){.default_profile = xstrdup("desktop")};
        }

        r = open_journal(m);
        if (r < 0)
                return r;
        r = topology_load(NULL, &m->topology);
        if (r < 0)
                return log_error_errno(r, "Failed to read the CPU topology: %m");
        load_attached(m);

        r = sd_event_add_defer(m->event, &m->pass_source, on_pass, m);
        if (r < 0)
                return log_error_errno(r, "Failed to add the pass source: %m");
        (void)sd_event_source_set_priority(m->pass_source, SD_EVENT_PRIORITY_IDLE);
        (void)sd_event_source_set_enabled(m->pass_source, SD_EVENT_OFF);
        (void)sd_event_source_set_description(m->pass_source, "reconcile-pass");

        sigset_t mask;
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

        r = uevent_monitor_new(m->event, m->conf.uevents, on_uevent, m, &m->uevents);
        if (r < 0)
                return log_error_errno(r, "Failed to listen for uevents: %m");
        log_debug("Listening for %s uevents.", uevent_monitor_backend_name(m->uevents));

        profile = initial_profile(m);
        r = switch_profile(m, profile, false, &err);
        if (r < 0)
                log_error("Cannot use profile %s, running without a profile until one is set:\n%s", profile,
                          err);

        if (!m->no_bus) {
                r = bus_setup(m);
                if (r < 0)
                        return r;
                r = sd_bus_match_signal_async(m->bus, &m->sleep_slot, "org.freedesktop.login1",
                                              "/org/freedesktop/login1", "org.freedesktop.login1.Manager",
                                              "PrepareForSleep", on_sleep, NULL, m);
                if (r < 0)
                        log_warning_errno(r, "Failed to watch for resume from suspend: %m, ignoring");
        }
        if (!m->policy)
                manager_schedule_pass(m, "start");
        return 0;
}

int manager_run(Manager *m)
{
        return sd_event_loop(m->event);
}
