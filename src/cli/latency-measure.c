/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The ways rtctl latency measures one slice: the kernel's tracers (timerlat, osnoise, hwlat), and its own
 * timer processes (one per CPU: a process, not a thread, so that rtctld can attach one to the isolated CPUs
 * and leave the others where they are). */
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>

#include "cli/latency.h"
#include "core/daemon-conf.h"
#include "shared/sysfs.h"

volatile sig_atomic_t latency_interrupted;

static void on_signal(int sig)
{
        latency_interrupted = sig;
}

void latency_block_signals(void)
{
        sigset_t set;

        sigemptyset(&set);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGHUP);
        sigprocmask(SIG_BLOCK, &set, NULL);
}

void latency_catch_signals(void)
{
        /* No SA_RESTART: a wait in progress returns at once with EINTR. */
        struct sigaction sa = {.sa_handler = on_signal};

        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);
}

/* Sleeps ms milliseconds unless a signal comes first. */
static int sleep_ms(unsigned ms)
{
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

        if (latency_interrupted)
                return -EINTR;
        while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
                if (latency_interrupted)
                        return -EINTR;
        return 0;
}

static uint64_t ts_ns(const struct timespec *t)
{
        return (uint64_t)t->tv_sec * 1000000000ULL + (uint64_t)t->tv_nsec;
}

/* ---- the tracers -------------------------------------------------------------------------------- */

LatencyTracer latency_method_tracer(LatencyMethod m)
{
        switch (m) {
        case LATENCY_TIMERLAT:
                return TRACER_TIMERLAT;
        case LATENCY_OSNOISE:
                return TRACER_OSNOISE;
        case LATENCY_HWLAT:
                return TRACER_HWLAT;
        default:
                return _TRACER_MAX;
        }
}

int latency_tracefs(char **ret_dir, char **ret_error)
{
        int r;

        r = tracefs_find(ret_dir);
        if (r != -ENOENT)
                return r;
        if (!isempty(sysroot())) {
                *ret_error = xasprintf("no tracefs under %s", sysroot());
                return r;
        }
        /* Nobody mounted it: mount it where only this process sees it. */
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
            mount("tracefs", "/sys/kernel/tracing", "tracefs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
                r = -errno;
                *ret_error =
                    xasprintf("cannot mount tracefs in a private mount namespace: %s", strerror(-r));
                return r;
        }
        *ret_dir = xstrdup("/sys/kernel/tracing");
        return 0;
}

static int cpu_index(const CpuSet *cpus, unsigned cpu)
{
        int i = 0;

        if (cpu >= cpus->size || !cpuset_has(cpus, cpu))
                return -1;
        FOREACH_CPU (c, cpus) {
                if ((unsigned)c == cpu)
                        return i;
                i++;
        }
        return -1;
}

/* One line of the trace into its CPU's histogram (and osnoise's totals). */
static void consume_line(const char *line, const LatencySlice *slice, LatencyHist *hists)
{
        OsnoiseSample s;
        unsigned cpu;
        uint64_t ns;
        bool nmi;
        int i;

        switch (slice->method) {
        case LATENCY_OSNOISE:
                if (!osnoise_parse_line(line, &cpu, &s) || (i = cpu_index(slice->cpus, cpu)) < 0)
                        return;
                latency_hist_add(&hists[i], s.max_single_us * 1000);
                if (slice->noise)
                        osnoise_sample_add(&slice->noise[i], &s);
                return;
        case LATENCY_HWLAT:
                if (hwlat_parse_line(line, &cpu, &ns, &nmi) && (i = cpu_index(slice->cpus, cpu)) >= 0)
                        latency_hist_add(&hists[i], ns);
                return;
        default:
                if (timerlat_parse_line(line, &cpu, &ns) && (i = cpu_index(slice->cpus, cpu)) >= 0)
                        latency_hist_add(&hists[i], ns);
                return;
        }
}

/* Complete lines of buf[0..*len) into the histograms; a partial last line stays for the next read. */
static void consume_lines(char *buf, size_t *len, const LatencySlice *slice, LatencyHist *hists)
{
        char *start = buf, *nl;

        while ((nl = memchr(start, '\n', *len - (size_t)(start - buf)))) {
                *nl = 0;
                consume_line(start, slice, hists);
                start = nl + 1;
        }
        *len -= (size_t)(start - buf);
        memmove(buf, start, *len);
}

static int read_trace(const char *dir, const LatencySlice *slice, LatencyHist *hists, char **ret_error)
{
        _cleanup_free_ char *path = xasprintf("%s/trace_pipe", dir), *p = sys_path(path);
        _cleanup_close_ int fd = open(p, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        struct timespec now;
        uint64_t end;
        char buf[65536];
        size_t len = 0;

        if (fd < 0) {
                int r = -errno;
                *ret_error = xasprintf("cannot open %s: %s", path, strerror(-r));
                return r;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        end = ts_ns(&now) + (uint64_t)slice->ms * 1000000ULL;
        for (;;) {
                struct pollfd pfd = {.fd = fd, .events = POLLIN};
                clock_gettime(CLOCK_MONOTONIC, &now);
                if (latency_interrupted)
                        return -EINTR;
                if (ts_ns(&now) >= end)
                        return 0;
                int timeout = (int)MIN((end - ts_ns(&now)) / 1000000ULL + 1, 100u);
                if (poll(&pfd, 1, timeout) < 0 && errno != EINTR)
                        return -errno;
                for (;;) {
                        ssize_t k = read(fd, buf + len, sizeof(buf) - 1 - len);
                        if (k <= 0)
                                break;
                        len += (size_t)k;
                        consume_lines(buf, &len, slice, hists);
                        if (len == sizeof(buf) - 1)
                                len = 0; /* a line longer than the buffer is no sample */
                }
        }
}

static char *tracefs_journal_path(const char *runtime)
{
        return xasprintf("%s/" TIMERLAT_JOURNAL, runtime);
}

/* What a killed run left in the tracefs at dir, put back. 0: nothing was left; 1: put back; < 0: a run
 * still measures (-EBUSY), or what could not be put back, with a sentence. */
static int put_back_leftovers(const char *dir, const char *journal, char **ret_error)
{
        unsigned owner = timerlat_journal_owner(journal);
        int r;

        if (owner) {
                *ret_error = xasprintf("another rtctl latency (PID %u) is measuring with a tracer", owner);
                return -EBUSY;
        }
        _cleanup_free_ char *msg = NULL;
        r = timerlat_journal_restore(journal, dir, &msg);
        if (r == 1) {
                fprintf(stderr, "Put back what an interrupted rtctl latency left in %s (journal %s).\n", dir,
                        journal);
                if (msg)
                        fprintf(stderr, "warning: %s\n", msg);
        } else if (r == 2)
                fprintf(stderr, "%s\n", msg);
        else if (r < 0)
                *ret_error = TAKE_PTR(msg);
        return r;
}

int latency_put_back_leftovers(char **ret_error)
{
        _cleanup_free_ char *runtime = rtctl_runtime_dir(), *journal = tracefs_journal_path(runtime),
                            *dir = NULL;
        int r;

        if (access(journal, F_OK) < 0)
                return 0;
        if (geteuid() != 0) {
                /* Not an error of this restore: tracefs is root's, and so is putting it back. */
                fprintf(
                    stderr,
                    "A killed rtctl latency left tracefs changed (%s): root puts it back, with `sudo rtctl "
                    "restore` or the next `sudo rtctl latency`.\n",
                    journal);
                return 0;
        }
        r = latency_tracefs(&dir, ret_error);
        if (r < 0)
                return r;
        return put_back_leftovers(dir, journal, ret_error);
}

static int measure_tracer(LatencySlice *slice, LatencyHist *hists, char **ret_error)
{
        TimerlatState st = {};
        _cleanup_free_ char *restore_error = NULL, *runtime = rtctl_runtime_dir(),
                            *journal = tracefs_journal_path(runtime);
        int r, q;

        r = put_back_leftovers(slice->tracefs, journal, ret_error);
        if (r == -EBADMSG) { /* said, and gone: timerlat_save() below still refuses a tracer left on */
                fprintf(stderr, "warning: %s\n", *ret_error);
                free(*ret_error);
                *ret_error = NULL;
        } else if (r < 0)
                return r;
        r = timerlat_save(slice->tracefs, latency_method_tracer(slice->method), &st, ret_error);
        if (r < 0)
                return r;
        slice->threshold_us = timerlat_threshold_us(&st);
        /* Journalled before the first write, so that a SIGKILL between here and the restore costs nothing.
         */
        r = mkdir_p(runtime, 0755);
        if (r >= 0)
                r = timerlat_journal_write(&st, journal);
        if (r < 0) {
                *ret_error = xasprintf("cannot journal tracefs's values in %s before changing them: %s",
                                       journal, strerror(-r));
                timerlat_state_clear(&st);
                return r;
        }
        r = timerlat_start(&st, slice->cpus, slice->period_us, ret_error);
        if (r >= 0)
                r = read_trace(slice->tracefs, slice, hists, ret_error);
        q = timerlat_restore(&st, &restore_error);
        if (q >= 0)
                (void)unlink(journal);
        if (q < 0) {
                fprintf(stderr,
                        "Could not put tracefs back as it was (kept in %s for the next `rtctl latency` "
                        "or `rtctl restore`): %s\n",
                        journal, restore_error);
                if (r >= 0) {
                        *ret_error = TAKE_PTR(restore_error);
                        r = q;
                }
        }
        timerlat_state_clear(&st);
        return r;
}

/* ---- rtctl's own timer -------------------------------------------------------------------------- */

typedef struct Worker {
        int error; /* errno of the step that failed, 0 while fine */
        char what[160];
        volatile int ready;
        LatencyHist hist;
} Worker;

typedef struct Shared {
        volatile int go;        /* placed (attached) by the parent: pin, raise priority, start */
        volatile int recording; /* every worker is ready */
        volatile int stop;
        Worker workers[];
} Shared;

static void fail(Worker *w, const char *what, int err)
{
        snprintf(w->what, sizeof(w->what), "%s", what);
        w->error = err;
}

/* The measuring process: the cyclictest loop (absolute deadlines, so a late wake-up does not shift the
 * next one) at SCHED_FIFO, pinned to one CPU, memory locked. */
static _Noreturn void worker_run(Shared *sh, Worker *w, unsigned cpu, unsigned period_us)
{
        struct sched_param sp = {.sched_priority = LATENCY_PRIORITY};
        struct timespec next, now;
        cpu_set_t set;

        signal(SIGINT, SIG_IGN);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_IGN);
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
        while (!sh->go && !sh->stop)
                usleep(1000);
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (sched_setaffinity(0, sizeof(set), &set) < 0) {
                fail(w, "sched_setaffinity", errno);
                w->ready = 1;
                _exit(1);
        }
        if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0) {
                fail(w, "sched_setscheduler(SCHED_FIFO)", errno);
                w->ready = 1;
                _exit(1);
        }
        /* Page faults would show as latency; without the lock the numbers are still worth having, and
         * the parent says so. */
        if (mlockall(MCL_CURRENT | MCL_FUTURE) < 0)
                fail(w, "mlockall", errno);
        w->ready = 1;

        clock_gettime(CLOCK_MONOTONIC, &next);
        while (!sh->stop) {
                uint64_t t = ts_ns(&next) + (uint64_t)period_us * 1000ULL;
                next.tv_sec = (time_t)(t / 1000000000ULL);
                next.tv_nsec = (long)(t % 1000000000ULL);
                if (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) != 0)
                        continue;
                clock_gettime(CLOCK_MONOTONIC, &now);
                if (sh->recording && !sh->stop)
                        latency_hist_add(&w->hist, ts_ns(&now) - ts_ns(&next));
                /* Missed periods are skipped, as cyclictest does. */
                while (ts_ns(&next) + (uint64_t)period_us * 1000ULL <= ts_ns(&now)) {
                        t = ts_ns(&next) + (uint64_t)period_us * 1000ULL;
                        next.tv_sec = (time_t)(t / 1000000000ULL);
                        next.tv_nsec = (long)(t % 1000000000ULL);
                }
        }
        _exit(0);
}

static char *worker_error(const Worker *w, unsigned cpu)
{
        if (streq(w->what, "sched_setaffinity") && w->error == EINVAL)
                return xasprintf(
                    "cannot run on cpu%u: it is not in this process's cpuset (isolated by rtctl? "
                    "with rtctld running it attaches the measurement; without it, "
                    "rtctl restore)",
                    cpu);
        if (streq(w->what, "sched_setscheduler(SCHED_FIFO)") && w->error == EPERM)
                return xasprintf(
                    "cannot run at SCHED_FIFO %d: RLIMIT_RTPRIO too low; run with sudo, or allow "
                    "real-time priority (rtprio 95 for the audio group in "
                    "/etc/security/limits.d)",
                    LATENCY_PRIORITY);
        return xasprintf("cpu%u: %s failed: %s", cpu, w->what, strerror(w->error));
}

static int measure_timer(const LatencySlice *slice, LatencyHist *hists, char **ret_error)
{
        unsigned n = cpuset_count(slice->cpus), i = 0;
        size_t size = sizeof(Shared) + sizeof(Worker) * n;
        _cleanup_free_ pid_t *pids = xmalloc0(sizeof(pid_t) * n);
        bool warned = false;
        Shared *sh;
        int r = 0;

        sh = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (sh == MAP_FAILED) {
                r = -errno;
                *ret_error = xasprintf("cannot map shared memory: %s", strerror(-r));
                return r;
        }
        FOREACH_CPU (cpu, slice->cpus) {
                latency_hist_init(&sh->workers[i].hist);
                fflush(NULL);
                pids[i] = fork();
                if (pids[i] < 0) {
                        r = -errno;
                        *ret_error = xasprintf("cannot fork: %s", strerror(-r));
                        break;
                }
                if (pids[i] == 0)
                        worker_run(sh, &sh->workers[i], (unsigned)cpu, slice->period_us);
                if (slice->attach && slice->attach_cpus && cpuset_has(slice->attach_cpus, (unsigned)cpu)) {
                        r = slice->attach(pids[i], slice->userdata, ret_error);
                        if (r < 0) {
                                i++;
                                break;
                        }
                }
                i++;
        }
        if (r >= 0) {
                sh->go = 1;
                /* Every worker placed and at its priority (or failed) before anything counts. */
                for (unsigned k = 0; k < n && r >= 0; k++)
                        while (!sh->workers[k].ready) {
                                if (waitpid(pids[k], NULL, WNOHANG) == pids[k]) {
                                        pids[k] = 0;
                                        break;
                                }
                                if ((r = sleep_ms(1)) < 0)
                                        break;
                        }
        }
        i = 0;
        FOREACH_CPU (cpu, slice->cpus) {
                Worker *w = &sh->workers[i++];
                if (r < 0 || !w->error)
                        continue;
                if (streq(w->what, "mlockall")) {
                        if (!warned)
                                fprintf(stderr,
                                        "Cannot lock memory (%s): page faults may add to the "
                                        "latencies; raise RLIMIT_MEMLOCK or run with sudo.\n",
                                        strerror(w->error));
                        warned = true;
                        continue;
                }
                *ret_error = worker_error(w, (unsigned)cpu);
                r = -w->error;
        }
        if (r >= 0) {
                sh->recording = 1;
                r = sleep_ms(slice->ms);
        }
        sh->stop = 1;
        for (unsigned k = 0; k < n; k++)
                if (pids[k] > 0)
                        (void)waitpid(pids[k], NULL, 0);
        for (unsigned k = 0; k < n; k++)
                latency_hist_merge(&hists[k], &sh->workers[k].hist);
        munmap(sh, size);
        return r;
}

int latency_measure(LatencySlice *slice, LatencyHist *hists, char **ret_error)
{
        assert(slice);

        return slice->method == LATENCY_TIMER ? measure_timer(slice, hists, ret_error)
                                              : measure_tracer(slice, hists, ret_error);
}
