/* SPDX-License-Identifier: GPL-2.0-or-later */
/* rtctl latency's arithmetic (src/core/latency.c: statistics, histogram, SVG) and its handling of
 * tracefs (src/core/timerlat.c) on a fixture tracefs: this host's kernel has no timerlat tracer, so the
 * save / start / restore sequence is checked here file by file. */
#include <json-c/json.h>
#include <math.h>

#include "core/latency.h"
#include "core/timerlat.h"
#include "shared/sysfs.h"
#include "test.h"

static LatencyHist h, h2;

static char *mfree_str(char *p)
{
        free(p);
        return NULL;
}

static bool near(double a, double b)
{
        return fabs(a - b) < 1e-9;
}

TEST(stats_of_an_even_latency)
{
        LatencyStats s;

        latency_hist_init(&h);
        for (int i = 0; i < 1000; i++)
                latency_hist_add(&h, 3700);
        latency_hist_stats(&h, &s);
        CHECK_INTEQ(s.samples, 1000);
        CHECK(near(s.avg_us, 3.7));
        CHECK(near(s.min_us, 3.7));
        CHECK(near(s.max_us, 3.7));
        /* Quantiles never read below the samples' average nor above their maximum. */
        CHECK(near(s.p50_us, 3.7));
        CHECK(near(s.p99_us, 3.7));
        CHECK(near(s.p99_9_us, 3.7));
}

TEST(quantiles_and_overflow)
{
        LatencyStats s;

        latency_hist_init(&h);
        for (int i = 0; i < 98; i++)
                latency_hist_add(&h, 5200);
        latency_hist_add(&h, 50100);
        latency_hist_add(&h, 20000000); /* 20 ms: past the histogram */
        latency_hist_stats(&h, &s);
        CHECK_INTEQ(s.samples, 100);
        CHECK_INTEQ(s.overflow, 1);
        CHECK(near(s.p50_us, 6));
        CHECK(near(s.p99_us, 51));
        CHECK(near(s.p99_9_us, 20000));
        CHECK(near(s.max_us, 20000));
        CHECK(near(s.avg_us, (98 * 5.2 + 50.1 + 20000) / 100));
        CHECK(s.max_us >= s.p99_9_us && s.p99_9_us >= s.p99_us && s.p99_us >= s.p50_us);
        CHECK_INTEQ(latency_hist_range(&h, 4, 8), 98);
        CHECK_INTEQ(latency_hist_range(&h, 32, 64), 1);
        CHECK_INTEQ(latency_hist_range(&h, 8192, LATENCY_HIST_US + 1), 1);
        CHECK_INTEQ(latency_hist_range(&h, 0, LATENCY_HIST_US), 99);
}

TEST(empty)
{
        LatencyStats s;

        latency_hist_init(&h);
        latency_hist_stats(&h, &s);
        CHECK_INTEQ(s.samples, 0);
        CHECK(s.max_us == 0 && s.avg_us == 0 && s.p99_us == 0);
}

TEST(merge_is_adding_every_sample)
{
        LatencyHist all;

        latency_hist_init(&h);
        latency_hist_init(&h2);
        latency_hist_init(&all);
        for (uint64_t ns = 100; ns < 3000000; ns = ns * 3 / 2) {
                latency_hist_add(ns % 2 ? &h : &h2, ns);
                latency_hist_add(&all, ns);
        }
        latency_hist_merge(&h, &h2);
        CHECK(memcmp(&h, &all, sizeof(h)) == 0);
}

TEST(verdict_in_frames)
{
        _cleanup_free_ char *a = NULL, *b = NULL, *c = NULL, *d = NULL;

        /* 64 frames at 48 kHz last 1333 µs: a quarter is 333 µs. */
        CHECK_INTEQ(latency_safe_period(212, 48000), 64);
        CHECK_INTEQ(latency_safe_period(333, 48000), 64);
        CHECK_INTEQ(latency_safe_period(334, 48000), 128);
        /* 16 frames at 96 kHz: 167 µs, a quarter 41.7 µs. */
        CHECK_INTEQ(latency_safe_period(40, 96000), 16);
        CHECK_INTEQ(latency_safe_period(0, 44100), 16);
        /* 4096 frames at 44.1 kHz: 92.9 ms, a quarter 23.2 ms. */
        CHECK_INTEQ(latency_safe_period(23000, 44100), 4096);
        CHECK_INTEQ(latency_safe_period(24000, 44100), 0);
        CHECK_INTEQ(latency_safe_period(10, 0), 0);
        a = latency_verdict(212, 48000, "wake-up");
        CHECK_STREQ(a, "48 kHz: 64 frames safe (worst wake-up 212 µs, 16 % of 1.33 ms)");
        b = latency_verdict(212, 44100, "wake-up");
        CHECK_STREQ(b, "44.1 kHz: 64 frames safe (worst wake-up 212 µs, 15 % of 1.45 ms)");
        c = latency_verdict(212, 96000, "wake-up");
        CHECK_STREQ(c, "96 kHz: 128 frames safe (worst wake-up 212 µs, 16 % of 1.33 ms)");
        d = latency_verdict(30000, 48000, "wake-up");
        CHECK_STREQ(d, "48 kHz: no period up to 4096 frames is safe (worst wake-up 30000 µs)");
}

TEST(json_has_the_buckets)
{
        json_object *o, *v, *a;

        latency_hist_init(&h);
        latency_hist_add(&h, 2500);
        latency_hist_add(&h, 2600);
        latency_hist_add(&h, 9000);
        o = latency_hist_json(&h);
        CHECK(json_object_object_get_ex(o, "samples", &v) && json_object_get_int(v) == 3);
        CHECK(json_object_object_get_ex(o, "max_us", &v) && near(json_object_get_double(v), 9.0));
        CHECK(json_object_object_get_ex(o, "p99_9_us", &v));
        CHECK(json_object_object_get_ex(o, "histogram", &a) && json_object_array_length(a) == 2);
        CHECK_STREQ(json_object_to_json_string_ext(json_object_array_get_idx(a, 0), JSON_C_TO_STRING_PLAIN),
                    "[2,2]");
        CHECK_STREQ(json_object_to_json_string_ext(json_object_array_get_idx(a, 1), JSON_C_TO_STRING_PLAIN),
                    "[9,1]");
        json_object_put(o);
}

static size_t occurrences(const char *s, const char *what)
{
        size_t n = 0;

        for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
                n++;
        return n;
}

TEST(svg)
{
        _cleanup_free_ char *svg = NULL;
        LatencySeries series[2] = {{"a<b & \"c\"", &h}, {"audio cpu1", &h2}};

        latency_hist_init(&h);
        latency_hist_init(&h2);
        for (int i = 0; i < 5000; i++) {
                latency_hist_add(&h, 4000 + (uint64_t)(i % 7) * 1000);
                latency_hist_add(&h2, 3000 + (uint64_t)(i % 3) * 1000);
        }
        latency_hist_add(&h, 30000000);
        svg = latency_svg(series, 2, "title <x>");
        CHECK(startswith(svg, "<?xml"));
        CHECK(endswith(svg, "</svg>\n"));
        CHECK_INTEQ(occurrences(svg, "<polyline"), 2);
        CHECK_INTEQ(occurrences(svg, "<svg"), 1);
        CHECK_CONTAINS(svg, "a&lt;b &amp; &quot;c&quot;");
        CHECK_CONTAINS(svg, "title &lt;x&gt;");
        /* The 30 ms sample is in the bar beyond the axis; counts on a log scale up to 10^4 (1667 at most).
         */
        CHECK_CONTAINS(svg, "&gt;50</text>");
        CHECK_CONTAINS(svg, ">1000</text>");
        CHECK_CONTAINS(svg, ">10000</text>");
        CHECK(!strstr(svg, ">100000</text>"));
        CHECK(!strstr(svg, "nan") && !strstr(svg, "inf"));
}

TEST(parse_trace_lines)
{
        unsigned cpu = 99;
        uint64_t ns = 0;

        CHECK(timerlat_parse_line("           <...>-867     [000] ....    54.029339: #1     context thread "
                                  "timer_latency     11700 ns",
                                  &cpu, &ns));
        CHECK_INTEQ(cpu, 0);
        CHECK_INTEQ(ns, 11700);
        CHECK(timerlat_parse_line(
            "    timerlat/12-868 [012] ..... 54.029353: #1     context thread timer_latency"
            "      9820 ns",
            &cpu, &ns));
        CHECK_INTEQ(cpu, 12);
        CHECK_INTEQ(ns, 9820);
        /* The IRQ's sample, headers, and anything else are not thread wake-ups. */
        CHECK(!timerlat_parse_line("          <idle>-0       [000] d.h1    54.029328: #1     context    irq "
                                   "timer_latency       932 ns",
                                   &cpu, &ns));
        CHECK(!timerlat_parse_line("#         TASK-PID      CPU# ||||   TIMESTAMP    ID            CONTEXT",
                                   &cpu, &ns));
        CHECK(!timerlat_parse_line("           <...>-867     [000] ....    54.029339: #1     context thread "
                                   "timer_latency     ns",
                                   &cpu, &ns));
        CHECK(!timerlat_parse_line("", &cpu, &ns));
}

static char *fixture_tracefs(const char *name, const char *tracer, const char *options)
{
        char *root = xasprintf("%s/%s", test_tmpdir(), name);

        test_write(root, "sys/kernel/tracing/available_tracers", "timerlat osnoise function nop\n");
        test_write(root, "sys/kernel/tracing/current_tracer", tracer);
        test_write(root, "sys/kernel/tracing/tracing_on", "1\n");
        test_write(root, "sys/kernel/tracing/osnoise/cpus", "0-3\n");
        test_write(root, "sys/kernel/tracing/osnoise/timerlat_period_us", "1000\n");
        test_write(root, "sys/kernel/tracing/osnoise/stop_tracing_us", "50\n");
        test_write(root, "sys/kernel/tracing/osnoise/stop_tracing_total_us", "0\n");
        if (options)
                test_write(root, "sys/kernel/tracing/osnoise/options", options);
        return root;
}

static char *read_fixture(const char *rel)
{
        _cleanup_free_ char *p = xasprintf("/sys/kernel/tracing/%s", rel);
        char *s = NULL;

        if (sys_read(p, &s) < 0)
                return xstrdup("(missing)");
        return s;
}

#define CHECK_FILE(rel, value)                                                                              \
        do {                                                                                                \
                _cleanup_free_ char *v_ = read_fixture(rel);                                                \
                CHECK_STREQ(v_, value);                                                                     \
        } while (0)

TEST(save_start_restore)
{
        _cleanup_free_ char *root =
            fixture_tracefs("tl", "nop\n", "DEFAULTS OSNOISE_WORKLOAD NO_PANIC_ON_STOP\n");
        _cleanup_free_ char *dir = NULL, *why = NULL, *err = NULL;
        _cleanup_cpuset_ CpuSet *cpus = NULL;
        TimerlatState st = {};

        sysroot_set(root);
        CHECK_INTEQ(tracefs_find(&dir), 0);
        CHECK_STREQ(dir, "/sys/kernel/tracing");
        CHECK_INTEQ(timerlat_probe(dir, TRACER_TIMERLAT, &why), 0);
        CHECK_INTEQ(timerlat_save(dir, TRACER_TIMERLAT, &st, &err), 0);
        CHECK_INTEQ(cpuset_parse_list("1,3", 4, &cpus, NULL), 0);
        CHECK_INTEQ(timerlat_start(&st, cpus, 500, &err), 0);
        CHECK_FILE("current_tracer", "timerlat");
        CHECK_FILE("osnoise/cpus", "1,3");
        CHECK_FILE("osnoise/timerlat_period_us", "500");
        CHECK_FILE("osnoise/stop_tracing_us", "0");
        /* The workload option was on: left alone. */
        CHECK_FILE("osnoise/options", "DEFAULTS OSNOISE_WORKLOAD NO_PANIC_ON_STOP");

        CHECK_INTEQ(timerlat_restore(&st, &err), 0);
        CHECK(!err);
        CHECK_FILE("current_tracer", "nop");
        CHECK_FILE("tracing_on", "1");
        CHECK_FILE("osnoise/cpus", "0-3");
        CHECK_FILE("osnoise/timerlat_period_us", "1000");
        CHECK_FILE("osnoise/stop_tracing_us", "50");
        CHECK_FILE("osnoise/stop_tracing_total_us", "0");
        CHECK_FILE("osnoise/options", "DEFAULTS OSNOISE_WORKLOAD NO_PANIC_ON_STOP");
        timerlat_state_clear(&st);
        sysroot_set(NULL);
}

TEST(journal_puts_back_what_a_killed_run_left)
{
        _cleanup_free_ char *root =
            fixture_tracefs("tl-journal", "nop\n", "DEFAULTS OSNOISE_WORKLOAD NO_PANIC_ON_STOP\n");
        _cleanup_free_ char *journal = xasprintf("%s/tl-journal.json", test_tmpdir()), *err = NULL;
        _cleanup_cpuset_ CpuSet *cpus = NULL;
        TimerlatState st = {};

        sysroot_set(root);
        CHECK_INTEQ(timerlat_save("/sys/kernel/tracing", TRACER_TIMERLAT, &st, &err), 0);
        /* The run's PID and start time come from this machine's /proc, not the fixture's. */
        sysroot_set(NULL);
        CHECK_INTEQ(timerlat_journal_write(&st, journal), 0);
        sysroot_set(root);
        CHECK_INTEQ(cpuset_parse_list("1", 4, &cpus, NULL), 0);
        CHECK_INTEQ(timerlat_start(&st, cpus, 500, &err), 0);
        timerlat_state_clear(&st); /* killed here: nothing of the run's memory is left */
        CHECK_FILE("current_tracer", "timerlat");
        sysroot_set(NULL);
        /* The journal names this process, which is alive: a run still measuring is left alone. */
        CHECK_INTEQ(timerlat_journal_owner(journal), (unsigned)getpid());
        sysroot_set(root);
        CHECK_INTEQ(timerlat_journal_restore(journal, "/sys/kernel/tracing", &err), 1);
        CHECK(!err);
        CHECK_FILE("current_tracer", "nop");
        CHECK_FILE("osnoise/cpus", "0-3");
        CHECK_FILE("osnoise/timerlat_period_us", "1000");
        CHECK_FILE("osnoise/stop_tracing_us", "50");
        CHECK(access(journal, F_OK) < 0 && errno == ENOENT);
        /* No journal: nothing to do. A damaged one: said, and removed (it names nothing to put back). */
        CHECK_INTEQ(timerlat_journal_restore(journal, "/sys/kernel/tracing", &err), 0);
        CHECK_INTEQ(write_file_atomic(journal, "{\"files\": {\"current_tr", false), 0);
        CHECK_INTEQ(timerlat_journal_restore(journal, "/sys/kernel/tracing", &err), -EBADMSG);
        CHECK_CONTAINS(err, "is damaged (not JSON)");
        CHECK_CONTAINS(err, "removed");
        CHECK(access(journal, F_OK) < 0);
        CHECK_INTEQ(timerlat_journal_owner(journal), 0);
        err = mfree_str(err);
        /* Wrong types: no crash, and the owner of a journal without a start time is nobody. */
        CHECK_INTEQ(write_file_atomic(journal, "{\"pid\": 1, \"starttime\": null, \"files\": 3}", false), 0);
        CHECK_INTEQ(timerlat_journal_owner(journal), 0);
        CHECK_INTEQ(timerlat_journal_restore(journal, "/sys/kernel/tracing", &err), -EBADMSG);
        CHECK_CONTAINS(err, "is damaged (files)");
        err = mfree_str(err);
        /* One damaged entry costs that entry, said; the rest goes back. */
        test_write(root, "sys/kernel/tracing/current_tracer", "timerlat\n");
        test_write(root, "sys/kernel/tracing/osnoise/cpus", "1\n");
        test_write(root, "sys/kernel/tracing/osnoise/timerlat_period_us", "500\n");
        CHECK_INTEQ(write_file_atomic(journal,
                                      "{\"files\": {\"current_tracer\": \"nop\", \"osnoise/cpus\": [1], "
                                      "\"osnoise/timerlat_period_us\": \"1000\"}}",
                                      false),
                    0);
        CHECK_INTEQ(timerlat_journal_restore(journal, "/sys/kernel/tracing", &err), 1);
        CHECK_CONTAINS(err, "osnoise/cpus not put back");
        CHECK_FILE("current_tracer", "nop");
        CHECK_FILE("osnoise/timerlat_period_us", "1000");
        CHECK_FILE("osnoise/cpus", "1");
        err = mfree_str(err);
        /* Someone started tracing since the kill: theirs, left alone. */
        test_write(root, "sys/kernel/tracing/current_tracer", "function\n");
        CHECK_INTEQ(write_file_atomic(journal, "{\"files\": {\"current_tracer\": \"nop\"}}", false), 0);
        CHECK_INTEQ(timerlat_journal_restore(journal, "/sys/kernel/tracing", &err), 2);
        CHECK_CONTAINS(err, "the function tracer is in use now");
        CHECK_FILE("current_tracer", "function");
        CHECK(access(journal, F_OK) < 0);
        sysroot_set(NULL);
}

TEST(workload_option_switched_on_and_back)
{
        _cleanup_free_ char *root = fixture_tracefs("tl-nowl", "nop\n", "DEFAULTS NO_OSNOISE_WORKLOAD\n");
        _cleanup_free_ char *err = NULL;
        _cleanup_cpuset_ CpuSet *cpus = NULL;
        TimerlatState st = {};

        sysroot_set(root);
        CHECK_INTEQ(timerlat_save("/sys/kernel/tracing", TRACER_TIMERLAT, &st, &err), 0);
        CHECK_INTEQ(cpuset_parse_list("0", 4, &cpus, NULL), 0);
        CHECK_INTEQ(timerlat_start(&st, cpus, 1000, &err), 0);
        /* A plain file keeps the last word written: the kernel's file would list every option. */
        CHECK_FILE("osnoise/options", "OSNOISE_WORKLOAD");
        CHECK_INTEQ(timerlat_restore(&st, &err), 0);
        CHECK_FILE("osnoise/options", "NO_OSNOISE_WORKLOAD");
        CHECK_FILE("current_tracer", "nop");
        timerlat_state_clear(&st);
        sysroot_set(NULL);
}

TEST(someone_else_is_tracing)
{
        _cleanup_free_ char *root = fixture_tracefs("tl-busy", "function\n", NULL);
        _cleanup_free_ char *err = NULL;
        TimerlatState st = {};

        sysroot_set(root);
        CHECK_INTEQ(timerlat_save("/sys/kernel/tracing", TRACER_TIMERLAT, &st, &err), -EBUSY);
        CHECK_CONTAINS(err, "the function tracer is in use");
        CHECK_FILE("current_tracer", "function");
        sysroot_set(NULL);
}

TEST(no_timerlat_in_this_kernel)
{
        _cleanup_free_ char *root = xasprintf("%s/tl-none", test_tmpdir()), *why = NULL, *dir = NULL;

        test_write(root, "sys/kernel/tracing/available_tracers", "blk function nop\n");
        sysroot_set(root);
        CHECK_INTEQ(tracefs_find(&dir), 0);
        CHECK_INTEQ(timerlat_probe(dir, TRACER_TIMERLAT, &why), -EOPNOTSUPP);
        CHECK_CONTAINS(why, "CONFIG_TIMERLAT_TRACER");
        why = mfree_str(why);
        CHECK_INTEQ(timerlat_probe(dir, TRACER_HWLAT, &why), -EOPNOTSUPP);
        CHECK_STREQ(why, "this kernel has no hwlat tracer (built without CONFIG_HWLAT_TRACER)");
        sysroot_set(NULL);
}

TEST(parse_osnoise_and_hwlat_lines)
{
        OsnoiseSample s = {}, sum = {};
        unsigned cpu = 99;
        uint64_t ns = 0;
        bool nmi = true;

        /* As the 6.1 kernel prints them (Documentation/trace/osnoise-tracer.rst), and with 6.x's five flags.
         */
        CHECK(osnoise_parse_line("           <...>-859     [000] ....    81.637220: 1000000        190  "
                                 "99.98100       9     18      0   1007     18      1",
                                 &cpu, &s));
        CHECK_INTEQ(cpu, 0);
        CHECK_INTEQ(s.runtime_us, 1000000);
        CHECK_INTEQ(s.noise_us, 190);
        CHECK_INTEQ(s.max_single_us, 9);
        CHECK_INTEQ(s.hw, 18);
        CHECK_INTEQ(s.nmi, 0);
        CHECK_INTEQ(s.irq, 1007);
        CHECK_INTEQ(s.softirq, 18);
        CHECK_INTEQ(s.thread, 1);
        osnoise_sample_add(&sum, &s);
        CHECK(osnoise_parse_line(
            "      osnoise/12-870 [012] d.... 82.1: 100000 4000 96.00000 3500 0 0 12 3 40", &cpu, &s));
        CHECK_INTEQ(cpu, 12);
        osnoise_sample_add(&sum, &s);
        CHECK_INTEQ(sum.runtime_us, 1100000);
        CHECK_INTEQ(sum.noise_us, 4190);
        CHECK_INTEQ(sum.max_single_us, 3500);
        CHECK_INTEQ(sum.thread, 41);
        /* Headers, a cut line, a timerlat or hwlat line: no window. */
        CHECK(!osnoise_parse_line(
            "#           TASK-PID      CPU# ||||   TIMESTAMP    IN US       IN US  AVAILABLE", &cpu, &s));
        CHECK(!osnoise_parse_line(
            "           <...>-859     [000] ....    81.637220: 1000000        190  99.98100", &cpu, &s));
        CHECK(!osnoise_parse_line("           <...>-867     [000] ....    54.029339: #1     context thread "
                                  "timer_latency     11700 ns",
                                  &cpu, &s));
        CHECK(!osnoise_parse_line("", &cpu, &s));

        CHECK(hwlat_parse_line(
            "           <...>-1729  [001] d...   678.473449: #1     inner/outer(us):   11/12    "
            "ts:1581527483.343962693 count:6",
            &cpu, &ns, &nmi));
        CHECK_INTEQ(cpu, 1);
        CHECK_INTEQ(ns, 12000);
        CHECK(!nmi);
        CHECK(hwlat_parse_line(
            "           <...>-1729  [004] d...   689.556542: #2     inner/outer(us):   19/12    "
            "ts:1581527494.889008092 count:1 nmi-total:7 nmi-count:1",
            &cpu, &ns, &nmi));
        CHECK_INTEQ(cpu, 4);
        CHECK_INTEQ(ns, 19000);
        CHECK(nmi);
        CHECK(!hwlat_parse_line(
            "           <...>-1729  [004] d...   689.556542: #2     inner/outer(us):   19/", &cpu, &ns,
            &nmi));
        CHECK(!hwlat_parse_line("           <...>-859     [000] ....    81.637220: 1000000        190  "
                                "99.98100       9     18      0   1007     18      1",
                                &cpu, &ns, &nmi));
}

TEST(osnoise_window_set_and_put_back)
{
        _cleanup_free_ char *root = fixture_tracefs("os", "nop\n", "DEFAULTS OSNOISE_WORKLOAD\n");
        _cleanup_free_ char *journal = xasprintf("%s/os-journal.json", test_tmpdir()), *err = NULL;
        _cleanup_cpuset_ CpuSet *cpus = NULL;
        TimerlatState st = {};

        /* A period shorter than the 100 ms window: the runtime cannot go first, either way. */
        test_write(root, "sys/kernel/tracing/osnoise/period_us", "50000\n");
        test_write(root, "sys/kernel/tracing/osnoise/runtime_us", "20000\n");
        test_write(root, "sys/kernel/tracing/tracing_thresh", "0\n");
        sysroot_set(root);
        CHECK_INTEQ(timerlat_save("/sys/kernel/tracing", TRACER_OSNOISE, &st, &err), 0);
        CHECK_INTEQ(timerlat_threshold_us(&st), 0); /* the kernel's default, by version */
        sysroot_set(NULL);
        CHECK_INTEQ(timerlat_journal_write(&st, journal), 0);
        sysroot_set(root);
        CHECK_INTEQ(cpuset_parse_list("2-3", 4, &cpus, NULL), 0);
        CHECK_INTEQ(timerlat_start(&st, cpus, 1000, &err), 0);
        CHECK_FILE("current_tracer", "osnoise");
        CHECK_FILE("osnoise/cpus", "2-3");
        CHECK_FILE("osnoise/period_us", "100000");
        CHECK_FILE("osnoise/runtime_us", "100000");
        CHECK_FILE("osnoise/timerlat_period_us", "1000");
        CHECK_FILE("osnoise/stop_tracing_us", "0");
        timerlat_state_clear(&st); /* killed: the journal puts it back, the tracer it names being on */
        CHECK_INTEQ(timerlat_journal_restore(journal, "/sys/kernel/tracing", &err), 1);
        CHECK(!err);
        CHECK_FILE("current_tracer", "nop");
        CHECK_FILE("osnoise/cpus", "0-3");
        CHECK_FILE("osnoise/period_us", "50000");
        CHECK_FILE("osnoise/runtime_us", "20000");
        CHECK_FILE("osnoise/stop_tracing_us", "50");
        sysroot_set(NULL);
}

TEST(hwlat_on_the_tracing_cpumask)
{
        _cleanup_free_ char *root = xasprintf("%s/hw", test_tmpdir()), *err = NULL;
        _cleanup_cpuset_ CpuSet *cpus = NULL;
        TimerlatState st = {};

        /* A kernel with hwlat and no osnoise: nothing of osnoise's is needed. */
        test_write(root, "sys/kernel/tracing/available_tracers", "hwlat function nop\n");
        test_write(root, "sys/kernel/tracing/current_tracer", "nop\n");
        test_write(root, "sys/kernel/tracing/tracing_on", "0\n");
        test_write(root, "sys/kernel/tracing/tracing_cpumask", "f\n");
        test_write(root, "sys/kernel/tracing/tracing_thresh", "25\n");
        sysroot_set(root);
        CHECK_INTEQ(timerlat_probe("/sys/kernel/tracing", TRACER_HWLAT, &err), 0);
        CHECK_INTEQ(timerlat_save("/sys/kernel/tracing", TRACER_HWLAT, &st, &err), 0);
        CHECK_INTEQ(timerlat_threshold_us(&st), 25);
        CHECK_INTEQ(cpuset_parse_list("1,3", 4, &cpus, NULL), 0);
        CHECK_INTEQ(timerlat_start(&st, cpus, 1000, &err), 0);
        CHECK_FILE("current_tracer", "hwlat");
        CHECK_FILE("tracing_cpumask", "a");
        CHECK_FILE("tracing_on", "1");
        CHECK_INTEQ(timerlat_restore(&st, &err), 0);
        CHECK_FILE("current_tracer", "nop");
        CHECK_FILE("tracing_cpumask", "f");
        CHECK_FILE("tracing_on", "0");
        CHECK_FILE("tracing_thresh", "25");
        timerlat_state_clear(&st);
        /* timerlat needs osnoise's files, which this kernel lacks. */
        CHECK_INTEQ(timerlat_save("/sys/kernel/tracing", TRACER_TIMERLAT, &st, &err), -ENOENT);
        CHECK_CONTAINS(err, "osnoise/cpus");
        sysroot_set(NULL);
}

TEST_MAIN(T(stats_of_an_even_latency), T(verdict_in_frames), T(quantiles_and_overflow), T(empty),
          T(merge_is_adding_every_sample), T(json_has_the_buckets), T(svg), T(parse_trace_lines),
          T(save_start_restore), T(journal_puts_back_what_a_killed_run_left),
          T(workload_option_switched_on_and_back), T(someone_else_is_tracing), T(no_timerlat_in_this_kernel),
          T(parse_osnoise_and_hwlat_lines), T(osnoise_window_set_and_put_back),
          T(hwlat_on_the_tracing_cpumask))
