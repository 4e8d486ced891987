/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <getopt.h>
#include <sched.h>

#include "daemon/manager.h"
#include "shared/log.h"
#include "shared/version.h"

static void help(void)
{
        printf("rtctld [OPTIONS]\n\n"
               "Keeps the machine tuned for low-latency work, as the active profile says.\n\n"
               "  -h --help            Show this help\n"
               "     --version         Show the version\n"
               "     --profile=NAME    Apply NAME instead of the remembered or default profile\n"
               "     --no-bus          Do not connect to D-Bus (tuning only, no API)\n"
               "     --realtime-priority=N\n"
               "                       Run at SCHED_FIFO N (1-99), children reset to SCHED_OTHER\n"
               "  -v --verbose         Log passes that changed nothing too\n\n"
               "See rtctld(8).\n");
}

static int parse_argv(int argc, char *argv[], Manager *m)
{
        enum { ARG_VERSION = 0x100, ARG_PROFILE, ARG_NO_BUS, ARG_REALTIME_PRIORITY };
        static const struct option options[] = {
            {"help", no_argument, NULL, 'h'},
            {"version", no_argument, NULL, ARG_VERSION},
            {"profile", required_argument, NULL, ARG_PROFILE},
            {"no-bus", no_argument, NULL, ARG_NO_BUS},
            {"realtime-priority", required_argument, NULL, ARG_REALTIME_PRIORITY},
            {"verbose", no_argument, NULL, 'v'},
            {},
        };
        int c;

        while ((c = getopt_long(argc, argv, "hv", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("rtctld %s\n%s\n", RTCTL_VERSION, rtctl_features());
                        return 0;
                case ARG_PROFILE:
                        free(m->profile_override);
                        m->profile_override = xstrdup(optarg);
                        break;
                case ARG_NO_BUS:
                        m->no_bus = true;
                        break;
                case ARG_REALTIME_PRIORITY:
                        if (safe_atou(optarg, &m->realtime_priority) < 0 || m->realtime_priority < 1 ||
                            m->realtime_priority > 99) {
                                _cleanup_free_ char *shown = text_escape(optarg);
                                log_error("--realtime-priority=%s: expected a SCHED_FIFO priority, 1 to 99.",
                                          shown);
                                return -EINVAL;
                        }
                        break;
                case 'v':
                        log_set_max_level(LOG_DEBUG);
                        break;
                default:
                        return -EINVAL;
                }
        if (optind < argc) {
                log_error("rtctld takes no positional arguments.");
                return -EINVAL;
        }
        return 1;
}

/* Best effort: a daemon that cannot have SCHED_FIFO still tunes, only its answers to events may wait
 * behind the housekeeping CPUs' load. Done here rather than with the unit's CPUSchedulingPolicy=, which
 * fails the whole start (214/SETSCHEDULER) where the kernel's RT group scheduling gives system.slice no
 * real-time runtime. */
static void set_realtime(unsigned priority)
{
        struct sched_param p = {.sched_priority = (int)priority};

        if (sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &p) < 0)
                log_warning_errno(
                    -errno,
                    "Cannot run at SCHED_FIFO %u (%m): running as an ordinary task, so the "
                    "placement of new audio threads may wait behind the housekeeping CPUs' load.",
                    priority);
        else
                log_debug("Running at SCHED_FIFO %u.", priority);
}

/* A bad command line, as systemd's daemons (and LSB's "invalid or excess argument") exit: 2. */
#define EXIT_USAGE 2

/* < 0: failed; 0: done; EXIT_USAGE: the command line was wrong (said on stderr). */
static int run(int argc, char *argv[])
{
        _cleanup_manager_ Manager *m = NULL;
        int r;

        log_setup("rtctld");
        tuners_register_all();
        r = manager_new(&m);
        if (r < 0)
                return log_error_errno(r, "Failed to allocate the event loop: %m");
        r = parse_argv(argc, argv, m);
        if (r < 0)
                return EXIT_USAGE;
        if (r == 0)
                return 0;

        m->runtime_dir = rtctl_runtime_dir();
        m->state_dir = rtctl_state_dir();
        if (m->realtime_priority > 0)
                set_realtime(m->realtime_priority);

        r = manager_start(m);
        if (r < 0)
                return r;
        return manager_run(m);
}

int main(int argc, char *argv[])
{
        int r = run(argc, argv);
        return r == EXIT_USAGE ? EXIT_USAGE : r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
