/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <systemd/sd-daemon.h>

#include "core/bootargs.h"
#include "daemon/manager-status.h"
#include "shared/log.h"
#include "shared/sysfs.h"

static void power_clear(Status *s)
{
        for (size_t i = 0; i < s->n_power; i++) {
                free(s->power[i].driver);
                free(s->power[i].governor);
                free(s->power[i].epp);
                free(s->power[i].disabled_states);
                free(s->power[i].pm_qos);
        }
        free(s->power);
        s->power = NULL;
        s->n_power = 0;
}

void status_init(Status *s)
{
        assert(s);

        *s = (Status){.failures = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, failure_free),
                      .unsupported = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, failure_free)};
        failure_log_init(&s->log);
}

void status_clear(Status *s)
{
        assert(s);

        if (s->failures)
                g_hash_table_destroy(s->failures);
        if (s->unsupported)
                g_hash_table_destroy(s->unsupported);
        failure_log_clear(&s->log);
        cpuset_free(s->isolated);
        cpuset_free(s->housekeeping);
        free(s->isolation_reason);
        power_clear(s);
        free(s->last_line);
        free(s->boot_missing);
        *s = (Status){};
}

static void set_entry(GHashTable *table, const char *tuner, const char *object, int error,
                      const char *message)
{
        Failure *f = failure_new(tuner, object, error, message);

        g_hash_table_replace(table, f->object, f);
}

/* A failure stands: in status always, in the log when it is new or changed. */
static unsigned set_failure(Status *s, int level, const char *tuner, const char *object, int error,
                            const char *message)
{
        set_entry(s->failures, tuner, object, error, message);
        if (!failure_log_note(&s->log, tuner, object, error, message))
                return 0;
        log_object(level, error, tuner, object, "%s", message);
        return 1;
}

static void set_fixed(Status *s, const char *tuner, const char *object)
{
        g_hash_table_remove(s->failures, object);
        if (failure_log_fixed(&s->log, object))
                log_object(LOG_INFO, 0, tuner, object, "now in place");
}

void status_set_failure(Status *s, int level, const char *tuner, const char *object, int error,
                        const char *message)
{
        assert(s);

        (void)set_failure(s, level, tuner, object, error, message);
}

static gboolean of_tuner(gpointer key, gpointer value, gpointer tuner)
{
        return streq(((Failure *)value)->tuner, tuner);
}

static gboolean under(gpointer key, gpointer value, gpointer prefix)
{
        return startswith(key, prefix) != NULL;
}

void status_forget_under(Status *s, const char *prefix)
{
        assert(s);

        g_hash_table_foreach_remove(s->failures, under, (gpointer)prefix);
        g_hash_table_foreach_remove(s->unsupported, under, (gpointer)prefix);
        failure_log_forget_under(&s->log, prefix);
}

void status_forget_tuner(Status *s, const char *tuner)
{
        assert(s);

        g_hash_table_foreach_remove(s->failures, of_tuner, (gpointer)tuner);
        g_hash_table_foreach_remove(s->unsupported, of_tuner, (gpointer)tuner);
}

unsigned status_n_failures(const Status *s)
{
        assert(s);

        return g_hash_table_size(s->failures);
}

static unsigned take_setting(Status *s, const Setting *set)
{
        switch (set->result) {
        case SETTING_FAILED:
        case SETTING_BUSY:
                return set_failure(s, LOG_WARNING, set->tuner, set->object, set->error, set->message);
        case SETTING_REFUSED:
                g_hash_table_remove(s->failures, set->object);
                set_entry(s->unsupported, set->tuner, set->object, 0, set->message);
                break;
        case SETTING_DEFERRED:
                break; /* the pass after systemd's jobs decides */
        case SETTING_CHANGED:
        case SETTING_UNCHANGED:
                /* A systemd job's end says whether it is in place (status_set_failure when it failed). */
                if (set->queued)
                        g_hash_table_remove(s->failures, set->object);
                else
                        set_fixed(s, set->tuner, set->object);
                break;
        case SETTING_PENDING:
        case SETTING_GONE:
                g_hash_table_remove(s->failures, set->object);
                break;
        }
        return 0;
}

/* What no longer fails without having been put in place (a device removed, an object a new profile does
 * not want) is forgotten: if it fails again, that is news. A systemd job under way is neither. */
static void forget_unlogged(Status *s, const Plan *plan)
{
        g_autoptr(GHashTable) standing = g_hash_table_new(g_str_hash, g_str_equal);
        GHashTableIter it;
        gpointer key;

        g_hash_table_iter_init(&it, s->failures);
        while (g_hash_table_iter_next(&it, &key, NULL))
                g_hash_table_add(standing, key);
        for (size_t i = 0; i < plan->n; i++)
                if (plan->settings[i].queued)
                        g_hash_table_add(standing, plan->settings[i].object);
        failure_log_prune(&s->log, standing);
}

unsigned status_update(Status *s, const Dirty *dirty, PassResult *res)
{
        unsigned logged = 0;

        assert(s);
        assert(res);

        for (size_t i = 0; i < tuners_n(); i++)
                if (dirty->full[i])
                        status_forget_tuner(s, tuner_nth(i)->name);
        g_hash_table_foreach_remove(s->failures, of_tuner, (gpointer) "policy");

        for (size_t i = 0; i < res->plan.n; i++)
                logged += take_setting(s, &res->plan.settings[i]);
        for (size_t i = 0; i < res->notes.n; i++) {
                const Unsupported *u = &res->notes.items[i];
                if (u->error)
                        logged += set_failure(s, LOG_WARNING, u->tuner, u->object, u->error, u->reason);
                else
                        set_entry(s->unsupported, u->tuner, u->object, 0, u->reason);
        }
        if (res->error)
                logged += set_failure(s, LOG_WARNING, "policy", "Isolate", EINVAL, res->error);
        forget_unlogged(s, &res->plan);
        if (res->isolated) {
                cpuset_free(s->isolated);
                cpuset_free(s->housekeeping);
                s->isolated = TAKE_PTR(res->isolated);
                s->housekeeping = TAKE_PTR(res->housekeeping);
                free(s->isolation_reason);
                s->isolation_reason = TAKE_PTR(res->isolation_reason);
        }
        return logged;
}

void status_update_boot(Status *s, const Policy *p, const Topology *t)
{
        _cleanup_free_ char *cmdline = NULL;
        BootArgs b;

        assert(s);

        free(s->boot_missing);
        s->boot_missing = NULL;
        g_hash_table_remove(s->unsupported, "/proc/cmdline");
        if (!p || !t || bootargs_plan(p, t, &b) < 0)
                return; /* a profile that cannot be placed is reported by the pass */
        if (sys_read("/proc/cmdline", &cmdline) >= 0)
                s->boot_missing = bootargs_missing(&b, cmdline);
        bootargs_clear(&b);
        if (s->boot_missing) {
                _cleanup_free_ char *m = xasprintf("reboot pending: the running kernel lacks %s (only a "
                                                   "reboot applies them: rtctl bootargs "
                                                   "apply, then reboot)",
                                                   s->boot_missing);
                set_entry(s->unsupported, "bootargs", "/proc/cmdline", 0, m);
        }
}

/* A sysfs value without the blanks around it; "" where the machine has no such thing. */
static char *cpu_attr(unsigned cpu, const char *rel)
{
        _cleanup_free_ char *p = xasprintf("/sys/devices/system/cpu/cpu%u/%s", cpu, rel), *v = NULL;

        if (sys_read(p, &v) < 0)
                return xstrdup("");
        return xstrdup(strstrip(v));
}

static char *disabled_states(unsigned cpu)
{
        _cleanup_free_ char *dir = xasprintf("/sys/devices/system/cpu/cpu%u/cpuidle", cpu);
        _cleanup_closedir_ DIR *d = sys_opendir(dir);
        g_autoptr(GString) names = g_string_new(NULL);
        struct dirent *de;

        while (d && (de = readdir(d))) {
                _cleanup_free_ char *rel = NULL, *dis = NULL, *name = NULL;
                if (!startswith(de->d_name, "state"))
                        continue;
                rel = xasprintf("cpuidle/%s/disable", de->d_name);
                dis = cpu_attr(cpu, rel);
                if (!streq(dis, "1"))
                        continue;
                free(rel);
                rel = xasprintf("cpuidle/%s/name", de->d_name);
                name = cpu_attr(cpu, rel);
                g_string_append_printf(names, "%s%s", names->len ? "," : "", name);
        }
        return xstrdup(names->str);
}

void status_refresh_power(Status *s, const CpuSet *online)
{
        size_t n = 0;

        assert(s);

        power_clear(s);
        FOREACH_CPU (cpu, online)
                n++;
        s->power = xmalloc0(sizeof(CpuPower) * (n + 1));
        FOREACH_CPU (cpu, online) {
                CpuPower *p = &s->power[s->n_power++];
                _cleanup_free_ char *fmin = cpu_attr((unsigned)cpu, "cpufreq/scaling_min_freq");
                _cleanup_free_ char *fmax = cpu_attr((unsigned)cpu, "cpufreq/scaling_max_freq");

                *p = (CpuPower){.cpu = (unsigned)cpu,
                                .driver = cpu_attr((unsigned)cpu, "cpufreq/scaling_driver"),
                                .governor = cpu_attr((unsigned)cpu, "cpufreq/scaling_governor"),
                                .epp = cpu_attr((unsigned)cpu, "cpufreq/energy_performance_preference"),
                                .disabled_states = disabled_states((unsigned)cpu),
                                .pm_qos = cpu_attr((unsigned)cpu, "power/pm_qos_resume_latency_us")};
                (void)safe_atou(fmin, &p->min_khz);
                (void)safe_atou(fmax, &p->max_khz);
        }
}

static gint cmp_names(gconstpointer a, gconstpointer b)
{
        return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The tuners with failures, in order: "block, irq". */
static char *failing_tuners(const Status *s)
{
        g_autoptr(GString) out = g_string_new(NULL);
        GHashTableIter it;
        gpointer value;
        g_autoptr(GPtrArray) names = g_ptr_array_new();

        g_hash_table_iter_init(&it, s->failures);
        while (g_hash_table_iter_next(&it, NULL, &value)) {
                const char *t = ((const Failure *)value)->tuner;
                if (!g_ptr_array_find_with_equal_func(names, t, g_str_equal, NULL))
                        g_ptr_array_add(names, (gpointer)t);
        }
        g_ptr_array_sort(names, cmp_names);
        for (guint i = 0; i < names->len; i++)
                g_string_append_printf(out, "%s%s", i ? ", " : "", (const char *)names->pdata[i]);
        return xstrdup(out->str);
}

char *status_line(const Status *s, const char *profile, const char *holds)
{
        assert(s);

        g_autoptr(GString) line = g_string_new(NULL);
        unsigned n = status_n_failures(s);

        if (isempty(profile))
                g_string_append(line, "No profile: nothing tuned");
        else
                g_string_append_printf(line, "Profile %s", profile);
        if (holds)
                g_string_append_printf(line, "; %s", holds);
        if (n > 0) {
                _cleanup_free_ char *names = failing_tuners(s);
                g_string_append_printf(line, "; %u failure%s (%s)", n, n == 1 ? "" : "s", names);
        } else if (!isempty(profile))
                g_string_append(line, "; applied");
        return xstrdup(line->str);
}

void status_notify(Status *s, const char *profile, const char *holds)
{
        assert(s);

        /* systemd reads each line of the datagram as an assignment: nothing a caller named (a hold's
         * application) may start one. */
        _cleanup_free_ char *raw = status_line(s, profile, holds);
        _cleanup_free_ char *line = text_escape(raw);

        if (s->ready_sent && streq_ptr(line, s->last_line))
                return;
        (void)sd_notifyf(false, "%sSTATUS=%s", s->ready_sent ? "" : "READY=1\n", line);
        s->ready_sent = true;
        free(s->last_line);
        s->last_line = TAKE_PTR(line);
}
