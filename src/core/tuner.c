/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "core/tuner.h"

/* The order is the order of a pass: sysctls before devices. */
const Tuner *const tuners[N_TUNERS] = {
    &tuner_sysctl,
    &tuner_block,
};

int tuner_index(const char *name)
{
        for (int i = 0; i < N_TUNERS; i++)
                if (streq(tuners[i]->name, name))
                        return i;
        return -1;
}

void plan_notes_add(PlanNotes *n, const char *tuner, char *object, char *reason)
{
        n->items = realloc(n->items, sizeof(Unsupported) * (n->n + 1));
        if (!n->items)
                abort();
        n->items[n->n++] = (Unsupported){.tuner = tuner, .object = object, .reason = reason};
}

void plan_notes_clear(PlanNotes *n)
{
        for (size_t i = 0; i < n->n; i++) {
                free(n->items[i].object);
                free(n->items[i].reason);
        }
        free(n->items);
        *n = (PlanNotes){};
}
