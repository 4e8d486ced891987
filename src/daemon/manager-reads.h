/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdint.h>

#include "core/irqs.h"

typedef struct Manager Manager;

/* A row of Plan(): what one write would do; or, with note set, an object the profile names that the
 * pass leaves alone (not supported here, or a failure known before writing), and why. */
typedef struct PlanRow {
        char *object;
        char *current;
        char *desired;
        char *note;
} PlanRow;

/* A row of Verify(): one setting in force; why is "" when it is in place. */
typedef struct VerifyRow {
        char *object;
        char *desired;
        char *actual;
        char *why;
} VerifyRow;

/* The answers of the expensive reads anyone may ask for, kept so that a flood of them costs one reading
 * of the machine, not one per call. Every scheduled pass and every pass drops them (the model is about
 * to change, or changed), and they are never older than READ_CACHE_USEC: what changes behind rtctl's
 * back, with no event, shows within that time. */
typedef struct ReadCache {
        bool plan_valid;
        uint64_t plan_usec; /* CLOCK_MONOTONIC when it was read */
        PlanRow *plan;
        size_t n_plan;
        char *plan_error; /* the active policy cannot be placed on this machine */

        IrqTable *irqs;
        uint64_t irqs_usec;
        double *rates;
        char **threads; /* per IRQ, "fifo:50" or NULL */
} ReadCache;

#define READ_CACHE_USEC (1000 * 1000)

void read_cache_clear(ReadCache *c);

void plan_rows_free(PlanRow *rows, size_t n);
void verify_rows_free(VerifyRow *rows, size_t n);

/* Plan(""): the dry run of the active policy, from the cache when it is fresh. The rows belong to the
 * cache (valid until the next call into the Manager). -EINVAL with ret_error: the policy cannot be
 * placed. */
int manager_plan_active(Manager *m, const PlanRow **ret, size_t *ret_n, const char **ret_error);
/* Plan(name): a dry run of a profile as loaded from its files now. -ENOENT no such profile, -EINVAL a bad
 * name, -EBADMSG an invalid profile, -EXDEV one that cannot be placed on this machine (a message in
 * ret_error for the last three). */
int manager_plan_profile(Manager *m, const char *name, PlanRow **ret, size_t *ret_n, char **ret_error);
/* ListIrqs(): the IRQs, their rates since the last pass and their threads' scheduling, from the cache
 * when it is fresh; the table belongs to the cache. */
int manager_irqs_cached(Manager *m, const IrqTable **ret, const double **ret_rates,
                        char *const **ret_threads);
/* Verify(): every setting the active policy keeps in force (and every original still to put back), read
 * now; nothing is written. */
void manager_verify(Manager *m, VerifyRow **ret, size_t *ret_n);
