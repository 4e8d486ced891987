/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <glib.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "core/irqs.h"
#include "core/journal.h"
#include "core/policy.h"
#include "core/reconcile.h"
#include "core/topology.h"
#include "daemon/daemon-conf.h"
#include "daemon/events.h"

typedef struct Failure {
        char *tuner;
        char *object;
        int error; /* positive errno, as on the bus */
        char *message;
} Failure;

/* A process put on the isolated CPUs; the start time tells it from a later process with its PID. */
typedef struct Attached {
        unsigned pid;
        unsigned long long starttime;
} Attached;

typedef struct LastPass {
        uint64_t timestamp_usec; /* CLOCK_REALTIME */
        unsigned changes;
        unsigned failures;
        uint64_t duration_usec;
} LastPass;

/* The daemon's whole state: one instance, handed to every callback. */
typedef struct Manager {
        sd_event *event;
        sd_bus *bus;
        sd_event_source *pass_source;      /* a defer source: the one pass after the event queue drained */
        sd_event_source *settle_source;    /* one more pass shortly after a CPU event */
        sd_event_source *rebalance_source; /* periodic passes a tuner asks for (RebalanceSec=), else none */
        sd_bus_slot *sleep_slot;           /* logind's PrepareForSleep: re-apply after resume */
        UeventMonitor *uevents;

        char **search_path;
        DaemonConf conf;
        char *runtime_dir;
        char *state_dir;
        char *profile_override; /* --profile */
        bool no_bus;

        Topology *topology;
        Journal *journal;
        Policy *policy; /* NULL: no tuning (after Restore, or before the first profile) */
        Dirty dirty;
        char *pass_reason;
        Attached *attached;
        size_t n_attached;
        IrqState irq;
        sd_bus_message **waiting; /* SetProfile/Restore calls answered when the pass is done */
        size_t n_waiting;

        /* Status, kept across passes: a pass over one disk does not forget another tuner's failure. */
        GHashTable *failures;    /* object -> Failure */
        GHashTable *unsupported; /* object -> Failure (error 0) */
        CpuSet *isolated;
        CpuSet *housekeeping;
        LastPass last_pass;
        bool ready_sent;
        char *last_status; /* the STATUS= line systemd has */
        bool stopping;
} Manager;

int manager_new(Manager **ret);
void manager_free(Manager *m);
static inline void manager_freep(Manager **m)
{
        manager_free(*m);
}
#define _cleanup_manager_ _cleanup_(manager_freep)

int manager_start(Manager *m);
int manager_run(Manager *m);

/* Schedules the one pass (no delay: it runs when the event queue is empty). */
void manager_schedule_pass(Manager *m, const char *reason);

/* Loads, validates and activates a profile; on error the last good policy stays. Returns -ENOENT for
 * no such profile, -EINVAL (with ret_error) for an invalid one. */
int manager_set_profile(Manager *m, const char *name, char **ret_error);
/* Rereads the daemon settings and the active profile; on error nothing changes. */
int manager_reload(Manager *m, char **ret_error);
/* Drops the policy: the next pass puts every journalled value back. */
void manager_restore(Manager *m);
/* Queues a method call to be answered with (changes, failures) when the pending pass is done. */
void manager_wait_for_pass(Manager *m, sd_bus_message *call);

/* -ESRCH no such process, -EPERM PID 1 or a kernel thread, -EEXIST already attached, -ENXIO the active
 * profile isolates no CPU. On success a pass is scheduled. */
int manager_attach(Manager *m, unsigned pid);
/* -ENOENT: not attached. */
int manager_detach(Manager *m, unsigned pid);

/* A run-time IRQ placement, kept until restore or a profile change. cpus "" drops it. -ENOENT no such
 * IRQ, -EPERM the kernel places it (reason in ret_error), -EINVAL a bad CPU list, -EXDEV CPUs that are
 * isolated without allow_isolated, -ENXIO offline CPUs only. On success a pass is scheduled. */
int manager_pin_irq(Manager *m, unsigned irq, const char *cpus, bool allow_isolated, char **ret_error);
/* A dry run of p as the daemon would apply it: with the processes attached, the IRQ pins and refusals
 * (pins only when p is the active profile) and the rates since the last pass. Writes nothing. */
void manager_dry_run(Manager *m, const Policy *p, PassResult *ret);
/* Everything ListIrqs() says, read now; rates are per second since the last pass. */
int manager_irqs(Manager *m, IrqTable **ret, double **ret_rates);

const char *manager_state(const Manager *m);
const char *manager_active_profile(const Manager *m);
