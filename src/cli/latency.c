/* SPDX-License-Identifier: GPL-2.0-or-later */
/* latency: wake-up latency per CPU, measured with the kernel's timerlat tracer or rtctl's own timer
 * processes; what interrupts a busy thread (osnoise); the hardware's own gaps (hwlat). --compare
 * alternates two profiles in short slices so both see the same conditions. */
#include <math.h>
#include <sys/resource.h>

#include "cli/args.h"
#include "cli/latency.h"
#include "cli/local.h"
#include "core/config.h"
#include "core/policy.h"
#include "core/topology.h"

#define PERIOD_US       1000u
#define SETTLE_MS       1000u
#define DEFAULT_SLICE_S 5u

typedef struct Options {
        LatencyMethod method;
        const char *cpus;
        unsigned duration_ms;
        unsigned slice_ms;
        const char *compare;
        const char *svg;
} Options;

/* The measurements of one profile (or of the machine as it is, profile NULL). */
typedef struct Run {
        char *profile;
        unsigned ms;          /* measured, settling left out */
        LatencyHist *hists;   /* one per measured CPU, in CPU order */
        OsnoiseSample *noise; /* osnoise's totals, one per measured CPU */
} Run;

#define USAGE                                                                                               \
        "latency [--cpus isolated|housekeeping|all|LIST] [--duration 30s]\n"                                \
        "                     [--method auto|timerlat|osnoise|hwlat|timer] [--compare PROFILE [--slice "    \
        "5s]]\n"                                                                                            \
        "                     [--svg FILE] [--json]"

/* "30", "30s", "1500ms", "2m". */
static int parse_duration_ms(const char *s, unsigned *ret)
{
        unsigned n, mult = 1000;
        _cleanup_free_ char *num = xstrdup(s);
        size_t l = strlen(num);

        if (endswith(num, "ms")) {
                mult = 1;
                num[l - 2] = 0;
        } else if (endswith(num, "s"))
                num[l - 1] = 0;
        else if (endswith(num, "m")) {
                mult = 60000;
                num[l - 1] = 0;
        }
        if (safe_atou(num, &n) < 0 || n == 0 || n > UINT32_MAX / 60000)
                return -EINVAL;
        *ret = n * mult;
        return 0;
}

/* true with o filled, or false when the verb returns a->exit. */
static bool parse_args(CliArgs *a, Options *o)
{
        enum { ARG_CPUS = CLI_OPT_VERB, ARG_DURATION, ARG_METHOD, ARG_COMPARE, ARG_SLICE, ARG_SVG };
        static const struct option options[] = {
            {"cpus", required_argument, NULL, ARG_CPUS},
            {"duration", required_argument, NULL, ARG_DURATION},
            {"method", required_argument, NULL, ARG_METHOD},
            {"compare", required_argument, NULL, ARG_COMPARE},
            {"slice", required_argument, NULL, ARG_SLICE},
            {"svg", required_argument, NULL, ARG_SVG},
            {},
        };
        int r;

        *o = (Options){.method = LATENCY_AUTO, .duration_ms = 30000, .slice_ms = DEFAULT_SLICE_S * 1000};
        a->options = options;
        while ((r = cli_next_option(a)) > 0) {
                const char *v = a->value;
                switch (r) {
                case ARG_CPUS:
                        o->cpus = v;
                        break;
                case ARG_COMPARE:
                        o->compare = v;
                        break;
                case ARG_SVG:
                        o->svg = v;
                        break;
                case ARG_METHOD:
                        if (streq(v, "auto"))
                                o->method = LATENCY_AUTO;
                        else if (streq(v, "timerlat"))
                                o->method = LATENCY_TIMERLAT;
                        else if (streq(v, "osnoise"))
                                o->method = LATENCY_OSNOISE;
                        else if (streq(v, "hwlat"))
                                o->method = LATENCY_HWLAT;
                        else if (streq(v, "timer"))
                                o->method = LATENCY_TIMER;
                        else {
                                cli_usage_error(
                                    a, "--method is auto, timerlat, osnoise, hwlat or timer, not %s", v);
                                return false;
                        }
                        break;
                case ARG_DURATION:
                case ARG_SLICE:
                        if (parse_duration_ms(v, r == ARG_SLICE ? &o->slice_ms : &o->duration_ms) < 0) {
                                cli_usage_error(a, "%s takes a duration such as 30s, 2m or 500ms, not %s",
                                                r == ARG_SLICE ? "--slice" : "--duration", v);
                                return false;
                        }
                        break;
                }
        }
        if (r == 0 && o->compare && o->method == LATENCY_HWLAT) {
                cli_usage_error(a, "--method hwlat measures the hardware beneath every profile: --compare "
                                   "has nothing to compare");
                return false;
        }
        return r == 0 && cli_args_count(a, 0, 0);
}

/* ---- which method ------------------------------------------------------------------------------- */

static int timer_allowed(char **ret_error)
{
        struct rlimit rl;

        if (geteuid() == 0)
                return 0;
        if (getrlimit(RLIMIT_RTPRIO, &rl) == 0 && rl.rlim_cur >= LATENCY_PRIORITY)
                return 0;
        *ret_error =
            xasprintf("The timer method runs at SCHED_FIFO %d, and RLIMIT_RTPRIO is %llu for this user; "
                      "run with sudo, or allow real-time priority (rtprio 95 for the audio group in "
                      "/etc/security/limits.d, then log in again)",
                      LATENCY_PRIORITY, (unsigned long long)rl.rlim_cur);
        return -EPERM;
}

static int tracer_allowed(LatencyMethod method, char **ret_dir, char **ret_error)
{
        LatencyTracer t = latency_method_tracer(method);
        _cleanup_free_ char *why = NULL;
        int r;

        if (geteuid() != 0) {
                *ret_error = xasprintf(
                    "The %s method needs tracefs, which needs root; run with sudo%s", latency_tracer_name(t),
                    t == TRACER_TIMERLAT
                        ? ", or use --method timer (needs real-time priority: RLIMIT_RTPRIO of 90 or more)"
                        : "");
                return -EPERM;
        }
        r = latency_tracefs(ret_dir, ret_error);
        if (r < 0)
                return r;
        r = timerlat_probe(*ret_dir, t, &why);
        if (r < 0) {
                /* Debian's generic kernels have none of the three; its -rt flavour has them all. */
                *ret_error = xasprintf("Cannot use %s: %s%s", latency_tracer_name(t), why,
                                       t == TRACER_TIMERLAT ? "; use --method timer"
                                                            : " (a PREEMPT_RT kernel such as Debian's "
                                                              "linux-image-rt-amd64 has it)");
                free(TAKE_PTR(*ret_dir));
        }
        return r;
}

static int choose_method(LatencyMethod *method, char **ret_tracefs, char **ret_error)
{
        _cleanup_free_ char *err = NULL;

        switch (*method) {
        case LATENCY_TIMERLAT:
        case LATENCY_OSNOISE:
        case LATENCY_HWLAT:
                return tracer_allowed(*method, ret_tracefs, ret_error);
        case LATENCY_TIMER:
                return timer_allowed(ret_error);
        default:
                if (tracer_allowed(LATENCY_TIMERLAT, ret_tracefs, &err) >= 0) {
                        *method = LATENCY_TIMERLAT;
                        return 0;
                }
                *method = LATENCY_TIMER;
                return timer_allowed(ret_error);
        }
}

/* ---- which CPUs --------------------------------------------------------------------------------- */

/* A string property of rtctld; EXIT_NO_DAEMON (quietly when quiet) when it does not run. */
static int read_string(Cli *c, const char *prop, char **ret, bool quiet)
{
        sd_bus_message *reply = NULL;
        const char *s;
        int code;

        code = cli_get_property(c, prop, "s", &reply, quiet);
        if (code != EXIT_OK)
                return code;
        code = sd_bus_message_read(reply, "s", &s) > 0 ? EXIT_OK : EXIT_FAILED;
        if (code == EXIT_OK)
                *ret = xstrdup(s);
        sd_bus_message_unref(reply);
        return code;
}

/* isolated/housekeeping from the profile rtctld would apply, when it does not run. */
static int profile_cpus(const Topology *t, bool isolated, CpuSet **ret, char **ret_error)
{
        _cleanup_strv_free_ char **search = conf_search_path();
        _cleanup_free_ char *name = local_default_profile();
        _cleanup_policy_ Policy *p = NULL;
        _cleanup_cpuset_ CpuSet *iso = NULL, *hk = NULL;
        int r;

        r = policy_load(search, name, &p, ret_error);
        if (r < 0)
                return r;
        r = policy_cpus(p, t, &iso, &hk, ret_error);
        if (r < 0)
                return r;
        *ret = isolated ? TAKE_PTR(iso) : TAKE_PTR(hk);
        return 0;
}

static int resolve_cpus(Cli *c, const char *spec, const Topology *t, CpuSet **ret)
{
        _cleanup_free_ char *err = NULL, *list = NULL;
        _cleanup_cpuset_ CpuSet *set = NULL;
        bool word = !spec || streq(spec, "isolated") || streq(spec, "housekeeping");
        bool isolated = !spec || streq(spec, "isolated");

        if (spec && streq(spec, "all"))
                set = cpuset_dup(t->online);
        else if (word) {
                if (read_string(c, isolated ? "IsolatedCPUs" : "HousekeepingCPUs", &list, true) == EXIT_OK) {
                        if (isempty(list))
                                set = cpuset_new(t->n_cpus);
                        else if (cpuset_parse_list(list, t->n_cpus, &set, &err) < 0) {
                                fprintf(stderr, "rtctld reports CPUs %s: %s\n", list, err);
                                return EXIT_FAILED;
                        }
                } else if (profile_cpus(t, isolated, &set, &err) < 0) {
                        fprintf(stderr, "Cannot tell the %s CPUs: %s\n",
                                isolated ? "isolated" : "housekeeping", err);
                        return EXIT_INVALID;
                }
                /* With nothing isolated the default is every CPU; asked for by name, it is an error. */
                if (cpuset_empty(set) && !spec)
                        return resolve_cpus(c, "all", t, ret);
                if (cpuset_empty(set)) {
                        fprintf(stderr, "No CPUs are %s in the profile in force.\n", spec);
                        return EXIT_FAILED;
                }
        } else if (cpuset_parse_list(spec, t->n_cpus, &set, &err) < 0) {
                fprintf(stderr, "--cpus %s: %s\n", spec, err);
                return EXIT_USAGE;
        }
        if (!cpuset_subset(set, t->online)) {
                _cleanup_free_ char *s = cpuset_format_list(set);
                fprintf(stderr, "--cpus %s: not every CPU of %s is online.\n", spec, s);
                return EXIT_USAGE;
        }
        *ret = TAKE_PTR(set);
        return EXIT_OK;
}

/* ---- profiles ----------------------------------------------------------------------------------- */

static int switch_profile(Cli *c, const char *name)
{
        sd_bus_message *reply = NULL;
        int code;

        code = cli_call(c, "SetProfile", &reply, false, "s", name);
        sd_bus_message_unref(reply);
        return code;
}

typedef struct AttachCtx {
        Cli *cli;
} AttachCtx;

/* A timer process for an isolated CPU goes there the way an audio server does. It exits at the end of
 * the slice, and rtctld forgets it. */
static int attach_worker(pid_t pid, void *userdata, char **ret_error)
{
        AttachCtx *a = userdata;
        sd_bus_message *reply = NULL;
        int code;

        code = cli_call(a->cli, "AttachProcess", &reply, false, "u", (unsigned)pid);
        sd_bus_message_unref(reply);
        if (code != EXIT_OK) {
                *ret_error = xasprintf("rtctld could not attach the measurement on an isolated CPU");
                return -EPERM;
        }
        return 0;
}

/* ---- output ------------------------------------------------------------------------------------- */

static const char *method_name(LatencyMethod m)
{
        return m == LATENCY_TIMER ? "timer" : latency_tracer_name(latency_method_tracer(m));
}

/* What one sample of the histograms is, for the verdict: the worst of it costs the audio cycle. */
static const char *sample_name(LatencyMethod m)
{
        return m == LATENCY_OSNOISE ? "interruption" : m == LATENCY_HWLAT ? "gap" : "wake-up";
}

static char *series_label(const Run *r, unsigned cpu, bool with_profile)
{
        return with_profile && r->profile ? xasprintf("%s cpu%u", r->profile, cpu) : xasprintf("cpu%u", cpu);
}

static void print_table(const Run *runs, size_t n_runs, const CpuSet *cpus, bool compare, LatencyMethod m)
{
        _cleanup_strv_free_ char **cells = NULL;
        size_t rows = 0;

        /* Side by side: each CPU's line for every profile together. */
        unsigned i = 0;
        FOREACH_CPU (cpu, cpus) {
                for (size_t r = 0; r < n_runs; r++) {
                        LatencyStats s;
                        latency_hist_stats(&runs[r].hists[i], &s);
                        if (compare)
                                strv_push(&cells, xstrdup(runs[r].profile));
                        strv_push(&cells, xasprintf("%d", cpu));
                        strv_push(&cells, xasprintf("%llu", (unsigned long long)s.samples));
                        strv_push(&cells, xasprintf("%.1f", s.avg_us));
                        strv_push(&cells, xasprintf("%.1f", s.p99_us));
                        strv_push(&cells, xasprintf("%.1f", s.p99_9_us));
                        strv_push(&cells, xasprintf("%.1f", s.max_us));
                        rows++;
                }
                i++;
        }
        /* osnoise: one sample per window, its longest interruption; hwlat: one per gap over the threshold.
         */
        const char *header[] = {
            "PROFILE", "CPU",    m == LATENCY_OSNOISE ? "WINDOWS" : m == LATENCY_HWLAT ? "GAPS" : "SAMPLES",
            "AVG us",  "P99 us", "P99.9 us",
            "MAX us"};
        cli_print_table(compare ? header : header + 1, compare ? 7 : 6, cells, rows);
}

/* osnoise: how much of each CPU the busy thread had, and what took the rest, counted by kind. */
static void print_noise(const Run *runs, size_t n_runs, const CpuSet *cpus, bool compare)
{
        _cleanup_strv_free_ char **cells = NULL;
        size_t rows = 0;
        unsigned i = 0;

        FOREACH_CPU (cpu, cpus) {
                for (size_t r = 0; r < n_runs; r++) {
                        const OsnoiseSample *n = &runs[r].noise[i];
                        if (compare)
                                strv_push(&cells, xstrdup(runs[r].profile));
                        strv_push(&cells, xasprintf("%d", cpu));
                        strv_push(&cells, n->runtime_us
                                              ? xasprintf("%.4f", 100.0 - 100.0 * (double)n->noise_us /
                                                                              (double)n->runtime_us)
                                              : xstrdup("-"));
                        strv_push(&cells, xasprintf("%llu", (unsigned long long)n->noise_us));
                        strv_push(&cells, xasprintf("%llu", (unsigned long long)n->hw));
                        strv_push(&cells, xasprintf("%llu", (unsigned long long)n->nmi));
                        strv_push(&cells, xasprintf("%llu", (unsigned long long)n->irq));
                        strv_push(&cells, xasprintf("%llu", (unsigned long long)n->softirq));
                        strv_push(&cells, xasprintf("%llu", (unsigned long long)n->thread));
                        rows++;
                }
                i++;
        }
        static const char *const header[] = {"PROFILE", "CPU", "AVAILABLE %", "NOISE us", "HW",
                                             "NMI",     "IRQ", "SOFTIRQ",     "THREAD"};
        printf("\nWhat took the CPU from a busy thread (time, and how often each kind did):\n");
        cli_print_table(compare ? header : header + 1, compare ? 9 : 8, cells, rows);
}

static const unsigned verdict_rates[] = {44100, 48000, 96000};

/* The worst wake-up of a run over its CPUs: the audio threads may run on any of them. */
static double run_worst_us(const Run *r, unsigned n_cpus, uint64_t *ret_samples)
{
        double worst = 0;

        *ret_samples = 0;
        for (unsigned i = 0; i < n_cpus; i++) {
                LatencyStats s;
                latency_hist_stats(&r->hists[i], &s);
                worst = MAX(worst, s.max_us);
                *ret_samples += s.samples;
        }
        return worst;
}

/* hwlat: the floor under every profile, in one sentence. */
static void print_floor(const Run *run, unsigned n_cpus, unsigned threshold_us)
{
        uint64_t gaps;
        double worst = run_worst_us(run, n_cpus, &gaps);

        if (gaps == 0)
                printf("\nNo gap of %u µs or more in %.0f s: no hardware noise shows at this threshold.\n",
                       threshold_us, run->ms / 1000.0);
        else
                printf("\nHardware noise floor: %.0f µs (%llu gaps of %u µs or more in %.0f s): SMIs, "
                       "firmware or "
                       "a hypervisor, which no profile removes; every wake-up may take this much longer.\n",
                       worst, (unsigned long long)gaps, threshold_us, run->ms / 1000.0);
}

/* "Verdict (a period is safe when the worst wake-up takes at most 25 % of it):" and a line per rate. */
static void print_verdict(const Run *runs, size_t n_runs, unsigned n_cpus, bool compare, LatencyMethod m)
{
        printf("\nVerdict (a period is safe when the worst %s measured takes at most %.0f %% of it):\n",
               sample_name(m), 100 * LATENCY_SAFE_SHARE);
        for (size_t r = 0; r < n_runs; r++) {
                uint64_t samples;
                double worst = run_worst_us(&runs[r], n_cpus, &samples);
                if (samples == 0)
                        continue;
                for (size_t k = 0; k < ELEMENTSOF(verdict_rates); k++) {
                        _cleanup_free_ char *v = latency_verdict(worst, verdict_rates[k], sample_name(m));
                        printf("  %s%s%s\n", compare ? runs[r].profile : "", compare ? ": " : "", v);
                }
        }
}

static json_object *verdict_json(const Run *r, unsigned n_cpus)
{
        json_object *a = json_object_new_array();
        uint64_t samples;
        double worst = run_worst_us(r, n_cpus, &samples);

        for (size_t k = 0; samples > 0 && k < ELEMENTSOF(verdict_rates); k++) {
                json_object *v = json_object_new_object();
                unsigned f = latency_safe_period(worst, verdict_rates[k]);
                json_object_object_add(v, "rate", json_object_new_int((int)verdict_rates[k]));
                json_object_object_add(v, "safe_frames", f ? json_object_new_int((int)f) : NULL);
                json_object_object_add(v, "worst_us", json_object_new_double(worst));
                json_object_array_add(a, v);
        }
        return a;
}

/* Rows of power-of-two ranges, one column per series: count and a bar, log-scaled. */
static void print_histogram(const LatencySeries *series, size_t n)
{
        _cleanup_strv_free_ char **cells = NULL;
        _cleanup_strv_free_ char **header = NULL;
        unsigned lo_row = UINT32_MAX, hi_row = 0, n_rows = 0;
        uint64_t top = 1;
        size_t rows = 0;

        for (unsigned lo = 0, row = 0; lo < LATENCY_HIST_US; lo = lo ? lo * 2 : 1, row++) {
                unsigned hi = lo ? lo * 2 : 1;
                hi = hi >= LATENCY_HIST_US ? LATENCY_HIST_US + 1 : hi;
                for (size_t k = 0; k < n; k++) {
                        uint64_t c = latency_hist_range(series[k].hist, lo, hi);
                        top = MAX(top, c);
                        if (c) {
                                lo_row = MIN(lo_row, row);
                                hi_row = MAX(hi_row, row);
                        }
                }
                n_rows = row + 1;
        }
        if (lo_row == UINT32_MAX)
                return;
        strv_push(&header, xstrdup("LATENCY us"));
        for (size_t k = 0; k < n; k++)
                strv_push(&header, xstrdup(series[k].label));
        for (unsigned lo = 0, row = 0; row < n_rows; lo = lo ? lo * 2 : 1, row++) {
                unsigned hi = lo ? lo * 2 : 1;
                bool last = hi >= LATENCY_HIST_US;
                if (row < lo_row || row > hi_row)
                        continue;
                strv_push(&cells, last ? xasprintf("%u-", lo) : xasprintf("%u-%u", lo, hi));
                for (size_t k = 0; k < n; k++) {
                        uint64_t c = latency_hist_range(series[k].hist, lo, last ? LATENCY_HIST_US + 1 : hi);
                        int bar = c ? (int)ceil(20.0 * log10((double)c + 1) / log10((double)top + 1)) : 0;
                        strv_push(&cells, bar ? xasprintf("%8llu %.*s", (unsigned long long)c, bar,
                                                          "####################")
                                              : xasprintf("%8llu", (unsigned long long)c));
                }
                rows++;
        }
        putchar('\n');
        cli_print_table((const char *const *)header, n + 1, cells, rows);
}

static json_object *noise_json(const OsnoiseSample *n)
{
        json_object *o = json_object_new_object();

        json_object_object_add(o, "runtime_us", json_object_new_int64((int64_t)n->runtime_us));
        json_object_object_add(o, "noise_us", json_object_new_int64((int64_t)n->noise_us));
        json_object_object_add(o, "max_single_us", json_object_new_int64((int64_t)n->max_single_us));
        json_object_object_add(o, "hw", json_object_new_int64((int64_t)n->hw));
        json_object_object_add(o, "nmi", json_object_new_int64((int64_t)n->nmi));
        json_object_object_add(o, "irq", json_object_new_int64((int64_t)n->irq));
        json_object_object_add(o, "softirq", json_object_new_int64((int64_t)n->softirq));
        json_object_object_add(o, "thread", json_object_new_int64((int64_t)n->thread));
        return o;
}

static json_object *runs_json(const Options *o, LatencyMethod method, const CpuSet *cpus, const Run *runs,
                              size_t n_runs, unsigned threshold_us)
{
        json_object *top = json_object_new_object(), *a = json_object_new_array();
        _cleanup_free_ char *list = cpuset_format_list(cpus);

        json_object_object_add(top, "method", json_object_new_string(method_name(method)));
        if (method == LATENCY_OSNOISE)
                json_object_object_add(top, "window_us", json_object_new_int((int)OSNOISE_WINDOW_US));
        else if (method != LATENCY_HWLAT)
                json_object_object_add(top, "period_us", json_object_new_int((int)PERIOD_US));
        if (method == LATENCY_OSNOISE || method == LATENCY_HWLAT)
                json_object_object_add(top, "threshold_us",
                                       threshold_us ? json_object_new_int((int)threshold_us) : NULL);
        json_object_object_add(top, "safe_share", json_object_new_double(LATENCY_SAFE_SHARE));
        json_object_object_add(top, "duration_s", json_object_new_double(o->duration_ms / 1000.0));
        if (o->compare)
                json_object_object_add(top, "slice_s", json_object_new_double(o->slice_ms / 1000.0));
        json_object_object_add(top, "cpus", json_object_new_string(list));
        for (size_t r = 0; r < n_runs; r++) {
                json_object *run = json_object_new_object(), *per = json_object_new_array();
                unsigned i = 0;
                json_object_object_add(run, "profile",
                                       runs[r].profile ? json_object_new_string(runs[r].profile) : NULL);
                json_object_object_add(run, "seconds", json_object_new_double(runs[r].ms / 1000.0));
                FOREACH_CPU (cpu, cpus) {
                        json_object *h = latency_hist_json(&runs[r].hists[i]);
                        json_object_object_add(h, "cpu", json_object_new_int(cpu));
                        if (method == LATENCY_OSNOISE)
                                json_object_object_add(h, "noise", noise_json(&runs[r].noise[i]));
                        i++;
                        json_object_array_add(per, h);
                }
                json_object_object_add(run, "cpus", per);
                if (method == LATENCY_HWLAT) {
                        uint64_t gaps;
                        double worst = run_worst_us(&runs[r], cpuset_count(cpus), &gaps);
                        json_object_object_add(run, "gaps", json_object_new_int64((int64_t)gaps));
                        json_object_object_add(run, "floor_us", json_object_new_double(worst));
                } else
                        json_object_object_add(run, "verdict", verdict_json(&runs[r], cpuset_count(cpus)));
                json_object_array_add(a, run);
        }
        json_object_object_add(top, "runs", a);
        return top;
}

static int write_svg(const char *path, const LatencySeries *series, size_t n, const char *title)
{
        _cleanup_free_ char *svg = latency_svg(series, n, title);
        _cleanup_fclose_ FILE *f = fopen(path, "we");

        if (!f || fputs(svg, f) < 0 || fflush(f) != 0) {
                fprintf(stderr, "Cannot write %s: %m\n", path);
                return EXIT_FAILED;
        }
        return EXIT_OK;
}

static int report(Cli *c, const Options *o, LatencyMethod method, const CpuSet *cpus, const Run *runs,
                  size_t n_runs, unsigned threshold_us)
{
        unsigned n_cpus = cpuset_count(cpus);
        size_t n = n_runs * n_cpus, k = 0;
        _cleanup_free_ LatencySeries *series = xmalloc0(sizeof(LatencySeries) * MAX(n, 1u));
        _cleanup_strv_free_ char **labels = NULL;
        _cleanup_free_ char *title = NULL, *timing = NULL, *list = cpuset_format_list(cpus);
        int code = EXIT_OK;

        unsigned i = 0;
        FOREACH_CPU (cpu, cpus) {
                for (size_t r = 0; r < n_runs; r++) {
                        char *l = series_label(&runs[r], (unsigned)cpu, o->compare);
                        strv_push(&labels, l);
                        series[k++] = (LatencySeries){.label = l, .hist = &runs[r].hists[i]};
                }
                i++;
        }
        if (method == LATENCY_OSNOISE)
                timing = threshold_us
                             ? xasprintf("busy in windows of %u ms, interruptions of %u µs and more",
                                         OSNOISE_WINDOW_US / 1000, threshold_us)
                             : xasprintf("busy in windows of %u ms, interruptions over the kernel's "
                                         "default threshold",
                                         OSNOISE_WINDOW_US / 1000);
        else if (method == LATENCY_HWLAT)
                timing =
                    xasprintf("interrupts off half of each second, gaps of %u µs and more", threshold_us);
        else
                timing = xasprintf("period %u µs", PERIOD_US);
        title = xasprintf("rtctl latency: %s method, %s, %.0f s per %s, CPUs %s", method_name(method),
                          timing, o->duration_ms / 1000.0,
                          o->compare ? "profile" : (method == LATENCY_HWLAT ? "run" : "CPU"), list);
        if (c->json)
                cli_print_json(runs_json(o, method, cpus, runs, n_runs, threshold_us));
        else {
                printf("%s\n\n", title + strlen("rtctl latency: "));
                print_table(runs, n_runs, cpus, o->compare, method);
                if (method == LATENCY_OSNOISE)
                        print_noise(runs, n_runs, cpus, o->compare);
                print_histogram(series, n);
                if (method == LATENCY_HWLAT)
                        print_floor(&runs[0], n_cpus, threshold_us);
                else
                        print_verdict(runs, n_runs, n_cpus, o->compare, method);
        }
        if (o->svg)
                code = write_svg(o->svg, series, n, title);
        /* hwlat counts only gaps over its threshold: none is a finding, not a failure. */
        for (size_t s = 0; method != LATENCY_HWLAT && s < n; s++)
                if (series[s].hist->count == 0) {
                        fprintf(stderr, "%s: no samples.\n", series[s].label);
                        code = EXIT_FAILED;
                }
        return code;
}

/* ---- the run ------------------------------------------------------------------------------------ */

static void run_clear(Run *r)
{
        free(r->profile);
        free(r->hists);
        free(r->noise);
}

static Run run_new(const char *profile, unsigned n_cpus)
{
        Run r = {.profile = profile ? xstrdup(profile) : NULL,
                 .hists = malloc(sizeof(LatencyHist) * n_cpus),
                 .noise = xmalloc0(sizeof(OsnoiseSample) * MAX(n_cpus, 1u))};

        if (!r.hists)
                abort();
        for (unsigned i = 0; i < n_cpus; i++)
                latency_hist_init(&r.hists[i]);
        return r;
}

/* Slices of each profile in turn until each has had its duration. Returns -EINTR, or an error with
 * *ret_code set; the caller switches back. */
static int measure_runs(Cli *c, const Options *o, LatencySlice *slice, Run *runs, size_t n_runs,
                        int *current, bool *answered, char **ret_error)
{
        unsigned left[2] = {o->duration_ms, o->duration_ms};
        int r;

        for (size_t k = 0; left[0] || (n_runs > 1 && left[1]); k++) {
                size_t i = n_runs > 1 ? k % 2 : 0;
                _cleanup_free_ char *iso = NULL;
                _cleanup_cpuset_ CpuSet *iso_set = NULL;
                if (!left[i])
                        continue;
                if (n_runs > 1 && *current != (int)i) {
                        /* Before the call: a call that failed on our side (a signal) may still have
                         * switched, and the way back must not be skipped. */
                        *current = (int)i;
                        *answered = false;
                        if (switch_profile(c, runs[i].profile) != EXIT_OK) {
                                if (latency_interrupted)
                                        return -EINTR;
                                *ret_error = xasprintf("cannot switch to profile %s", runs[i].profile);
                                return -EIO;
                        }
                        *answered = true;
                        if ((r = latency_interrupted ? -EINTR : 0) < 0)
                                return r;
                        struct timespec ts = {.tv_sec = SETTLE_MS / 1000,
                                              .tv_nsec = (SETTLE_MS % 1000) * 1000000L};
                        while (nanosleep(&ts, &ts) < 0 && !latency_interrupted)
                                ;
                        if (latency_interrupted)
                                return -EINTR;
                }
                /* Whatever rtctld isolates now: a timer process for such a CPU must be let in. */
                if (slice->method == LATENCY_TIMER &&
                    read_string(c, "IsolatedCPUs", &iso, true) == EXIT_OK && !isempty(iso))
                        (void)cpuset_parse_list(iso, slice->cpus->size, &iso_set, NULL);
                slice->attach_cpus = iso_set;
                slice->ms = n_runs > 1 ? MIN(o->slice_ms, left[i]) : left[i];
                slice->noise = runs[i].noise;
                r = latency_measure(slice, runs[i].hists, ret_error);
                slice->attach_cpus = NULL;
                if (r < 0)
                        return r;
                runs[i].ms += slice->ms;
                left[i] -= slice->ms;
        }
        return 0;
}

int verb_latency(Cli *c, int argc, char *argv[])
{
        _cleanup_topology_ Topology *topo = NULL;
        _cleanup_cpuset_ CpuSet *cpus = NULL;
        _cleanup_free_ char *tracefs = NULL, *err = NULL, *base = NULL, *active = NULL;
        CliArgs args = {.cli = c, .argc = argc, .argv = argv, .usage = USAGE};
        Options o;
        Run runs[2] = {};
        size_t n_runs = 1;
        int code, r, current = 0;
        bool answered = true;

        assert(c);
        assert(argv);

        if (!parse_args(&args, &o))
                return args.exit;
        r = topology_load(NULL, &topo);
        if (r < 0) {
                fprintf(stderr, "Cannot read the CPU topology: %s\n", strerror(-r));
                return EXIT_FAILED;
        }
        code = resolve_cpus(c, o.cpus, topo, &cpus);
        if (code != EXIT_OK)
                return code;
        if (choose_method(&o.method, &tracefs, &err) < 0) {
                fprintf(stderr, "%s\n", err);
                return EXIT_FAILED;
        }
        if (o.compare) {
                if ((code = read_string(c, "BaseProfile", &base, false)) != EXIT_OK ||
                    (code = read_string(c, "ActiveProfile", &active, false)) != EXIT_OK)
                        return code;
                if (!streq(base, active)) {
                        fprintf(stderr,
                                "Profile %s is held over %s: --compare switches the base profile, which "
                                "would not be in force. Release the hold first.\n",
                                active, base);
                        return EXIT_FAILED;
                }
                if (streq(base, o.compare)) {
                        fprintf(stderr, "Profile %s is already in force: compare it with another one.\n",
                                base);
                        return EXIT_USAGE;
                }
                n_runs = 2;
                runs[0] = run_new(base, cpuset_count(cpus));
                runs[1] = run_new(o.compare, cpuset_count(cpus));
        } else {
                (void)read_string(c, "ActiveProfile", &active, true);
                runs[0] = run_new(active, cpuset_count(cpus));
        }

        AttachCtx actx = {.cli = c};
        LatencySlice slice = {.method = o.method,
                              .cpus = cpus,
                              .period_us = PERIOD_US,
                              .tracefs = tracefs,
                              .attach = attach_worker,
                              .userdata = &actx};
        latency_catch_signals();
        r = measure_runs(c, &o, &slice, runs, n_runs, &current, &answered, &err);
        /* The machine ends in the profile it started in, interrupted or not. A switch whose answer a
         * signal cut short is still on its way (rtctld may be busy): asked again, the answer comes
         * after it, so that "everything put back" is said once it is. */
        latency_block_signals();
        if ((current != 0 || !answered) && switch_profile(c, base) != EXIT_OK) {
                fprintf(stderr, "Could not switch back to profile %s: rtctl profile %s\n", base, base);
                r = r < 0 ? r : -EIO;
        }
        if (r == -EINTR)
                fprintf(stderr, "Interrupted (%s); everything put back.\n", strsignal(latency_interrupted));
        else if (r < 0)
                fprintf(stderr, "rtctl latency: %s\n", strempty(err));
        code = r < 0 ? EXIT_FAILED : report(c, &o, o.method, cpus, runs, n_runs, slice.threshold_us);
        for (size_t i = 0; i < n_runs; i++)
                run_clear(&runs[i]);
        return code;
}
