/* SPDX-License-Identifier: GPL-2.0-or-later */
/* How rtctl reads its command line (src/cli/args.c): every verb takes its options the same way, and a
 * usage error names the verb and the option and exits 2. The built rtctl runs on a fixture with no
 * rtctld to reach, so nothing here touches the live kernel. */
#include "test.h"

static char *root;

typedef struct Run {
        int status;
        char *out, *err;
} Run;

static Run run(const char *args)
{
        Run r = {};

        if (!root)
                root = test_fixture("vm2");
        r.status = test_run_rtctl(root, args, &r.out, &r.err);
        return r;
}

static void run_clear(Run *r)
{
        free(r->out);
        free(r->err);
}

/* Every verb, as its usage line starts. */
static const char *const verbs[] = {"status", "profiles", "profile", "restore",  "plan",
                                    "attach", "detach",   "irq",     "check",    "hold",
                                    "run",    "holds",    "verify",  "bootargs", "latency"};

TEST(unknown_option_named_with_the_verb)
{
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++) {
                _cleanup_free_ char *args = xasprintf("%s --bogus", verbs[i]);
                _cleanup_free_ char *want = xasprintf("rtctl %s: unknown option '--bogus'\n", verbs[i]);
                _cleanup_free_ char *usage = xasprintf("Usage: rtctl %s", verbs[i]);
                Run r = run(args);
                CHECK_INTEQ(r.status, 2);
                CHECK_CONTAINS(r.err, want);
                CHECK_CONTAINS(r.err, usage);
                CHECK_STREQ(r.out, "");
                run_clear(&r);
        }
}

TEST(help_after_the_verb)
{
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++) {
                _cleanup_free_ char *args = xasprintf("%s --help", verbs[i]);
                _cleanup_free_ char *usage = xasprintf("Usage: rtctl %s", verbs[i]);
                Run r = run(args);
                CHECK_INTEQ(r.status, 0);
                CHECK(startswith(r.out, usage));
                CHECK_STREQ(r.err, "");
                run_clear(&r);
        }
        Run r = run("bootargs -h apply");
        CHECK_INTEQ(r.status, 0); /* nothing applied */
        CHECK_STREQ(r.out, "Usage: rtctl bootargs [show|apply|revert] [--profile NAME]\n");
        run_clear(&r);
}

TEST(missing_value)
{
        static const char *const cases[][2] = {
            {"plan --profile", "rtctl plan: option '--profile' needs a value"},
            {"check --local --user", "rtctl check: option '--user' needs a value"},
            {"bootargs show --profile", "rtctl bootargs: option '--profile' needs a value"},
            {"latency --duration", "rtctl latency: option '--duration' needs a value"},
            {"run --reason", "rtctl run: option '--reason' needs a value"},
            {"hold audio --reason -- true", "rtctl hold: option '--reason' needs a value"},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                Run r = run(cases[i][0]);
                CHECK_INTEQ(r.status, 2);
                CHECK_CONTAINS(r.err, cases[i][1]);
                run_clear(&r);
        }
}

TEST(flag_given_a_value)
{
        Run r = run("status --json=yes");
        CHECK_INTEQ(r.status, 2);
        CHECK_CONTAINS(r.err, "rtctl status: option '--json' takes no value");
        run_clear(&r);
        r = run("check --local=1");
        CHECK_INTEQ(r.status, 2);
        CHECK_CONTAINS(r.err, "rtctl check: option '--local' takes no value");
        run_clear(&r);
}

TEST(unexpected_or_missing_argument)
{
        static const char *const cases[][2] = {
            {"status now", "rtctl status: unexpected argument 'now'"},
            {"verify --no-legend x", "rtctl verify: unexpected argument 'x'"},
            {"profile a b", "rtctl profile: unexpected argument 'b'"},
            {"plan --profile audio x", "rtctl plan: unexpected argument 'x'"},
            {"hold audio extra -- true", "rtctl hold: unexpected argument 'extra'"},
            {"bootargs frob", "rtctl bootargs: unknown action 'frob'"},
            {"bootargs show show", "rtctl bootargs: unexpected argument 'show'"},
            {"bootargs revert --profile audio", "rtctl bootargs: revert takes no profile"},
            {"attach", "rtctl attach: missing argument"},
            {"detach x", "rtctl detach: not a process ID: 'x'"},
            {"irq pin 5", "rtctl irq: pin takes IRQ CPUS"},
            {"irq pin x 1", "rtctl irq: not an IRQ number: 'x'"},
            {"irq frob", "rtctl irq: unknown subcommand 'frob'"},
            {"hold audio", "rtctl hold: no command: give it after \"--\""},
            {"run --profile audio -- ", "rtctl run: no command"},
            {"latency --method fast",
             "rtctl latency: --method is auto, timerlat, osnoise, hwlat or timer, not fast"},
            {"latency --slice=0", "rtctl latency: --slice takes a duration"},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                Run r = run(cases[i][0]);
                CHECK_INTEQ(r.status, 2);
                CHECK_CONTAINS(r.err, cases[i][1]);
                run_clear(&r);
        }
}

/* rtctl's own options, in front of the verb. */
TEST(option_before_the_verb)
{
        Run r = run("--bogus status");
        CHECK_INTEQ(r.status, 2);
        CHECK_CONTAINS(r.err, "rtctl: unknown option '--bogus'");
        run_clear(&r);
        r = run("--json frob");
        CHECK_INTEQ(r.status, 2);
        CHECK_CONTAINS(r.err, "Unknown command 'frob'");
        run_clear(&r);
        r = run("--json");
        CHECK_INTEQ(r.status, 2);
        CHECK(startswith(r.out, "rtctl [OPTIONS] COMMAND"));
        run_clear(&r);
}

/* --opt=VALUE and --opt VALUE alike, options and arguments in any order: here the profile is looked
 * up (and is not there) instead of the command line being refused. */
TEST(options_any_form_any_order)
{
        static const char *const cases[] = {
            "check --local --profile=nosuch", "check --profile nosuch --local",
            "bootargs --profile nosuch show", "bootargs --profile=nosuch apply",
            "plan --profile=nosuch",          "plan --profile nosuch",
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                Run r = run(cases[i]);
                CHECK_INTEQ(r.status, 4);
                CHECK_CONTAINS(r.err, "nosuch");
                run_clear(&r);
        }
}

/* The global options are taken after the verb too; after "--" nothing is an option. */
TEST(global_options_and_dashdash)
{
        Run r = run("profiles --no-pager --json");
        CHECK_INTEQ(r.status, 0);
        CHECK(startswith(r.out, "["));
        run_clear(&r);
        r = run("profile -- --json");
        CHECK_INTEQ(r.status, 3); /* the name goes to rtctld, which cannot be reached */
        CHECK_CONTAINS(r.err, "Cannot connect to the system bus");
        CHECK_STREQ(r.out, "");
        run_clear(&r);
        r = run("run --json -- true --bogus");
        CHECK_INTEQ(r.status, 3); /* the command's options are its own */
        run_clear(&r);
}

TEST_MAIN(T(unknown_option_named_with_the_verb), T(help_after_the_verb), T(missing_value),
          T(flag_given_a_value), T(unexpected_or_missing_argument), T(option_before_the_verb),
          T(options_any_form_any_order), T(global_options_and_dashdash))
