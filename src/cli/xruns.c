/* SPDX-License-Identifier: GPL-2.0-or-later */
/* xruns: follows the audio server's xruns and names, for each, what took the time on the audio CPUs
 * during the late cycle, with the profile line that would prevent it.
 *
 * The xruns come from the server: PipeWire's profiler (xruns-pipewire.c), or JACK's xrun callback
 * (jack2's server, or PipeWire's JACK interface under pw-jack), read in a child process that runs as the
 * user under sudo and passes back fixed-size records (xruns-server.c); the COMMAND runs as that user too
 * (xruns-user.c). This process, root, keeps what needs root: tracefs, the SMI counters, /proc.
 *
 * What ran comes from a private tracefs instance of the audio CPUs (xruns-record.c); each xrun is read
 * back over it (xruns-analyse.c) and told with its causes and their fixes (xruns-report.c). This file is
 * the verb: its options, the CPUs, the loop that feeds the trace and waits for the xruns. */
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/xruns.h"
#include "core/irqs.h"
#include "core/topology.h"
#include "core/xruns.h"
#include "shared/sysfs.h"

#define USAGE                                                                                               \
        "xruns [--server auto|pipewire|jack] [--cpus LIST] [--window MS] [--json] [-- COMMAND [ARG...]]"

/* Seconds of the CPUs' history kept. */
#define KEEP_NS (3ULL * 1000000000ULL)
/* How long after joining the graph xruns are not counted. */
#define SETTLE_START_NS (1000ULL * 1000000ULL)
/* How long after an xrun the trace is read: the last events reach trace_pipe by then. */
#define SETTLE_NS (60ULL * 1000000ULL)
/* Xruns waiting for their trace, at most. */
#define MAX_PENDING 4096

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
        interrupted = sig;
}

static CpuSet *isolated_cpus(Cli *c, unsigned size)
{
        sd_bus_message *reply = NULL;
        const char *s;
        CpuSet *set = NULL;

        if (cli_get_property(c, "IsolatedCPUs", "s", &reply, true) != EXIT_OK)
                return NULL;
        if (sd_bus_message_read(reply, "s", &s) > 0 && !isempty(s))
                (void)cpuset_parse_list(s, size, &set, NULL);
        sd_bus_message_unref(reply);
        return set;
}

/* The CPUs the audio threads may run on: rtctld's isolated ones, else every online CPU. */
static CpuSet *audio_cpus(const Topology *topo, const char *given, const CpuSet *isolated, char **ret_error)
{
        CpuSet *set = NULL;

        if (given) {
                _cleanup_free_ char *err = NULL;
                if (cpuset_parse_list(given, topo->n_cpus, &set, &err) < 0 || cpuset_empty(set)) {
                        *ret_error = xasprintf("--cpus: %s is not a CPU list%s%s", given, err ? ": " : "",
                                               strempty(err));
                        cpuset_free(set);
                        return NULL;
                }
                return set;
        }
        return cpuset_dup(isolated ?: topo->online);
}

int verb_xruns(Cli *c, int argc, char *argv[])
{
        enum { ARG_CPUS = CLI_OPT_VERB, ARG_WINDOW, ARG_SERVER };
        static const struct option options[] = {
            {"server", required_argument, NULL, ARG_SERVER},
            {"cpus", required_argument, NULL, ARG_CPUS},
            {"window", required_argument, NULL, ARG_WINDOW},
            {},
        };
        int dashdash = cli_find_dashdash(argc, argv);
        CliArgs args = {.cli = c, .argc = dashdash, .argv = argv, .usage = USAGE, .options = options};
        const char *cpus_arg = NULL, *server_arg = "auto";
        unsigned window_ms = 0;
        _cleanup_topology_ Topology *topo = NULL;
        _cleanup_cpuset_ CpuSet *cpus = NULL;
        _cleanup_free_ char *err = NULL, *cpus_list = NULL;
        _cleanup_xrun_trace_ XrunTrace *trace = NULL;
        XrunsContext ctx = {.rt_runtime_us = -1};
        XrunsServer server = XRUNS_SERVER_NULL;
        XrunsUser user = {};
        XrunsRecording rec = {.fd = -EBADF, .lock = -EBADF};
        XrunsSmis smis = {};
        GArray *findings = g_array_new(false, true, sizeof(XrunsFinding));
        GArray *pending = g_array_new(false, false, sizeof(uint64_t));
        pid_t child = 0;
        FILE *raw = NULL;
        int status = 0, code = EXIT_OK, r, for_user = 0;
        bool server_gone = false;
        uint64_t started;

        while ((r = cli_next_option(&args)) > 0)
                if (r == ARG_CPUS)
                        cpus_arg = args.value;
                else if (r == ARG_SERVER && !streq(args.value, "auto") && !streq(args.value, "pipewire") &&
                         !streq(args.value, "jack")) {
                        code =
                            cli_usage_error(&args, "--server is auto, pipewire or jack, not %s", args.value);
                        goto out;
                } else if (r == ARG_SERVER)
                        server_arg = args.value;
                else if (r == ARG_WINDOW &&
                         (safe_atou(args.value, &window_ms) < 0 || window_ms == 0 || window_ms > 2000)) {
                        code = cli_usage_error(&args, "--window takes milliseconds from 1 to 2000, not %s",
                                               args.value);
                        goto out;
                }
        if (r < 0 || !cli_args_count(&args, 0, 0)) {
                code = args.exit;
                goto out;
        }
        if (dashdash < argc && dashdash + 1 >= argc) {
                code = cli_usage_error(&args, "no command: give it after \"--\"");
                goto out;
        }
        if (geteuid() != 0) {
                fprintf(stderr, "rtctl xruns records with tracefs, which needs root: run it with sudo.\n");
                code = EXIT_FAILED;
                goto out;
        }
        r = topology_load(NULL, &topo);
        if (r < 0) {
                fprintf(stderr, "Cannot read the CPU topology: %s\n", strerror(-r));
                code = EXIT_FAILED;
                goto out;
        }
        ctx.isolated = isolated_cpus(c, topo->n_cpus);
        cpus = audio_cpus(topo, cpus_arg, ctx.isolated, &err);
        if (!cpus) {
                fprintf(stderr, "%s\n", err);
                code = EXIT_USAGE;
                goto out;
        }
        cpus_list = cpuset_format_list(cpus);
        /* rtctl itself, its JACK or PipeWire threads and the trace's reading stay off the CPUs it records,
         * where they would be among the causes (threads made later inherit this). */
        {
                cpu_set_t mask;
                unsigned n = 0;
                CPU_ZERO(&mask);
                FOREACH_CPU (cpu, topo->online)
                        if (!cpuset_has(cpus, (unsigned)cpu) && cpu < CPU_SETSIZE) {
                                CPU_SET(cpu, &mask);
                                n++;
                        }
                if (n > 0)
                        (void)sched_setaffinity(0, sizeof mask, &mask);
        }
        /* Under sudo, the command and the server's client run as the user who ran it (xruns-user.c). */
        for_user = xruns_user_find(&user, &err);
        if (for_user < 0) {
                fprintf(stderr, "rtctl xruns: %s\n", err);
                code = EXIT_FAILED;
                goto out;
        }
        r = xruns_server_start(&server, server_arg, for_user ? &user : NULL, &err);
        if (r < 0) {
                if (err) /* else the server's client said why */
                        fprintf(stderr, "rtctl xruns: %s\n", err);
                code = EXIT_FAILED;
                goto out;
        }
        ctx.period_us = server.rate ? (unsigned)((uint64_t)server.frames * 1000000ULL / server.rate) : 0;
        if (streq(server.kind, "pipewire"))
                ctx.late_ns = (uint64_t)ctx.period_us * 1000ULL;
        if (window_ms == 0) /* the late cycle and the one before it, and time for the news to arrive */
                window_ms = MAX(10u, (4 * ctx.period_us + 999) / 1000);
        (void)irq_table_load(0, topo->n_cpus, &ctx.irqs);
        {
                _cleanup_free_ char *rt = NULL;
                if (sys_read("/proc/sys/kernel/sched_rt_runtime_us", &rt) >= 0)
                        ctx.rt_runtime_us = strtoll(strstrip(rt), NULL, 10);
        }

        struct sigaction sa = {.sa_handler = on_signal};
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);

        r = xruns_recording_start(&rec, cpus, &err);
        if (r < 0) {
                fprintf(stderr, "rtctl xruns: %s\n", err);
                code = EXIT_FAILED;
                goto out;
        }
        trace = xrun_trace_new(KEEP_NS);
        xruns_smis_start(&smis, cpus);
        /* RTCTL_XRUNS_RAW=FILE keeps the trace as read, to look into a finding by hand. */
        if (getenv("RTCTL_XRUNS_RAW"))
                raw = fopen(getenv("RTCTL_XRUNS_RAW"), "we");
        started = xruns_now_ns();
        if (!c->json)
                fprintf(stderr,
                        "Following %s's xruns (%u frames at %u Hz), recording CPU %s; Ctrl-C ends.\n",
                        server.kind, server.frames, server.rate, cpus_list);
        if (dashdash < argc) {
                child = fork();
                if (child < 0) {
                        fprintf(stderr, "Cannot start %s: %m\n", argv[dashdash + 1]);
                        code = EXIT_FAILED;
                        goto out;
                }
                if (child == 0) {
                        signal(SIGINT, SIG_DFL);
                        signal(SIGTERM, SIG_DFL);
                        signal(SIGHUP, SIG_DFL);
                        if (for_user && (r = xruns_user_become(&user, true)) < 0) {
                                fprintf(stderr, "Cannot become %s to run %s: %s\n", user.name,
                                        argv[dashdash + 1], strerror(-r));
                                _exit(127);
                        }
                        execvp(argv[dashdash + 1], argv + dashdash + 1);
                        fprintf(stderr, "Cannot run %s: %m\n", argv[dashdash + 1]);
                        _exit(127);
                }
        }

        for (;;) {
                char buf[65536];
                ssize_t n;
                uint64_t t;
                bool done = interrupted != 0 || server_gone;

                if (child > 0 && waitpid(child, &status, WNOHANG) == child) {
                        child = 0;
                        done = true;
                }
                while ((n = read(rec.fd, buf, sizeof buf)) > 0) {
                        xrun_trace_feed(trace, buf, (size_t)n);
                        if (raw)
                                (void)fwrite(buf, 1, (size_t)n, raw);
                }
                while ((r = xruns_server_next(&server, &t)) > 0)
                        /* Joining can itself make an xrun (jack2 reorders its graph for a new client;
                         * PipeWire starts its profiler): the first second is not counted. A flood is
                         * not kept past what the analysis can follow. */
                        if (t > started + SETTLE_START_NS && pending->len < MAX_PENDING)
                                g_array_append_val(pending, t);
                if (r < 0) /* the server went, or its client did */
                        server_gone = done = true;
                /* An xrun is read once the trace has passed it, or SETTLE_NS after. */
                while (pending->len > 0) {
                        uint64_t at = g_array_index(pending, uint64_t, 0), now = xruns_now_ns();
                        if (!done && xrun_trace_now(trace) < at + SETTLE_NS && now < at + 4 * SETTLE_NS)
                                break;
                        XrunsFinding f = {.mono_ns = at,
                                          .wall = time(NULL) - (time_t)((now - at) / 1000000000ULL)};
                        xruns_analyse(trace, cpus, &ctx, (uint64_t)window_ms * 1000000ULL, at, &f);
                        xruns_same_stall(findings, &ctx, &f);
                        xruns_smis_read(&smis, &f);
                        g_array_append_val(findings, f);
                        if (!c->json) {
                                xruns_finding_print(&ctx, &server, &f, findings->len - 1, cpus_list);
                                fflush(stdout);
                        }
                        g_array_remove_index(pending, 0);
                }
                if (done && pending->len == 0)
                        break;
                struct pollfd p = {.fd = server.fd, .events = POLLIN};
                (void)poll(&p, 1, 20);
        }

        xruns_smis_read(&smis, NULL);
        xruns_summary(c->json, &ctx, &server, findings, &smis, trace, cpus_list, window_ms, started);
        if (dashdash < argc)
                code = WIFEXITED(status) ? WEXITSTATUS(status)
                                         : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);

out:
        if (child > 0) {
                kill(child, SIGTERM);
                (void)waitpid(child, NULL, 0);
        }
        xruns_server_stop(&server);
        xruns_user_clear(&user);
        xruns_recording_stop(&rec);
        if (raw)
                fclose(raw);
        for (size_t i = 0; i < findings->len; i++) {
                XrunsFinding *f = &g_array_index(findings, XrunsFinding, i);
                xrun_causes_free(f->causes, f->n_causes);
                free(f->notes);
        }
        free(smis.cpus);
        g_array_free(findings, true);
        g_array_free(pending, true);
        cpuset_free(ctx.isolated);
        if (ctx.irqs)
                irq_table_free(ctx.irqs);
        free(rec.inst);
        return code;
}
