/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <assert.h>
#include <glib.h>
#include <time.h>

#include "core/reconcile.h"
#include "core/systemd.h"

void dirty_mark_all(Dirty *d)
{
        assert(d);

        for (size_t i = 0; i < tuners_n(); i++)
                dirty_mark_full(d, (int)i);
}

void dirty_mark_full(Dirty *d, int tuner)
{
        assert(d);
        assert(tuner >= 0 && (size_t)tuner < tuners_n());

        d->full[tuner] = true;
        strv_free(d->devices[tuner]);
        d->devices[tuner] = NULL;
}

void dirty_mark_device(Dirty *d, int tuner, const char *device)
{
        assert(d);
        assert(tuner >= 0 && (size_t)tuner < tuners_n());

        if (d->full[tuner] || strv_contains(d->devices[tuner], device))
                return;
        strv_push(&d->devices[tuner], xstrdup(device));
}

void dirty_clear(Dirty *d)
{
        assert(d);

        for (size_t i = 0; i < TUNERS_MAX; i++)
                strv_free(d->devices[i]);
        *d = (Dirty){};
}

void pass_result_clear(PassResult *r)
{
        assert(r);

        plan_clear(&r->plan);
        plan_notes_clear(&r->notes);
        cpuset_free(r->isolated);
        cpuset_free(r->housekeeping);
        free(r->isolation_reason);
        free(r->error);
        *r = (PassResult){};
}

static void drop_settings_from(Plan *plan, size_t n)
{
        for (size_t i = n; i < plan->n; i++) {
                Setting *s = &plan->settings[i];
                free(s->object);
                free(s->desired);
                free(s->current);
                free(s->message);
        }
        plan->n = n;
}

static bool has_failure_of(const PlanNotes *notes, size_t from, const char *tuner)
{
        for (size_t i = from; i < notes->n; i++)
                if (notes->items[i].error && streq(notes->items[i].tuner, tuner))
                        return true;
        return false;
}

/* A tuner that could not plan (a read failed) keeps its state: what it planned before the failure is
 * dropped, nothing it set is restored, and the failure is reported. A failed plan is never taken for a
 * tuner that wants nothing. */
static void plan_tuner(const Tuner *t, const PlanContext *ctx, const void *config, const char *device,
                       PassResult *ret, bool *ret_failed)
{
        size_t n_settings = ret->plan.n, n_notes = ret->notes.n;
        int r = t->plan(ctx, config, device, &ret->plan, &ret->notes);

        if (r >= 0)
                return;
        drop_settings_from(&ret->plan, n_settings);
        if (!has_failure_of(&ret->notes, n_notes, t->name))
                plan_notes_fail(&ret->notes, t->name, xasprintf("tuner:%s", t->name), -r,
                                xasprintf("could not plan: %s", strerror(-r)));
        *ret_failed = true;
}

/* What tuner t keeps between passes: its own state, or that of the tuner whose config it reads. */
static void *state_of(const Tuner *t, void *const *states)
{
        int i = tuner_place(t->config_from ?: t);

        return states && i >= 0 ? states[i] : NULL;
}

static void plan_tuners(const Policy *policy, const PlanContext *pass, void *const *states,
                        const Dirty *dirty, PassResult *ret)
{
        for (size_t i = 0; i < tuners_n(); i++) {
                const Tuner *t = tuner_nth(i);
                const void *config = policy ? policy->config[i] : NULL;
                PlanContext ctx = *pass;

                if (!config)
                        continue;
                ctx.state = state_of(t, states);
                if (dirty->full[i])
                        plan_tuner(t, &ctx, config, NULL, ret, &ret->plan_failed[i]);
                else
                        for (char **dev = dirty->devices[i]; dev && *dev; dev++)
                                plan_tuner(t, &ctx, config, *dev, ret, &ret->plan_failed[i]);
        }
}

/* Each tuner that keeps state sees what an applied pass did. */
static void states_applied(void *const *states, const Plan *plan)
{
        for (size_t i = 0; states && i < tuners_n(); i++)
                if (states[i] && tuner_nth(i)->state_applied)
                        tuner_nth(i)->state_applied(states[i], plan);
}

static void plan_restore(Journal *journal, const JournalEntry *e, int t, unsigned phase, PassResult *ret)
{
        Setting *s = plan_add(&ret->plan, e->kind, t >= 0 ? tuner_nth((size_t)t)->name : "unknown", phase,
                              xstrdup(e->object), xstrdup(e->original));

        s->restore = true;
        s->starttime = e->starttime;
        /* Not the process that was changed: nothing of its to put back, and nothing to write. */
        if (journal_entry_task_gone(e)) {
                s->result = SETTING_GONE;
                s->message = xstrdup(e->starttime ? "gone (its PID now names another process), "
                                                    "nothing to restore"
                                                  : "recorded without its process's start time, "
                                                    "so a reused PID cannot be told apart: left alone");
        }
}

/* The order restores run in: processes go home first (kind member: a cgroup rtctl made can only go once
 * nobody is in it, and on cgroup v2 a process's threads went into rtctl's threaded subtree after the
 * process itself), then the directories rtctl made go (with what lies in them: a partition that holds
 * exclusive CPUs its ancestors list), then everything else. */
static int restore_rank(const JournalEntry *e)
{
        if (e->kind == &setting_kind_member)
                return 0;
        if (e->kind->owns_children && streq(e->original, "absent"))
                return 1;
        return 2;
}

/* Journalled objects of wholly replanned tuners that the plan no longer sets go back to their
 * originals, newest first within each rank (above), after everything else: a profile switch goes
 * straight from the old values to the new ones, and only what the new profile leaves alone is
 * restored. */
static void plan_restores(Journal *journal, const Dirty *dirty, PassResult *ret)
{
        g_autoptr(GHashTable) wanted = g_hash_table_new(g_str_hash, g_str_equal);
        unsigned phase = 0;

        for (size_t i = 0; i < ret->plan.n; i++) {
                g_hash_table_add(wanted, ret->plan.settings[i].object);
                phase = MAX(phase, ret->plan.settings[i].phase + 1);
        }
        for (int rank = 0; rank < 3; rank++)
                for (size_t i = journal_size(journal); i-- > 0;) {
                        const JournalEntry *e = journal_entry(journal, i);
                        int t = tuner_index_by_name(e->tuner);

                        if (restore_rank(e) != rank)
                                continue;
                        if (t >= 0 && (!dirty->full[t] || ret->plan_failed[t]))
                                continue;
                        if (g_hash_table_contains(wanted, e->object))
                                continue;
                        plan_restore(journal, e, t, phase, ret);
                }
}

/* Restored objects, and those that went with their device, leave the journal; what is busy (a cpufreq
 * policy whose CPUs are offline) or failed stays there for a later pass, and so does a restore systemd
 * only queued a job for, until the job ends (reconcile_jobs_ended()). */
static void settle_restores(Journal *journal, SettingContext *kinds, PassResult *ret)
{
        g_autoptr(GHashTable) done = g_hash_table_new(g_str_hash, g_str_equal);

        for (size_t i = 0; i < ret->plan.n; i++) {
                Setting *s = &ret->plan.settings[i];

                /* This pass's word on an object is the last: a job of an earlier restore of it that
                 * ends later forgets nothing. */
                if (s->result != SETTING_DEFERRED)
                        g_hash_table_remove(kinds->queued_restores, s->object);
                if (!s->restore)
                        continue;
                if (s->result == SETTING_CHANGED && s->queued)
                        g_hash_table_add(kinds->queued_restores, xstrdup(s->object));
                else if (s->result == SETTING_CHANGED || s->result == SETTING_UNCHANGED ||
                         s->result == SETTING_GONE)
                        g_hash_table_add(done, s->object);
        }
        journal_forget_set(journal, done);
        (void)journal_save(journal);
}

void reconcile_jobs_ended(Journal *journal, SettingContext *kinds)
{
        assert(kinds);

        g_autoptr(GHashTable) ended = systemd_client_take_ended(kinds->systemd);
        g_autoptr(GHashTable) done = g_hash_table_new(g_str_hash, g_str_equal);
        GHashTableIter it;
        gpointer label, result;

        g_hash_table_iter_init(&it, ended);
        while (g_hash_table_iter_next(&it, &label, &result)) {
                if (!g_hash_table_remove(kinds->queued_restores, label))
                        continue; /* not a restore's job */
                if (streq(result, "done"))
                        g_hash_table_add(done, label);
        }
        journal_forget_set(journal, done);
        (void)journal_save(journal);
}

void reconcile_pass(const Policy *policy, const Topology *topology, Journal *journal, const Dirty *dirty,
                    bool dry_run, PassResult *ret)
{
        reconcile_pass_with(policy, topology, journal, dirty, dry_run, NULL, ret);
}

void reconcile_pass_with(const Policy *policy, const Topology *topology, Journal *journal,
                         const Dirty *dirty, bool dry_run, const PassInput *in, PassResult *ret)
{
        uint64_t start = now_usec(CLOCK_MONOTONIC);
        SettingContext own = {}, *kinds = in && in->kinds ? in->kinds : &own;
        TaskScan tasks = {.cache = in ? in->task_cache : NULL};

        assert(ret);

        *ret = (PassResult){};
        if (policy && policy_cpus_explained(policy, topology, &ret->isolated, &ret->housekeeping,
                                            &ret->isolation_reason, &ret->error) < 0) {
                ret->duration_usec = now_usec(CLOCK_MONOTONIC) - start;
                return;
        }
        if (!policy) {
                ret->isolated = cpuset_new(topology->n_cpus);
                ret->housekeeping = cpuset_dup(topology->possible);
        }
        if (kinds == &own)
                setting_context_init(&own, NULL);
        kinds->tasks = &tasks;
        systemd_client_pass_start(kinds->systemd, true);

        PlanContext ctx = {.topology = topology,
                           .isolated = ret->isolated,
                           .housekeeping = ret->housekeeping,
                           .attached = in ? in->attached : NULL,
                           .n_attached = in ? in->n_attached : 0,
                           .threads = in ? in->threads : NULL,
                           .n_threads = in ? in->n_threads : 0,
                           .tasks = &tasks,
                           .pass_start_usec = start,
                           .stop_conflicts = in && in->stop_conflicts,
                           .kinds = kinds};
        plan_tuners(policy, &ctx, in ? in->states : NULL, dirty, ret);
        if (journal)
                plan_restores(journal, dirty, ret);

        applier_apply(&ret->plan, dry_run ? NULL : journal, kinds, &ret->stats);
        if (journal && !dry_run)
                settle_restores(journal, kinds, ret);
        if (!dry_run)
                states_applied(in ? in->states : NULL, &ret->plan);

        kinds->tasks = NULL;
        systemd_client_pass_start(kinds->systemd, false);
        task_scan_clear(&tasks);
        if (kinds == &own) {
                /* A one-off pass (the CLI) waits here for what it asked systemd to do. */
                if (!dry_run && systemd_client_pending(own.systemd) > 0)
                        (void)systemd_client_wait(own.systemd, 30 * 1000000ULL);
                if (journal && !dry_run)
                        reconcile_jobs_ended(journal, &own);
                setting_context_clear(&own);
        }
        ret->duration_usec = now_usec(CLOCK_MONOTONIC) - start;
}
