/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <json-c/json.h>
#include <systemd/sd-bus.h>

#include "shared/util.h"

/* Exit codes scripts can rely on; documented in rtctl(1). */
enum {
        EXIT_OK = 0,
        EXIT_FAILED = 1, /* the operation failed, or left failures behind */
        EXIT_USAGE = 2,
        EXIT_NO_DAEMON = 3, /* rtctld is not on the bus and the verb needs it */
        EXIT_NO_PROFILE = 4,
        EXIT_INVALID = 5, /* a profile or configuration file is invalid */
        EXIT_NOT_AUTHORIZED = 6,
};

typedef struct Cli {
        bool json;
        bool no_legend;
        bool pager;
        sd_bus *bus;
} Cli;

/* Connects to the system bus. Returns EXIT_OK, or EXIT_NO_DAEMON (quietly, when quiet) if no bus. */
int cli_bus(Cli *c, bool quiet);
/* Calls a method on rtctld. On failure prints the error and returns the exit code it maps to; with
 * quiet_absent, a daemon that is not running returns EXIT_NO_DAEMON without printing. */
int cli_call(Cli *c, const char *method, sd_bus_message **reply, bool quiet_absent, const char *types, ...);
int cli_get_property(Cli *c, const char *name, const char *type, sd_bus_message **reply, bool quiet_absent);
int cli_exit_for_error(const sd_bus_error *e);
/* Every failure in the daemon's status, "object: message" on stderr: what a call that reported
 * failures left undone. */
void cli_print_failures(Cli *c);

void cli_print_json(json_object *o);
/* Prints rows of n columns, aligned; cells is rows*n strings. The header line is left out under
 * --no-legend; with colour on it is bold, and a STATUS column's ok / warn / fail are green / yellow / red.
 */
/* Escapes the cells in place first (cli_escape_cells()). */
void cli_print_table(const char *const *header, size_t n, char **cells, size_t rows);
/* Text the daemon hands on (a hold's reason, a device's name) is shown escaped (text_escape()), so it
 * cannot forge a line of the output or drive the terminal. */
void cli_escape_cells(char **cells, size_t n);
/* Whether to print headers and summary lines (false under --no-legend). */
bool cli_legend(void);
/* Once the command line is read: fixes the legend and colour, and starts the pager under --pager. */
void cli_output_begin(const Cli *c);

/* --pager: from here on stdout goes through $RTCTL_PAGER, $PAGER or less (LESS=FRX unless set), when
 * stdout is a terminal; otherwise nothing changes. cli_pager_close() waits for the pager to quit. */
void cli_pager_open(void);
void cli_pager_close(void);

int verb_status(Cli *c, int argc, char *argv[]);
int verb_profiles(Cli *c, int argc, char *argv[]);
int verb_profile(Cli *c, int argc, char *argv[]);
int verb_restore(Cli *c, int argc, char *argv[]);
int verb_plan(Cli *c, int argc, char *argv[]);
int verb_attach(Cli *c, int argc, char *argv[]);
int verb_irq(Cli *c, int argc, char *argv[]);
int verb_check(Cli *c, int argc, char *argv[]);
int verb_hold(Cli *c, int argc, char *argv[]);
int verb_holds(Cli *c, int argc, char *argv[]);
/* The daemon's holds as (cookie, profile, application id, reason, holder, since), 6 cells per hold. */
int cli_read_holds(Cli *c, char ***ret_cells, size_t *ret_n, bool quiet_absent);
int verb_verify(Cli *c, int argc, char *argv[]);
int verb_bootargs(Cli *c, int argc, char *argv[]);
int verb_latency(Cli *c, int argc, char *argv[]);
int verb_xruns(Cli *c, int argc, char *argv[]);
