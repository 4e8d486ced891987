/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "core/tuner.h"

static const Tuner *const *registered;
static size_t n_registered;

void tuners_register(const Tuner *const *list, size_t n)
{
        if (n > TUNERS_MAX)
                abort();
        registered = list;
        n_registered = n;
}

size_t tuners_n(void)
{
        return n_registered;
}

const Tuner *tuner_nth(size_t i)
{
        return i < n_registered ? registered[i] : NULL;
}

int tuner_place(const Tuner *t)
{
        for (size_t i = 0; i < n_registered; i++)
                if (registered[i] == t)
                        return (int)i;
        return -1;
}

int tuner_index_by_name(const char *name)
{
        assert(name);

        for (size_t i = 0; i < n_registered; i++)
                if (streq(registered[i]->name, name))
                        return (int)i;
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
