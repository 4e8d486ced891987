/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "core/applier.h"
#include "core/systemd.h"
#include "shared/sysfs.h"

/* ENOENT where the object's directory went too: the device was removed during the pass. Its values went
 * with it; that is not a failure. A missing file in a directory that exists (a tunable the scheduler
 * does not have) is one. */
static bool vanished(const Setting *s, int error)
{
        _cleanup_free_ char *dir = NULL;
        const char *slash;

        if (error != -ENOENT || !(slash = strrchr(s->object, '/')) || slash == s->object)
                return false;
        dir = xstrndup(s->object, (size_t)(slash - s->object));
        return !sys_exists(dir);
}

static bool refused_by_kernel(const Setting *s, int error)
{
        for (const int *e = s->kind->refusals; e && *e; e++)
                if (-error == *e)
                        return true;
        return false;
}

void applier_fail(Setting *s, int error, const char *what)
{
        assert(s);

        free(s->message);
        s->error = error;
        if (vanished(s, error) || error == -ESRCH || error == -ENODEV || (s->restore && error == -ENOENT)) {
                s->result = SETTING_GONE;
                s->message = xstrdup(s->restore ? "gone, nothing to restore" : "gone during the pass");
        } else if (error == -EBUSY || error == -EAGAIN) {
                s->result = SETTING_BUSY;
                s->message = xasprintf("%s: %s; trying again", what, strerror(-error));
        } else if (!s->restore && refused_by_kernel(s, error)) {
                s->result = SETTING_REFUSED;
                s->message =
                    xasprintf("refused by the kernel (%s): it places this itself", strerror(-error));
        } else {
                s->result = SETTING_FAILED;
                s->message = xasprintf("%s: %s", what, strerror(-error));
        }
}

/* In a dry run nothing of an earlier phase was written, so an object that only appears after such a
 * write (bfq's iosched/ files before the switch to bfq) cannot be read yet. It would be written. */
static bool earlier_phase_pending(const Plan *plan, unsigned phase)
{
        for (size_t i = 0; i < plan->n; i++)
                if (plan->settings[i].phase < phase && plan->settings[i].result == SETTING_PENDING)
                        return true;
        return false;
}

/* The process a setting's /proc/PID/... object names is not the one planned any more: it exited, and
 * its PID may be another process's. */
static bool task_replaced(const Setting *s)
{
        unsigned pid;
        TaskInfo t;

        return s->starttime && journal_object_task(s->object, &pid) &&
               (task_info(pid, &t) < 0 || t.starttime != s->starttime);
}

static void read_phase(Plan *plan, unsigned phase, Journal *journal, SettingContext *ctx,
                       size_t *ret_pending)
{
        size_t pending = 0;
        bool dry_run_gap = !journal && earlier_phase_pending(plan, phase);

        for (size_t i = 0; i < plan->n; i++) {
                Setting *s = &plan->settings[i];
                int r;

                if (s->phase != phase || s->result != SETTING_PENDING)
                        continue;
                /* Neither read nor journalled: what a stranger's PID shows is not the planned process's
                 * original. */
                if (task_replaced(s)) {
                        applier_fail(s, -ESRCH, "gone");
                        continue;
                }
                /* A tuner that read the object in this pass already may say what it found. */
                r = s->current ? 0 : s->kind->read(ctx, s->object, s->desired, &s->current);
                if (r == SYSTEMD_UNKNOWN && !journal) {
                        /* A dry run does not ask systemd, and it has not told rtctld yet. */
                        s->current = xstrdup("(unknown: systemd is not asked in a read-only call)");
                        s->error = r;
                        pending++;
                        continue;
                }
                if (r == -ENOENT && dry_run_gap) {
                        s->current = xstrdup("(absent until the earlier change)");
                        pending++;
                        continue;
                }
                if (r < 0) {
                        applier_fail(s, r, "cannot read");
                        continue;
                }
                if (s->kind->equal(s->current, s->desired)) {
                        s->result = SETTING_UNCHANGED;
                        continue;
                }
                if (journal && !journal_covered(journal, s->object))
                        journal_remember(journal, s->kind, s->tuner, s->object, s->current);
                pending++;
        }
        *ret_pending = pending;
}

static void write_phase(Plan *plan, unsigned phase, Journal *journal, SettingContext *ctx, int journal_error,
                        uint64_t *write_usec)
{
        for (size_t i = 0; i < plan->n; i++) {
                Setting *s = &plan->settings[i];
                _cleanup_free_ char *now = NULL;
                uint64_t t0;
                int r;

                if (s->phase != phase || s->result != SETTING_PENDING)
                        continue;
                if (journal_error < 0) {
                        applier_fail(s, journal_error, "not written, the journal could not be saved");
                        continue;
                }
                t0 = now_usec(CLOCK_MONOTONIC);
                r = s->kind->write_task ? s->kind->write_task(ctx, s->object, s->desired, s->starttime)
                                        : s->kind->write(ctx, s->object, s->desired);
                *write_usec += now_usec(CLOCK_MONOTONIC) - t0;
                if (r < 0) {
                        applier_fail(s, r, "write failed");
                        /* The planned process is gone: an original journalled under its PID (maybe read
                         * from the process that has it now) is nobody's to restore. Saved with the next
                         * phase's writes, or the pass's journal. */
                        if (s->starttime && s->result == SETTING_GONE && !s->restore)
                                journal_forget(journal, s->object);
                        continue;
                }
                if (r == SYSTEMD_QUEUED) {
                        /* systemd runs the job: its end, not a read now, says how it went. */
                        s->result = SETTING_CHANGED;
                        s->queued = true;
                        continue;
                }
                r = s->kind->read(ctx, s->object, s->desired, &now);
                if (r < 0) {
                        applier_fail(s, r, "cannot read back");
                        continue;
                }
                if (!s->kind->equal(now, s->desired)) {
                        s->result = SETTING_FAILED;
                        s->error = -EIO;
                        free(s->message);
                        s->message = xasprintf("wrote '%s', but the kernel kept '%s'", s->desired, now);
                        continue;
                }
                s->result = SETTING_CHANGED;
        }
}

static void defer_from(Plan *plan, unsigned phase)
{
        for (size_t i = 0; i < plan->n; i++)
                if (plan->settings[i].phase >= phase && plan->settings[i].result == SETTING_PENDING)
                        plan->settings[i].result = SETTING_DEFERRED;
}

void applier_count(const Plan *plan, ApplyStats *ret)
{
        assert(plan);

        *ret = (ApplyStats){};
        for (size_t i = 0; i < plan->n; i++)
                switch (plan->settings[i].result) {
                case SETTING_CHANGED:
                        ret->changed++;
                        break;
                case SETTING_UNCHANGED:
                        ret->unchanged++;
                        break;
                case SETTING_GONE:
                        ret->gone++;
                        break;
                case SETTING_BUSY:
                        ret->busy++;
                        break;
                case SETTING_REFUSED:
                        ret->refused++;
                        break;
                case SETTING_FAILED:
                        ret->failed++;
                        break;
                case SETTING_DEFERRED:
                        ret->deferred++;
                        break;
                case SETTING_PENDING: /* a dry run's "would change" */
                        break;
                }
}

void applier_apply(Plan *plan, Journal *journal, SettingContext *ctx, ApplyStats *ret)
{
        unsigned max_phase = 0;
        uint64_t write_usec = 0;

        assert(plan);

        for (size_t i = 0; i < plan->n; i++)
                max_phase = MAX(max_phase, plan->settings[i].phase);

        for (unsigned phase = 0; phase <= max_phase; phase++) {
                size_t pending;

                read_phase(plan, phase, journal, ctx, &pending);
                if (!journal || pending == 0)
                        continue;
                write_phase(plan, phase, journal, ctx, journal_save(journal), &write_usec);
                if (ctx->systemd && systemd_client_pending(ctx->systemd) > 0) {
                        defer_from(plan, phase + 1);
                        break;
                }
        }
        applier_count(plan, ret);
        ret->write_usec = write_usec;
}
