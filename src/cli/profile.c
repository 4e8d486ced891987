/* SPDX-License-Identifier: GPL-2.0-or-later */
/* profile, restore, plan */
#include <time.h>

#include "cli/args.h"
#include "cli/latency.h"
#include "cli/xruns.h"
#include "cli/local.h"
#include "core/daemon-conf.h"
#include "core/tracefs.h"

static int print_result(Cli *c, const char *what, sd_bus_message *reply)
{
        unsigned changes = 0, failures = 0;

        (void)sd_bus_message_read(reply, "uu", &changes, &failures);
        if (c->json) {
                json_object *o = json_object_new_object();
                json_object_object_add(o, "changes", json_object_new_int((int)changes));
                json_object_object_add(o, "failures", json_object_new_int((int)failures));
                cli_print_json(o);
        } else
                printf("%s: %u changes, %u failures.\n", what, changes, failures);
        if (failures)
                cli_print_failures(c);
        return failures ? EXIT_FAILED : EXIT_OK;
}

int verb_profile(Cli *c, int argc, char *argv[])
{
        CliArgs args = {.cli = c, .argc = argc, .argv = argv, .usage = "profile [NAME]"};
        sd_bus_message *reply = NULL;
        int code;

        assert(c);
        assert(argv);

        if (!cli_parse_args(&args, 0, 1))
                return args.exit;
        if (args.n_operands == 0) {
                const char *name = "";
                code = cli_get_property(c, "ActiveProfile", "s", &reply, false);
                if (code != EXIT_OK)
                        return code;
                (void)sd_bus_message_read(reply, "s", &name);
                if (c->json) {
                        json_object *o = json_object_new_object();
                        json_object_object_add(o, "profile", json_object_new_string(name));
                        cli_print_json(o);
                } else
                        puts(*name ? name : "(none)");
                sd_bus_message_unref(reply);
                return EXIT_OK;
        }

        code = cli_call(c, "SetProfile", &reply, false, "s", args.operands[0]);
        if (code != EXIT_OK)
                return code;
        _cleanup_free_ char *what = xasprintf("Profile %s in place", args.operands[0]);
        code = print_result(c, what, reply);
        sd_bus_message_unref(reply);
        return code;
}

/* Originals a damaged journal lost: by object where the damage left the object's name. */
static void print_lost(const Journal *j)
{
        for (size_t i = 0; i < journal_n_lost(j); i++) {
                _cleanup_free_ char *m = journal_loss_message(journal_lost(j, i)), *shown = text_escape(m);
                fprintf(stderr, "%s\n", shown);
        }
        if (journal_damaged_copy(j))
                fprintf(stderr, "The damaged journal is kept as %s.\n", journal_damaged_copy(j));
        if (journal_n_lost(j) > 0)
                fprintf(stderr, "These values were not restored: set them by hand, or reboot.\n");
}

static json_object *lost_json(const Journal *j)
{
        json_object *a = json_object_new_array();

        for (size_t i = 0; i < journal_n_lost(j); i++) {
                const JournalLoss *l = journal_lost(j, i);
                json_object *o = json_object_new_object();
                json_object_object_add(o, "object", l->object ? json_object_new_string(l->object) : NULL);
                json_object_object_add(o, "reason", json_object_new_string(l->reason));
                json_object_array_add(a, o);
        }
        return a;
}

/* Passes of a restore without rtctld after the first, while something is busy (20: 2 s). */
#define RESTORE_BUSY_TRIES 20

int verb_restore(Cli *c, int argc, char *argv[])
{
        CliArgs args = {.cli = c, .argc = argc, .argv = argv, .usage = "restore"};
        _cleanup_free_ char *err = NULL, *lost_note = NULL, *runtime = NULL, *holder = NULL;
        _cleanup_journal_ Journal *journal = NULL;
        _cleanup_close_ int lock = -EBADF;
        sd_bus_message *reply = NULL;
        PassResult res;
        size_t lost;
        bool tracefs_failed = false;
        int code, r;

        assert(c);
        assert(argv);

        if (!cli_parse_args(&args, 0, 0))
                return args.exit;
        /* What a killed `rtctl latency` left in tracefs: its own journal, whatever rtctld's state. */
        if (latency_put_back_leftovers(&err) < 0) {
                fprintf(stderr, "%s\n", err);
                tracefs_failed = true;
                free(err);
                err = NULL;
        }
        /* And what a killed `rtctl xruns` left there. */
        if (xruns_put_back_leftovers(&err) < 0) {
                fprintf(stderr, "%s\n", err);
                tracefs_failed = true;
                free(err);
                err = NULL;
        }
        code = cli_call(c, "Restore", &reply, true, NULL);
        if (code == EXIT_OK) {
                code = print_result(c, "Restored", reply);
                sd_bus_message_unref(reply);
                return code == EXIT_OK && tracefs_failed ? EXIT_FAILED : code;
        }
        if (code != EXIT_NO_DAEMON)
                return code;

        /* rtctld is not running (killed, or never started): restore from its journal ourselves, unless a
         * daemon starting meanwhile holds it (it restores or keeps what it finds there). One that went
         * away under the call may hold it a moment longer, while its exit closes its files: up to 2 s. */
        runtime = rtctl_runtime_dir();
        r = mkdir_p(runtime, 0755);
        for (unsigned attempt = 0; r >= 0; attempt++) {
                free(holder);
                holder = NULL;
                r = journal_lock(runtime, "rtctl restore", false, &lock, &holder);
                if (r != -EWOULDBLOCK || attempt == 20)
                        break;
                (void)nanosleep(&(struct timespec){.tv_nsec = 100 * 1000 * 1000}, NULL);
        }
        if (r == -EWOULDBLOCK) {
                fprintf(stderr,
                        "Cannot restore: %s holds the journal in %s. If rtctld is starting, run `rtctl "
                        "restore` again once it is running, and it restores through rtctld.\n",
                        holder ?: "another process", runtime);
                return EXIT_FAILED;
        }
        /* Who may not take the lock may not write what the journal names either: the restore says so. */
        if (r < 0 && r != -EACCES && r != -EPERM && r != -EROFS) {
                fprintf(stderr, "Cannot lock the journal in %s: %s\n", runtime, strerror(-r));
                return EXIT_FAILED;
        }
        /* What is busy (a cgroup that processes forked into while it was emptied) stays in the journal:
         * rtctld retries it from its event loop, and this restore does a few times, 100 ms apart. */
        unsigned changed = 0;
        for (unsigned attempt = 0;; attempt++) {
                if (local_pass(NULL, false, &res, &journal, &err) < 0) {
                        fprintf(stderr, "Cannot restore: %s\n", err);
                        return EXIT_FAILED;
                }
                changed += res.stats.changed;
                if (res.stats.busy == 0 || attempt == RESTORE_BUSY_TRIES)
                        break;
                pass_result_clear(&res);
                journal_free(journal);
                journal = NULL;
                (void)nanosleep(&(struct timespec){.tv_nsec = 100 * 1000 * 1000}, NULL);
        }
        res.stats.changed = changed;
        /* Still busy: not put back, said so, and left in the journal for the next restore. */
        for (size_t i = 0; i < res.plan.n; i++)
                if (res.plan.settings[i].result == SETTING_BUSY) {
                        _cleanup_free_ char *object = text_escape(res.plan.settings[i].object);
                        _cleanup_free_ char *message = text_escape(strempty(res.plan.settings[i].message));
                        fprintf(stderr,
                                "%s: still busy after %u tries (%s); kept for the next `rtctl restore`\n",
                                object, RESTORE_BUSY_TRIES + 1, message);
                        res.stats.failed++;
                }
        if (tracefs_failed) /* rtctl latency's tracefs journal, above */
                res.stats.failed++;
        /* What a killed rtctld made in tracefs for Threads=realtime (its own journal). */
        if (sched_trace_restore_dir(runtime, &err) < 0) {
                fprintf(stderr, "%s\n", err);
                res.stats.failed++;
        }
        for (size_t i = 0; i < res.plan.n; i++)
                if (res.plan.settings[i].result == SETTING_FAILED) {
                        _cleanup_free_ char *object = text_escape(res.plan.settings[i].object);
                        _cleanup_free_ char *message = text_escape(strempty(res.plan.settings[i].message));
                        fprintf(stderr, "%s: %s\n", object, message);
                }
        lost = journal_n_lost(journal);
        lost_note = lost > 0 ? xasprintf(", %zu lost", lost) : xstrdup("");
        print_lost(journal);
        if (c->json) {
                json_object *o = json_object_new_object();
                json_object_object_add(o, "changes", json_object_new_int((int)res.stats.changed));
                json_object_object_add(o, "failures", json_object_new_int((int)res.stats.failed));
                json_object_object_add(o, "lost", lost_json(journal));
                json_object_object_add(o, "damaged_copy",
                                       journal_damaged_copy(journal)
                                           ? json_object_new_string(journal_damaged_copy(journal))
                                           : NULL);
                cli_print_json(o);
        } else
                printf("rtctld is not running; restored from its journal: %u changes, %u failures%s.\n",
                       res.stats.changed, res.stats.failed, lost_note);
        /* Reported: the next restore need not say it again. */
        journal_forget_lost(journal);
        r = journal_save(journal);
        if (r < 0)
                fprintf(stderr, "Cannot update %s: %s\n", journal_path(journal), strerror(-r));
        code = res.stats.failed || lost > 0 ? EXIT_FAILED : EXIT_OK;
        pass_result_clear(&res);
        return code;
}

/* cells: object, current, desired per write; notes: object, why per object left alone. In JSON a left
 * alone object is {"object", "left_alone": why}, after the writes. */
static void print_plan(Cli *c, char **cells, size_t rows, char **notes, size_t n_notes)
{
        if (c->json) {
                json_object *a = json_object_new_array();
                for (size_t i = 0; i < rows; i++) {
                        json_object *o = json_object_new_object();
                        json_object_object_add(o, "object", json_object_new_string(cells[i * 3]));
                        json_object_object_add(o, "current", json_object_new_string(cells[i * 3 + 1]));
                        json_object_object_add(o, "desired", json_object_new_string(cells[i * 3 + 2]));
                        json_object_array_add(a, o);
                }
                for (size_t i = 0; i < n_notes; i++) {
                        json_object *o = json_object_new_object();
                        json_object_object_add(o, "object", json_object_new_string(notes[i * 2]));
                        json_object_object_add(o, "left_alone", json_object_new_string(notes[i * 2 + 1]));
                        json_object_array_add(a, o);
                }
                cli_print_json(a);
                return;
        }
        if (rows == 0)
                puts(n_notes ? "Nothing to change, but:" : "Nothing to change.");
        else
                cli_print_table((const char *const[]){"OBJECT", "CURRENT", "DESIRED"}, 3, cells, rows);
        if (n_notes && rows)
                puts("\nLeft alone:");
        for (size_t i = 0; i < n_notes; i++)
                printf("  %s: %s\n", notes[i * 2], notes[i * 2 + 1]);
}

int verb_plan(Cli *c, int argc, char *argv[])
{
        enum { ARG_PROFILE = CLI_OPT_VERB };
        static const struct option options[] = {
            {"profile", required_argument, NULL, ARG_PROFILE},
            {},
        };
        CliArgs args = {
            .cli = c, .argc = argc, .argv = argv, .usage = "plan [--profile NAME]", .options = options};
        _cleanup_strv_free_ char **cells = NULL, **notes = NULL;
        _cleanup_free_ char *err = NULL, *local_name = NULL;
        const char *profile = "";
        sd_bus_message *reply = NULL;
        size_t rows = 0, n_notes = 0, n_cells = 0, n_note_cells = 0; /* strv_append's lengths */
        PassResult res;
        int code, r;

        assert(c);
        assert(argv);

        while ((r = cli_next_option(&args)) > 0)
                if (r == ARG_PROFILE)
                        profile = args.value;
        if (r < 0 || !cli_args_count(&args, 0, 0))
                return args.exit;

        code = cli_call(c, "PlanWithNotes", &reply, true, "s", profile);
        if (code == EXIT_OK) {
                const char *o, *cur, *want;
                if (sd_bus_message_enter_container(reply, 'a', "(sss)") >= 0) {
                        while (sd_bus_message_read(reply, "(sss)", &o, &cur, &want) > 0) {
                                strv_append(&cells, &n_cells, xstrdup(o));
                                strv_append(&cells, &n_cells, xstrdup(cur));
                                strv_append(&cells, &n_cells, xstrdup(want));
                                rows++;
                        }
                        (void)sd_bus_message_exit_container(reply);
                }
                if (sd_bus_message_enter_container(reply, 'a', "(ss)") >= 0)
                        while (sd_bus_message_read(reply, "(ss)", &o, &want) > 0) {
                                strv_append(&notes, &n_note_cells, xstrdup(o));
                                strv_append(&notes, &n_note_cells, xstrdup(want));
                                n_notes++;
                        }
                sd_bus_message_unref(reply);
                print_plan(c, cells, rows, notes, n_notes);
                return EXIT_OK;
        }
        if (code != EXIT_NO_DAEMON)
                return code;

        /* No daemon: read the configuration and the machine ourselves. */
        if (isempty(profile))
                profile = local_name = local_default_profile();
        code = local_pass(profile, true, &res, NULL, &err);
        if (code < 0) {
                fprintf(stderr, "%s\n", err);
                return code == -ENOENT ? EXIT_NO_PROFILE : code == -EINVAL ? EXIT_INVALID : EXIT_FAILED;
        }
        for (size_t i = 0; i < res.plan.n; i++) {
                Setting *s = &res.plan.settings[i];
                if (s->result != SETTING_PENDING)
                        continue;
                strv_append(&cells, &n_cells, xstrdup(s->object));
                strv_append(&cells, &n_cells, xstrdup(strempty(s->current)));
                strv_append(&cells, &n_cells, xstrdup(s->desired));
                rows++;
        }
        for (size_t i = 0; i < res.notes.n; i++) {
                const Unsupported *u = &res.notes.items[i];
                strv_append(&notes, &n_note_cells, xstrdup(u->object));
                strv_append(&notes, &n_note_cells, unsupported_describe(u));
                n_notes++;
        }
        pass_result_clear(&res);
        print_plan(c, cells, rows, notes, n_notes);
        return EXIT_OK;
}

int verb_attach(Cli *c, int argc, char *argv[])
{
        bool attach = streq(argv[0], "attach");
        CliArgs args = {.cli = c, .argc = argc, .argv = argv, .usage = attach ? "attach PID" : "detach PID"};
        sd_bus_message *reply = NULL;
        unsigned pid;
        int code;

        assert(c);
        assert(argv);

        if (!cli_parse_args(&args, 1, 1))
                return args.exit;
        if (safe_atou(args.operands[0], &pid) < 0 || pid == 0)
                return cli_usage_error(&args, "not a process ID: '%s'", args.operands[0]);
        code = cli_call(c, attach ? "AttachProcess" : "DetachProcess", &reply, false, "u", pid);
        if (code != EXIT_OK)
                return code;
        _cleanup_free_ char *what = xasprintf(
            "Process %u %s", pid, attach ? "runs on the isolated CPUs" : "is back on the housekeeping CPUs");
        code = print_result(c, what, reply);
        sd_bus_message_unref(reply);
        return code;
}
