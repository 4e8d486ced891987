/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "daemon/failure-log.h"
#include "shared/util.h"

Failure *failure_new(const char *tuner, const char *object, int error, const char *message)
{
        Failure *f = xmalloc0(sizeof(Failure));

        *f = (Failure){.tuner = xstrdup(tuner),
                       .object = xstrdup(object),
                       .error = error < 0 ? -error : error,
                       .message = xstrdup(message)};
        return f;
}

void failure_free(void *p)
{
        Failure *f = p;

        if (!f)
                return;
        free(f->tuner);
        free(f->object);
        free(f->message);
        free(f);
}

void failure_log_init(FailureLog *l)
{
        assert(l);

        l->logged = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, failure_free);
}

void failure_log_clear(FailureLog *l)
{
        assert(l);

        if (l->logged)
                g_hash_table_destroy(l->logged);
        l->logged = NULL;
}

bool failure_log_note(FailureLog *l, const char *tuner, const char *object, int error, const char *message)
{
        assert(l);

        const Failure *old = g_hash_table_lookup(l->logged, object);
        Failure *f;

        if (old && streq(old->tuner, tuner) && old->error == (error < 0 ? -error : error) &&
            streq(old->message, message))
                return false;
        f = failure_new(tuner, object, error, message);
        g_hash_table_replace(l->logged, f->object, f);
        return true;
}

bool failure_log_fixed(FailureLog *l, const char *object)
{
        assert(l);

        return g_hash_table_remove(l->logged, object);
}

static gboolean not_standing(gpointer key, gpointer value, gpointer standing)
{
        return !g_hash_table_contains(standing, key);
}

void failure_log_prune(FailureLog *l, GHashTable *standing)
{
        assert(l);

        g_hash_table_foreach_remove(l->logged, not_standing, standing);
}

static gboolean under(gpointer key, gpointer value, gpointer prefix)
{
        return startswith(key, prefix) != NULL;
}

void failure_log_forget_under(FailureLog *l, const char *prefix)
{
        assert(l);

        g_hash_table_foreach_remove(l->logged, under, (gpointer)prefix);
}
