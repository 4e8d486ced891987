/* SPDX-License-Identifier: GPL-2.0-or-later */
/* status, profiles */
#include <time.h>

#include "cli/args.h"
#include "cli/local.h"
#include "core/policy.h"

typedef struct Row {
        char *a, *b, *c, *d;
} Row;

static int read_string_prop(Cli *c, const char *name, char **ret)
{
        sd_bus_message *reply = NULL;
        const char *s;
        int code = cli_get_property(c, name, "s", &reply, false);

        if (code != EXIT_OK)
                return code;
        if (sd_bus_message_read(reply, "s", &s) < 0)
                s = "";
        *ret = xstrdup(s);
        sd_bus_message_unref(reply);
        return EXIT_OK;
}

/* a(ssis) for Failures, a(sss) for Unsupported */
static int read_problems(Cli *c, const char *name, bool with_errno, char ***ret_cells, size_t *ret_rows)
{
        sd_bus_message *reply = NULL;
        const char *tuner, *object, *message;
        int err = 0, code, r;
        size_t rows = 0;
        char **cells = NULL;

        code = cli_get_property(c, name, with_errno ? "a(ssis)" : "a(sss)", &reply, false);
        if (code != EXIT_OK)
                return code;
        r = sd_bus_message_enter_container(reply, 'a', with_errno ? "(ssis)" : "(sss)");
        while (r >= 0) {
                r = with_errno ? sd_bus_message_read(reply, "(ssis)", &tuner, &object, &err, &message)
                               : sd_bus_message_read(reply, "(sss)", &tuner, &object, &message);
                if (r <= 0)
                        break;
                strv_push(&cells, xstrdup(tuner));
                strv_push(&cells, xstrdup(object));
                strv_push(&cells, with_errno ? xasprintf("%s", strerrorname_np(err) ?: "?") : xstrdup(""));
                strv_push(&cells, xstrdup(message));
                rows++;
        }
        sd_bus_message_unref(reply);
        *ret_cells = cells;
        *ret_rows = rows;
        return EXIT_OK;
}

void cli_print_failures(Cli *c)
{
        _cleanup_strv_free_ char **cells = NULL;
        size_t rows = 0;

        if (read_problems(c, "Failures", true, &cells, &rows) != EXIT_OK)
                return;
        cli_escape_cells(cells, rows * 4);
        for (size_t i = 0; i < rows; i++)
                fprintf(stderr, "%s: %s\n", cells[i * 4 + 1], cells[i * 4 + 3]);
}

static json_object *problems_json(char **cells, size_t rows, bool with_errno)
{
        json_object *a = json_object_new_array();

        for (size_t i = 0; i < rows; i++) {
                json_object *o = json_object_new_object();
                json_object_object_add(o, "tuner", json_object_new_string(cells[i * 4]));
                json_object_object_add(o, "object", json_object_new_string(cells[i * 4 + 1]));
                if (with_errno)
                        json_object_object_add(o, "error", json_object_new_string(cells[i * 4 + 2]));
                json_object_object_add(o, "message", json_object_new_string(cells[i * 4 + 3]));
                json_object_array_add(a, o);
        }
        return a;
}

#define POWER_COLUMNS 8
static const char *const power_columns[POWER_COLUMNS] = {"CPU", "DRIVER",  "GOVERNOR",      "EPP",
                                                         "MIN", "MAX kHz", "IDLE DISABLED", "PM QOS"};

/* The CPUPower property as table cells; an older daemon without it gives none. */
static void read_power(Cli *c, char ***ret, size_t *ret_n, int *ret_dma)
{
        sd_bus_message *reply = NULL;
        const char *driver, *gov, *epp, *disabled, *qos;
        uint32_t cpu, lo, hi;

        if (cli_get_property(c, "DMALatencyRequest", "i", &reply, true) == EXIT_OK) {
                (void)sd_bus_message_read(reply, "i", ret_dma);
                sd_bus_message_unref(reply);
        }
        if (cli_get_property(c, "CPUPower", "a(usssuuss)", &reply, true) != EXIT_OK)
                return;
        if (sd_bus_message_enter_container(reply, 'a', "(usssuuss)") >= 0)
                while (sd_bus_message_read(reply, "(usssuuss)", &cpu, &driver, &gov, &epp, &lo, &hi,
                                           &disabled, &qos) > 0) {
                        strv_push(ret, xasprintf("%u", cpu));
                        strv_push(ret, xstrdup(*driver ? driver : "-"));
                        strv_push(ret, xstrdup(*gov ? gov : "-"));
                        strv_push(ret, xstrdup(*epp ? epp : "-"));
                        strv_push(ret, lo ? xasprintf("%u", lo) : xstrdup("-"));
                        strv_push(ret, hi ? xasprintf("%u", hi) : xstrdup("-"));
                        strv_push(ret, xstrdup(*disabled ? disabled : "-"));
                        strv_push(ret, xstrdup(qos));
                        (*ret_n)++;
                }
        sd_bus_message_unref(reply);
}

static json_object *power_json(char **cells, size_t rows)
{
        static const char *const keys[POWER_COLUMNS] = {
            "cpu",     "driver",  "governor",      "epp",
            "min_khz", "max_khz", "idle_disabled", "pm_qos_resume_latency_us"};
        json_object *a = json_object_new_array();

        for (size_t i = 0; i < rows; i++) {
                json_object *o = json_object_new_object();
                for (size_t k = 0; k < POWER_COLUMNS; k++) {
                        const char *v = cells[i * POWER_COLUMNS + k];
                        if (k == 0 || k == 4 || k == 5)
                                json_object_object_add(o, keys[k],
                                                       json_object_new_int(streq(v, "-") ? 0 : atoi(v)));
                        else
                                json_object_object_add(o, keys[k],
                                                       json_object_new_string(streq(v, "-") ? "" : v));
                }
                json_object_array_add(a, o);
        }
        return a;
}

#define ATTACHED_COLUMNS 5

/* AttachedThreads as table cells (PID, TID or "all", name, rule, why); an older daemon without it gives
 * none. */
static void read_attached_threads(Cli *c, char ***ret, size_t *ret_n)
{
        sd_bus_message *reply = NULL;
        const char *comm, *rule, *why;
        uint32_t pid, tid;

        if (cli_get_property(c, "AttachedThreads", "a(uusss)", &reply, true) != EXIT_OK)
                return;
        if (sd_bus_message_enter_container(reply, 'a', "(uusss)") >= 0)
                while (sd_bus_message_read(reply, "(uusss)", &pid, &tid, &comm, &rule, &why) > 0) {
                        strv_push(ret, xasprintf("%u", pid));
                        strv_push(ret, tid ? xasprintf("%u", tid) : xstrdup("all"));
                        strv_push(ret, xstrdup(comm));
                        strv_push(ret, xstrdup(rule));
                        strv_push(ret, xstrdup(why));
                        (*ret_n)++;
                }
        sd_bus_message_unref(reply);
}

static json_object *attached_json(char **cells, size_t rows)
{
        json_object *a = json_object_new_array();

        for (size_t i = 0; i < rows; i++) {
                json_object *o = json_object_new_object();
                char **row = cells + i * ATTACHED_COLUMNS;
                json_object_object_add(o, "pid", json_object_new_int(atoi(row[0])));
                json_object_object_add(o, "tid",
                                       json_object_new_int(streq(row[1], "all") ? 0 : atoi(row[1])));
                json_object_object_add(o, "comm", json_object_new_string(row[2]));
                json_object_object_add(o, "rule", json_object_new_string(row[3]));
                json_object_object_add(o, "why", json_object_new_string(row[4]));
                json_object_array_add(a, o);
        }
        return a;
}

int verb_status(Cli *c, int argc, char *argv[])
{
        CliArgs args = {.cli = c, .argc = argc, .argv = argv, .usage = "status"};
        _cleanup_free_ char *profile = NULL, *state = NULL, *version = NULL, *iso = NULL, *hk = NULL,
                            *base = NULL;
        _cleanup_strv_free_ char **failures = NULL, **unsupported = NULL, **holds = NULL;
        size_t n_failures = 0, n_unsupported = 0, n_holds = 0;
        sd_bus_message *reply = NULL;
        uint64_t ts = 0, duration = 0;
        unsigned changes = 0, failed = 0;
        int code;

        assert(c);
        assert(argv);

        if (!cli_parse_args(&args, 0, 0))
                return args.exit;
        if ((code = read_string_prop(c, "ActiveProfile", &profile)) != EXIT_OK ||
            (code = read_string_prop(c, "BaseProfile", &base)) != EXIT_OK ||
            (code = cli_read_holds(c, &holds, &n_holds, false)) != EXIT_OK ||
            (code = read_string_prop(c, "State", &state)) != EXIT_OK ||
            (code = read_string_prop(c, "Version", &version)) != EXIT_OK ||
            (code = read_string_prop(c, "IsolatedCPUs", &iso)) != EXIT_OK ||
            (code = read_string_prop(c, "HousekeepingCPUs", &hk)) != EXIT_OK ||
            (code = read_problems(c, "Failures", true, &failures, &n_failures)) != EXIT_OK ||
            (code = read_problems(c, "Unsupported", false, &unsupported, &n_unsupported)) != EXIT_OK)
                return code;
        code = cli_get_property(c, "LastPass", "(tuut)", &reply, false);
        if (code != EXIT_OK)
                return code;
        (void)sd_bus_message_read(reply, "(tuut)", &ts, &changes, &failed, &duration);
        sd_bus_message_unref(reply);
        _cleanup_strv_free_ char **power = NULL;
        size_t n_power = 0;
        int dma = -1;
        read_power(c, &power, &n_power, &dma);
        _cleanup_strv_free_ char **attached = NULL;
        size_t n_attached = 0;
        read_attached_threads(c, &attached, &n_attached);
        _cleanup_free_ char *policy_events = NULL;
        if (cli_get_property(c, "PolicyEvents", "s", &reply, true) == EXIT_OK) {
                const char *s = NULL;
                if (sd_bus_message_read(reply, "s", &s) >= 0)
                        policy_events = xstrdup(s);
                sd_bus_message_unref(reply);
        }
        _cleanup_free_ char *why = NULL;
        if (cli_get_property(c, "IsolationReason", "s", &reply, true) == EXIT_OK) {
                const char *s = NULL;
                if (sd_bus_message_read(reply, "s", &s) >= 0)
                        why = xstrdup(s);
                sd_bus_message_unref(reply);
        }
        int reboot_pending = 0;
        if (cli_get_property(c, "RebootPending", "b", &reply, true) == EXIT_OK) {
                (void)sd_bus_message_read(reply, "b", &reboot_pending);
                sd_bus_message_unref(reply);
        }

        if (c->json) {
                json_object *o = json_object_new_object(), *lp = json_object_new_object();
                json_object_object_add(o, "version", json_object_new_string(version));
                json_object_object_add(o, "profile", json_object_new_string(profile));
                json_object_object_add(o, "base_profile", json_object_new_string(base));
                json_object *ha = json_object_new_array();
                for (size_t i = 0; i < n_holds; i++) {
                        json_object *h = json_object_new_object();
                        json_object_object_add(h, "cookie", json_object_new_int64(atoll(holds[i * 6])));
                        json_object_object_add(h, "profile", json_object_new_string(holds[i * 6 + 1]));
                        json_object_object_add(h, "application_id",
                                               json_object_new_string(holds[i * 6 + 2]));
                        json_object_object_add(h, "reason", json_object_new_string(holds[i * 6 + 3]));
                        json_object_array_add(ha, h);
                }
                json_object_object_add(o, "holds", ha);
                json_object_object_add(o, "state", json_object_new_string(state));
                json_object_object_add(o, "isolated_cpus", json_object_new_string(iso));
                json_object_object_add(o, "housekeeping_cpus", json_object_new_string(hk));
                json_object_object_add(o, "isolation_reason", json_object_new_string(strempty(why)));
                json_object_object_add(lp, "timestamp_usec", json_object_new_uint64(ts));
                json_object_object_add(lp, "changes", json_object_new_int((int)changes));
                json_object_object_add(lp, "failures", json_object_new_int((int)failed));
                json_object_object_add(lp, "duration_usec", json_object_new_uint64(duration));
                json_object_object_add(o, "last_pass", lp);
                json_object_object_add(o, "failures", problems_json(failures, n_failures, true));
                json_object_object_add(o, "unsupported", problems_json(unsupported, n_unsupported, false));
                json_object_object_add(o, "cpus", power_json(power, n_power));
                json_object_object_add(o, "dma_latency_request_us", json_object_new_int(dma));
                json_object_object_add(o, "attached_by_rules", attached_json(attached, n_attached));
                json_object_object_add(o, "policy_events", json_object_new_string(strempty(policy_events)));
                json_object_object_add(o, "reboot_pending", json_object_new_boolean(reboot_pending));
                cli_print_json(o);
        } else {
                char when[64] = "never";
                time_t t = (time_t)(ts / 1000000);
                if (ts)
                        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime(&t));
                cli_escape_cells(holds, n_holds * 6);
                cli_escape_cells(unsupported, n_unsupported * 4);
                printf("Profile:          %s", *profile ? profile : "(none)");
                if (n_holds && streq(profile, base))
                        printf(" (base profile; no hold outranks it)\n");
                else if (n_holds)
                        printf(" (held; base profile: %s)\n", *base ? base : "none");
                else
                        printf("\n");
                for (size_t i = 0; i < n_holds; i++)
                        printf("  hold %s:%*s%s by %s: %s\n", holds[i * 6],
                               (int)MAX(0, 10 - (int)strlen(holds[i * 6])), "", holds[i * 6 + 1],
                               holds[i * 6 + 2], holds[i * 6 + 3]);
                printf("State:            %s\n", state);
                printf("Isolated CPUs:    %s\n", *iso ? iso : "(none)");
                if (!isempty(why))
                        printf("Isolation:        %s\n", why);
                printf("Housekeeping CPUs: %s\n", hk);
                printf("Last pass:        %s, %u changes, %u failures, %.1f ms\n", when, changes, failed,
                       (double)duration / 1000.0);
                printf("Daemon:           rtctld %s\n", version);
                if (reboot_pending)
                        printf("Reboot pending:   the kernel lacks boot arguments the profile wants "
                               "(rtctl bootargs)\n");
                if (dma >= 0)
                        printf("DMA latency:      %d µs requested (/dev/cpu_dma_latency held)\n", dma);
                if (n_power) {
                        printf("\n");
                        cli_print_table(power_columns, POWER_COLUMNS, power, n_power);
                }
                if (!isempty(policy_events)) {
                        _cleanup_free_ char *shown = text_escape(policy_events);
                        printf("Real-time threads: policy changes seen by %s\n", shown);
                }
                if (n_attached) {
                        printf("\nOn the isolated CPUs by [Attach] rules:\n");
                        cli_print_table((const char *const[]){"PID", "TID", "NAME", "RULE", "WHY"},
                                        ATTACHED_COLUMNS, attached, n_attached);
                }
                if (n_failures) {
                        printf("\nFailures:\n");
                        cli_print_table((const char *const[]){"TUNER", "OBJECT", "ERROR", "MESSAGE"}, 4,
                                        failures, n_failures);
                }
                if (n_unsupported) {
                        printf("\nNot supported here (not failures):\n");
                        for (size_t i = 0; i < n_unsupported; i++)
                                printf("  %s: %s\n", unsupported[i * 4 + 1], unsupported[i * 4 + 3]);
                }
        }
        return streq(state, "degraded") ? EXIT_FAILED : EXIT_OK;
}

int verb_profiles(Cli *c, int argc, char *argv[])
{
        CliArgs args = {.cli = c, .argc = argc, .argv = argv, .usage = "profiles"};
        _cleanup_free_ char *active = NULL;
        _cleanup_strv_free_ char **cells = NULL;
        sd_bus_message *reply = NULL;
        size_t rows = 0;
        int code;

        assert(c);
        assert(argv);

        if (!cli_parse_args(&args, 0, 0))
                return args.exit;
        code = cli_get_property(c, "Profiles", "a(ss)", &reply, true);
        if (code == EXIT_OK) {
                const char *name, *desc;
                (void)read_string_prop(c, "ActiveProfile", &active);
                if (sd_bus_message_enter_container(reply, 'a', "(ss)") >= 0)
                        while (sd_bus_message_read(reply, "(ss)", &name, &desc) > 0) {
                                strv_push(&cells, xstrdup(name));
                                strv_push(&cells, xstrdup(desc));
                                rows++;
                        }
                sd_bus_message_unref(reply);
        } else if (code == EXIT_NO_DAEMON) {
                /* Without the daemon, list what this machine's configuration holds. */
                _cleanup_strv_free_ char **path = conf_search_path();
                ProfileInfo *l = NULL;
                size_t n = 0;
                (void)profiles_list(path, &l, &n);
                for (size_t i = 0; i < n; i++) {
                        strv_push(&cells, xstrdup(l[i].name));
                        strv_push(&cells, xstrdup(l[i].description));
                }
                rows = n;
                profiles_free(l, n);
        } else
                return code;

        if (c->json) {
                json_object *a = json_object_new_array();
                for (size_t i = 0; i < rows; i++) {
                        json_object *o = json_object_new_object();
                        json_object_object_add(o, "name", json_object_new_string(cells[i * 2]));
                        json_object_object_add(o, "description", json_object_new_string(cells[i * 2 + 1]));
                        json_object_object_add(
                            o, "active", json_object_new_boolean(active && streq(active, cells[i * 2])));
                        json_object_array_add(a, o);
                }
                cli_print_json(a);
                return EXIT_OK;
        }
        for (size_t i = 0; i < rows; i++)
                printf("%s %-16s %s\n", active && streq(active, cells[i * 2]) ? "*" : " ", cells[i * 2],
                       cells[i * 2 + 1]);
        return EXIT_OK;
}
