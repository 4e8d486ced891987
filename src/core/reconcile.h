/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include "core/applier.h"
#include "core/journal.h"
#include "core/policy.h"
#include "core/topology.h"
#include "core/tuner.h"

/* What the next pass must replan: whole tuners, or single devices of one tuner. */
typedef struct Dirty {
        bool full[TUNERS_MAX];
        char **devices[TUNERS_MAX];
} Dirty;

void dirty_mark_all(Dirty *d);
void dirty_mark_full(Dirty *d, int tuner);
void dirty_mark_device(Dirty *d, int tuner, const char *device);
void dirty_clear(Dirty *d);

typedef struct PassResult {
        Plan plan; /* every setting of the pass with its result; restores have restore=true */
        PlanNotes notes;
        ApplyStats stats;
        CpuSet *isolated;
        CpuSet *housekeeping;
        char *isolation_reason; /* which cores auto:N chose and why; NULL for a CPU list */
        char *error;            /* the policy could not be placed on this machine: nothing was planned */
        bool plan_failed[TUNERS_MAX]; /* could not plan (its state was kept): try again */
        uint64_t duration_usec;
} PassResult;

void pass_result_clear(PassResult *r);

/* One pass: plan the dirty tuners, add a restore for every journalled object a wholly replanned tuner
 * no longer wants, apply. policy NULL means no tuning at all: everything journalled goes back.
 * dry_run: nothing is written and the journal is untouched; the plan shows what would change. */
void reconcile_pass(const Policy *policy, const Topology *topology, Journal *journal, const Dirty *dirty,
                    bool dry_run, PassResult *ret);
/* What the daemon keeps between passes and hands to the tuners. */
typedef struct PassInput {
        const TaskId *attached; /* processes attached to the isolated CPUs */
        size_t n_attached;
        const AttachedThread *threads; /* threads [Attach] rules place one by one */
        size_t n_threads;
        void *const *states; /* each tuner's state (Tuner.state_new) by its place; NULL: none */
        bool stop_conflicts;
        SettingContext *kinds; /* what setting kinds keep between passes; NULL: one for this pass */
        TaskCache *task_cache; /* kernel threads kept between passes; NULL: /proc is read whole */
} PassInput;

/* The same, with the daemon's state (in may be NULL). */
void reconcile_pass_with(const Policy *policy, const Topology *topology, Journal *journal,
                         const Dirty *dirty, bool dry_run, const PassInput *in, PassResult *ret);

/* The systemd jobs that ended since the last call: a restore whose job ended "done" leaves the journal
 * (saved); one whose job failed stays there, for a later restore to try again. */
void reconcile_jobs_ended(Journal *journal, SettingContext *kinds);
