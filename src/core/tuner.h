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
        const unsigned *attached;
        size_t n_attached;
        /* Every thread of the processes an [Attach] rule with a thread glob matched (not of those attached
         * whole), each with whether the rule wants it on the isolated CPUs. */
        const AttachedThread *threads;
        size_t n_threads;
        /* What the IRQ tuners keep between passes (rates, refusals, pins); NULL in a one-off plan. */
        struct IrqState *irq;
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
} Tuner;

extern const Tuner tuner_block;
extern const Tuner tuner_sysctl;
extern const Tuner tuner_sched;
extern const Tuner tuner_cpuset;
/* The cpuset tuner's one "device": replanning it plans the attached processes and threads alone. */
#define CPUSET_ATTACH_DEVICE "attach"
extern const Tuner tuner_cache;
extern const Tuner tuner_kthread;
extern const Tuner tuner_irq;
extern const Tuner tuner_irqthread;
extern const Tuner tuner_cpufreq;
extern const Tuner tuner_cpuidle;
extern const Tuner tuner_conflict;

#define N_TUNERS 11
extern const Tuner *const tuners[N_TUNERS];

int tuner_index(const char *name);
