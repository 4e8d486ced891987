/* SPDX-License-Identifier: GPL-2.0-or-later */
/* check: what an audio user needs from this machine, audited without changing anything (src/core/check*.c).
 * The machine's side comes from rtctld's Check() when it runs (as root it sees what a user may not, such
 * as debugfs, and it knows the CPUs it really isolated); without the daemon, with --local or --profile,
 * rtctl runs it here. The user's side (limits, a real SCHED_FIFO attempt) always runs here: only a
 * process of that user, or root becoming them, can try. */
#include "cli/args.h"
#include "cli/local.h"
#include "core/bootargs.h"
#include "core/check.h"
#include "core/config.h"
#include "core/policy.h"
#include "core/topology.h"
#include "shared/sysfs.h"

static int audit_remote(Cli *c, Audit *a)
{
        sd_bus_message *reply = NULL;
        const char *check, *status, *detail, *fix;
        int code, r;

        code = cli_call(c, "Check", &reply, true, NULL);
        if (code != EXIT_OK)
                return code;
        r = sd_bus_message_enter_container(reply, 'a', "(ssss)");
        while (r >= 0 && (r = sd_bus_message_read(reply, "(ssss)", &check, &status, &detail, &fix)) > 0) {
                /* The strings live in the reply, which goes before the audit is printed. */
                strv_push(&a->strings, xstrdup(check));
                strv_push(&a->strings, xstrdup(status));
                size_t n = strv_length(a->strings);
                audit_add(a, a->strings[n - 2], a->strings[n - 1], xstrdup(detail),
                          *fix ? xstrdup(fix) : NULL);
        }
        sd_bus_message_unref(reply);
        return r < 0 ? EXIT_FAILED : EXIT_OK;
}

static int audit_local(const char *profile, Audit *a)
{
        _cleanup_strv_free_ char **search = conf_search_path();
        _cleanup_free_ char *name = profile ? xstrdup(profile) : local_default_profile(), *err = NULL;
        _cleanup_free_ char *source = xasprintf("profile %s, as rtctld would apply it", name);
        _cleanup_free_ char *cmdline = NULL, *missing = NULL;
        _cleanup_policy_ Policy *policy = NULL;
        _cleanup_topology_ Topology *topo = NULL;
        _cleanup_cpuset_ CpuSet *isolated = NULL, *housekeeping = NULL;
        AuditOptions o = {.isolated_source = source, .profile = name};
        BootArgs b;

        if (policy_load(search, name, &policy, &err) < 0 && profile) {
                fprintf(stderr, "%s\n", err);
                return EXIT_NO_PROFILE;
        }
        /* The isolated CPUs and boot arguments the profile asks for on this machine: what a running
         * daemon would isolate, and what it would say a reboot still has to bring. */
        if (policy && topology_load(NULL, &topo) >= 0) {
                if (policy_cpus(policy, topo, &isolated, &housekeeping, NULL) >= 0)
                        o.isolated = isolated;
                if (bootargs_plan(policy, topo, &b) >= 0) {
                        if (sys_read("/proc/cmdline", &cmdline) >= 0) {
                                missing = bootargs_missing(&b, cmdline);
                                o.boot_known = true;
                                o.boot_missing = missing;
                        }
                        bootargs_clear(&b);
                }
        }
        o.realtime_rules = policy_uses_realtime(policy);
        audit_run(&o, a);
        return EXIT_OK;
}

static void print(Cli *c, const Audit *a)
{
        _cleanup_strv_free_ char **cells = NULL;

        if (c->json) {
                json_object *arr = json_object_new_array();
                for (size_t i = 0; i < a->n; i++) {
                        json_object *o = json_object_new_object();
                        json_object_object_add(o, "check", json_object_new_string(a->items[i].check));
                        json_object_object_add(o, "status", json_object_new_string(a->items[i].status));
                        json_object_object_add(o, "detail", json_object_new_string(a->items[i].detail));
                        json_object_object_add(o, "fix", json_object_new_string(a->items[i].fix ?: ""));
                        json_object_array_add(arr, o);
                }
                cli_print_json(arr);
                return;
        }
        for (size_t i = 0; i < a->n; i++) {
                strv_push(&cells, xstrdup(a->items[i].check));
                strv_push(&cells, xstrdup(a->items[i].status));
                strv_push(&cells, a->items[i].fix
                                      ? xasprintf("%s. Fix: %s", a->items[i].detail, a->items[i].fix)
                                      : xstrdup(a->items[i].detail));
        }
        cli_print_table((const char *const[]){"CHECK", "STATUS", "DETAIL"}, 3, cells, a->n);
}

int verb_check(Cli *c, int argc, char *argv[])
{
        Audit machine = {}, user = {};
        AuditUser who = {};
        const char *user_name = NULL, *profile = NULL;
        bool local = false, warn;
        enum { ARG_LOCAL = CLI_OPT_VERB, ARG_USER, ARG_PROFILE };
        static const struct option options[] = {
            {"local", no_argument, NULL, ARG_LOCAL},
            {"user", required_argument, NULL, ARG_USER},
            {"profile", required_argument, NULL, ARG_PROFILE},
            {},
        };
        CliArgs args = {.cli = c,
                        .argc = argc,
                        .argv = argv,
                        .usage = "check [--local] [--user NAME] [--profile NAME]",
                        .options = options};
        int code = EXIT_NO_DAEMON, r;

        assert(c);
        assert(argv);

        while ((r = cli_next_option(&args)) > 0)
                switch (r) {
                case ARG_LOCAL:
                        local = true;
                        break;
                case ARG_USER:
                        user_name = args.value;
                        break;
                case ARG_PROFILE:
                        profile = args.value;
                        break;
                }
        if (r < 0 || !cli_args_count(&args, 0, 0))
                return args.exit;
        if (audit_user_pick(user_name, &who) < 0) {
                fprintf(stderr, "No such user: %s\n", user_name ? user_name : "(the caller)");
                return EXIT_USAGE;
        }
        if (!local && !profile)
                code = audit_remote(c, &machine);
        if (code == EXIT_NO_DAEMON)
                code = audit_local(profile, &machine);
        if (code != EXIT_OK) {
                audit_user_clear(&who);
                audit_clear(&machine);
                return code;
        }
        audit_user_checks(&who, &user);
        audit_user_clear(&who);
        /* The user's findings first: who was judged heads the list. */
        for (size_t i = 0; i < machine.n; i++)
                audit_add(&user, machine.items[i].check, machine.items[i].status,
                          TAKE_PTR(machine.items[i].detail), TAKE_PTR(machine.items[i].fix));
        print(c, &user);
        warn = audit_warns(&user);
        audit_clear(&user);
        audit_clear(&machine);
        return warn ? EXIT_FAILED : EXIT_OK;
}
