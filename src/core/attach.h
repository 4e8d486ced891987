/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <sys/types.h>

#include "core/config.h"

/* [Attach NAME] rules: which processes go to the isolated CPUs as they appear, whole or by thread.
 *
 *   Match=comm:pipewire exe:/usr/bin/pipewire user:active
 *   Threads=data-loop*
 *
 * Match= holds terms separated by white space; every term must hold (AND), and a term's alternatives are
 * separated by | (OR). The terms speak of the process: comm: its name (the main thread's, cut by the
 * kernel at 15 characters), exe: the executable's path, user: its real user (a name, a number, or
 * `active`: the user of the active logind session on any seat), graph: the audio graph whose shared
 * memory it has mapped (pipewire, jack). Threads= says which of its threads go: `all` (the whole
 * process), or white-space separated alternatives, any of which sends a thread: `realtime` (its policy
 * is SCHED_FIFO, SCHED_RR or SCHED_DEADLINE) and globs on the thread name. A rule whose only alternative
 * is `realtime` matches only a process that has a real-time thread. In a rule that lets in any user but
 * root, a glob sends a thread only if it is real-time too: names are the user's to choose, and only
 * real-time threads belong on the isolated CPUs. For each process the first rule
 * that matches wins, so a profile's own rules come before those of the profiles it includes. */

typedef enum AttachTermKind {
        ATTACH_COMM,
        ATTACH_EXE,
        ATTACH_USER,
        ATTACH_GRAPH,
} AttachTermKind;

/* graph: alternatives, as bits. */
enum {
        ATTACH_GRAPH_PIPEWIRE = 1 << 0,
        ATTACH_GRAPH_JACK = 1 << 1,
};

typedef struct AttachTerm {
        AttachTermKind kind;
        char **globs; /* comm and exe alternatives */
        uid_t *uids;  /* user alternatives */
        size_t n_uids, uids_allocated;
        bool active;     /* user:active is one of the alternatives */
        unsigned graphs; /* graph: alternatives (ATTACH_GRAPH_*) */
} AttachTerm;

typedef struct AttachRule {
        char *name;
        AttachTerm *terms;
        size_t n_terms;
        char *profile;       /* [Hold NAME]: the profile held while a matching process runs */
        bool all;            /* Threads=all: the whole process */
        bool realtime;       /* `realtime` is an alternative of Threads= */
        char **thread_globs; /* the thread-name glob alternatives */
        /* The rule lets in a user other than root (user:active, a name, a UID but 0): a thread name is
         * that user's to choose, so a glob picks among the real-time threads only. */
        bool names_need_realtime;
} AttachRule;

typedef struct AttachRules {
        AttachRule *rules;
        size_t n;
        bool uses_active;   /* some rule says user:active: a session switch changes what matches */
        bool uses_realtime; /* some rule says Threads=realtime: policy changes are followed */
        bool uses_graph;    /* some rule says graph:, which no event announces (a library loaded late) */
} AttachRules;

/* Reads every [Attach NAME] section; appends "file:line: Key=value: why" to *errors. NULL when the
 * profile has no rule. */
AttachRules *attach_rules_parse(Conf *conf, char ***errors);

/* [Hold NAME] rules: a profile held for as long as a matching process runs, with no command typed.
 *
 *   Match=exe:/usr/lib/ardour[0-9]/ardour-[0-9]* user:active
 *   Profile=audio
 *
 * Match= as [Attach] has it, and like it naming whose processes (a user: term): comm: and exe: are the
 * process's own to choose, so without one any local user could tune the machine by naming a program so.
 * Profile= names the profile to hold; the rules are read from the base profile. NULL when none. */
AttachRules *hold_rules_parse(Conf *conf, char ***errors);
void attach_rules_free(AttachRules *r);

/* What rules look at, read on first need only: an exec storm costs one read of comm per process, and
 * exe or the user only when a rule's comm term let the process through. */
typedef struct AttachProc {
        unsigned pid;
        char comm[16];
        bool have_comm;
        char *exe; /* NULL once read: unreadable (a kernel thread, gone, or no permission) */
        bool have_exe;
        uid_t uid;
        int uid_error; /* <0: could not be read */
        bool have_uid;
        int realtime;    /* -1: not read yet; else whether some thread runs at a real-time policy */
        unsigned graphs; /* ATTACH_GRAPH_* mapped, once have_graphs */
        bool have_graphs;
} AttachProc;

/* comm: the process name when the caller knows it (from an event or a scan), else NULL. */
void attach_proc_init(AttachProc *p, unsigned pid, const char *comm);
void attach_proc_clear(AttachProc *p);

/* The index of the first rule the process matches, -1 when none. active: the users of the active
 * sessions (none where there is no logind). */
int attach_rules_match(const AttachRules *r, AttachProc *p, const uid_t *active, size_t n_active);
/* Why a rule puts a thread on the isolated CPUs, as bits; 0: it does not. */
enum {
        ATTACH_WHY_ALL = 1 << 0,
        ATTACH_WHY_REALTIME = 1 << 1,
        ATTACH_WHY_NAME = 1 << 2,
};
/* Whether (and why) the rule puts a thread of this name and scheduling policy on the isolated CPUs. */
unsigned attach_rule_wants_thread(const AttachRule *rule, const char *thread_comm, int policy);
/* "all", "realtime", "name", "realtime,name"; "" for 0. */
const char *attach_why_string(unsigned why);
/* Whether a policy (sched_getscheduler(2), /proc/PID/task/TID/stat field 41) is a real-time one:
 * SCHED_FIFO, SCHED_RR, SCHED_DEADLINE, with or without SCHED_RESET_ON_FORK. */
bool attach_policy_realtime(int policy);
/* The scheduling policy of a thread, from /proc/PID/task/TID/stat (field 41). */
int attach_thread_policy(unsigned pid, unsigned tid, int *ret);
/* The policy field of a stat line's text ("pid (comm) state ... policy ..."); -EBADMSG if it has none. */
int attach_stat_policy(const char *stat, int *ret);
/* Which graphs (ATTACH_GRAPH_*) a /proc/PID/maps text shows mapped: PipeWire's memfds
 * ("/memfd:pipewire-memfd:flags=...,type=2,size=16384 (deleted)"), jack2's shared memory registry
 * ("/dev/shm/jack-shm-registry"). */
unsigned attach_maps_graphs(const char *maps);
/* The process (thread group) a thread belongs to, from /proc/TID/status; -ENOENT when it is gone. */
int attach_thread_tgid(unsigned tid, unsigned *ret);

/* A thread of a process a rule with a thread glob matched. */
typedef struct AttachedThread {
        unsigned pid;
        unsigned long long starttime; /* the process's, as its rule's match recorded it; 0: not known */
        unsigned tid;
        char comm[16];
        const char *rule; /* the rule's name; owned by the policy */
        bool isolate;     /* the rule wants it on the isolated CPUs; the others stay where they were */
        unsigned why;     /* ATTACH_WHY_* when isolate */
} AttachedThread;

/* Appends every thread of process pid (from /proc/PID/task) with the rule's decision to *threads, which
 * holds *n and has room for *allocated (GREEDY_REALLOC). -ENOENT: the process is gone. */
int attach_list_threads(const AttachRule *rule, unsigned pid, AttachedThread **threads, size_t *n,
                        size_t *allocated);
