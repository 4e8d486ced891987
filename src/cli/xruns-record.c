/* SPDX-License-Identifier: GPL-2.0-or-later */
/* xruns-record.c: rtctl xruns's recording. A private tracefs instance (XRUNS_TRACE_INSTANCE) records
 * only the audio CPUs: context switches and wake-ups, IRQ and softirq handlers, workqueue items, hrtimer
 * expiries, idle exits and frequency changes, time-stamped with CLOCK_MONOTONIC (trace_clock mono) as
 * the xruns are. The instance and a tracefs mount it needed are journalled first (XRUNS_TRACE_JOURNAL),
 * so that a killed run's leftovers go with the next run or `rtctl restore`. One recording at a time. */
#include <fcntl.h>
#include <sys/file.h>

#include "cli/xruns.h"
#include "core/daemon-conf.h"
#include "core/journal.h"
#include "core/tracefs.h"
#include "core/xruns.h"
#include "shared/sysfs.h"

static const char *const trace_events[] = {
    "sched/sched_switch",
    "sched/sched_wakeup",
    "irq/irq_handler_entry",
    "irq/irq_handler_exit",
    "irq/softirq_entry",
    "irq/softirq_exit",
    "workqueue/workqueue_execute_start",
    "workqueue/workqueue_execute_end",
    "timer/hrtimer_expire_entry",
    "timer/hrtimer_expire_exit",
    "power/cpu_idle",
    "power/cpu_frequency",
};

static int inst_write(const char *inst, const char *file, const char *value)
{
        _cleanup_free_ char *p = xasprintf("%s/%s", inst, file);

        return sys_write(p, value);
}

void xruns_recording_stop(XrunsRecording *rec)
{
        int r;

        if (!rec->journal)
                return;
        r = sched_trace_restore(rec->journal, rec->fd);
        rec->fd = -EBADF;
        if (r < 0)
                fprintf(stderr,
                        "Could not put tracefs back as it was: %s (kept in the journal for `rtctl "
                        "restore`).\n",
                        strerror(-r));
        journal_free(rec->journal);
        rec->journal = NULL;
        if (rec->lock >= 0)
                close(rec->lock);
        rec->lock = -EBADF;
}

/* Puts back what the journal at path holds (a killed run's instance and mount), saying so. 0: nothing
 * was there; 1: put back; < 0 with a sentence. */
static int put_back(Journal *j, const char *path, char **ret_error)
{
        int r;

        if (journal_size(j) == 0)
                return 0;
        r = sched_trace_restore(j, -EBADF);
        if (r < 0) {
                *ret_error =
                    xasprintf("cannot put back what a killed rtctl xruns left in tracefs (journal %s): %s",
                              path, strerror(-r));
                return r;
        }
        fprintf(stderr, "Put back what an interrupted rtctl xruns left in tracefs (journal %s).\n", path);
        return 1;
}

int xruns_recording_start(XrunsRecording *rec, const CpuSet *cpus, char **ret_error)
{
        _cleanup_free_ char *runtime = rtctl_runtime_dir(), *path = NULL, *lockp = NULL, *dir = NULL,
                            *mask = NULL, *pipe = NULL;
        int r;

        *rec = (XrunsRecording){.fd = -EBADF, .lock = -EBADF};
        r = mkdir_p(runtime, 0755);
        if (r < 0) {
                *ret_error = xasprintf("cannot make %s: %s", runtime, strerror(-r));
                return r;
        }
        /* One recording at a time: a second would take the first's instance. */
        lockp = xasprintf("%s/xruns.lock", runtime);
        rec->lock = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (rec->lock < 0 || flock(rec->lock, LOCK_EX | LOCK_NB) < 0) {
                r = -errno;
                *ret_error = r == -EWOULDBLOCK ? xstrdup("another rtctl xruns is recording")
                                               : xasprintf("cannot lock %s: %s", lockp, strerror(-r));
                return r;
        }
        path = xasprintf("%s/" XRUNS_TRACE_JOURNAL, runtime);
        r = journal_open(path, JOURNAL_RUNTIME, &rec->journal, ret_error);
        if (r < 0)
                return r;
        /* What a killed run left goes first. */
        r = put_back(rec->journal, path, ret_error);
        if (r < 0)
                return r;
        r = tracefs_instance_create(rec->journal, "rtctl xruns", XRUNS_TRACE_INSTANCE, &dir, &rec->inst,
                                    ret_error);
        if (r < 0)
                return r;
        /* The audio CPUs alone, a buffer big enough for a few seconds of them, the clock the xruns have. */
        mask = cpuset_format_mask(cpus);
        if ((r = inst_write(rec->inst, "trace_clock", "mono")) < 0 ||
            (r = inst_write(rec->inst, "tracing_cpumask", mask)) < 0 ||
            (r = inst_write(rec->inst, "buffer_size_kb", "4096")) < 0) {
                *ret_error = xasprintf("cannot set up %s: %s", rec->inst, strerror(-r));
                return r;
        }
        for (size_t i = 0; i < ELEMENTSOF(trace_events); i++) {
                _cleanup_free_ char *f = xasprintf("events/%s/enable", trace_events[i]);
                r = inst_write(rec->inst, f, "1");
                /* Only the context switches are essential; a kernel without the rest records less. */
                if (r < 0 && i == 0) {
                        *ret_error = xasprintf("cannot enable %s in %s: %s", trace_events[i], rec->inst,
                                               strerror(-r));
                        return r;
                }
        }
        pipe = xasprintf("%s/trace_pipe", rec->inst);
        {
                _cleanup_free_ char *p = sys_path(pipe);
                rec->fd = open(p, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        }
        if (rec->fd < 0) {
                r = -errno;
                *ret_error = xasprintf("cannot open %s: %s", pipe, strerror(-r));
                return r;
        }
        return 0;
}

int xruns_put_back_leftovers(char **ret_error)
{
        _cleanup_free_ char *runtime = rtctl_runtime_dir(),
                            *path = xasprintf("%s/" XRUNS_TRACE_JOURNAL, runtime),
                            *lockp = xasprintf("%s/xruns.lock", runtime);
        _cleanup_journal_ Journal *j = NULL;
        _cleanup_close_ int lock = -EBADF;
        int r;

        if (access(path, F_OK) < 0)
                return 0;
        /* A run in progress keeps its own. */
        lock = open(lockp, O_RDWR | O_CLOEXEC);
        if (lock >= 0 && flock(lock, LOCK_EX | LOCK_NB) < 0)
                return 0;
        r = journal_open(path, JOURNAL_RUNTIME, &j, ret_error);
        if (r < 0)
                return r;
        return put_back(j, path, ret_error);
}
