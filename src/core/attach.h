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
 * `active`: the user of the active logind session on any seat). Threads= says which of its threads go:
 * a glob on the thread name, or `all` (the whole process). For each process the first rule that
 * matches wins, so a profile's own rules come before those of the profiles it includes. */

typedef enum AttachTermKind {
        ATTACH_COMM,
        ATTACH_EXE,
        ATTACH_USER,
} AttachTermKind;

typedef struct AttachTerm {
        AttachTermKind kind;
        char **globs; /* comm and exe alternatives */
        uid_t *uids;  /* user alternatives */
        size_t n_uids, uids_allocated;
        bool active; /* user:active is one of the alternatives */
} AttachTerm;

typedef struct AttachRule {
        char *name;
        AttachTerm *terms;
        size_t n_terms;
        char *threads; /* a thread-name glob; NULL: every thread (Threads=all) */
} AttachRule;

typedef struct AttachRules {
        AttachRule *rules;
        size_t n;
        bool uses_active; /* some rule says user:active: a session switch changes what matches */
} AttachRules;

/* Reads every [Attach NAME] section; appends "file:line: Key=value: why" to *errors. NULL when the
 * profile has no rule. */
AttachRules *attach_rules_parse(Conf *conf, char ***errors);
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
} AttachProc;

/* comm: the process name when the caller knows it (from an event or a scan), else NULL. */
void attach_proc_init(AttachProc *p, unsigned pid, const char *comm);
void attach_proc_clear(AttachProc *p);

/* The index of the first rule the process matches, -1 when none. active: the users of the active
 * sessions (none where there is no logind). */
int attach_rules_match(const AttachRules *r, AttachProc *p, const uid_t *active, size_t n_active);
/* Whether the rule puts a thread of this name on the isolated CPUs. */
bool attach_rule_wants_thread(const AttachRule *rule, const char *thread_comm);

/* A thread of a process a rule with a thread glob matched. */
typedef struct AttachedThread {
        unsigned pid;
        unsigned tid;
        char comm[16];
        const char *rule; /* the rule's name; owned by the policy */
        bool isolate;     /* the rule wants it on the isolated CPUs; the others stay where they were */
} AttachedThread;

/* Appends every thread of process pid (from /proc/PID/task) with the rule's decision to *threads, which
 * holds *n and has room for *allocated (GREEDY_REALLOC). -ENOENT: the process is gone. */
int attach_list_threads(const AttachRule *rule, unsigned pid, AttachedThread **threads, size_t *n,
                        size_t *allocated);
