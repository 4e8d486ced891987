/* SPDX-License-Identifier: GPL-2.0-or-later */
/* verify: is everything the active profile sets still in place? The daemon reads it all again
 * (Verify()) and writes nothing. */
#include <glib.h>

#include "cli/args.h"

#define VERIFY_COLUMNS 4

int verb_verify(Cli *c, int argc, char *argv[])
{
        CliArgs args = {.cli = c, .argc = argc, .argv = argv, .usage = "verify"};
        g_autoptr(GPtrArray) cells = g_ptr_array_new_with_free_func(free);
        sd_bus_message *reply = NULL;
        const char *object, *desired, *actual, *why;
        size_t rows = 0, drifted = 0;
        int code, r;

        assert(c);
        assert(argv);

        if (!cli_parse_args(&args, 0, 0))
                return args.exit;
        code = cli_call(c, "Verify", &reply, false, NULL);
        if (code != EXIT_OK)
                return code;
        r = sd_bus_message_enter_container(reply, 'a', "(ssss)");
        while (r >= 0 && (r = sd_bus_message_read(reply, "(ssss)", &object, &desired, &actual, &why)) > 0) {
                g_ptr_array_add(cells, xstrdup(object));
                g_ptr_array_add(cells, xstrdup(desired));
                g_ptr_array_add(cells, xstrdup(actual));
                g_ptr_array_add(cells, xstrdup(why));
                rows++;
                drifted += *why != 0;
        }
        sd_bus_message_unref(reply);
        if (r < 0) {
                fprintf(stderr, "Cannot read rtctld's answer: %s\n", strerror(-r));
                return EXIT_FAILED;
        }

        if (c->json) {
                json_object *a = json_object_new_array();
                for (size_t i = 0; i < rows; i++) {
                        char **row = (char **)&cells->pdata[i * VERIFY_COLUMNS];
                        json_object *o = json_object_new_object();
                        json_object_object_add(o, "object", json_object_new_string(row[0]));
                        json_object_object_add(o, "desired", json_object_new_string(row[1]));
                        json_object_object_add(o, "actual", json_object_new_string(row[2]));
                        json_object_object_add(o, "in_place", json_object_new_boolean(*row[3] == 0));
                        json_object_object_add(o, "why", json_object_new_string(row[3]));
                        json_object_array_add(a, o);
                }
                cli_print_json(a);
        } else {
                cli_print_table((const char *const[]){"OBJECT", "DESIRED", "ACTUAL", "WHY NOT IN PLACE"},
                                VERIFY_COLUMNS, (char **)cells->pdata, rows);
                if (cli_legend())
                        printf("\n%zu settings in force: %zu in place, %zu not.\n", rows, rows - drifted,
                               drifted);
        }
        return drifted ? EXIT_FAILED : EXIT_OK;
}
