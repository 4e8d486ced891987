/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <glib.h>
#include <time.h>

#include "core/reconcile.h"

void dirty_mark_all(Dirty *d)
{
        for (int i = 0; i < N_TUNERS; i++)
                dirty_mark_full(d, i);
}

void dirty_mark_full(Dirty *d, int tuner)
{
        d->full[tuner] = true;
        strv_free(d->devices[tuner]);
        d->devices[tuner] = NULL;
}

void dirty_mark_device(Dirty *d, int tuner, const char *device)
{
        if (d->full[tuner] || strv_contains(d->devices[tuner], device))
                return;
        strv_push(&d->devices[tuner], xstrdup(device));
}

bool dirty_any(const Dirty *d)
{
        for (int i = 0; i < N_TUNERS; i++)
                if (d->full[i] || d->devices[i])
                        return true;
        return false;
}

void dirty_clear(Dirty *d)
{
        for (int i = 0; i < N_TUNERS; i++)
                strv_free(d->devices[i]);
        *d = (Dirty){};
}

void pass_result_clear(PassResult *r)
{
        plan_clear(&r->plan);
        plan_notes_clear(&r->notes);
        cpuset_free(r->isolated);
        cpuset_free(r->housekeeping);
        free(r->error);
        *r = (PassResult){};
}

static void plan_tuners(const Policy *policy, const PlanContext *ctx, const Dirty *dirty, PassResult *ret)
{
        for (int i = 0; i < N_TUNERS; i++) {
                const void *config = policy ? policy->config[i] : NULL;

                if (!config)
                        continue;
                if (dirty->full[i])
                        tuners[i]->plan(ctx, config, NULL, &ret->plan, &ret->notes);
                else
                        for (char **dev = dirty->devices[i]; dev && *dev; dev++)
                                tuners[i]->plan(ctx, config, *dev, &ret->plan, &ret->notes);
        }
}

/* Journalled objects of wholly replanned tuners that the plan no longer sets go back to their
 * originals, newest first, after everything else: a profile switch goes straight from the old values to
 * the new ones, and only what the new profile leaves alone is restored. */
static void plan_restores(Journal *journal, const Dirty *dirty, PassResult *ret)
{
        g_autoptr(GHashTable) wanted = g_hash_table_new(g_str_hash, g_str_equal);
        unsigned phase = 0;

        for (size_t i = 0; i < ret->plan.n; i++) {
                g_hash_table_add(wanted, ret->plan.settings[i].object);
                phase = MAX(phase, ret->plan.settings[i].phase + 1);
        }
        for (size_t i = journal_size(journal); i-- > 0;) {
                const JournalEntry *e = journal_entry(journal, i);
                int t = tuner_index(e->tuner);
                Setting *s;

                if (t >= 0 && !dirty->full[t])
                        continue;
                if (g_hash_table_contains(wanted, e->object))
                        continue;
                s = plan_add(&ret->plan, e->kind, t >= 0 ? tuners[t]->name : "unknown", phase,
                             xstrdup(e->object), xstrdup(e->original));
                s->restore = true;
        }
}

/* Restored objects, and those that vanished with their device, leave the journal. */
static void settle_restores(Journal *journal, PassResult *ret)
{
        g_autoptr(GHashTable) done = g_hash_table_new(g_str_hash, g_str_equal);

        for (size_t i = 0; i < ret->plan.n; i++) {
                Setting *s = &ret->plan.settings[i];

                if (!s->restore)
                        continue;
                if (s->result == SETTING_FAILED &&
                    (s->error == -ENOENT || s->error == -ENODEV || s->error == -ESRCH)) {
                        s->result = SETTING_UNCHANGED;
                        free(s->message);
                        s->message = xstrdup("gone, nothing to restore");
                        ret->stats.failed--;
                        ret->stats.unchanged++;
                }
                /* A cpufreq policy whose CPUs are all offline answers EBUSY: its original goes back when
                 * they return (it stays in the journal), and that is not a failure. */
                if (s->result == SETTING_FAILED && s->error == -EBUSY) {
                        s->result = SETTING_UNCHANGED;
                        free(s->message);
                        s->message = xstrdup("busy (its CPUs are offline): restored later");
                        ret->stats.failed--;
                        ret->stats.unchanged++;
                        continue;
                }
                if (s->result != SETTING_FAILED)
                        g_hash_table_add(done, s->object);
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

        *ret = (PassResult){};
        if (policy && policy_cpus(policy, topology, &ret->isolated, &ret->housekeeping, &ret->error) < 0) {
                ret->duration_usec = now_usec(CLOCK_MONOTONIC) - start;
                return;
        }
        if (!policy) {
                ret->isolated = cpuset_new(topology->n_cpus);
                ret->housekeeping = cpuset_dup(topology->possible);
        }

        PlanContext ctx = {.topology = topology,
                           .isolated = ret->isolated,
                           .housekeeping = ret->housekeeping,
                           .attached = in ? in->attached : NULL,
                           .n_attached = in ? in->n_attached : 0,
                           .irq = in ? in->irq : NULL,
                           .pass_start_usec = start,
                           .stop_conflicts = in && in->stop_conflicts};
        plan_tuners(policy, &ctx, dirty, ret);
        if (journal)
                plan_restores(journal, dirty, ret);

        applier_apply(&ret->plan, dry_run ? NULL : journal, &ret->stats);
        if (journal && !dry_run)
                settle_restores(journal, ret);
        ret->duration_usec = now_usec(CLOCK_MONOTONIC) - start;
}
