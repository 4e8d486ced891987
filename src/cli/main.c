/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <getopt.h>
#include <stdarg.h>
#include <unistd.h>

#include "cli/args.h"
#include "core/bootloader.h"
#include "shared/log.h"
#include "shared/version.h"
#include "tuners/registry.h"

#define BUS_NAME  "org.rtctl.Manager1"
#define BUS_PATH  "/org/rtctl/Manager1"
#define BUS_IFACE "org.rtctl.Manager1"

enum { ARG_VERSION = CLI_OPT_VERB };

static void help(void)
{
        printf(
            "rtctl [OPTIONS] COMMAND ...\n\n"
            "Shows and changes how rtctld tunes this machine for low-latency work.\n\n"
            "Commands:\n"
            "  status                 Active profile, state, failures, last pass\n"
            "  profiles               The profiles there are\n"
            "  profile [NAME]         Show the active profile, or switch to NAME (returns when in place)\n"
            "  plan [--profile NAME]  What applying a profile would change (works without rtctld)\n"
            "  restore                Put every value rtctl changed back (works without rtctld)\n"
            "  attach PID             Run process PID on the isolated CPUs (PipeWire, JACK, a DAW)\n"
            "  detach PID             Move it back to the housekeeping CPUs\n"
            "  run [--profile NAME] -- CMD...\n"
            "                         Run CMD with NAME (default audio) held and its whole process\n"
            "                         tree on the isolated CPUs; exits with CMD's status\n"
            "  hold NAME -- CMD...    Hold profile NAME while CMD runs\n"
            "  holds                  The profiles applications hold\n"
            "  irq                    Every IRQ: class, device, CPUs, rate, thread priority\n"
            "  irq pin IRQ CPUS       Keep an IRQ on CPUS until restore or a profile change\n"
            "                         (--isolated to allow isolated CPUs); irq unpin IRQ\n"
            "  verify                 Whether everything the profile sets is still in place\n"
            "  check [--local] [--user NAME] [--profile NAME]\n"
            "                         Audit the machine for audio work (works without rtctld)\n"
            "  bootargs [show|apply|revert] [--profile NAME]\n"
            "                         Kernel arguments only a reboot applies: show them and what the\n"
            "                         running kernel has; put them in (or take them out of) the boot\n"
            "                         loader's configuration (as root; works without rtctld)\n"
            "  latency [--cpus CPUS] [--duration 30s] [--method auto|timerlat|timer]\n"
            "          [--compare PROFILE] [--svg FILE]\n"
            "                         Wake-up latency per CPU (avg, p99, p99.9, max, histogram);\n"
            "                         --compare alternates the profile in force with PROFILE\n"
            "  xruns [--server auto|pipewire|jack] [--cpus CPUS] [-- COMMAND]\n"
            "                         Follow the JACK or PipeWire server's xruns and name what took\n"
            "                         the time on the audio CPUs in each late cycle, with the fix\n"
            "                         (as root; records with a private tracefs instance)\n\n"
            "Options:\n"
            "  -h --help              Show this help (after a command: its usage)\n"
            "     --version           Show the version\n"
            "     --json              Machine-readable output (keys are stable; see rtctl(1))\n"
            "     --no-legend         Leave out table headers and summary lines\n"
            "     --pager             Page long output through $RTCTL_PAGER, $PAGER or less\n"
            "     --no-pager          Do not page output (the default)\n\n"
            "Exit status: 0 ok, 1 failed or failures left, 2 usage, 3 rtctld not running,\n"
            "4 no such profile, 5 invalid profile, 6 not authorized. See rtctl(1).\n");
}

int cli_exit_for_error(const sd_bus_error *e)
{
        if (sd_bus_error_has_names(
                e, "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner",
                "org.freedesktop.DBus.Error.NoServer", "org.freedesktop.DBus.Error.FileNotFound"))
                return EXIT_NO_DAEMON;
        if (sd_bus_error_has_name(e, "org.rtctl.Error.NoSuchProfile"))
                return EXIT_NO_PROFILE;
        if (sd_bus_error_has_names(e, "org.rtctl.Error.NoSuchProcess", "org.rtctl.Error.AlreadyAttached",
                                   "org.rtctl.Error.NotAttached", "org.rtctl.Error.NotIsolated",
                                   "org.rtctl.Error.NoSuchHold"))
                return EXIT_FAILED;
        if (sd_bus_error_has_name(e, "org.rtctl.Error.InvalidProfile"))
                return EXIT_INVALID;
        if (sd_bus_error_has_names(e, "org.rtctl.Error.NotAuthorized",
                                   "org.freedesktop.DBus.Error.AccessDenied"))
                return EXIT_NOT_AUTHORIZED;
        if (sd_bus_error_has_name(e, "org.rtctl.Error.InvalidArgument"))
                return EXIT_USAGE;
        return EXIT_FAILED;
}

int cli_bus(Cli *c, bool quiet)
{
        int r;

        assert(c);

        if (c->bus)
                return EXIT_OK;
        r = sd_bus_open_system(&c->bus);
        if (r < 0) {
                if (!quiet)
                        fprintf(stderr, "Cannot connect to the system bus: %s\n", strerror(-r));
                return EXIT_NO_DAEMON;
        }
        /* On a terminal polkit may ask for a password (through the session's agent); in a script it
         * answers at once. */
        (void)sd_bus_set_allow_interactive_authorization(c->bus, isatty(STDIN_FILENO) > 0);
        return EXIT_OK;
}

/* The bus answers NoReply both when a call times out and when the daemon went away with it unanswered
 * (killed, crashed: the bus could still route it there, or it was stopped with the call queued). With
 * no owner of the name left, that is a daemon that does not run, and a verb that can do without it
 * (restore from the journal, status) does so. */
static bool daemon_went_away(Cli *c, const sd_bus_error *e)
{
        sd_bus_message *reply = NULL;
        int owned = 1, r;

        if (!sd_bus_error_has_name(e, SD_BUS_ERROR_NO_REPLY))
                return false;
        r = sd_bus_call_method(c->bus, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                               "org.freedesktop.DBus", "NameHasOwner", NULL, &reply, "s", BUS_NAME);
        if (r >= 0)
                r = sd_bus_message_read(reply, "b", &owned);
        sd_bus_message_unref(reply);
        return r >= 0 && !owned;
}

static int handle_error(Cli *c, sd_bus_error *e, int r, bool quiet_absent)
{
        bool gone = daemon_went_away(c, e);
        int code = gone ? EXIT_NO_DAEMON : e->name ? cli_exit_for_error(e) : EXIT_FAILED;

        if (code == EXIT_NO_DAEMON) {
                if (!quiet_absent)
                        fprintf(stderr, "rtctld is not running (%s%s on the system bus).\n",
                                gone ? "it went away without answering; no " : "no ", BUS_NAME);
        } else
                fprintf(stderr, "%s\n", e->message ?: strerror(-r));
        return code;
}

int cli_call(Cli *c, const char *method, sd_bus_message **reply, bool quiet_absent, const char *types, ...)
{
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *m = NULL;
        va_list ap;
        int r, code;

        code = cli_bus(c, quiet_absent);
        if (code != EXIT_OK)
                return code;
        r = sd_bus_message_new_method_call(c->bus, &m, BUS_NAME, BUS_PATH, BUS_IFACE, method);
        if (r >= 0 && types) {
                va_start(ap, types);
                r = sd_bus_message_appendv(m, types, ap);
                va_end(ap);
        }
        if (r >= 0)
                /* A profile switch waits for elevator switches (~24 ms per disk): allow for many disks,
                 * and for a password typed into polkit's prompt. */
                r = sd_bus_call(c->bus, m, 300 * 1000000ULL, &e, reply);
        sd_bus_message_unref(m);
        if (r < 0) {
                code = handle_error(c, &e, r, quiet_absent);
                sd_bus_error_free(&e);
                return code;
        }
        return EXIT_OK;
}

int cli_get_property(Cli *c, const char *name, const char *type, sd_bus_message **reply, bool quiet_absent)
{
        sd_bus_error e = SD_BUS_ERROR_NULL;
        int r, code;

        code = cli_bus(c, quiet_absent);
        if (code != EXIT_OK)
                return code;
        r = sd_bus_get_property(c->bus, BUS_NAME, BUS_PATH, BUS_IFACE, name, &e, reply, type);
        if (r < 0) {
                code = handle_error(c, &e, r, quiet_absent);
                sd_bus_error_free(&e);
                return code;
        }
        return EXIT_OK;
}

void cli_print_json(json_object *o)
{
        puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
}

/* How tables print, fixed once by main() from the options and the terminal, like systemctl's arg_legend:
 * every verb prints through the two functions below. */
static struct {
        bool legend;
        bool color;
} output = {.legend = true};

/* Colour only for a person at a terminal that shows it, and never when NO_COLOR is set
 * (https://no-color.org). Decided before a pager takes stdout, which less -R passes through. */
static bool want_color(void)
{
        const char *no_color = getenv("NO_COLOR"), *term = getenv("TERM");

        if (no_color && *no_color)
                return false;
        if (!term || streq(term, "dumb"))
                return false;
        return isatty(STDOUT_FILENO) > 0;
}

bool cli_legend(void)
{
        return output.legend;
}

#define ANSI_BOLD   "\033[1m"
#define ANSI_GREEN  "\033[32m"
#define ANSI_YELLOW "\033[33m"
#define ANSI_RED    "\033[31m"
#define ANSI_RESET  "\033[0m"

static const char *state_color(const char *state)
{
        if (streq(state, "ok"))
                return ANSI_GREEN;
        if (streq(state, "warn"))
                return ANSI_YELLOW;
        if (streq(state, "fail") || streq(state, "failed") || streq(state, "error"))
                return ANSI_RED;
        return NULL;
}

/* One cell padded to width (the last of a row unpadded, then the newline); the escape codes go around the
 * text so they do not count towards the width. */
static void print_cell(const char *text, const char *color, size_t width, bool last)
{
        if (output.color && color)
                printf("%s%s%s", color, text, ANSI_RESET);
        else
                fputs(text, stdout);
        if (last)
                putchar('\n');
        else
                printf("%*s", (int)(width - strlen(text) + 2), "");
}

void cli_escape_cells(char **cells, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                char *e = text_escape(cells[i]);
                free(cells[i]);
                cells[i] = e;
        }
}

void cli_print_table(const char *const *header, size_t n, char **cells, size_t rows)
{
        size_t width[16] = {};
        size_t state_column = SIZE_MAX;

        cli_escape_cells(cells, rows * n);

        for (size_t j = 0; j < n; j++) {
                width[j] = output.legend ? strlen(header[j]) : 0;
                if (streq(header[j], "STATUS"))
                        state_column = j;
        }
        for (size_t i = 0; i < rows; i++)
                for (size_t j = 0; j < n; j++)
                        width[j] = MAX(width[j], strlen(cells[i * n + j]));
        if (output.legend)
                for (size_t j = 0; j < n; j++)
                        print_cell(header[j], ANSI_BOLD, width[j], j + 1 == n);
        for (size_t i = 0; i < rows; i++)
                for (size_t j = 0; j < n; j++) {
                        const char *cell = cells[i * n + j];
                        print_cell(cell, j == state_column ? state_color(cell) : NULL, width[j], j + 1 == n);
                }
}

static const struct {
        const char *name;
        int (*run)(Cli *c, int argc, char *argv[]);
} verbs[] = {
    {"status", verb_status},   {"profiles", verb_profiles}, {"profile", verb_profile},
    {"restore", verb_restore}, {"plan", verb_plan},         {"attach", verb_attach},
    {"detach", verb_attach},   {"irq", verb_irq},           {"check", verb_check},
    {"hold", verb_hold},       {"run", verb_hold},          {"holds", verb_holds},
    {"verify", verb_verify},   {"bootargs", verb_bootargs}, {"latency", verb_latency},
    {"xruns", verb_xruns},
};

static void version(void)
{
        printf("rtctl %s\n%s\n", RTCTL_VERSION, rtctl_features());
}

void cli_output_begin(const Cli *c)
{
        output.legend = !c->no_legend;
        output.color = want_color();
        if (c->pager)
                cli_pager_open();
}

int main(int argc, char *argv[])
{
        static const struct option options[] = {
            {"version", no_argument, NULL, ARG_VERSION},
            {},
        };
        Cli c = {};
        CliArgs args = {.cli = &c, .argc = argc, .argv = argv, .options = options};
        int r;

        log_setup("rtctl");
        tuners_register_all();
        bootloader_kinds_register();
        while ((r = cli_next_option(&args)) > 0)
                switch (r) {
                case 'h':
                        help();
                        return EXIT_OK;
                case ARG_VERSION:
                        version();
                        return EXIT_OK;
                }
        if (r < 0)
                return args.exit;
        if (args.n_operands == 0) {
                help();
                return EXIT_USAGE;
        }
        for (size_t v = 0; v < ELEMENTSOF(verbs); v++)
                if (streq(args.operands[0], verbs[v].name)) {
                        /* The verb reads the rest, with the global options that may follow it. */
                        r = verbs[v].run(&c, (int)args.n_operands, args.operands);
                        sd_bus_flush_close_unref(c.bus);
                        cli_pager_close();
                        return r;
                }
        fprintf(stderr, "Unknown command '%s'. See rtctl --help.\n", args.operands[0]);
        return EXIT_USAGE;
}
