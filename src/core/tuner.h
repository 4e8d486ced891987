/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include "core/attach.h"
#include "core/config.h"
#include "core/setting.h"
#include "core/topology.h"

/* What a tuner sees when it plans: the machine and where the policy puts housekeeping and isolation. */
typedef struct PlanContext {
        const Topology *topology;
        const CpuSet *isolated;
        const CpuSet *housekeeping;
        /* Processes put on the isolated CPUs at run time (AttachProcess), still alive. */
        const TaskId *attached;
        size_t n_attached;
        /* Every thread of the processes an [Attach] rule with a thread glob matched (not of those attached
         * whole), each with whether the rule wants it on the isolated CPUs. */
        const AttachedThread *threads;
        size_t n_threads;
        /* What this tuner keeps between passes (Tuner.state_new), opaque to the core; NULL in a one-off
         * plan. A tuner that reads another's config (config_from) shares that one's state. */
        void *state;
        /* The pass's one reading of /proc, loaded when a tuner first asks. */
        TaskScan *tasks;
        uint64_t pass_start_usec; /* CLOCK_MONOTONIC */
        /* Stop conflicting services (irqbalance) rather than warn about them: OnConflict=stop. */
        bool stop_conflicts;
        /* What setting kinds keep; a tuner only asks it what the machine offers (whether systemd has a
         * property), never writes through it. */
        SettingContext *kinds;
} PlanContext;

/* Something the profile asks for that this kernel or machine cannot do: reported, never a failure. */
typedef struct Unsupported {
        const char *tuner;
        char *object;
        char *reason;
        int error; /* positive errno: not a note but a failure found while planning (a value the driver does
                      not offer), reported with the failures; 0: not supported here */
} Unsupported;

typedef struct PlanNotes {
        Unsupported *items;
        size_t n, allocated;
} PlanNotes;

void plan_notes_add(PlanNotes *n, const char *tuner, char *object, char *reason); /* takes both */
/* A failure known before writing: the setting is not planned, and status says why. */
void plan_notes_fail(PlanNotes *n, const char *tuner, char *object, int error, char *reason);
void plan_notes_clear(PlanNotes *n);
/* "not supported: REASON", or "ERRNO TEXT: REASON" for a failure known before writing. */
char *unsupported_describe(const Unsupported *u);

/* One subsystem. A tuner never writes: plan() only reads the machine and says what it wants, so a dry
 * run is exact and every tuner can be tested on a fixture tree. */
typedef struct Tuner {
        const char *name;
        /* Profile sections it owns: "Block" owns [Block] and [Block NAME]. */
        const char *const *sections;
        /* Uevent subsystems whose add/change/remove replan it, for one device. */
        const char *const *subsystems;
        /* Replanned whole when a CPU goes online or offline. */
        bool cpu_dependent;
        /* A uevent of its subsystems replans it whole, not one device: IRQ placement is one decision. */
        bool replan_whole;
        /* Replanned whole after resume, as CPU-dependent tuners are: firmware and drivers reset it. */
        bool after_resume;

        /* Reads its sections (marking the keys it knows), appends "file:line: Key=value: why" for each
         * bad one to *errors. Returns its config (NULL when the profile does not use it). */
        void *(*parse)(Conf *conf, char ***errors);
        void (*free_config)(void *config);
        /* Instead of parse: the config of the tuner that owns the sections both read (the IRQ thread
         * tuner reads [IRQ], parsed once by the IRQ tuner), where uses() says it has work in it. */
        const struct Tuner *config_from;
        bool (*uses)(const void *config);
        /* device: NULL for the whole machine, else the kernel name of one device of its subsystems.
         * Negative errno when it could not plan (a read failed): the pass then keeps what the tuner set
         * as it is and reports the failure; a tuner may say what failed with plan_notes_fail(). */
        int (*plan)(const PlanContext *ctx, const void *config, const char *device, Plan *plan,
                    PlanNotes *notes);
        /* Seconds between passes the config asks for (periodic rebalancing); 0 or NULL: events only. */
        unsigned (*interval_sec)(const void *config);
        /* What the config needs from the kernel command line (BOOT_NEEDS_*); NULL: nothing. */
        unsigned (*boot_needs)(const void *config);

        /* What it keeps between passes, made once by whoever runs passes (the daemon) and handed back
         * in PlanContext.state; NULL when it keeps nothing. state_applied() sees each applied pass's
         * results. */
        void *(*state_new)(void);
        void (*state_free)(void *state);
        void (*state_applied)(void *state, const Plan *plan);
} Tuner;

/* What a profile may need that only a reboot gives. */
#define BOOT_NEEDS_IRQ_THREADS (1u << 0) /* IRQ handlers run in threads (threadirqs) */

/* The most tuners a registry may hold: the size of the arrays indexed by a tuner's place. */
#define TUNERS_MAX 16

/* The tuners in the order of a pass. The layer that knows them registers them once at start
 * (tuners/registry.c); the core walks them without naming any. */
void tuners_register(const Tuner *const *list, size_t n);
size_t tuners_n(void);
const Tuner *tuner_nth(size_t i);
/* The place of a registered tuner, or of the one with that name (read from data: the journal); -1 when
 * none. Code names a tuner by its TunerId (tuners/registry.h), never by a string. */
int tuner_place(const Tuner *t);
int tuner_index_by_name(const char *name);
