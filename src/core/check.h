/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <sys/types.h>

#include "shared/cpuset.h"
#include "shared/util.h"

/* What an audio user needs from this machine, audited without changing anything, through the root
 * prefix: `rtctl check` runs it in place, rtctld answers Check() with it. Every check and its fix is
 * listed in rtctl(1). */

typedef struct AuditFinding {
        const char *check;  /* "preemption", "isolated-tasks", ... */
        const char *status; /* "ok", "warn" (something to fix), "info" */
        char *detail;       /* a sentence a person can act on */
        char *fix;          /* the profile key, boot argument or command that fixes it; "" when none */
} AuditFinding;

typedef struct Audit {
        AuditFinding *items;
        size_t n, allocated;
        char *
            *strings; /* check and status names not of the audit's own (read from a reply): freed with it */
} Audit;

typedef struct AuditOptions {
        /* The CPUs kept for chosen work, and where that came from ("rtctld", "profile desktop"). NULL:
         * no isolated CPUs, so the isolation checks say there is nothing to check. */
        const CpuSet *isolated;
        const char *isolated_source;
        /* The boot arguments the profile wants that the running kernel lacks (bootargs_missing()), NULL
         * when it has them all; boot_known false: no profile to compare with. */
        bool boot_known;
        const char *boot_missing;
        const char *profile;
        /* The profile has a Threads=realtime rule; policy_events: how rtctld follows policy changes for
         * it, as its PolicyEvents says ("tracepoints", "re-check after thread creation: WHY"); NULL
         * without a daemon, when the kernel's configuration tells whether it would have the tracepoints. */
        bool realtime_rules;
        const char *policy_events;
} AuditOptions;

/* The machine's checks: they need no particular user. */
void audit_run(const AuditOptions *o, Audit *ret);
bool audit_warns(const Audit *a);
void audit_clear(Audit *a);
/* Takes detail and fix (fix NULL: none). */
void audit_add(Audit *a, const char *check, const char *status, char *detail, char *fix);

/* The user whose session is judged: limits, groups and a real SCHED_FIFO attempt are a user's, not
 * the machine's, and the answer for root says nothing about the desktop user. */
typedef struct AuditUser {
        uid_t uid;
        gid_t gid;
        char *name;
        const char *why; /* "the caller", "--user", "the active session's user" */
        bool self;       /* the judged user is the process running the audit: its own limits count */
} AuditUser;

/* The user named (NULL: the caller, or when the caller is root the active graphical session's user).
 * -ESRCH: no such user. */
int audit_user_pick(const char *name, AuditUser *ret);
void audit_user_clear(AuditUser *u);
void audit_user_checks(const AuditUser *u, Audit *a);

/* pam_limits' answer for one item ("rtprio", "memlock") of a user in the given groups, from
 * /etc/security/limits.conf then limits.d/ *.conf under the root prefix: a user's own line beats a
 * group's, which beats "*"; among equals the later wins. RLIM_INFINITY for "unlimited"; -ENOENT when no
 * line sets it. ret_where: "file:line" of the deciding line. */
int audit_pam_limit(const char *user, char *const *groups, const char *item, unsigned long long *ret_soft,
                    char **ret_where);

/* A thread's scheduling as /proc/PID/task/TID/stat shows it. */
typedef struct ThreadSched {
        unsigned pid;
        unsigned tid;
        char comm[16];         /* the thread's own name */
        char process_comm[16]; /* its process's */
        unsigned flags;
        unsigned policy; /* SCHED_OTHER 0, SCHED_FIFO 1, SCHED_RR 2, ... */
        unsigned rt_priority;
} ThreadSched;

/* Parses a /proc/PID/task/TID/stat line. */
int thread_sched_parse(const char *stat, ThreadSched *ret);

/* rtkit's default MaxRealtimePriority: threads made real-time through rtkit run at or below it. */
#define RTKIT_CEILING 20

/* The audio priority order on threads already read: audio IRQ threads (irq/N-snd_*, or those of IRQs
 * in audio_irqs) above the real-time threads of audio servers (PipeWire's data-loop.N, every real-time
 * thread of jackd and jackdbus), and those above rtkit's ceiling. */
void audit_inversion(Audit *a, const ThreadSched *threads, size_t n, const unsigned *audio_irqs,
                     size_t n_audio_irqs);
