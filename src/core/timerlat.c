/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <ctype.h>
#include <inttypes.h>

#include "core/timerlat.h"
#include "shared/sysfs.h"

static const char *const files[_TIMERLAT_FILES] = {
    [TIMERLAT_TRACER] = "current_tracer",
    [TIMERLAT_TRACING_ON] = "tracing_on",
    [TIMERLAT_CPUS] = "osnoise/cpus",
    [TIMERLAT_PERIOD] = "osnoise/timerlat_period_us",
    [TIMERLAT_STOP_US] = "osnoise/stop_tracing_us",
    [TIMERLAT_STOP_TOTAL_US] = "osnoise/stop_tracing_total_us",
    [TIMERLAT_OPTIONS] = "osnoise/options",
};

/* The option that makes the tracer dispatch its own per-CPU threads (6.3+); off, nothing is measured. */
#define WORKLOAD_OPTION "OSNOISE_WORKLOAD"

static char *path_of(const char *dir, unsigned file)
{
        return xasprintf("%s/%s", dir, files[file]);
}

int timerlat_probe(const char *dir, char **ret_why)
{
        _cleanup_free_ char *p = xasprintf("%s/available_tracers", dir), *tracers = NULL;
        _cleanup_strv_free_ char **l = NULL;
        int r;

        r = sys_read(p, &tracers);
        if (r < 0) {
                *ret_why = xasprintf("cannot read %s: %s", p, strerror(-r));
                return r == -EACCES || r == -EPERM ? r : -EOPNOTSUPP;
        }
        l = strv_split(tracers, " \n");
        if (!strv_contains(l, "timerlat")) {
                *ret_why =
                    xstrdup("this kernel has no timerlat tracer (built without CONFIG_TIMERLAT_TRACER)");
                return -EOPNOTSUPP;
        }
        return 0;
}

int timerlat_save(const char *dir, TimerlatState *ret, char **ret_error)
{
        TimerlatState st = {.dir = xstrdup(dir)};
        int r;

        for (unsigned i = 0; i < _TIMERLAT_FILES; i++) {
                _cleanup_free_ char *p = path_of(dir, i);
                r = sys_read(p, &st.saved[i]);
                if (r == -ENOENT && i >= TIMERLAT_STOP_US)
                        continue; /* older kernels: nothing to save, nothing to set */
                if (r < 0) {
                        *ret_error = xasprintf("cannot read %s: %s", p, strerror(-r));
                        timerlat_state_clear(&st);
                        return r;
                }
                strstrip(st.saved[i]);
        }
        if (!streq(st.saved[TIMERLAT_TRACER], "nop")) {
                *ret_error =
                    xasprintf("the %s tracer is in use (%s/current_tracer); rtctl latency does not take "
                              "tracefs from someone who is tracing",
                              st.saved[TIMERLAT_TRACER], dir);
                timerlat_state_clear(&st);
                return -EBUSY;
        }
        *ret = st;
        return 0;
}

static int write_file(const TimerlatState *st, unsigned file, const char *value, char **ret_error)
{
        _cleanup_free_ char *p = path_of(st->dir, file);
        int r;

        r = sys_write(p, value);
        if (r < 0 && ret_error && !*ret_error)
                *ret_error = xasprintf("cannot write '%s' to %s: %s", value, p, strerror(-r));
        return r;
}

/* The options file lists every option, "NO_" in front of those that are off. */
static bool option_off(const char *options, const char *name)
{
        _cleanup_strv_free_ char **l = strv_split(strempty(options), " \n");
        _cleanup_free_ char *off = xasprintf("NO_%s", name);

        return strv_contains(l, off);
}

int timerlat_start(const TimerlatState *st, const CpuSet *cpus, unsigned period_us, char **ret_error)
{
        _cleanup_free_ char *list = cpuset_format_list(cpus), *period = xasprintf("%u", period_us);
        int r;

        assert(st);

        /* Thresholds that would stop the trace at the first large latency: a measurement wants them all. */
        if (st->saved[TIMERLAT_STOP_US] && !streq(st->saved[TIMERLAT_STOP_US], "0") &&
            (r = write_file(st, TIMERLAT_STOP_US, "0", ret_error)) < 0)
                return r;
        if (st->saved[TIMERLAT_STOP_TOTAL_US] && !streq(st->saved[TIMERLAT_STOP_TOTAL_US], "0") &&
            (r = write_file(st, TIMERLAT_STOP_TOTAL_US, "0", ret_error)) < 0)
                return r;
        if (st->saved[TIMERLAT_OPTIONS] && option_off(st->saved[TIMERLAT_OPTIONS], WORKLOAD_OPTION) &&
            (r = write_file(st, TIMERLAT_OPTIONS, WORKLOAD_OPTION, ret_error)) < 0)
                return r;
        if ((r = write_file(st, TIMERLAT_CPUS, list, ret_error)) < 0 ||
            (r = write_file(st, TIMERLAT_PERIOD, period, ret_error)) < 0 ||
            (r = write_file(st, TIMERLAT_TRACING_ON, "1", ret_error)) < 0 ||
            (r = write_file(st, TIMERLAT_TRACER, "timerlat", ret_error)) < 0)
                return r;
        return 0;
}

static int restore_options(const TimerlatState *st, char **ret_error)
{
        _cleanup_free_ char *p = path_of(st->dir, TIMERLAT_OPTIONS), *now = NULL;
        _cleanup_strv_free_ char **want = strv_split(st->saved[TIMERLAT_OPTIONS], " \n");
        _cleanup_strv_free_ char **have = NULL;
        int r, ret = 0;

        r = sys_read(p, &now);
        if (r < 0) {
                if (!*ret_error)
                        *ret_error = xasprintf("cannot read %s: %s", p, strerror(-r));
                return r;
        }
        have = strv_split(now, " \n");
        /* One option at a time, only those that differ: "DEFAULTS" would reset the ones we never saw. */
        for (char **o = want; *o; o++) {
                if (streq(*o, "DEFAULTS") || strv_contains(have, *o))
                        continue;
                r = write_file(st, TIMERLAT_OPTIONS, *o, ret_error);
                if (r < 0 && ret == 0)
                        ret = r;
        }
        return ret;
}

int timerlat_restore(const TimerlatState *st, char **ret_error)
{
        int ret = 0, r;

        for (unsigned i = 0; i < _TIMERLAT_FILES; i++) {
                _cleanup_free_ char *p = path_of(st->dir, i), *now = NULL;
                if (!st->saved[i])
                        continue;
                if (i == TIMERLAT_OPTIONS) {
                        r = restore_options(st, ret_error);
                } else {
                        r = sys_read(p, &now);
                        if (r >= 0 && streq(strstrip(now), st->saved[i]))
                                continue;
                        r = write_file(st, i, st->saved[i], ret_error);
                }
                if (r < 0 && ret == 0)
                        ret = r;
        }
        return ret;
}

void timerlat_state_clear(TimerlatState *st)
{
        assert(st);

        free(st->dir);
        for (unsigned i = 0; i < _TIMERLAT_FILES; i++)
                free(st->saved[i]);
        *st = (TimerlatState){};
}

static const char *skip_spaces(const char *p)
{
        while (*p == ' ' || *p == '\t')
                p++;
        return p;
}

bool timerlat_parse_line(const char *line, unsigned *ret_cpu, uint64_t *ret_ns)
{
        assert(line);

        const char *p = strchr(line, '['), *q;
        unsigned long long ns;
        unsigned cpu = 0;
        char *end;

        if (line[0] == '#' || !p || !isdigit((unsigned char)p[1]))
                return false;
        for (p++; isdigit((unsigned char)*p); p++)
                cpu = cpu * 10 + (unsigned)(*p - '0');
        if (*p != ']')
                return false;
        q = strstr(p, " context ");
        if (!q)
                return false;
        q = skip_spaces(q + strlen(" context "));
        if (!startswith(q, "thread "))
                return false;
        q = skip_spaces(q + strlen("thread "));
        if (!startswith(q, "timer_latency "))
                return false;
        q = skip_spaces(q + strlen("timer_latency "));
        if (!isdigit((unsigned char)*q))
                return false;
        errno = 0;
        ns = strtoull(q, &end, 10);
        if (errno || !startswith(skip_spaces(end), "ns"))
                return false;
        *ret_cpu = cpu;
        *ret_ns = ns;
        return true;
}
