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
} JournalEntry;

typedef struct Journal Journal;

/* Loads path if it exists (a daemon restarted after SIGKILL finds its originals there). */
int journal_open(const char *path, Journal **ret, char **ret_error);
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

/* Remembers object's original unless it is already known. Not yet on disk: call journal_save(). */
void journal_remember(Journal *j, const SettingKind *kind, const char *tuner, const char *object,
                      const char *original);
/* Forgets every object in a set of object strings, in one sweep: a restore of thousands. */
void journal_forget_set(Journal *j, GHashTable *objects);
/* True when an ancestor of object was created by rtctl (journalled "absent" by a kind that owns its
 * children): removing it restores object as well, so object needs no entry. */
bool journal_covered(const Journal *j, const char *object);
/* Writes the journal atomically (or removes the file when empty). A no-op when nothing changed. */
int journal_save(Journal *j);

/* Forgets every entry whose object starts with prefix, e.g. a removed disk's "/sys/block/loop9/". */
void journal_forget_prefix(Journal *j, const char *prefix);
