/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <glib.h>

#include "core/reconcile.h"
#include "daemon/failure-log.h"

typedef struct LastPass {
        uint64_t timestamp_usec; /* CLOCK_REALTIME */
        unsigned changes;
        unsigned failures;
        uint64_t duration_usec;
} LastPass;

/* One online CPU's power state, as the last pass that touched CPUs left it. */
typedef struct CpuPower {
        unsigned cpu;
        char *driver;
        char *governor;
        char *epp;
        unsigned min_khz;
        unsigned max_khz;
        char *disabled_states; /* names, comma-separated */
        char *pm_qos;          /* pm_qos_resume_latency_us as the kernel shows it */
} CpuPower;

/* What status says. Kept across passes: a pass over one disk does not forget another tuner's failure.
 * Passes update it; the bus only marshals it. */
typedef struct Status {
        GHashTable *failures;    /* object -> Failure */
        GHashTable *unsupported; /* object -> Failure (error 0) */
        FailureLog log;          /* the failures logged: each is logged once, until it changes */
        CpuSet *isolated;
        CpuSet *housekeeping;
        char *isolation_reason; /* why auto:N chose those cores; NULL for a CPU list */
        LastPass last_pass;
        CpuPower *power;
        size_t n_power;
        bool ready_sent;
        char *last_line; /* the STATUS= line systemd has */
        /* Boot arguments the profile in force wants and the running kernel lacks ("isolcpus=...
         * threadirqs"); NULL when none: RebootPending. */
        char *boot_missing;
} Status;

void status_init(Status *s);
void status_clear(Status *s);

/* Takes a pass's results: failures and notes of wholly replanned tuners start over, those of single
 * devices are replaced object by object; every setting's result (sorted by the applier: gone, busy,
 * refused, failed) lands in one place here. Takes the CPU split from res. Logs each failure that is new
 * or changed (one that stands as it was is not logged again) and each logged one that is now in place;
 * returns how many failures it logged. */
unsigned status_update(Status *s, const Dirty *dirty, PassResult *res);
/* Compares the boot arguments p wants on t (src/core/bootargs.c) with the running kernel's command line:
 * boot_missing, and a note in Unsupported naming them. p NULL: nothing is wanted. */
void status_update_boot(Status *s, const Policy *p, const Topology *t);
/* A failure found outside a pass (a systemd job, the journal): logged at level, once, as a pass's are. */
void status_set_failure(Status *s, int level, const char *tuner, const char *object, int error,
                        const char *message);
/* A removed device's failures and notes go with it ("/sys/block/loop9/"). */
void status_forget_under(Status *s, const char *prefix);
void status_forget_tuner(Status *s, const char *tuner);
/* Rereads the CPU power model (governor, EPP, frequencies, idle states, PM QoS per online CPU): after a
 * pass that touched CPUs, never on a property read. */
void status_refresh_power(Status *s, const CpuSet *online);
unsigned status_n_failures(const Status *s);
/* The line `systemctl status rtctld` shows: "Profile rt; 1 hold (org.example.Daw); 2 failures (irq, block)".
 * holds: "1 hold (...)", or NULL when none. */
char *status_line(const Status *s, const char *profile, const char *holds);
/* Tells systemd (READY=1 the first time, STATUS=) only when the line changed: a pass for each uevent
 * must not wake PID 1 too. */
void status_notify(Status *s, const char *profile, const char *holds);
