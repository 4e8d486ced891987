/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <glib.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "core/daemon-conf.h"
#include "tuners/irq.h"
#include "core/journal.h"
#include "core/policy.h"
#include "core/reconcile.h"
#include "core/topology.h"
#include "core/tracefs.h"
#include "tuners/registry.h"
#include "daemon/topology-cache.h"
#include "daemon/bus-attach.h" /* for bus.c's vtable, which the lead keeps */
#include "daemon/manager-reads.h"
#include "daemon/manager-status.h"
#include "daemon/proc-events.h"
#include "daemon/uevent-monitor.h"

typedef struct sd_login_monitor sd_login_monitor;

/* A process put on the isolated CPUs; the start time tells it from a later process with its PID. */
typedef struct Attached {
        unsigned pid;
        unsigned long long starttime;
        uid_t uid; /* who attached it: counted against that user's share */
} Attached;

/* How rtctld learns that a thread's scheduling policy changed (manager-sched.c). */
typedef enum PolicyWatchMethod {
        POLICY_WATCH_NONE,        /* no profile in force or held has a Threads=realtime rule */
        POLICY_WATCH_TRACEPOINTS, /* sched_setscheduler/sched_setattr's syscall tracepoints */
        POLICY_WATCH_RECHECK,     /* a bounded re-check after a thread is created */
} PolicyWatchMethod;

/* A process to look at again after it created a thread (the re-check method). */
typedef struct PolicyRecheck {
        unsigned pid;
        unsigned stage; /* index of the next delay */
        uint64_t due;   /* CLOCK_MONOTONIC µs */
} PolicyRecheck;

typedef struct PolicyWatch {
        PolicyWatchMethod method;
        char *why; /* why the re-check method is used */
        Journal *journal;
        int fd; /* the instance's trace_pipe */
        sd_event_source *source;
        SchedTrace trace;
        PolicyRecheck *rechecks;
        size_t n_rechecks, rechecks_allocated;
        sd_event_source *timer;  /* only while a re-check is pending */
        sd_event_source *linger; /* the last hold that wanted the tracing ended: off when it fires */
        bool for_holds;          /* on for a hold, the base profile has no Threads=realtime rule */
} PolicyWatch;

/* A process an [Attach] rule matched: found by a scan or a process event, never saved. */
typedef struct RuleMatch {
        unsigned pid;
        unsigned long long starttime;
        unsigned rule; /* index in the policy's rules */
        char comm[16];
        /* By thread: how many of its threads the last pass isolated, once a pass has said so in the log
         * (reported). A match that places nothing is worth a line: the user expected an effect. */
        bool reported;
        unsigned placed;
} RuleMatch;

/* A process a [Hold] rule of the base profile matched. */
typedef struct HoldMatch {
        unsigned pid;
        unsigned long long starttime;
        unsigned rule; /* index in m->hold_rules */
} HoldMatch;

/* What a [Hold] rule did with its hold. */
typedef struct HoldRuleState {
        uint32_t cookie;          /* the hold it took; 0: none */
        bool tried;               /* taken (or failed, said once) since the rule last matched nothing */
        uint64_t unmatched_since; /* CLOCK_MONOTONIC µs the rule matched nothing from; 0: it matches */
        bool gone_unseen;         /* its last match was found gone by a check: its exit event was lost */
        unsigned pid;             /* the first process it matched, for the hold's reason */
        uid_t uid;
        char *program;
} HoldRuleState;

/* What a pass places on the isolated CPUs: whole processes (attached, or matched by a rule with
 * Threads=all) and single threads (rules with a thread glob). */
typedef struct AttachInput {
        TaskId *pids;
        size_t n_pids, pids_allocated;
        AttachedThread *threads;
        size_t n_threads, threads_allocated;
} AttachInput;

/* A profile an application asked for, for as long as its bus name lives (HoldProfile). */
/* A method call answered when the pass it asked for is done: with (changes, failures), or with the
 * cookie of the hold it took. */
typedef struct Waiter {
        sd_bus_message *reply; /* not sent yet: the call itself is not kept */
        uint32_t cookie;
} Waiter;

typedef struct Hold {
        uint32_t cookie; /* random, never 0 */
        char *profile;
        int rank;      /* the profile's Rank= when the hold was taken */
        bool realtime; /* ...and whether it had a Threads=realtime rule (manager-sched.c) */
        char *reason;
        char *application_id;
        char *bus_name;      /* the holder's unique name: the hold ends when it leaves the bus */
        sd_bus_track *track; /* follows bus_name; shared by the holds of one holder */
        uid_t uid;           /* the holder's user: counted against that user's share */
        uint64_t since_usec; /* CLOCK_REALTIME */
        uint64_t seq;        /* newer holds win ties */
        /* Taken through power-profiles-daemon's API (bus-ppd.c): the object path it was asked on, where
         * its ProfileReleased goes; NULL for rtctl's own HoldProfile. */
        char *ppd_path;
} Hold;

typedef struct Polkit Polkit;

/* The daemon's whole state: one instance, handed to every callback. Its jobs live in one file each:
 *   manager.c          the loop: passes, their timers, signals, answering callers when a pass is done
 *   manager-status.c   what status says: failures, notes, the CPU power model, systemd's STATUS=
 *   manager-profile.c  profiles: load, switch, reload, restore, the remembered one, which one is in force
 *   manager-hold.c     holds: profiles applications ask for while their bus name lives
 *   manager-attach.c   processes attached to the isolated CPUs
 *   manager-rules.c    [Attach] rules: the /proc scan, process events, the active user
 *   manager-irq.c      IRQ pins and the IRQ listing
 *   manager-events.c   what uevents and resume mark dirty
 *   topology-cache.c   the CPU topology, reread once per burst of CPU events
 *   manager-reads.c    the expensive reads anyone may ask for (Plan, ListIrqs, Verify), cached
 *   bus.c              the D-Bus API, marshalling what this struct holds
 *   bus-signals.c      every signal and PropertiesChanged the daemon emits
 *   bus-reads.c        the read-only methods: queued per caller, served after everything else
 *   polkit.c           who may call what: polkit's answers, asked without blocking */
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
        unsigned realtime_priority; /* --realtime-priority=: SCHED_FIFO at start; 0: as started */

        TopologyCache topology; /* through manager_topology(): CPU events only mark it stale */
        TaskCache task_cache;   /* kernel threads held by pidfds between passes (core/tasks.h) */
        Journal *journal;
        int journal_lock; /* held for the daemon's life: no `rtctl restore` replays the journal meanwhile */
        Policy *policy;   /* in force; NULL: no tuning (after Restore, or before the first profile) */
        char *base_profile; /* SetProfile's (or the configured one); NULL after Restore */
        int base_rank;
        bool base_realtime; /* the base profile has a Threads=realtime rule (manager-sched.c) */
        Hold **holds;
        size_t n_holds, holds_allocated;
        uint64_t hold_seq;
        sd_bus_slot *name_slot; /* NameOwnerChanged: callers leaving the bus (bus.c) */
        Polkit *polkit;
        bool ppd_serving;           /* power-profiles-daemon's objects are registered (bus-ppd.c) */
        int ppd_shown;              /* the power profile ActiveProfile last signalled; -1: none yet */
        bool ppd_names_asked;       /* and its names asked for */
        bool ppd_owned[2];          /* its names rtctld owns now: PPD_NAME, PPD_NAME_OLD (bus-ppd.c) */
        sd_bus_slot *ppd_watch;     /* NameOwnerChanged of its name, while waiting for it to run */
        sd_event_source *ppd_timer; /* the next read of its unit while waiting for it */
        uint64_t ppd_idle_until;    /* CLOCK_MONOTONIC: how long its unit may idle with no job queued */
        unsigned ppd_names_wanted;  /* the names it will own, bits in ppd_names' order; 0: not read yet */
        SettingContext kinds;
        Dirty dirty;
        char *pass_reason;
        Dirty retry;                 /* what the retry timer replans */
        unsigned retries;            /* in a row, without a clean pass */
        bool after_jobs[_TUNER_MAX]; /* replanned once systemd finished the jobs a pass queued */
        Attached *attached;
        size_t n_attached, attached_allocated;
        ProcMonitor *procs; /* process events, while the policy has [Attach] or the base [Hold] rules */
        sd_login_monitor *login;
        sd_event_source *login_source;
        RuleMatch *matches;
        size_t matches_allocated;
        size_t n_matches;   /* RULE_MATCHES_MAX at most */
        bool matches_full;  /* a match was ignored for it, and said so; until one goes */
        uid_t *active_uids; /* users of the active session of each seat */
        size_t n_active_uids, active_uids_allocated;
        AttachRules *hold_rules; /* the base profile's [Hold] rules; NULL: none */
        HoldMatch *hold_matches;
        size_t n_hold_matches, hold_matches_allocated; /* RULE_MATCHES_MAX at most */
        HoldRuleState *hold_state;                     /* per hold rule */
        bool hold_matches_full;       /* a match was not kept for want of room: rescan before a release */
        bool hold_resync;             /* process events were lost: the next sync scans /proc again */
        sd_event_source *hold_timer;  /* takes and releases holds, debounced (manager-hold-rules.c) */
        AttachedThread *rule_threads; /* the threads rules put on the isolated CPUs in the last pass */
        size_t n_rule_threads, rule_threads_allocated;
        PolicyWatch policy_watch;      /* policy changes, while a rule says Threads=realtime */
        void *tuner_state[_TUNER_MAX]; /* each tuner's (Tuner.state_new), by TunerId */
        Waiter *waiting;               /* calls answered when the pass and what it started are done */
        size_t n_waiting, waiting_allocated;

        Status status;
        ReadCache reads;
        struct BusReads *bus_reads;
        bool stopping;
        bool code_pages_released;      /* after the first pass: release_code_pages() */
        sd_event_source *quiet_source; /* QUIET_RELEASE_USEC after the last pass: code released again */
        uint64_t file_pages_released;  /* resident file pages (statm) just after the last release */
} Manager;

/* The IRQ tuner's state: its refusals and pins, which the daemon's IRQ methods read and set. */
static inline IrqState *manager_irq_state(Manager *m)
{
        return m->tuner_state[TUNER_IRQ];
}

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
/* Marks every tuner whose plan depends on the CPUs (hotplug, attached processes). */
void manager_mark_cpu_tuners(Manager *m);
/* Those and the tuners marked after_resume: what firmware and drivers may reset across suspend. */
void manager_mark_resume_tuners(Manager *m);
/* The CPU topology, reread first when CPU events marked it stale: once per burst of them, by the pass
 * they scheduled or whatever reads it first. */
static inline Topology *manager_topology(Manager *m)
{
        return topology_cache_get(&m->topology);
}
/* Queues a method call to be answered with (changes, failures) once the scheduled pass and what it
 * started (systemd jobs, retries) are done; answered at once when nothing is scheduled. */
void manager_wait_for_pass(Manager *m, sd_bus_message *call);
/* The same for HoldProfile: the answer is the cookie. */
void manager_wait_for_pass_cookie(Manager *m, sd_bus_message *call, uint32_t cookie);
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
/* Puts the profile that should be in force (the highest-ranked of the base profile and the holds) in
 * force, if it is not already. preloaded: a freshly loaded policy that is used when it is the one. */
void manager_apply_in_force(Manager *m, Policy *preloaded, const char *reason);
/* Loads a profile and checks it can be placed on this machine. */
int manager_load_profile(Manager *m, const char *name, Policy **ret, char **ret_error);

/* manager-hold.c */
/* What callers can make rtctld keep is bounded: holds per bus name, per user (however many connections
 * it opens; root has no share of its own) and in all. */
#define HOLDS_PER_CALLER_MAX 16
#define HOLDS_PER_USER_MAX   32
#define HOLDS_MAX            256
/* -ENOENT/-EINVAL as manager_set_profile; -EDQUOT when bus_name holds HOLDS_PER_CALLER_MAX already,
 * -ENOSPC when uid holds HOLDS_PER_USER_MAX, -EUSERS when HOLDS_MAX are held, -ENOTCONN when bus_name
 * cannot be followed (it left the bus already). The hold ends with
 * ReleaseProfile or when bus_name leaves the bus. */
int manager_hold(Manager *m, const char *profile, const char *reason, const char *application_id,
                 const char *bus_name, uid_t uid, uint32_t *ret_cookie, char **ret_error);
/* The holder of the power slider's choice over a base profile the slider does not show (bus-ppd.c): no bus
 * name keeps it, a base profile chosen ends it. */
#define SLIDER_HOLDER "[power slider]"
/* -ENOENT: no such hold. Emits ProfileReleased. */
int manager_release(Manager *m, uint32_t cookie);
/* Ends the holds of one holder, without putting another profile in force: the caller does. */
void manager_release_holder(Manager *m, const char *bus_name);
void manager_release_all(Manager *m);
const Hold *manager_find_hold(const Manager *m, uint32_t cookie);
/* For the status line: "2 holds (org.example.Daw, rtctl run)"; NULL when there is none. */
char *manager_holds_summary(const Manager *m);
/* The hold that wins, NULL when the base profile is in force. */
const Hold *manager_winning_hold(const Manager *m);
void manager_holds_free(Manager *m);

/* manager-attach.c */
/* Attached processes are bounded: per user who attached them (root has no share of its own), and in
 * all; each attach rewrites a file and replans. */
#define ATTACHED_PER_USER_MAX 64
#define ATTACHED_MAX          1024
/* uid attaches pid. -ESRCH no such process, -EPERM PID 1 or a kernel thread, -EEXIST already attached,
 * -ENXIO the active profile isolates no CPU, -EDQUOT uid attached ATTACHED_PER_USER_MAX already, -EUSERS
 * ATTACHED_MAX are attached. On success a pass is scheduled. */
int manager_attach(Manager *m, unsigned pid, uid_t uid);
/* The same for the process a pidfd refers to (a recycled PID can never move the wrong process); ret_pid
 * is its PID. -ESRCH also when it has exited, -EBADF: fd is no pidfd. */
int manager_attach_pidfd(Manager *m, int fd, uid_t uid, unsigned *ret_pid);
/* -ENOENT: not attached. */
int manager_detach(Manager *m, unsigned pid);
/* A process that exited (or whose PID now belongs to another) is no longer attached. */
void manager_prune_attached(Manager *m);
void manager_load_attached(Manager *m);
/* The processes, for a pass (free the array). */
TaskId *manager_attached_pids(const Manager *m);

/* manager-rules.c */
/* What [Attach] rules match is bounded (a user may start processes the rules match); beyond, further
 * matches are ignored, said once, until some go. */
#define RULE_MATCHES_MAX 256
/* The policy changed: follow process events while it has rules (subscribing first), scan /proc once. */
void manager_rules_apply(Manager *m);
void manager_rules_free(Manager *m);
/* A thread ended: if a rule had placed it, it leaves status and the journal. */
void manager_rules_thread_gone(Manager *m, unsigned pid, unsigned tid);
/* What the next pass places (prunes processes that are gone). Free with attach_input_clear(). */
void manager_attach_input(Manager *m, AttachInput *ret);
void manager_rules_note_pass(Manager *m, const AttachInput *in);
void attach_input_clear(AttachInput *a);
const char *manager_rule_name(const Manager *m, const RuleMatch *x);
bool manager_rule_whole(const Manager *m, const RuleMatch *x);
/* Process events and logind followed while [Attach] rules of the policy or [Hold] rules of the base
 * profile need them, and no longer. */
void manager_rules_follow(Manager *m);

/* manager-hold-rules.c */
/* The base profile's [Hold] rules (taken over), or none (NULL): the holds of the rules that go end, and
 * /proc is scanned for the new ones. */
void manager_hold_rules_set(Manager *m, AttachRules *rules);
/* A process event (lost events: a rescan). */
void manager_hold_rules_event(Manager *m, const ProcEvent *ev);
/* Every process evaluated again (the active session changed, events were lost). */
void manager_hold_rules_rescan(Manager *m, const char *why);
bool manager_hold_rules_use_active(const Manager *m);
void manager_hold_rules_free(Manager *m);

/* A thread's scheduling policy may have changed: its process is evaluated against the rules again. */
void manager_rules_policy_changed(Manager *m, unsigned tid);
/* A process is looked at again (a re-check timer): whether it matches a rule now. */
bool manager_rules_recheck(Manager *m, unsigned pid);
/* Events were lost: every process is looked at again. */
void manager_rules_rescan(Manager *m, const char *why);

/* manager-sched.c */
/* Follows policy changes while a profile in force, or one that comes back into force when a hold ends
 * (the base profile, a hold that may win), has a Threads=realtime rule, else stops (removing what it
 * made in tracefs): on or off only when those rules change. Events are acted on while the profile in
 * force has such a rule. */
void manager_sched_update(Manager *m);
void manager_sched_stop(Manager *m);
/* The re-check method: process pid created a thread; look at it again 10 ms, 100 ms and 1 s later. */
void manager_sched_thread_created(Manager *m, unsigned pid, unsigned tid, bool matched);
/* Evaluates pid against the rules again 10 ms, 100 ms and 1 s from now (at most RECHECKS_MAX processes
 * wait at once). */
void manager_sched_recheck_later(Manager *m, unsigned pid);
/* "tracepoints", "re-check after thread creation: WHY", "" (not followed). */
char *manager_sched_method(const Manager *m);

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

/* The upgrade's handover (manager-handover.c): a marker for this daemon's next stop only. */
void manager_handover_clear(Manager *m);
bool manager_handover_requested(Manager *m);
int manager_on_sleep(sd_bus_message *msg, void *userdata, sd_bus_error *error);

/* rtctld's memory (manager-memory.c): after each pass the heap is trimmed, after the first the code
 * pages it did not run are dropped, and after a quiet spell the ones a burst brought back. */
void manager_release_memory_after_pass(Manager *m);
/* Drops rtctld's mapped code pages and ends fault-around on them (manager-memory.c says why). */
void release_code_pages(void);
