/* SPDX-License-Identifier: GPL-2.0-or-later */
/* A JACK client that does a fixed amount of DSP-like work in every process() cycle and counts what went
 * wrong while it ran: xruns the server reported, cycles it finished after the next one was due, cycles it
 * never ran. bench/xruns.py drives it.
 *
 *   xrun-client --calibrate [--cpu N]
 *   xrun-client --units N [--warmup S] [--seconds S] [--name NAME] [--server-log FILE] [--busy]
 *
 * --calibrate needs no server: it times the work unit on one CPU and prints nanoseconds per unit.
 * Otherwise the client waits up to 60 s for the server ($JACK_DEFAULT_SERVER; its start is not real-time
 * work: with every other task confined to one loaded housekeeping CPU it took over 10 s once), lets --warmup
 * seconds pass, counts for --seconds, and prints one JSON object. --server-log names the server's stderr:
 * the server's own xrun messages written during the counting window are counted too.
 *
 * --busy adds what a DAW has beside its audio thread: a non-real-time thread of its own, named "busy",
 * that works a little and sleeps a little (1 ms of work, 5 ms of sleep) for as long as the client
 * runs. With it, once the process thread has run, the client prints one JSON line before the result:
 * {"pid", "process_tid", "busy_tid"}, so a test knows which thread is which without trusting names
 * or policies (tests/vm: a PipeWire JACK client under pw-jack). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jack/jack.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* One work unit filters BLOCK samples of noise through a biquad low-pass: a dependent floating-point
 * chain like the inner loop of a filter plugin, with a working set that stays in L1. Fresh input every
 * unit keeps the state away from denormals, whose cost would make the work depend on its history. */
#define BLOCK 32
/* Histograms of times within a cycle, 1 µs bins; later values land in the last bin. */
#define HIST_US 50000

typedef struct {
        float b0, b1, b2, a1, a2;
        float x1, x2, y1, y2;
        float noise[BLOCK];
        float out[BLOCK];
} Work;

typedef struct {
        jack_client_t *jack;
        jack_port_t *port;
        Work work;
        uint64_t units;
        atomic_bool counting;
        bool have_last;
        jack_nframes_t last_frames;
        /* Written by the process thread while counting, read once counting stopped. */
        uint64_t cycles, late, missed;
        uint32_t finish_hist[HIST_US + 1], wake_hist[HIST_US + 1], busy_hist[HIST_US + 1];
        uint64_t finish_max, wake_max, busy_max;
        atomic_uint_fast64_t xruns;
        atomic_bool shutdown;
        atomic_int process_tid, busy_tid;
} Client;

static void work_init(Work *w)
{
        /* A second-order Butterworth low-pass at a quarter of the sample rate. */
        const float k = 1.0f, norm = 1.0f / (1.0f + (float)M_SQRT2 * k + k * k);

        *w = (Work){
            .b0 = k * k * norm,
            .b1 = 2.0f * k * k * norm,
            .b2 = k * k * norm,
            .a1 = 2.0f * (k * k - 1.0f) * norm,
            .a2 = (1.0f - (float)M_SQRT2 * k + k * k) * norm,
        };
        uint32_t seed = 12345;
        for (int i = 0; i < BLOCK; i++) {
                seed = seed * 1664525u + 1013904223u;
                w->noise[i] = (float)(seed >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
        }
}

static void work_run(Work *w, uint64_t units)
{
        for (uint64_t u = 0; u < units; u++)
                for (int i = 0; i < BLOCK; i++) {
                        float x = w->noise[i];
                        float y = w->b0 * x + w->b1 * w->x1 + w->b2 * w->x2 - w->a1 * w->y1 - w->a2 * w->y2;

                        w->x2 = w->x1;
                        w->x1 = x;
                        w->y2 = w->y1;
                        w->y1 = y;
                        w->out[i] = y;
                }
}

static uint64_t now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

/* The work unit's cost on one CPU of an idle machine: many short trials, so that the fastest ones are
 * undisturbed by interrupts and the hypervisor. */
static int calibrate(int cpu)
{
        enum { TRIALS = 200, UNITS = 2000 };
        static double ns[TRIALS];
        Work w;

        if (cpu >= 0) {
                cpu_set_t set;
                CPU_ZERO(&set);
                CPU_SET(cpu, &set);
                if (sched_setaffinity(0, sizeof(set), &set) < 0) {
                        fprintf(stderr, "xrun-client: cannot run on cpu%d: %s\n", cpu, strerror(errno));
                        return 1;
                }
        }
        work_init(&w);
        work_run(&w, UNITS * 10); /* warm caches and the branch predictor */
        for (int t = 0; t < TRIALS; t++) {
                uint64_t start = now_ns();
                work_run(&w, UNITS);
                ns[t] = (double)(now_ns() - start) / UNITS;
        }
        qsort(ns, TRIALS, sizeof(double), cmp_double);
        printf("{\"ns_per_unit_min\": %.4f, \"ns_per_unit_median\": %.4f, \"ns_per_unit_max\": %.4f, "
               "\"block\": %d, \"sink\": %g}\n",
               ns[0], ns[TRIALS / 2], ns[TRIALS - 1], BLOCK, (double)w.out[0]);
        return 0;
}

static void hist_add(uint32_t *hist, uint64_t *max, int64_t us)
{
        if (us < 0)
                us = 0;
        if ((uint64_t)us > *max)
                *max = (uint64_t)us;
        hist[us > HIST_US ? HIST_US : us]++;
}

static int process(jack_nframes_t nframes, void *arg)
{
        Client *c = arg;
        jack_time_t start = jack_get_time(), cycle_usecs, next_usecs;
        jack_nframes_t frames;
        float period_usecs;
        bool counting = atomic_load_explicit(&c->counting, memory_order_relaxed);
        bool times = jack_get_cycle_times(c->jack, &frames, &cycle_usecs, &next_usecs, &period_usecs) == 0;

        if (atomic_load_explicit(&c->process_tid, memory_order_relaxed) == 0)
                atomic_store(&c->process_tid, (int)gettid());

        work_run(&c->work, c->units);
        jack_default_audio_sample_t *out = jack_port_get_buffer(c->port, nframes);
        for (jack_nframes_t i = 0; i < nframes; i++)
                out[i] = c->work.out[i % BLOCK] * 0.01f;

        jack_time_t end = jack_get_time();
        if (counting && times) {
                c->cycles++;
                if (end > next_usecs)
                        c->late++;
                if (c->have_last && frames - c->last_frames > nframes)
                        c->missed += (frames - c->last_frames) / nframes - 1;
                hist_add(c->finish_hist, &c->finish_max, (int64_t)(end - cycle_usecs));
                hist_add(c->wake_hist, &c->wake_max, (int64_t)(start - cycle_usecs));
                hist_add(c->busy_hist, &c->busy_max, (int64_t)(end - start));
        }
        c->have_last = times;
        c->last_frames = frames;
        return 0;
}

static int on_xrun(void *arg)
{
        Client *c = arg;

        if (atomic_load(&c->counting))
                atomic_fetch_add(&c->xruns, 1);
        return 0;
}

static void on_shutdown(void *arg)
{
        Client *c = arg;

        atomic_store(&c->shutdown, true);
}

static uint64_t percentile(const uint32_t *hist, uint64_t total, double q)
{
        uint64_t want = (uint64_t)ceil(q / 100.0 * (double)total), acc = 0;

        for (int i = 0; i <= HIST_US; i++) {
                acc += hist[i];
                if (acc >= want && acc > 0)
                        return (uint64_t)i;
        }
        return HIST_US;
}

static off_t file_size(const char *path)
{
        struct stat st;

        return path && stat(path, &st) == 0 ? st.st_size : 0;
}

typedef struct {
        unsigned driver, client, other;
        char first[200];
} ServerXruns;

/* The server's xrun messages written between two offsets of its log: the timed driver's own
 * ("JackTimedDriver::Process XRun"), a client not finished in time ("JackEngine::XRun"), and anything
 * else naming an xrun. */
static void count_server_xruns(const char *path, off_t from, off_t to, ServerXruns *ret)
{
        char line[512];
        FILE *f;

        *ret = (ServerXruns){};
        if (!path || to <= from || !(f = fopen(path, "re")))
                return;
        if (fseeko(f, from, SEEK_SET) == 0)
                while (ftello(f) < to && fgets(line, sizeof(line), f)) {
                        if (!strstr(line, "XRun") && !strstr(line, "xrun"))
                                continue;
                        if (strstr(line, "JackTimedDriver"))
                                ret->driver++;
                        else if (strstr(line, "JackEngine::XRun"))
                                ret->client++;
                        else
                                ret->other++;
                        if (!ret->first[0]) {
                                line[strcspn(line, "\n\"\\")] = '\0';
                                line[sizeof(ret->first) - 1] = '\0';
                                memcpy(ret->first, line, strlen(line) + 1);
                        }
                }
        fclose(f);
}

static bool sleep_while_up(Client *c, double seconds)
{
        uint64_t end = now_ns() + (uint64_t)(seconds * 1e9);

        while (now_ns() < end) {
                if (atomic_load(&c->shutdown))
                        return false;
                struct timespec ts = {0, 20 * 1000 * 1000};
                nanosleep(&ts, NULL);
        }
        return true;
}

static const char *policy_name(int policy)
{
        return policy == SCHED_FIFO ? "SCHED_FIFO" : policy == SCHED_RR ? "SCHED_RR" : "SCHED_OTHER";
}

static void format_cpus(const cpu_set_t *set, char *buf, size_t size)
{
        size_t n = 0;

        buf[0] = '\0';
        for (int cpu = 0; cpu < CPU_SETSIZE && n + 8 < size; cpu++)
                if (CPU_ISSET(cpu, set))
                        n += (size_t)snprintf(buf + n, size - n, "%s%d", n ? "," : "", cpu);
}

static void quiet(const char *msg)
{
}

static void to_stderr(const char *msg)
{
        fprintf(stderr, "xrun-client: %s\n", msg);
}

/* The --busy thread: 1 ms of the work unit, then 5 ms of sleep, until the client shuts down. */
static void *busy_main(void *arg)
{
        Client *c = arg;
        Work w;

        atomic_store(&c->busy_tid, (int)gettid());
        work_init(&w);
        while (!atomic_load(&c->shutdown)) {
                uint64_t end = now_ns() + 1000 * 1000;
                while (now_ns() < end)
                        work_run(&w, 8);
                struct timespec ts = {0, 5 * 1000 * 1000};
                nanosleep(&ts, NULL);
        }
        return NULL;
}

static int start_busy(Client *c, pthread_t *thread)
{
        int r = pthread_create(thread, NULL, busy_main, c);

        if (r != 0) {
                fprintf(stderr, "xrun-client: cannot start the busy thread: %s\n", strerror(r));
                return -1;
        }
        pthread_setname_np(*thread, "busy");
        return 0;
}

/* The --busy line: once the process thread has run (up to 10 s), which thread is which. */
static void announce_threads(Client *c)
{
        for (int i = 0; i < 200 && (!atomic_load(&c->process_tid) || !atomic_load(&c->busy_tid)); i++) {
                struct timespec ts = {0, 50 * 1000 * 1000};
                nanosleep(&ts, NULL);
        }
        printf("{\"pid\": %d, \"process_tid\": %d, \"busy_tid\": %d}\n", (int)getpid(),
               atomic_load(&c->process_tid), atomic_load(&c->busy_tid));
        fflush(stdout);
}

/* The server is started beside the client: until it answers, failed attempts are expected and not
 * worth a message each. */
static jack_client_t *connect_server(const char *name)
{
        uint64_t deadline = now_ns() + 60ull * 1000000000u;
        jack_status_t status;

        for (;;) {
                jack_set_error_function(quiet);
                jack_set_info_function(quiet);
                jack_client_t *j = jack_client_open(name, JackNoStartServer | JackUseExactName, &status);
                jack_set_error_function(to_stderr);
                jack_set_info_function(quiet);
                if (j || now_ns() > deadline)
                        return j;
                struct timespec ts = {0, 50 * 1000 * 1000};
                nanosleep(&ts, NULL);
        }
}

static int run(uint64_t units, double warmup, double seconds, const char *name, const char *server_log,
               bool busy)
{
        static Client c;
        pthread_t busy_thread;
        int policy = -1;
        struct sched_param param = {};
        cpu_set_t cpus;
        char cpulist[256] = "";

        work_init(&c.work);
        c.units = units;
        c.jack = connect_server(name);
        if (!c.jack) {
                fprintf(stderr, "xrun-client: no JACK server answered in 60 s\n");
                return 1;
        }
        c.port = jack_port_register(c.jack, "out", JACK_DEFAULT_AUDIO_TYPE, JackPortIsOutput, 0);
        if (!c.port || jack_set_process_callback(c.jack, process, &c) != 0 ||
            jack_set_xrun_callback(c.jack, on_xrun, &c) != 0) {
                fprintf(stderr, "xrun-client: cannot set up the client\n");
                return 1;
        }
        jack_on_shutdown(c.jack, on_shutdown, &c);
        if (jack_activate(c.jack) != 0) {
                fprintf(stderr, "xrun-client: cannot activate\n");
                return 1;
        }
        /* A playback port of the server, so the client is part of a real graph. */
        const char **ports =
            jack_get_ports(c.jack, NULL, JACK_DEFAULT_AUDIO_TYPE, JackPortIsPhysical | JackPortIsInput);
        if (ports && ports[0])
                jack_connect(c.jack, jack_port_name(c.port), ports[0]);
        jack_free(ports);
        if (busy) {
                if (start_busy(&c, &busy_thread) < 0)
                        return 1;
                announce_threads(&c);
        }

        bool up = sleep_while_up(&c, warmup);
        pthread_t rt = jack_client_thread_id(c.jack);
        if (pthread_getschedparam(rt, &policy, &param) != 0)
                policy = -1;
        if (pthread_getaffinity_np(rt, sizeof(cpus), &cpus) == 0)
                format_cpus(&cpus, cpulist, sizeof(cpulist));
        jack_nframes_t period = jack_get_buffer_size(c.jack), rate = jack_get_sample_rate(c.jack);

        off_t log_from = file_size(server_log);
        uint64_t t0 = now_ns();
        atomic_store(&c.counting, up);
        if (up)
                up = sleep_while_up(&c, seconds);
        atomic_store(&c.counting, false);
        double elapsed = (double)(now_ns() - t0) / 1e9;
        float load = jack_cpu_load(c.jack);
        jack_deactivate(c.jack);
        off_t log_to = file_size(server_log);
        ServerXruns sx;
        count_server_xruns(server_log, log_from, log_to, &sx);

        double period_us = 1e6 * period / rate;
        uint64_t xruns = atomic_load(&c.xruns);
        printf("{\"period_frames\": %" PRIu32 ", \"rate\": %" PRIu32
               ", \"period_us\": %.1f, \"units\": %" PRIu64
               ", \"seconds\": %.3f, \"server_up\": %s, \"cycles\": %" PRIu64 ", \"expected_cycles\": %.0f"
               ", \"client_xruns\": %" PRIu64 ", \"late_cycles\": %" PRIu64 ", \"missed_cycles\": %" PRIu64
               ", \"server_xruns\": %u, \"server_driver_xruns\": %u, \"server_client_xruns\": %u"
               ", \"server_other_xruns\": %u, \"server_first_xrun\": \"%s\""
               ", \"finish_us\": {\"p50\": %" PRIu64 ", \"p99\": %" PRIu64 ", \"p99_9\": %" PRIu64
               ", \"max\": %" PRIu64 "}, \"wake_us\": {\"p50\": %" PRIu64 ", \"p99\": %" PRIu64
               ", \"p99_9\": %" PRIu64 ", \"max\": %" PRIu64 "}, \"busy_us\": {\"p50\": %" PRIu64
               ", \"p99\": %" PRIu64 ", \"p99_9\": %" PRIu64 ", \"max\": %" PRIu64
               "}, \"jack_cpu_load\": %.1f"
               ", \"rt_policy\": \"%s\", \"rt_priority\": %d, \"rt_cpus\": \"%s\"}\n",
               period, rate, period_us, units, elapsed, up ? "true" : "false", c.cycles,
               elapsed * rate / period, xruns, c.late, c.missed, sx.driver + sx.client + sx.other, sx.driver,
               sx.client, sx.other, sx.first, percentile(c.finish_hist, c.cycles, 50),
               percentile(c.finish_hist, c.cycles, 99), percentile(c.finish_hist, c.cycles, 99.9),
               c.finish_max, percentile(c.wake_hist, c.cycles, 50), percentile(c.wake_hist, c.cycles, 99),
               percentile(c.wake_hist, c.cycles, 99.9), c.wake_max, percentile(c.busy_hist, c.cycles, 50),
               percentile(c.busy_hist, c.cycles, 99), percentile(c.busy_hist, c.cycles, 99.9), c.busy_max,
               (double)load, policy < 0 ? "unknown" : policy_name(policy), param.sched_priority, cpulist);
        jack_client_close(c.jack);
        if (busy) {
                atomic_store(&c.shutdown, true);
                pthread_join(busy_thread, NULL);
        }
        return up ? 0 : 2;
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
            {"calibrate", no_argument, NULL, 'c'},
            {"cpu", required_argument, NULL, 'C'},
            {"units", required_argument, NULL, 'u'},
            {"warmup", required_argument, NULL, 'w'},
            {"seconds", required_argument, NULL, 's'},
            {"name", required_argument, NULL, 'n'},
            {"server-log", required_argument, NULL, 'l'},
            {"busy", no_argument, NULL, 'b'},
            {},
        };
        bool cal = false, busy = false;
        int cpu = -1, o;
        uint64_t units = 0;
        double warmup = 2, seconds = 60;
        const char *name = "xrun-client", *server_log = NULL;

        while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1)
                switch (o) {
                case 'c':
                        cal = true;
                        break;
                case 'C':
                        cpu = atoi(optarg);
                        break;
                case 'u':
                        units = strtoull(optarg, NULL, 10);
                        break;
                case 'w':
                        warmup = atof(optarg);
                        break;
                case 's':
                        seconds = atof(optarg);
                        break;
                case 'n':
                        name = optarg;
                        break;
                case 'l':
                        server_log = optarg;
                        break;
                case 'b':
                        busy = true;
                        break;
                default:
                        return 64;
                }
        if (cal)
                return calibrate(cpu);
        if (units == 0 || seconds <= 0) {
                fprintf(stderr,
                        "usage: xrun-client --calibrate [--cpu N] | --units N [--warmup S] [--seconds S] "
                        "[--name NAME] [--server-log FILE] [--busy]\n");
                return 64;
        }
        signal(SIGPIPE, SIG_IGN);
        return run(units, warmup, seconds, name, server_log, busy);
}
