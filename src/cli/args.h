/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <getopt.h>

#include "cli/cli.h"

/* The vals a verb gives its own options (long ones only); those below are rtctl's. */
#define CLI_OPT_VERB 0x100

/* One command line being parsed: a verb's (argv[0] the verb; for run and hold only what comes before
 * the "--" in front of the command), or rtctl's own options in front of the verb (usage NULL). */
typedef struct CliArgs {
        Cli *cli;
        int argc;
        char **argv;
        const char *usage;            /* "check [--local] ...": the line --help and errors print */
        const struct option *options; /* the verb's own, ended by a zeroed entry; NULL for none */

        const char *value; /* the value of the option cli_next_option() returned */
        char **operands;   /* after the options: the arguments, in their order */
        size_t n_operands;
        int exit; /* when parsing stopped: EXIT_OK after --help, EXIT_USAGE after an error */

        bool started;
        struct option table[16];
} CliArgs;

/* The next of the verb's options (its val, with its value in a->value), 0 when none is left (a->operands
 * then holds the arguments and the output is set up: colour, pager), or -1 when the verb is done and
 * returns a->exit: --help printed the usage, or an error naming the option and the verb was printed.
 * Options are --opt=VALUE or --opt VALUE, anywhere among the arguments; "--" ends them. The global
 * options (--json, --no-legend, --pager, --no-pager) are taken here. For rtctl's own options (usage
 * NULL), -h / --help is returned as 'h' and parsing stops at the verb, a->operands. */
int cli_next_option(CliArgs *a);
/* For a verb without options of its own: true when it has min_args to max_args arguments; otherwise
 * false, with a->exit to return. */
bool cli_parse_args(CliArgs *a, size_t min_args, size_t max_args);
/* After cli_next_option() returned 0: true when there are min_args to max_args arguments; otherwise
 * false, with a->exit to return after an error that says so. */
bool cli_args_count(CliArgs *a, size_t min_args, size_t max_args);
/* The index in argv of the first "--" after the verb (argv[0]), or argc: for the verbs that run a
 * command (run, hold, xruns), whose own options are not rtctl's. */
int cli_find_dashdash(int argc, char *argv[]);
/* "rtctl VERB: MESSAGE" and the usage on stderr; sets a->exit to, and returns, EXIT_USAGE. */
int cli_usage_error(CliArgs *a, const char *fmt, ...) _printf_(2, 3);
