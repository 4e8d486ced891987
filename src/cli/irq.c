/* SPDX-License-Identifier: GPL-2.0-or-later */
/* irq, irq pin, irq unpin */
#include "cli/args.h"

static const char *const columns[] = {"IRQ",  "NAME",      "CLASS",  "DEVICE", "DRIVER",
                                      "CPUS", "EFFECTIVE", "RATE/S", "THREAD", "NOTE"};

static int list(Cli *c)
{
        sd_bus_message *reply = NULL;
        json_object *arr = c->json ? json_object_new_array() : NULL;
        char **cells = NULL;
        size_t rows = 0;
        int code;

        code = cli_call(c, "ListIrqs", &reply, false, NULL);
        if (code != EXIT_OK)
                return code;
        if (sd_bus_message_enter_container(reply, 'a', "(ussssssdssi)") >= 0) {
                const char *name, *class, *device, *driver, *cpus, *eff, *why, *policy;
                uint32_t irq;
                double rate;
                int prio;

                while (sd_bus_message_read(reply, "(ussssssdssi)", &irq, &name, &class, &device, &driver,
                                           &cpus, &eff, &rate, &why, &policy, &prio) > 0) {
                        if (arr) {
                                json_object *o = json_object_new_object();
                                json_object_object_add(o, "irq", json_object_new_int((int)irq));
                                json_object_object_add(o, "name", json_object_new_string(name));
                                json_object_object_add(o, "class", json_object_new_string(class));
                                json_object_object_add(o, "device", json_object_new_string(device));
                                json_object_object_add(o, "driver", json_object_new_string(driver));
                                json_object_object_add(o, "cpus", json_object_new_string(cpus));
                                json_object_object_add(o, "effective", json_object_new_string(eff));
                                json_object_object_add(o, "rate", json_object_new_double(rate));
                                json_object_object_add(o, "unmovable", json_object_new_string(why));
                                json_object_object_add(o, "thread_policy", json_object_new_string(policy));
                                json_object_object_add(o, "thread_priority", json_object_new_int(prio));
                                json_object_array_add(arr, o);
                                continue;
                        }
                        strv_push(&cells, xasprintf("%u", irq));
                        strv_push(&cells, xstrdup(name));
                        strv_push(&cells, xstrdup(class));
                        strv_push(&cells, xstrdup(*device ? device : "-"));
                        strv_push(&cells, xstrdup(*driver ? driver : "-"));
                        strv_push(&cells, xstrdup(cpus));
                        strv_push(&cells, xstrdup(eff));
                        strv_push(&cells, xasprintf("%.0f", rate));
                        strv_push(&cells, *policy ? xasprintf("%s:%d", policy, prio) : xstrdup("-"));
                        strv_push(&cells, xstrdup(why));
                        rows++;
                }
        }
        sd_bus_message_unref(reply);
        if (arr)
                cli_print_json(arr);
        else
                cli_print_table(columns, ELEMENTSOF(columns), cells, rows);
        strv_free(cells);
        return EXIT_OK;
}

static int pin(Cli *c, unsigned irq, const char *cpus, bool isolated)
{
        sd_bus_message *reply = NULL;
        unsigned changes = 0, failures = 0;
        int code;

        code = cli_call(c, "PinIrqWithFlags", &reply, false, "ust", irq, cpus, (uint64_t)(isolated ? 1 : 0));
        if (code != EXIT_OK)
                return code;
        (void)sd_bus_message_read(reply, "uu", &changes, &failures);
        sd_bus_message_unref(reply);
        if (c->json) {
                json_object *o = json_object_new_object();
                json_object_object_add(o, "changes", json_object_new_int((int)changes));
                json_object_object_add(o, "failures", json_object_new_int((int)failures));
                cli_print_json(o);
        } else if (*cpus)
                printf("IRQ %u pinned to CPUs %s: %u changes, %u failures.\n", irq, cpus, changes, failures);
        else
                printf("IRQ %u balanced again: %u changes, %u failures.\n", irq, changes, failures);
        return failures ? EXIT_FAILED : EXIT_OK;
}

int verb_irq(Cli *c, int argc, char *argv[])
{
        enum { ARG_ISOLATED = CLI_OPT_VERB };
        static const struct option options[] = {
            {"isolated", no_argument, NULL, ARG_ISOLATED},
            {},
        };
        CliArgs args = {.cli = c,
                        .argc = argc,
                        .argv = argv,
                        .usage = "irq [pin IRQ CPUS [--isolated] | unpin IRQ]",
                        .options = options};
        bool isolated = false, pinning;
        unsigned irq;
        int r;

        assert(c);
        assert(argv);

        while ((r = cli_next_option(&args)) > 0)
                if (r == ARG_ISOLATED)
                        isolated = true;
        if (r < 0)
                return args.exit;
        if (args.n_operands == 0)
                return list(c);
        pinning = streq(args.operands[0], "pin");
        if (!pinning && !streq(args.operands[0], "unpin"))
                return cli_usage_error(&args, "unknown subcommand '%s'", args.operands[0]);
        if (args.n_operands != (pinning ? 3 : 2))
                return cli_usage_error(&args, "%s takes %s", args.operands[0], pinning ? "IRQ CPUS" : "IRQ");
        if (safe_atou(args.operands[1], &irq) < 0)
                return cli_usage_error(&args, "not an IRQ number: '%s'", args.operands[1]);
        return pinning ? pin(c, irq, args.operands[2], isolated) : pin(c, irq, "", false);
}
