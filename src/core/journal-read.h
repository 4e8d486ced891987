/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include "core/journal.h"

/* Between journal.c (the journal in memory and on disk) and journal-read.c (reading a journal file,
 * whatever it holds); nothing else uses these. */

/* Adds an entry, whether or not its object is known: the reader decides about duplicates. */
void journal_append(Journal *j, const SettingKind *kind, const char *tuner, const char *object,
                    const char *original, unsigned long long starttime);
/* Takes reason. */
void journal_add_loss(Journal *j, const char *object, char *reason);
/* Takes path. */
void journal_set_damaged_copy(Journal *j, char *path);

JournalScope journal_scope(const Journal *j);

/* What an entry is checked against (journal-kinds.c); the cpuset mount is found on first need. */
typedef struct JournalCheck {
        JournalScope scope;
        bool cgroup_known;
        char *cgroup_mount; /* a cpuset hierarchy outside /sys/fs/cgroup, or NULL */
} JournalCheck;

/* NULL when kind belongs in c's journal and object is one it writes, else why not. */
char *journal_check_entry(JournalCheck *c, const SettingKind *kind, const char *object);
/* NULL when original, the value kind restores, names nothing outside what kind writes, else why not. */
char *journal_check_original(JournalCheck *c, const SettingKind *kind, const char *original);
void journal_check_clear(JournalCheck *c);
/* Whether object is root or under it, as a plain path (no "." or "..") that lands there once every link
 * of it is followed (under the root prefix). */
bool journal_path_within(const char *object, const char *root);

/* Loads the text of a journal file, size bytes with a NUL at buf[size], into the empty journal j. True
 * when it is damaged (not as the daemon wrote it). */
bool journal_load_text(Journal *j, const char *buf, size_t size);
/* Loads the file at journal_path(j), when there is one, into the empty journal j. A damaged file is
 * copied beside it first (ret_damaged): it must be rewritten before anything else is journalled. Fails
 * only when the file or its copy cannot be read or written. */
int journal_read(Journal *j, bool *ret_damaged, char **ret_error);
