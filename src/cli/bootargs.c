/* SPDX-License-Identifier: GPL-2.0-or-later */
/* bootargs [show|apply|revert] [--profile NAME]: what only a reboot gives (src/core/bootargs.c), put on
 * the kernel command line through the machine's boot tooling (src/core/bootloader.c). Runs here, not in
 * rtctld: the daemon may not write /etc or run update-grub (ProtectSystem=strict). */
#include <unistd.h>

#include "cli/args.h"
#include "cli/local.h"
#include "core/bootloader.h"
#include "core/config.h"
#include "shared/sysfs.h"

/* The profile in force: rtctld's, else the one it would start with. */
static char *active_profile(Cli *c)
{
        sd_bus_message *reply = NULL;
        const char *name = NULL;
        char *s = NULL;

        if (cli_get_property(c, "ActiveProfile", "s", &reply, true) == EXIT_OK &&
            sd_bus_message_read(reply, "s", &name) >= 0)
                s = xstrdup(name);
        sd_bus_message_unref(reply);
        if (s)
                return s;
        return local_default_profile();
}

/* EXIT_OK and ret filled, or an exit code after saying why. */
static int compute(const char *profile, BootArgs *ret, KernelFlavour *ret_kernel)
{
        _cleanup_strv_free_ char **search = conf_search_path();
        _cleanup_topology_ Topology *topo = NULL;
        _cleanup_policy_ Policy *policy = NULL;
        _cleanup_free_ char *err = NULL;
        KernelFlavour k;
        int r;

        *ret = (BootArgs){};
        kernel_flavour_read(ret_kernel);
        if (isempty(profile))
                return EXIT_OK; /* no profile in force: nothing wanted */
        r = policy_load(search, profile, &policy, &err);
        if (r < 0) {
                fprintf(stderr, "%s\n", err);
                return r == -ENOENT ? EXIT_NO_PROFILE : EXIT_INVALID;
        }
        r = topology_load(NULL, &topo);
        if (r < 0) {
                fprintf(stderr, "Cannot read the CPU topology: %s\n", strerror(-r));
                return EXIT_FAILED;
        }
        kernel_flavour_read(&k);
        *ret_kernel = k;
        r = bootargs_plan_for(policy, topo, &k, ret, &err);
        if (r < 0) {
                fprintf(stderr, "Profile %s cannot be placed on this machine: %s\n", profile, err);
                return EXIT_INVALID;
        }
        return EXIT_OK;
}

/* What the kernel would ignore is left out: said, so nobody adds it by hand in vain. */
static const char *left_out(const BootArgs *b, const KernelFlavour *k)
{
        for (size_t i = 0; i < b->n; i++)
                if (streq(b->args[i].key, "isolcpus") && !k->nohz_full)
                        return "nohz_full: this kernel is built without NO_HZ_FULL (no "
                               "/sys/devices/system/cpu/nohz_full) and would ignore it";
        return NULL;
}

static int show(Cli *c, const char *profile, const BootArgs *b, const KernelFlavour *k)
{
        const char *note = left_out(b, k);
        _cleanup_free_ char *running = NULL, *missing = NULL, *loader_err = NULL, *journal_err = NULL;
        _cleanup_free_ char *want = bootargs_format(b);
        _cleanup_journal_ Journal *journal = NULL;
        BootLoader loader = {};
        bool have_loader;

        if (sys_read("/proc/cmdline", &running) < 0)
                running = xstrdup("");
        strstrip(running);
        missing = bootargs_missing(b, running);
        have_loader = bootloader_detect(&loader, &loader_err) >= 0;
        if (bootargs_journal_open(&journal, &journal_err) < 0)
                fprintf(stderr, "Cannot read the boot journal: %s\n", journal_err);

        if (c->json) {
                json_object *o = json_object_new_object(), *a = json_object_new_array();
                json_object *m = json_object_new_array();
                for (size_t i = 0; i < b->n; i++) {
                        json_object *e = json_object_new_object();
                        bool in = boot_arg_in_cmdline(&b->args[i], running);
                        _cleanup_free_ char *w = boot_arg_format(&b->args[i]);
                        json_object_object_add(e, "argument", json_object_new_string(w));
                        json_object_object_add(e, "key", json_object_new_string(b->args[i].key));
                        json_object_object_add(
                            e, "value", b->args[i].value ? json_object_new_string(b->args[i].value) : NULL);
                        json_object_object_add(e, "reason", json_object_new_string(b->args[i].reason));
                        json_object_object_add(e, "running", json_object_new_boolean(in));
                        json_object_array_add(a, e);
                        if (!in)
                                json_object_array_add(m, json_object_new_string(w));
                }
                json_object_object_add(o, "profile", json_object_new_string(strempty(profile)));
                json_object_object_add(o, "arguments", a);
                json_object_object_add(o, "wanted", json_object_new_string(want));
                json_object_object_add(o, "running", json_object_new_string(running));
                json_object_object_add(o, "missing", m);
                json_object_object_add(o, "left_out", note ? json_object_new_string(note) : NULL);
                json_object_object_add(o, "reboot_pending", json_object_new_boolean(missing != NULL));
                json_object_object_add(
                    o, "boot_loader", have_loader ? json_object_new_string(bootloader_name(&loader)) : NULL);
                json_object_object_add(o, "boot_loader_error",
                                       have_loader ? NULL : json_object_new_string(loader_err));
                json_object_object_add(o, "applied",
                                       json_object_new_boolean(journal && journal_size(journal) > 0));
                cli_print_json(o);
        } else {
                if (b->n == 0)
                        printf("Profile %s needs no boot arguments.\n",
                               isempty(profile) ? "(none)" : profile);
                else {
                        _cleanup_strv_free_ char **cells = NULL;
                        printf("Profile %s wants these kernel arguments (only a reboot applies them):\n\n",
                               profile);
                        for (size_t i = 0; i < b->n; i++) {
                                strv_push(&cells, boot_arg_format(&b->args[i]));
                                strv_push(&cells,
                                          xstrdup(boot_arg_in_cmdline(&b->args[i], running) ? "yes" : "no"));
                                strv_push(&cells, xstrdup(b->args[i].reason));
                        }
                        cli_print_table((const char *const[]){"ARGUMENT", "RUNNING", "WHY"}, 3, cells, b->n);
                }
                if (note)
                        printf("Left out:       %s\n", note);
                printf("\nRunning kernel: %s\n", running);
                if (missing)
                        printf("Missing:        %s\n", missing);
                else
                        printf("Missing:        nothing: no reboot pending\n");
                if (have_loader)
                        printf("Boot loader:    %s (`rtctl bootargs apply` changes %s%s)\n",
                               bootloader_name(&loader), bootloader_target(&loader),
                               journal && journal_size(journal) > 0
                                   ? "; applied, `rtctl bootargs revert` undoes it"
                                   : "");
                else
                        printf("Boot loader:    %s\n", loader_err);
        }
        bootloader_clear(&loader);
        return EXIT_OK;
}

static void print_changes(Cli *c, const char *what, const BootLoader *l, const Plan *plan,
                          const ApplyStats *st)
{
        if (c->json) {
                json_object *o = json_object_new_object(), *a = json_object_new_array();
                for (size_t i = 0; i < plan->n; i++)
                        if (plan->settings[i].result == SETTING_CHANGED)
                                json_object_array_add(a, json_object_new_string(plan->settings[i].object));
                json_object_object_add(o, "boot_loader", json_object_new_string(bootloader_name(l)));
                json_object_object_add(o, "changes", json_object_new_int((int)st->changed));
                json_object_object_add(o, "changed", a);
                cli_print_json(o);
                return;
        }
        for (size_t i = 0; i < plan->n; i++)
                if (plan->settings[i].result == SETTING_CHANGED)
                        printf("%s %s\n", plan->settings[i].restore ? "Restored" : "Changed",
                               plan->settings[i].object);
        printf("%s through %s: %u changes. They take effect at the next boot.\n", what, bootloader_name(l),
               st->changed);
}

static int apply_or_revert(Cli *c, bool apply, const BootArgs *b)
{
        _cleanup_journal_ Journal *journal = NULL;
        _cleanup_free_ char *err = NULL;
        BootLoader loader = {};
        ApplyStats st = {};
        Plan plan = {};
        int r, code = EXIT_OK;

        r = bootloader_detect(&loader, &err);
        if (r < 0) {
                fprintf(stderr, "Cannot %s boot arguments: %s.\n", apply ? "apply" : "revert", err);
                return EXIT_FAILED;
        }
        r = bootargs_journal_open(&journal, &err);
        if (r < 0) {
                fprintf(stderr, "Cannot read the boot journal: %s\n", err);
                bootloader_clear(&loader);
                return EXIT_FAILED;
        }
        for (size_t i = 0; i < journal_n_lost(journal); i++) {
                _cleanup_free_ char *m = journal_loss_message(journal_lost(journal, i));
                fprintf(stderr, "%s\n", m);
                code = EXIT_FAILED;
        }
        if (!apply && journal_size(journal) == 0) {
                if (c->json)
                        print_changes(c, "Reverted", &loader, &plan, &st);
                else
                        printf("Nothing to revert: rtctl has not changed the boot configuration.\n");
                bootloader_clear(&loader);
                return code;
        }
        if (apply)
                bootloader_plan(&loader, b, journal, &plan);
        else
                bootloader_plan_revert(journal, &plan);
        r = bootloader_apply(&loader, &plan, journal, &st, &err);
        if (r < 0) {
                fprintf(stderr, "Cannot %s boot arguments: %s%s\n", apply ? "apply" : "revert", err,
                        (r == -EACCES || r == -EPERM) && geteuid() != 0 ? " (run it as root)" : "");
                code = EXIT_FAILED;
        } else
                print_changes(c, apply ? "Applied" : "Reverted", &loader, &plan, &st);
        plan_clear(&plan);
        bootloader_clear(&loader);
        return code;
}

int verb_bootargs(Cli *c, int argc, char *argv[])
{
        enum { ARG_PROFILE = CLI_OPT_VERB };
        static const struct option options[] = {
            {"profile", required_argument, NULL, ARG_PROFILE},
            {},
        };
        CliArgs args = {.cli = c,
                        .argc = argc,
                        .argv = argv,
                        .usage = "bootargs [show|apply|revert] [--profile NAME]",
                        .options = options};
        _cleanup_free_ char *active = NULL;
        const char *profile = NULL, *action = "show";
        BootArgs b = {};
        KernelFlavour k;
        int code, r;

        assert(c);
        assert(argv);

        while ((r = cli_next_option(&args)) > 0)
                if (r == ARG_PROFILE)
                        profile = args.value;
        if (r < 0 || !cli_args_count(&args, 0, 1))
                return args.exit;
        if (args.n_operands == 1) {
                action = args.operands[0];
                if (!strv_contains((char *const[]){"show", "apply", "revert", NULL}, action))
                        return cli_usage_error(&args, "unknown action '%s'", action);
        }
        if (streq(action, "revert")) {
                if (profile)
                        return cli_usage_error(&args,
                                               "revert takes no profile: it puts back what apply changed");
                return apply_or_revert(c, false, NULL);
        }
        if (!profile)
                profile = active = active_profile(c);
        code = compute(profile, &b, &k);
        if (code != EXIT_OK)
                return code;
        code = streq(action, "show") ? show(c, profile, &b, &k) : apply_or_revert(c, true, &b);
        bootargs_clear(&b);
        return code;
}
