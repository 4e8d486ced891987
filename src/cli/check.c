/* SPDX-License-Identifier: GPL-2.0-or-later */
/* check: the audit of src/core/audit.c, run here. */
#include "cli/cli.h"
#include "core/audit.h"

static void audit_local(char ***cells, size_t *rows)
{
        Audit a = {};

        audit_run(&a);
        for (size_t i = 0; i < a.n; i++) {
                strv_push(cells, xstrdup(a.items[i].check));
                strv_push(cells, xstrdup(a.items[i].status));
                strv_push(cells, xstrdup(a.items[i].detail));
        }
        *rows = a.n;
        audit_clear(&a);
}

int verb_check(Cli *c, int argc, char *argv[])
{
        _cleanup_strv_free_ char **cells = NULL;
        size_t rows = 0;
        bool warn = false;

        if (argc > 1) {
                fprintf(stderr, "check takes no arguments.\n");
                return EXIT_USAGE;
        }
        audit_local(&cells, &rows);

        if (c->json) {
                json_object *a = json_object_new_array();
                for (size_t i = 0; i < rows; i++) {
                        json_object *o = json_object_new_object();
                        json_object_object_add(o, "check", json_object_new_string(cells[i * 3]));
                        json_object_object_add(o, "status", json_object_new_string(cells[i * 3 + 1]));
                        json_object_object_add(o, "detail", json_object_new_string(cells[i * 3 + 2]));
                        json_object_array_add(a, o);
                }
                cli_print_json(a);
        } else
                cli_print_table((const char *const[]){"CHECK", "STATUS", "DETAIL"}, 3, cells, rows);
        for (size_t i = 0; i < rows; i++)
                warn = warn || streq(cells[i * 3 + 1], "warn");
        return warn ? EXIT_FAILED : EXIT_OK;
}
