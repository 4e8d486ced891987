/* SPDX-License-Identifier: GPL-2.0-or-later */
/* check: what an audio user needs from this machine, audited without changing anything (src/core/audit.c).
 * rtctld's Check() runs the audit as root, which sees what a user may not (debugfs); without the daemon,
 * or with --local, it runs here. */
#include "cli/cli.h"
#include "core/audit.h"

/* (check, status, detail) per finding, as table cells. */
static int audit_remote(Cli *c, char ***cells, size_t *rows)
{
        sd_bus_message *reply = NULL;
        const char *check, *status, *detail;
        int code, r;

        code = cli_call(c, "Check", &reply, true, NULL);
        if (code != EXIT_OK)
                return code;
        r = sd_bus_message_enter_container(reply, 'a', "(sss)");
        while (r >= 0 && sd_bus_message_read(reply, "(sss)", &check, &status, &detail) > 0) {
                strv_push(cells, xstrdup(check));
                strv_push(cells, xstrdup(status));
                strv_push(cells, xstrdup(detail));
                (*rows)++;
        }
        sd_bus_message_unref(reply);
        return r < 0 ? EXIT_FAILED : EXIT_OK;
}

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
        bool warn = false, local = false;
        int code = EXIT_NO_DAEMON;

        for (int i = 1; i < argc; i++) {
                if (!streq(argv[i], "--local")) {
                        fprintf(stderr, "check takes no arguments but --local.\n");
                        return EXIT_USAGE;
                }
                local = true;
        }
        if (!local)
                code = audit_remote(c, &cells, &rows);
        if (code == EXIT_NO_DAEMON)
                audit_local(&cells, &rows);
        else if (code != EXIT_OK)
                return code;

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
