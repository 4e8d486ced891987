/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <glib.h>

#include "core/setting.h"

/* The original value of every kernel object rtctl changed, saved to disk before the first write to it,
 * so stop, profile "off" or `rtctl restore` can put it back — also after the daemon was killed. */
typedef struct JournalEntry {
        const SettingKind *kind;
        char *object;
        char *original;
        char *tuner;
        /* The start time (/proc/PID/stat field 22) of the process or thread a /proc/PID/... object
         * belongs to: a PID used again by another process is not it. 0: not recorded (a journal of an
         * older rtctl), and then never restored, as no reused PID can be told apart. */
        unsigned long long starttime;
} JournalEntry;

/* An original that was in the journal but cannot be restored: its entry was damaged. */
typedef struct JournalLoss {
        char *object; /* NULL when unknown */
        char *reason; /* "original lost: unknown kind 'foo'"; names the entry when object is NULL */
} JournalLoss;

typedef struct Journal Journal;

/* Which journal a file is: each holds only its own kinds, and each kind only the objects it writes. An
 * entry of another kind, or naming another object, is damage: its original is reported lost, never
 * restored. */
typedef enum JournalScope {
        JOURNAL_RUNTIME,  /* $RUNTIME_DIRECTORY/journal.json: the kernel and systemd objects of a pass */
        JOURNAL_BOOTARGS, /* /var/lib/rtctl/bootargs.json: `rtctl bootargs`' files and grubby arguments */
} JournalScope;

/* Loads path if it exists (a daemon restarted after SIGKILL finds its originals there). Any content is
 * read: every entry that can be read is kept, every one that cannot becomes a JournalLoss, and a damaged
 * file is first copied to a new name beside path (see journal_damaged_copy()) and rewritten on the next
 * journal_save(). Fails only when the file cannot be read, or the damaged copy cannot be written. */
int journal_open(const char *path, JournalScope scope, Journal **ret, char **ret_error);
void journal_free(Journal *j);
static inline void journal_freep(Journal **j)
{
        journal_free(*j);
}
#define _cleanup_journal_ _cleanup_(journal_freep)

const char *journal_path(const Journal *j);
size_t journal_size(const Journal *j);
const JournalEntry *journal_entry(const Journal *j, size_t i);
const JournalEntry *journal_find(const Journal *j, const char *object);

/* The process or thread a /proc/PID/... (or /proc/PID/task/TID/...) object belongs to: true and its
 * PID (the TID), or false for any other object. */
bool journal_object_task(const char *object, unsigned *ret_pid);
/* True when e names a process or thread that is no longer the one journalled: gone, its PID used
 * again (another start time), or recorded without a start time. Restoring it would write to a
 * stranger: it is gone, and a restore of it is done. */
bool journal_entry_task_gone(const JournalEntry *e);

/* Remembers object's original unless it is already known, with the start time of its process when it
 * names one. Not yet on disk: call journal_save(). */
void journal_remember(Journal *j, const SettingKind *kind, const char *tuner, const char *object,
                      const char *original);
/* Forgets every object in a set of object strings, in one sweep: a restore of thousands. */
void journal_forget_set(Journal *j, GHashTable *objects);
/* True when an ancestor of object was created by rtctl (journalled "absent" by a kind that owns its
 * children): removing it restores object as well, so object needs no entry. */
bool journal_covered(const Journal *j, const char *object);
/* Writes the journal atomically (or removes the file when it holds neither entries nor losses). A no-op
 * when nothing changed. */
int journal_save(Journal *j);

/* Forgets object's entry, if it has one. */
void journal_forget(Journal *j, const char *object);
/* Forgets every entry whose object starts with prefix, e.g. a removed disk's "/sys/block/loop9/". */
void journal_forget_prefix(Journal *j, const char *prefix);

/* Originals lost from a damaged journal, kept (and saved) until a restore reported them. */
size_t journal_n_lost(const Journal *j);
const JournalLoss *journal_lost(const Journal *j, size_t i);
/* "OBJECT: REASON", or REASON alone when the object is unknown: one line for a person. */
char *journal_loss_message(const JournalLoss *l);
/* The user was told (a restore reported them): they leave the journal. */
void journal_forget_lost(Journal *j);
/* Path of the damaged file kept beside the journal, NULL when none was found. */
const char *journal_damaged_copy(const Journal *j);

/* The lock on the runtime journal (journal.lock in dir): whoever restores from the journal or writes it
 * holds it, so rtctld (for its whole life) and `rtctl restore` (while it restores) never both replay one
 * journal. who ("rtctld", "rtctl restore") is written into the file with this PID, for whoever finds it
 * taken. Without wait, a lock held elsewhere is -EWOULDBLOCK and *ret_holder says by whom ("rtctld (PID
 * 123)", or NULL when the holder wrote nothing yet). The lock lasts as long as *ret_fd is open. */
int journal_lock(const char *dir, const char *who, bool wait, int *ret_fd, char **ret_holder);
