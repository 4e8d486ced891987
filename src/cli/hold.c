/* SPDX-License-Identifier: GPL-2.0-or-later */
/* hold, run, holds: a profile held for a command's lifetime (power-profiles-daemon's `launch`), with the
 * command's whole process tree on the isolated CPUs for `run` (gamemoderun, for latency). */
#include <fcntl.h>
#include <glib.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/args.h"

static volatile sig_atomic_t child_pid;

/* Signals sent to rtctl reach the command. Those a terminal sends to its whole foreground process group
 * (Ctrl-C, Ctrl-\) reach the command directly and are not sent twice. */
static void forward(int sig, siginfo_t *si, void *ctx)
{
        if (child_pid > 0 && si->si_code != SI_KERNEL)
                kill(child_pid, sig);
}

static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT};

static void forward_signals(void)
{
        struct sigaction sa = {.sa_sigaction = forward, .sa_flags = SA_SIGINFO | SA_RESTART};

        sigemptyset(&sa.sa_mask);
        for (size_t i = 0; i < ELEMENTSOF(forwarded); i++)
                (void)sigaction(forwarded[i], &sa, NULL);
}

/* Starts argv held at a gate: it execs once the gate opens (after it was attached), or exits 127 without
 * running anything when the gate closes unopened. */
static pid_t spawn_gated(char **argv, int *ret_gate)
{
        int p[2];
        pid_t pid;

        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        pid = fork();
        if (pid < 0) {
                int r = -errno;
                close(p[0]);
                close(p[1]);
                return r;
        }
        if (pid == 0) {
                char go = 0;
                close(p[1]);
                if (read(p[0], &go, 1) != 1 || go != 'g')
                        _exit(127);
                close(p[0]);
                execvp(argv[0], argv);
                fprintf(stderr, "rtctl: cannot run %s: %s\n", argv[0], strerror(errno));
                _exit(errno == ENOENT ? 127 : 126);
        }
        close(p[0]);
        *ret_gate = p[1];
        return pid;
}

static int wait_exit_status(pid_t pid)
{
        int status;

        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return EXIT_FAILED;
        if (WIFEXITED(status))
                return WEXITSTATUS(status);
        if (WIFSIGNALED(status))
                return 128 + WTERMSIG(status);
        return EXIT_FAILED;
}

static char *command_line(char **argv)
{
        g_autoptr(GString) s = g_string_new(NULL);

        for (char **a = argv; *a; a++)
                g_string_append_printf(s, "%s%s", a == argv ? "" : " ", *a);
        return g_string_free(g_steal_pointer(&s), false);
}

/* HoldProfile keeps a reason of at most this many bytes, of printable text only. */
#define HOLD_REASON_MAX 256

/* "rtctl run: CMD ARGS": escaped, and cut on a character boundary with an ellipsis, so a long or odd
 * command line still makes a reason the daemon takes. */
static char *default_reason(bool run, char **argv)
{
        _cleanup_free_ char *cmdline = command_line(argv);
        _cleanup_free_ char *shown = text_escape(cmdline);
        _cleanup_free_ char *full = xasprintf("rtctl %s: %s", run ? "run" : "hold", shown);
        static const char ellipsis[] = "\u2026";

        if (strlen(full) <= HOLD_REASON_MAX)
                return TAKE_PTR(full);
        return xasprintf("%.*s%s", (int)utf8_cut(full, HOLD_REASON_MAX - strlen(ellipsis)), full, ellipsis);
}

static int hold(Cli *c, const char *profile, const char *reason, uint32_t *ret_cookie)
{
        sd_bus_message *reply = NULL;
        int code, r;

        code = cli_call(c, "HoldProfile", &reply, false, "sss", profile, reason, "rtctl");
        if (code != EXIT_OK)
                return code;
        r = sd_bus_message_read(reply, "u", ret_cookie);
        sd_bus_message_unref(reply);
        return r < 0 ? EXIT_FAILED : EXIT_OK;
}

/* Attaches the gated child by pidfd. A profile that isolates nothing still runs the command. */
static int attach_child(Cli *c, pid_t pid, const char *profile)
{
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        int fd, r, code = EXIT_OK;

        fd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (fd < 0) {
                fprintf(stderr, "Cannot open a pidfd for the command: %s\n", strerror(errno));
                return EXIT_FAILED;
        }
        r = sd_bus_call_method(c->bus, "org.rtctl.Manager1", "/org/rtctl/Manager1", "org.rtctl.Manager1",
                               "AttachProcessByPIDFD", &e, &reply, "h", fd);
        close(fd);
        if (r < 0) {
                if (sd_bus_error_has_name(&e, "org.rtctl.Error.NotIsolated"))
                        fprintf(stderr,
                                "Profile %s isolates no CPU: the command runs where it would anyway.\n",
                                profile);
                else {
                        fprintf(stderr, "Cannot put the command on the isolated CPUs: %s\n",
                                e.message ?: strerror(-r));
                        code = cli_exit_for_error(&e);
                }
        }
        sd_bus_error_free(&e);
        sd_bus_message_unref(reply);
        return code;
}

enum { ARG_PROFILE = CLI_OPT_VERB, ARG_REASON };

/* hold takes the same but --profile: run_options + 1. */
static const struct option run_options[] = {
    {"profile", required_argument, NULL, ARG_PROFILE},
    {"reason", required_argument, NULL, ARG_REASON},
    {},
};

/* hold PROFILE [--reason TEXT] -- CMD... and run [--profile NAME] [--reason TEXT] -- CMD... */
int verb_hold(Cli *c, int argc, char *argv[])
{
        bool run = streq(argv[0], "run");
        /* The command's own options, after the first "--", are not rtctl's. */
        int dashdash = cli_find_dashdash(argc, argv);
        CliArgs args = {.cli = c,
                        .argc = dashdash,
                        .argv = argv,
                        .usage = run ? "run [--profile NAME] [--reason TEXT] -- COMMAND [ARG...]"
                                     : "hold PROFILE [--reason TEXT] -- COMMAND [ARG...]",
                        .options = run ? run_options : run_options + 1};
        const char *profile = run ? "audio" : NULL, *reason = NULL;
        _cleanup_free_ char *reason_made = NULL;
        uint32_t cookie = 0;
        int gate = -1, code, status, r;
        pid_t pid;

        assert(c);
        assert(argv);

        while ((r = cli_next_option(&args)) > 0)
                if (r == ARG_PROFILE)
                        profile = args.value;
                else if (r == ARG_REASON)
                        reason = args.value;
        if (r < 0 || !cli_args_count(&args, !run, !run))
                return args.exit;
        if (!run)
                profile = args.operands[0];
        if (dashdash + 1 >= argc)
                return cli_usage_error(&args, "no command: give it after \"--\"");
        argv += dashdash + 1;
        if (!reason)
                reason = reason_made = default_reason(run, argv);

        code = hold(c, profile, reason, &cookie);
        if (code != EXIT_OK)
                return code;

        pid = spawn_gated(argv, &gate);
        if (pid < 0) {
                fprintf(stderr, "Cannot start %s: %s\n", argv[0], strerror((int)-pid));
                return EXIT_FAILED;
        }
        child_pid = pid;
        if (run && (code = attach_child(c, pid, profile)) != EXIT_OK) {
                close(gate); /* the command never runs */
                (void)wait_exit_status(pid);
                return code;
        }
        /* From here on the command runs and gets the signals; before, a signal ends rtctl, and the
         * command, seeing its gate close, never runs. */
        forward_signals();
        if (write(gate, "g", 1) != 1) {
                close(gate);
                (void)wait_exit_status(pid);
                return EXIT_FAILED;
        }
        close(gate);

        status = wait_exit_status(pid);
        child_pid = 0;
        /* The hold also ends when this connection closes; releasing says so at once. */
        (void)sd_bus_call_method(c->bus, "org.rtctl.Manager1", "/org/rtctl/Manager1", "org.rtctl.Manager1",
                                 "ReleaseProfile", NULL, NULL, "u", cookie);
        return status;
}

static char *format_since(uint64_t usec)
{
        time_t t = (time_t)(usec / 1000000);
        struct tm tm;
        char buf[64];

        if (!localtime_r(&t, &tm) || strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm) == 0)
                return xstrdup("?");
        return xstrdup(buf);
}

/* Holds as (cookie, profile, application id, reason, bus name, since) strings, 6 per hold. */
int cli_read_holds(Cli *c, char ***ret_cells, size_t *ret_n, bool quiet_absent)
{
        sd_bus_message *reply = NULL;
        char **cells = NULL;
        size_t n = 0;
        int code, r;

        code = cli_get_property(c, "ActiveProfileHolds", "aa{sv}", &reply, quiet_absent);
        if (code != EXIT_OK)
                return code;
        r = sd_bus_message_enter_container(reply, 'a', "a{sv}");
        while (r > 0 && (r = sd_bus_message_enter_container(reply, 'a', "{sv}")) > 0) {
                char *cookie = NULL, *profile = NULL, *app = NULL, *reason = NULL, *name = NULL,
                     *since = NULL;
                while ((r = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
                        const char *key, *s;
                        uint32_t u;
                        uint64_t t;
                        if ((r = sd_bus_message_read(reply, "s", &key)) < 0)
                                break;
                        if (streq(key, "Cookie") && sd_bus_message_read(reply, "v", "u", &u) >= 0)
                                cookie = xasprintf("%u", u);
                        else if (streq(key, "Since") && sd_bus_message_read(reply, "v", "t", &t) >= 0)
                                since = format_since(t);
                        else if (strv_contains(
                                     (char *const[]){"Profile", "ApplicationId", "Reason", "BusName", NULL},
                                     key) &&
                                 sd_bus_message_read(reply, "v", "s", &s) >= 0) {
                                char **slot = streq(key, "Profile")         ? &profile
                                              : streq(key, "ApplicationId") ? &app
                                              : streq(key, "Reason")        ? &reason
                                                                            : &name;
                                *slot = xstrdup(s);
                        } else if ((r = sd_bus_message_skip(reply, "v")) < 0)
                                break;
                        if ((r = sd_bus_message_exit_container(reply)) < 0)
                                break;
                }
                strv_push(&cells, cookie ?: xstrdup("?"));
                strv_push(&cells, profile ?: xstrdup(""));
                strv_push(&cells, app ?: xstrdup(""));
                strv_push(&cells, reason ?: xstrdup(""));
                strv_push(&cells, name ?: xstrdup(""));
                strv_push(&cells, since ?: xstrdup(""));
                n++;
                if (r < 0 || (r = sd_bus_message_exit_container(reply)) < 0)
                        break;
                r = 1;
        }
        sd_bus_message_unref(reply);
        if (r < 0) {
                strv_free(cells);
                fprintf(stderr, "Cannot read the holds: %s\n", strerror(-r));
                return EXIT_FAILED;
        }
        *ret_cells = cells;
        *ret_n = n;
        return EXIT_OK;
}

static const char *const hold_keys[] = {"cookie", "profile",  "application_id",
                                        "reason", "bus_name", "since"};

int verb_holds(Cli *c, int argc, char *argv[])
{
        CliArgs args = {.cli = c, .argc = argc, .argv = argv, .usage = "holds"};
        _cleanup_strv_free_ char **cells = NULL;
        size_t n = 0;
        int code;

        assert(c);
        assert(argv);

        if (!cli_parse_args(&args, 0, 0))
                return args.exit;
        code = cli_read_holds(c, &cells, &n, false);
        if (code != EXIT_OK)
                return code;
        if (c->json) {
                json_object *a = json_object_new_array();
                for (size_t i = 0; i < n; i++) {
                        json_object *o = json_object_new_object();
                        for (size_t k = 0; k < ELEMENTSOF(hold_keys); k++)
                                json_object_object_add(o, hold_keys[k],
                                                       k == 0 ? json_object_new_int64(atoll(cells[i * 6]))
                                                              : json_object_new_string(cells[i * 6 + k]));
                        json_object_array_add(a, o);
                }
                cli_print_json(a);
                return EXIT_OK;
        }
        if (n == 0) {
                printf("No holds.\n");
                return EXIT_OK;
        }
        cli_print_table(
            (const char *const[]){"COOKIE", "PROFILE", "APPLICATION", "REASON", "HOLDER", "SINCE"}, 6, cells,
            n);
        return EXIT_OK;
}
