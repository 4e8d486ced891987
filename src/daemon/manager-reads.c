/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The reads anyone may ask for that cost a reading of the whole machine: Plan(), ListIrqs(), Verify().
 * Plan("") and ListIrqs() are answered from a cache that passes drop, so unprivileged callers cannot
 * make the daemon read the machine once per call. */
#include <time.h>

#include "core/systemd.h"
#include "daemon/manager.h"
#include "shared/log.h"

void plan_rows_free(PlanRow *rows, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                free(rows[i].object);
                free(rows[i].current);
                free(rows[i].desired);
                free(rows[i].note);
        }
        free(rows);
}

void verify_rows_free(VerifyRow *rows, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                free(rows[i].object);
                free(rows[i].desired);
                free(rows[i].actual);
                free(rows[i].why);
        }
        free(rows);
}

static void free_threads(char **threads, size_t n)
{
        for (size_t i = 0; threads && i < n; i++)
                free(threads[i]);
        free(threads);
}

void read_cache_clear(ReadCache *c)
{
        assert(c);

        plan_rows_free(c->plan, c->n_plan);
        free(c->plan_error);
        free_threads(c->threads, c->irqs ? c->irqs->n : 0);
        free(c->rates);
        irq_table_free(c->irqs);
        *c = (ReadCache){};
}

static bool fresh(bool valid, uint64_t since)
{
        return valid && now_usec(CLOCK_MONOTONIC) - since < READ_CACHE_USEC;
}

/* The writes of a dry run: what would change, restores included. */
static void plan_rows(const PassResult *res, PlanRow **ret, size_t *ret_n)
{
        PlanRow *rows = xmalloc0(sizeof(PlanRow) * (res->plan.n + res->notes.n + 1));
        size_t n = 0;

        for (size_t i = 0; i < res->plan.n; i++) {
                const Setting *s = &res->plan.settings[i];
                if (s->result == SETTING_PENDING)
                        rows[n++] = (PlanRow){.object = xstrdup(s->object),
                                              .current = xstrdup(strempty(s->current)),
                                              .desired = xstrdup(s->desired)};
        }
        for (size_t i = 0; i < res->notes.n; i++) {
                const Unsupported *u = &res->notes.items[i];
                rows[n++] = (PlanRow){.object = xstrdup(u->object),
                                      .current = xstrdup(""),
                                      .desired = xstrdup(""),
                                      .note = unsupported_describe(u)};
        }
        *ret = rows;
        *ret_n = n;
}

int manager_plan_active(Manager *m, const PlanRow **ret, size_t *ret_n, const char **ret_error)
{
        assert(m);

        ReadCache *c = &m->reads;
        PassResult res;

        if (!fresh(c->plan_valid, c->plan_usec)) {
                plan_rows_free(c->plan, c->n_plan);
                free(c->plan_error);
                c->plan = NULL;
                c->n_plan = 0;
                c->plan_error = NULL;
                manager_dry_run(m, m->policy, &res);
                if (res.error)
                        c->plan_error = TAKE_PTR(res.error);
                else
                        plan_rows(&res, &c->plan, &c->n_plan);
                pass_result_clear(&res);
                c->plan_valid = true;
                c->plan_usec = now_usec(CLOCK_MONOTONIC);
        }
        if (c->plan_error) {
                *ret_error = c->plan_error;
                return -EINVAL;
        }
        *ret = c->plan;
        *ret_n = c->n_plan;
        return 0;
}

int manager_plan_profile(Manager *m, const char *name, PlanRow **ret, size_t *ret_n, char **ret_error)
{
        _cleanup_policy_ Policy *p = NULL;
        PassResult res;
        int r;

        assert(m);

        r = policy_load(m->search_path, name, &p, ret_error);
        if (r == -ENOENT)
                return r;
        if (r < 0)
                return profile_name_valid(name) ? -EBADMSG : -EINVAL;
        manager_dry_run(m, p, &res);
        if (res.error) {
                *ret_error = TAKE_PTR(res.error);
                pass_result_clear(&res);
                return -EXDEV;
        }
        plan_rows(&res, ret, ret_n);
        pass_result_clear(&res);
        return 0;
}

int manager_irqs_cached(Manager *m, const IrqTable **ret, const double **ret_rates,
                        char *const **ret_threads)
{
        assert(m);

        ReadCache *c = &m->reads;
        int r;

        if (!fresh(c->irqs != NULL, c->irqs_usec)) {
                free_threads(c->threads, c->irqs ? c->irqs->n : 0);
                free(c->rates);
                irq_table_free(c->irqs);
                c->threads = NULL;
                c->rates = NULL;
                c->irqs = NULL;
                r = manager_irqs(m, &c->irqs, &c->rates, &c->threads);
                if (r < 0)
                        return r;
                c->irqs_usec = now_usec(CLOCK_MONOTONIC);
        }
        *ret = c->irqs;
        *ret_rates = c->rates;
        *ret_threads = c->threads;
        return 0;
}

static const Failure *failure_of(const Manager *m, const char *object)
{
        return g_hash_table_lookup(m->status.failures, object);
}

/* Why a setting of the dry run is not in place; "" when it is. */
static char *why_not(const Manager *m, const Setting *s)
{
        const Failure *f = failure_of(m, s->object);

        switch (s->result) {
        case SETTING_UNCHANGED:
                return xstrdup("");
        case SETTING_PENDING:
                if (s->error == SYSTEMD_UNKNOWN)
                        return xstrdup("unknown: systemd is not asked in a read-only call, and has not told "
                                       "rtctld yet");
                if (f)
                        return xasprintf("the last write failed: %s", f->message);
                if (s->restore)
                        return xstrdup("rtctl's original value is not back (no profile keeps it any more)");
                return xstrdup("not as the profile sets it: changed outside rtctl, or not applied yet");
        default:
                return xstrdup(s->message ?: "cannot be read");
        }
}

void manager_verify(Manager *m, VerifyRow **ret, size_t *ret_n)
{
        PassResult res;
        VerifyRow *rows;
        size_t n = 0;

        assert(m);

        manager_dry_run(m, m->policy, &res);
        rows = xmalloc0(sizeof(VerifyRow) * (res.plan.n + 2));
        if (res.error)
                rows[n++] = (VerifyRow){.object = xstrdup("policy"),
                                        .desired = xstrdup(manager_active_profile(m)),
                                        .actual = xstrdup(""),
                                        .why = xstrdup(res.error)};
        for (size_t i = 0; i < res.plan.n; i++) {
                const Setting *s = &res.plan.settings[i];
                if (s->result == SETTING_GONE)
                        continue; /* went with its device or process: nothing is in force there */
                rows[n++] = (VerifyRow){.object = xstrdup(s->object),
                                        .desired = xstrdup(s->desired),
                                        .actual = xstrdup(strempty(s->current)),
                                        .why = why_not(m, s)};
        }
        pass_result_clear(&res);
        *ret = rows;
        *ret_n = n;
}
