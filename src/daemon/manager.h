/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <glib.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "core/daemon-conf.h"
#include "core/irqs.h"
#include "core/journal.h"
#include "core/policy.h"
#include "core/reconcile.h"
#include "core/topology.h"
#include "daemon/events.h"
#include "daemon/manager-reads.h"
#include "daemon/manager-status.h"

/* A process put on the isolated CPUs; the start time tells it from a later process with its PID. */
typedef struct Attached {
        unsigned pid;
        unsigned long long starttime;
} Attached;

/* The daemon's whole state: one instance, handed to every callback. Its jobs live in one file each:
 *   manager.c          the loop: passes, their timers, signals, answering callers when a pass is done
 *   manager-status.c   what status says: failures, notes, the CPU power model, systemd's STATUS=
 *   manager-profile.c  profiles: load, switch, reload, restore, the remembered one
 *   manager-attach.c   processes attached to the isolated CPUs
 *   manager-irq.c      IRQ pins and the IRQ listing
 *   manager-events.c   what uevents and resume mark dirty
 *   manager-reads.c    the expensive reads anyone may ask for (Plan, ListIrqs, Verify), cached
 *   bus.c              the D-Bus API, marshalling what this struct holds
 *   bus-reads.c        the read-only methods: queued per caller, served after everything else */
typedef struct Manager {
        sd_event *event;
        sd_bus *bus;
        sd_event_source *pass_source;      /* a defer source: the one pass after the event queue drained */
        sd_event_source *settle_source;    /* one more pass shortly after a CPU event */
        sd_event_source *rebalance_source; /* periodic passes a tuner asks for (RebalanceSec=), else none */
        sd_event_source *retry_source;     /* busy settings and failed plans, tried again shortly */
        sd_event_source *stop_timeout;     /* stopping: do not wait for systemd forever */
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
        SettingContext kinds;
        Dirty dirty;
        char *pass_reason;
        Dirty retry;               /* what the retry timer replans */
        unsigned retries;          /* in a row, without a clean pass */
        bool after_jobs[N_TUNERS]; /* replanned once systemd finished the jobs a pass queued */
        Attached *attached;
        size_t n_attached;
        IrqState irq;
        sd_bus_message **waiting; /* calls answered when the pass and what it started are done */
        size_t n_waiting;

        Status status;
        ReadCache reads;
        struct BusReads *bus_reads;
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
/* One more pass shortly after a CPU event (the kernel's own cpuset work may follow the uevent). */
void manager_schedule_settle(Manager *m);
/* Marks every tuner whose plan depends on the CPUs (hotplug, attached processes, resume). */
void manager_mark_cpu_tuners(Manager *m);
/* Queues a method call to be answered with (changes, failures) once the scheduled pass and what it
 * started (systemd jobs, retries) are done; answered at once when nothing is scheduled. */
void manager_wait_for_pass(Manager *m, sd_bus_message *call);
/* A dry run of p as the daemon would apply it: with the processes attached, the IRQ pins and refusals
 * (pins only when p is the active profile) and the rates since the last pass. Writes nothing. */
void manager_dry_run(Manager *m, const Policy *p, PassResult *ret);

/* manager-profile.c */
/* Loads, validates and activates a profile; on error the last good policy stays. Returns -ENOENT for
 * no such profile, -EINVAL (with ret_error) for an invalid one. */
int manager_set_profile(Manager *m, const char *name, char **ret_error);
/* Switches without remembering it (the profile at start). */
int manager_use_profile(Manager *m, const char *name, char **ret_error);
/* Rereads the daemon settings and the active profile; on error nothing changes. */
int manager_reload(Manager *m, char **ret_error);
/* Drops the policy: the next pass puts every journalled value back. */
void manager_restore(Manager *m);
const char *manager_state(const Manager *m);
const char *manager_active_profile(const Manager *m);

/* manager-attach.c */
/* -ESRCH no such process, -EPERM PID 1 or a kernel thread, -EEXIST already attached, -ENXIO the active
 * profile isolates no CPU. On success a pass is scheduled. */
int manager_attach(Manager *m, unsigned pid);
/* -ENOENT: not attached. */
int manager_detach(Manager *m, unsigned pid);
/* A process that exited (or whose PID now belongs to another) is no longer attached. */
void manager_prune_attached(Manager *m);
void manager_load_attached(Manager *m);
/* The PIDs, for a pass (free the array). */
unsigned *manager_attached_pids(const Manager *m);

/* manager-irq.c */
/* A run-time IRQ placement, kept until restore or a profile change. cpus "" drops it. -ENOENT no such
 * IRQ, -EPERM the kernel places it (reason in ret_error), -EINVAL a bad CPU list, -EXDEV CPUs that are
 * isolated without allow_isolated, -ENXIO offline CPUs only, -ESRCH nothing to unpin, -EOPNOTSUPP the
 * profile places no IRQs. On success a pass is scheduled. */
int manager_pin_irq(Manager *m, unsigned irq, const char *cpus, bool allow_isolated, char **ret_error);
/* Everything ListIrqs() says: the IRQs read now (a method call asks for the present), rates per
 * second since the last pass, and each IRQ's first thread's scheduling ("fifo:50"; NULL when none). */
int manager_irqs(Manager *m, IrqTable **ret, double **ret_rates, char ***ret_threads);

/* manager-events.c */
void manager_on_uevent(const Uevent *ev, void *userdata);
int manager_on_sleep(sd_bus_message *msg, void *userdata, sd_bus_error *error);
