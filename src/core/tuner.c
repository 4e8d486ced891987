/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "core/tuner.h"

/* The order is the order of a pass: rival services stopped first (and, restore going newest first,
 * started again last, after rtctl put their knobs back), then sysctls and the scheduler's knobs, then the
 * CPU split (kernel threads' own CPUs before the cpusets, so that restore, newest first, dissolves the
 * cpusets before it puts affinities back) and the isolated CPUs' cache ways, then interrupts (placed
 * within the CPU split just made, their threads after them), then power (frequency, then idle
 * states), then devices. */
const Tuner *const tuners[] = {
    &tuner_conflict, &tuner_sysctl,    &tuner_sched,   &tuner_kthread, &tuner_cpuset, &tuner_cache,
    &tuner_irq,      &tuner_irqthread, &tuner_cpufreq, &tuner_cpuidle, &tuner_block,
};
_Static_assert(ELEMENTSOF(tuners) == N_TUNERS, "N_TUNERS must count the tuners");

int tuner_index(const char *name)
{
        assert(name);

        for (int i = 0; i < N_TUNERS; i++)
                if (streq(tuners[i]->name, name))
                        return i;
        return -1;
}

void plan_notes_add(PlanNotes *n, const char *tuner, char *object, char *reason)
{
        assert(n);

        GREEDY_REALLOC(n->items, n->allocated, n->n + 1);
        n->items[n->n++] = (Unsupported){.tuner = tuner, .object = object, .reason = reason};
}

void plan_notes_fail(PlanNotes *n, const char *tuner, char *object, int error, char *reason)
{
        assert(n);

        plan_notes_add(n, tuner, object, reason);
        n->items[n->n - 1].error = error;
}

char *unsupported_describe(const Unsupported *u)
{
        assert(u);

        if (u->error)
                return xasprintf("%s: %s", strerror(u->error), u->reason);
        /* Some reasons say it themselves ("not supported: use base_slice_ns"). */
        return startswith(u->reason, "not supported") ? xstrdup(u->reason)
                                                      : xasprintf("not supported: %s", u->reason);
}

void plan_notes_clear(PlanNotes *n)
{
        assert(n);

        for (size_t i = 0; i < n->n; i++) {
                free(n->items[i].object);
                free(n->items[i].reason);
        }
        free(n->items);
        *n = (PlanNotes){};
}
