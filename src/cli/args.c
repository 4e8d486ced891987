/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The command line, parsed the same way for rtctl itself and for every verb: getopt_long over a table
 * of options, with the global ones and --help added, and errors that name the option and the verb. */
#include <assert.h>
#include <stdarg.h>

#include "cli/args.h"

enum {
        OPT_JSON = 0x1000,
        OPT_NO_LEGEND,
        OPT_PAGER,
        OPT_NO_PAGER,
};

static const struct option global_options[] = {
    {"json", no_argument, NULL, OPT_JSON},   {"no-legend", no_argument, NULL, OPT_NO_LEGEND},
    {"pager", no_argument, NULL, OPT_PAGER}, {"no-pager", no_argument, NULL, OPT_NO_PAGER},
    {"help", no_argument, NULL, 'h'},
};

/* The verb's options, then the global ones, then the zeroed end. */
static void build_table(CliArgs *a)
{
        size_t n = 0;

        for (const struct option *o = a->options; o && o->name; o++) {
                assert(n < ELEMENTSOF(a->table) - ELEMENTSOF(global_options) - 1);
                assert(o->val >= CLI_OPT_VERB && o->val < OPT_JSON);
                a->table[n++] = *o;
        }
        for (size_t i = 0; i < ELEMENTSOF(global_options); i++)
                a->table[n++] = global_options[i];
        a->table[n] = (struct option){};
}

int cli_usage_error(CliArgs *a, const char *fmt, ...)
{
        va_list ap;

        fprintf(stderr, "rtctl%s%s: ", a->usage ? " " : "", a->usage ? a->argv[0] : "");
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        if (a->usage)
                fprintf(stderr, "\nUsage: rtctl %s\n", a->usage);
        else
                fprintf(stderr, "\nSee rtctl --help.\n");
        a->exit = EXIT_USAGE;
        return EXIT_USAGE;
}

/* getopt_long answered '?' or ':' for the element just before optind (or, in a cluster of short
 * options, for optopt). */
static int option_error(CliArgs *a, int ret)
{
        const char *arg = a->argv[optind - 1];
        _cleanup_free_ char *name = NULL;

        if (optopt > 0 && optopt < CLI_OPT_VERB && !startswith(arg, "--"))
                name = xasprintf("-%c", optopt); /* a short option */
        else
                name = xstrndup(arg, strcspn(arg, "="));
        if (ret == ':')
                cli_usage_error(a, "option '%s' needs a value", name);
        else if (optopt != 0 && startswith(arg, "--"))
                cli_usage_error(a, "option '%s' takes no value", name);
        else
                cli_usage_error(a, "unknown option '%s'", name);
        return -1;
}

/* Positional arguments are gathered at the front of argv, after argv[0], in their order: getopt has
 * passed every slot they are written to. */
static void add_operand(CliArgs *a, char *arg)
{
        a->argv[1 + a->n_operands++] = arg;
}

static int finish(CliArgs *a)
{
        if (!a->usage) {
                /* rtctl's own options end at the verb. */
                a->operands = a->argv + optind;
                a->n_operands = (size_t)(a->argc - optind);
                return 0;
        }
        /* What follows "--" is arguments, whatever it looks like. */
        for (int i = optind; i < a->argc; i++)
                add_operand(a, a->argv[i]);
        a->operands = a->argv + 1;
        cli_output_begin(a->cli);
        return 0;
}

int cli_next_option(CliArgs *a)
{
        int r;

        if (!a->started) {
                build_table(a);
                a->started = true;
                optind = 0; /* glibc: start afresh, whoever parsed before */
                opterr = 0; /* errors are said here, naming the verb */
        }
        for (;;) {
                /* A verb's arguments may stand among its options ("-": returned in order, as 1, even
                 * under POSIXLY_CORRECT); rtctl's own options stop at the verb ("+"). */
                r = getopt_long(a->argc, a->argv, a->usage ? "-:h" : "+:h", a->table, NULL);
                switch (r) {
                case -1:
                        return finish(a);
                case 1:
                        add_operand(a, optarg);
                        continue;
                case '?':
                case ':':
                        return option_error(a, r);
                case 'h':
                        if (!a->usage)
                                return 'h';
                        printf("Usage: rtctl %s\n", a->usage);
                        a->exit = EXIT_OK;
                        return -1;
                case OPT_JSON:
                        a->cli->json = true;
                        continue;
                case OPT_NO_LEGEND:
                        a->cli->no_legend = true;
                        continue;
                case OPT_PAGER:
                        a->cli->pager = true;
                        continue;
                case OPT_NO_PAGER:
                        a->cli->pager = false;
                        continue;
                default:
                        a->value = optarg;
                        return r;
                }
        }
}

bool cli_parse_args(CliArgs *a, size_t min_args, size_t max_args)
{
        int r = cli_next_option(a);

        assert(r <= 0); /* a verb with options of its own reads them with cli_next_option() */
        return r == 0 && cli_args_count(a, min_args, max_args);
}

bool cli_args_count(CliArgs *a, size_t min_args, size_t max_args)
{
        if (a->n_operands > max_args) {
                cli_usage_error(a, "unexpected argument '%s'", a->operands[max_args]);
                return false;
        }
        if (a->n_operands < min_args) {
                cli_usage_error(a, "missing argument");
                return false;
        }
        return true;
}

int cli_find_dashdash(int argc, char *argv[])
{
        int i = 1;

        while (i < argc && !streq(argv[i], "--"))
                i++;
        return i;
}
