/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <ctype.h>
#include <glib.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <unistd.h>

#include "core/tasks.h"
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
    [TIMERLAT_OSNOISE_PERIOD] = "osnoise/period_us",
    [TIMERLAT_OSNOISE_RUNTIME] = "osnoise/runtime_us",
    [TIMERLAT_CPUMASK] = "tracing_cpumask",
    [TIMERLAT_THRESH] = "tracing_thresh",
};

static const char *const tracer_names[_TRACER_MAX] = {
    [TRACER_TIMERLAT] = "timerlat",
    [TRACER_OSNOISE] = "osnoise",
    [TRACER_HWLAT] = "hwlat",
};

/* The Kconfig option behind each, for the sentence that says why a kernel has none. */
static const char *const tracer_configs[_TRACER_MAX] = {
    [TRACER_TIMERLAT] = "CONFIG_TIMERLAT_TRACER",
    [TRACER_OSNOISE] = "CONFIG_OSNOISE_TRACER",
    [TRACER_HWLAT] = "CONFIG_HWLAT_TRACER",
};

const char *latency_tracer_name(LatencyTracer t)
{
        return t < _TRACER_MAX ? tracer_names[t] : NULL;
}

/* Whether a file must exist for the tracer: the others are saved when the kernel has them. */
static bool file_needed(LatencyTracer t, unsigned file)
{
        switch (file) {
        case TIMERLAT_TRACER:
        case TIMERLAT_TRACING_ON:
                return true;
        case TIMERLAT_CPUS:
                return t != TRACER_HWLAT;
        case TIMERLAT_PERIOD:
                return t == TRACER_TIMERLAT;
        case TIMERLAT_OSNOISE_PERIOD:
        case TIMERLAT_OSNOISE_RUNTIME:
                return t == TRACER_OSNOISE;
        case TIMERLAT_CPUMASK:
                return t == TRACER_HWLAT;
        default:
                return false;
        }
}

/* The option that makes the tracer dispatch its own per-CPU threads (6.3+); off, nothing is measured. */
#define WORKLOAD_OPTION "OSNOISE_WORKLOAD"

static char *path_of(const char *dir, unsigned file)
{
        return xasprintf("%s/%s", dir, files[file]);
}

int timerlat_probe(const char *dir, LatencyTracer tracer, char **ret_why)
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
        if (!strv_contains(l, tracer_names[tracer])) {
                *ret_why = xasprintf("this kernel has no %s tracer (built without %s)", tracer_names[tracer],
                                     tracer_configs[tracer]);
                return -EOPNOTSUPP;
        }
        return 0;
}

int timerlat_save(const char *dir, LatencyTracer tracer, TimerlatState *ret, char **ret_error)
{
        TimerlatState st = {.tracer = tracer, .dir = xstrdup(dir)};
        int r;

        for (unsigned i = 0; i < _TIMERLAT_FILES; i++) {
                _cleanup_free_ char *p = path_of(dir, i);
                r = sys_read(p, &st.saved[i]);
                if (r == -ENOENT && !file_needed(tracer, i))
                        continue; /* older kernels, or another tracer's: nothing to save, nothing to set */
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

/* osnoise's runtime may not exceed its period, and the kernel checks each write against the other
 * value in force: whichever order keeps that true at every step. */
static int write_window(const TimerlatState *st, const char *period, const char *runtime, char **ret_error)
{
        _cleanup_free_ char *p = path_of(st->dir, TIMERLAT_OSNOISE_RUNTIME), *now = NULL;
        unsigned long long cur_runtime = 0, want_period = strtoull(period, NULL, 10);
        int r;

        if (sys_read(p, &now) >= 0)
                cur_runtime = strtoull(now, NULL, 10);
        if (want_period >= cur_runtime) {
                if ((r = write_file(st, TIMERLAT_OSNOISE_PERIOD, period, ret_error)) < 0)
                        return r;
                return write_file(st, TIMERLAT_OSNOISE_RUNTIME, runtime, ret_error);
        }
        if ((r = write_file(st, TIMERLAT_OSNOISE_RUNTIME, runtime, ret_error)) < 0)
                return r;
        return write_file(st, TIMERLAT_OSNOISE_PERIOD, period, ret_error);
}

int timerlat_start(const TimerlatState *st, const CpuSet *cpus, unsigned period_us, char **ret_error)
{
        _cleanup_free_ char *list = cpuset_format_list(cpus), *period = xasprintf("%u", period_us),
                            *mask = cpuset_format_mask(cpus), *window = xasprintf("%u", OSNOISE_WINDOW_US);
        int r;

        assert(st);

        if (st->tracer == TRACER_HWLAT) {
                /* hwlat takes its CPUs from the tracing cpumask, and its width and window as the kernel
                 * has them (500 ms of each second with interrupts off). */
                if ((r = write_file(st, TIMERLAT_CPUMASK, mask, ret_error)) < 0 ||
                    (r = write_file(st, TIMERLAT_TRACING_ON, "1", ret_error)) < 0 ||
                    (r = write_file(st, TIMERLAT_TRACER, tracer_names[st->tracer], ret_error)) < 0)
                        return r;
                return 0;
        }
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
        if ((r = write_file(st, TIMERLAT_CPUS, list, ret_error)) < 0)
                return r;
        if (st->tracer == TRACER_OSNOISE)
                r = write_window(st, window, window, ret_error);
        else
                r = write_file(st, TIMERLAT_PERIOD, period, ret_error);
        if (r < 0 || (r = write_file(st, TIMERLAT_TRACING_ON, "1", ret_error)) < 0 ||
            (r = write_file(st, TIMERLAT_TRACER, tracer_names[st->tracer], ret_error)) < 0)
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
                } else if (i == TIMERLAT_OSNOISE_PERIOD && st->saved[TIMERLAT_OSNOISE_RUNTIME]) {
                        _cleanup_free_ char *p2 = path_of(st->dir, TIMERLAT_OSNOISE_RUNTIME), *now2 = NULL;
                        if (sys_read(p, &now) >= 0 && sys_read(p2, &now2) >= 0 &&
                            streq(strstrip(now), st->saved[i]) &&
                            streq(strstrip(now2), st->saved[TIMERLAT_OSNOISE_RUNTIME]))
                                continue;
                        r = write_window(st, st->saved[i], st->saved[TIMERLAT_OSNOISE_RUNTIME], ret_error);
                } else if (i == TIMERLAT_OSNOISE_RUNTIME && st->saved[TIMERLAT_OSNOISE_PERIOD]) {
                        continue; /* with the period */
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

int timerlat_journal_write(const TimerlatState *st, const char *path)
{
        json_object *o = json_object_new_object(), *f = json_object_new_object();
        TaskInfo self;
        char start[32] = "";
        int r;

        assert(st);
        if (task_info((unsigned)getpid(), &self) >= 0)
                snprintf(start, sizeof start, "%llu", self.starttime);
        json_object_object_add(o, "pid", json_object_new_int((int)getpid()));
        json_object_object_add(o, "starttime", json_object_new_string(start));
        json_object_object_add(o, "dir", json_object_new_string(st->dir));
        json_object_object_add(o, "tracer", json_object_new_string(tracer_names[st->tracer]));
        for (unsigned i = 0; i < _TIMERLAT_FILES; i++)
                if (st->saved[i])
                        json_object_object_add(f, files[i], json_object_new_string(st->saved[i]));
        json_object_object_add(o, "files", f);
        r = write_file_atomic(path, json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY), false);
        json_object_put(o);
        return r;
}

static json_object *journal_load(const char *path, int *ret)
{
        _cleanup_free_ char *text = NULL;
        json_object *o;

        *ret = read_full_file(path, &text, NULL);
        if (*ret < 0)
                return NULL;
        o = json_tokener_parse(text);
        if (!o || !json_object_is_type(o, json_type_object)) {
                json_object_put(o);
                *ret = -EBADMSG;
                return NULL;
        }
        return o;
}

unsigned timerlat_journal_owner(const char *path)
{
        json_object *o, *pid, *start;
        TaskInfo t;
        unsigned owner = 0;
        int r;

        o = journal_load(path, &r);
        if (!o)
                return 0;
        if (json_object_object_get_ex(o, "pid", &pid) && json_object_is_type(pid, json_type_int) &&
            json_object_object_get_ex(o, "starttime", &start) &&
            json_object_is_type(start, json_type_string) && json_object_get_int(pid) > 0 &&
            task_info((unsigned)json_object_get_int(pid), &t) >= 0) {
                char now[32];
                snprintf(now, sizeof now, "%llu", t.starttime);
                if (streq(now, json_object_get_string(start)))
                        owner = t.pid;
        }
        json_object_put(o);
        return owner;
}

int timerlat_journal_restore(const char *path, const char *dir, char **ret_error)
{
        _cleanup_strv_free_ char **damaged = NULL;
        _cleanup_free_ char *tracer_path = xasprintf("%s/current_tracer", dir), *tracer = NULL;
        _cleanup_free_ char *ran = NULL;
        TimerlatState st = {};
        json_object *o, *f = NULL, *t;
        int r;

        o = journal_load(path, &r);
        if (!o && r == -ENOENT)
                return 0;
        if (!o && r != -EBADMSG) {
                *ret_error = xasprintf("cannot read %s: %s", path, strerror(-r));
                return r;
        }
        /* Which tracer the run started; journals from before osnoise and hwlat name none. */
        if (o && json_object_object_get_ex(o, "tracer", &t) && json_object_is_type(t, json_type_string))
                ran = xstrdup(json_object_get_string(t));
        else
                ran = xstrdup(tracer_names[TRACER_TIMERLAT]);
        if (o && (!json_object_object_get_ex(o, "files", &f) || !json_object_is_type(f, json_type_object))) {
                strv_push(&damaged, xstrdup("files"));
                f = NULL;
        }
        for (unsigned i = 0; f && i < _TIMERLAT_FILES; i++) {
                json_object *v;
                if (!json_object_object_get_ex(f, files[i], &v))
                        continue; /* a file the kernel did not have */
                if (json_object_is_type(v, json_type_string))
                        st.saved[i] = xstrdup(json_object_get_string(v));
                else
                        strv_push(&damaged, xstrdup(files[i]));
        }
        json_object_put(o);
        if (o && f && !st.saved[TIMERLAT_TRACER] && !strv_contains(damaged, files[TIMERLAT_TRACER]))
                strv_push(&damaged, xstrdup(files[TIMERLAT_TRACER]));
        /* Said out loud: what the damage cost. Without the tracer's saved value nothing is put back (the
         * tracer would stay on with the others reset under it). */
        if (!o || strv_contains(damaged, "files") || strv_contains(damaged, files[TIMERLAT_TRACER])) {
                _cleanup_free_ char *what = o ? g_strjoinv(", ", damaged) : xstrdup("not JSON");
                int u = unlink(path) < 0 ? -errno : 0;
                *ret_error =
                    xasprintf("%s is damaged (%s): what an interrupted rtctl latency changed in tracefs "
                              "is not known and is not put back; %s",
                              path, what, u < 0 ? "it could not be removed" : "removed");
                timerlat_state_clear(&st);
                return -EBADMSG;
        }
        /* Someone started tracing since the kill: theirs now, left alone. */
        if (sys_read(tracer_path, &tracer) >= 0 && !streq(strstrip(tracer), ran) &&
            !streq(tracer, st.saved[TIMERLAT_TRACER])) {
                *ret_error =
                    xasprintf("an interrupted rtctl latency left %s, but the %s tracer is in use now: "
                              "tracefs left as it is, the journal removed",
                              path, tracer);
                (void)unlink(path);
                timerlat_state_clear(&st);
                return 2;
        }
        st.dir = xstrdup(dir);
        r = timerlat_restore(&st, ret_error);
        timerlat_state_clear(&st);
        if (r < 0)
                return r;
        (void)unlink(path);
        if (damaged) {
                _cleanup_free_ char *what = g_strjoinv(", ", damaged);
                *ret_error = xasprintf("%s was damaged: %s not put back", path, what);
        }
        return 1;
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

unsigned timerlat_threshold_us(const TimerlatState *st)
{
        unsigned us = 0;

        assert(st);
        if (st->saved[TIMERLAT_THRESH] && safe_atou(st->saved[TIMERLAT_THRESH], &us) >= 0 && us > 0)
                return us;
        return st->tracer == TRACER_HWLAT ? 10 : 0;
}

/* Past the CPU field and the timestamp: the text after "[CPU] flags TIMESTAMP: ", or NULL. */
static const char *after_timestamp(const char *line, unsigned *ret_cpu)
{
        const char *p = strchr(line, '['), *q;
        unsigned cpu = 0;

        if (line[0] == '#' || !p || !isdigit((unsigned char)p[1]))
                return NULL;
        for (p++; isdigit((unsigned char)*p); p++)
                cpu = cpu * 10 + (unsigned)(*p - '0');
        if (*p != ']')
                return NULL;
        q = strstr(p, ": ");
        if (!q)
                return NULL;
        *ret_cpu = cpu;
        return skip_spaces(q + 2);
}

/* The next unsigned decimal field at *p, moving past it. */
static bool next_u64(const char **p, uint64_t *ret)
{
        char *end;

        *p = skip_spaces(*p);
        if (!isdigit((unsigned char)**p))
                return false;
        errno = 0;
        *ret = strtoull(*p, &end, 10);
        if (errno)
                return false;
        *p = end;
        return true;
}

bool osnoise_parse_line(const char *line, unsigned *ret_cpu, OsnoiseSample *ret)
{
        const char *p;
        OsnoiseSample s = {};
        unsigned cpu;
        char *end;

        assert(line);
        p = after_timestamp(line, &cpu);
        if (!p || !next_u64(&p, &s.runtime_us) || !next_u64(&p, &s.noise_us))
                return false;
        /* % of CPU available: a decimal fraction, read to move past it. */
        p = skip_spaces(p);
        errno = 0;
        (void)strtod(p, &end);
        if (errno || end == p)
                return false;
        p = end;
        if (!next_u64(&p, &s.max_single_us) || !next_u64(&p, &s.hw) || !next_u64(&p, &s.nmi) ||
            !next_u64(&p, &s.irq) || !next_u64(&p, &s.softirq) || !next_u64(&p, &s.thread))
                return false;
        if (*skip_spaces(p) != 0 || s.runtime_us == 0)
                return false;
        *ret_cpu = cpu;
        *ret = s;
        return true;
}

void osnoise_sample_add(OsnoiseSample *into, const OsnoiseSample *s)
{
        into->runtime_us += s->runtime_us;
        into->noise_us += s->noise_us;
        into->max_single_us = MAX(into->max_single_us, s->max_single_us);
        into->hw += s->hw;
        into->nmi += s->nmi;
        into->irq += s->irq;
        into->softirq += s->softirq;
        into->thread += s->thread;
}

bool hwlat_parse_line(const char *line, unsigned *ret_cpu, uint64_t *ret_ns, bool *ret_nmi)
{
        const char *p, *q;
        uint64_t inner, outer;
        unsigned cpu;

        assert(line);
        p = after_timestamp(line, &cpu);
        if (!p || *p != '#')
                return false;
        q = strstr(p, "inner/outer(us):");
        if (!q)
                return false;
        q += strlen("inner/outer(us):");
        if (!next_u64(&q, &inner) || *q != '/')
                return false;
        q++;
        if (!next_u64(&q, &outer))
                return false;
        *ret_cpu = cpu;
        *ret_ns = MAX(inner, outer) * 1000;
        *ret_nmi = strstr(q, "nmi-count:") != NULL;
        return true;
}

bool timerlat_parse_line(const char *line, unsigned *ret_cpu, uint64_t *ret_ns)
{
        const char *q;
        unsigned cpu;
        uint64_t ns;

        assert(line);
        q = after_timestamp(line, &cpu);
        if (!q || !(q = strstr(q, " context ")))
                return false;
        q = skip_spaces(q + strlen(" context "));
        if (!startswith(q, "thread "))
                return false;
        q = skip_spaces(q + strlen("thread "));
        if (!startswith(q, "timer_latency "))
                return false;
        q += strlen("timer_latency ");
        if (!next_u64(&q, &ns) || !startswith(skip_spaces(q), "ns"))
                return false;
        *ret_cpu = cpu;
        *ret_ns = ns;
        return true;
}
