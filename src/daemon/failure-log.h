/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <glib.h>
#include <stdbool.h>

typedef struct Failure {
        char *tuner;
        char *object;
        int error; /* positive errno, as on the bus */
        char *message;
} Failure;

Failure *failure_new(const char *tuner, const char *object, int error, const char *message);
void failure_free(void *f);

/* Which failures were logged, so that one that repeats on every pass is logged once: again only when it
 * changes (another tuner, errno or message), or after it cleared. Holds only failures that still stand;
 * it decides, the daemon logs. */
typedef struct FailureLog {
        GHashTable *logged; /* object -> Failure, as logged */
} FailureLog;

void failure_log_init(FailureLog *l);
void failure_log_clear(FailureLog *l);
/* A failure seen in a pass: true when it is to be logged (new or changed); it is remembered either way.
 * error may be negative. */
bool failure_log_note(FailureLog *l, const char *tuner, const char *object, int error, const char *message);
/* object is in place: true when a failure of it had been logged (the daemon says it is fixed). Forgets
 * it either way. */
bool failure_log_fixed(FailureLog *l, const char *object);
/* Forgets, without a word, the failures not in standing (object -> anything): those that went without
 * being fixed, with a device removed or a profile that no longer wants the object. */
void failure_log_prune(FailureLog *l, GHashTable *standing);
/* Forgets those of objects under prefix (a removed device's). */
void failure_log_forget_under(FailureLog *l, const char *prefix);
