/* SPDX-License-Identifier: GPL-2.0-or-later */
/* check: what an audio user needs from this machine, audited without changing anything. */
#include <dirent.h>

#include "cli/cli.h"
#include "core/cgroupfs.h"
#include "shared/sysfs.h"

typedef struct Finding {
        const char *check;
        const char *status; /* "ok", "warn", "info" */
        char *detail;
} Finding;

typedef struct Findings {
        Finding *items;
        size_t n;
} Findings;

static void add(Findings *f, const char *check, const char *status, char *detail)
{
        f->items = realloc(f->items, sizeof(Finding) * (f->n + 1));
        if (!f->items)
                abort();
        f->items[f->n++] = (Finding){.check = check, .status = status, .detail = detail};
}

static bool cmdline_has(const char *cmdline, const char *word)
{
        size_t n = strlen(word);

        for (const char *p = cmdline; (p = strstr(p, word)); p += n)
                if ((p == cmdline || p[-1] == ' ') &&
                    (p[n] == 0 || p[n] == ' ' || p[n] == '=' || p[n] == '\n'))
                        return true;
        return false;
}

static void check_kernel(Findings *f)
{
        _cleanup_free_ char *cmdline = NULL, *rt = NULL, *preempt = NULL;
        bool realtime;

        (void)sys_read("/proc/cmdline", &cmdline);
        realtime = sys_read("/sys/kernel/realtime", &rt) >= 0 && streq(strstrip(rt), "1");
        if (realtime)
                add(f, "irq-threads", "ok",
                    xstrdup("PREEMPT_RT kernel: every IRQ handler runs in a thread"));
        else if (cmdline && cmdline_has(cmdline, "threadirqs"))
                add(f, "irq-threads", "ok",
                    xstrdup("threadirqs: IRQ handlers run in threads rtctl can prioritise"));
        else
                add(f, "irq-threads", "warn",
                    xstrdup(
                        "IRQs are not threaded: the sound card's IRQ cannot be given a priority above the "
                        "rest; needs boot parameters: threadirqs"));

        if (realtime)
                add(f, "preemption", "ok", xstrdup("PREEMPT_RT"));
        else if (sys_read("/sys/kernel/debug/sched/preempt", &preempt) >= 0)
                add(f, "preemption", strstr(preempt, "(full)") ? "ok" : "warn",
                    xasprintf("preemption model: %s%s", strstrip(preempt),
                              strstr(preempt, "(full)") ? "" : "; needs boot parameters: preempt=full"));
        else if (cmdline && strstr(cmdline, "preempt=full"))
                add(f, "preemption", "ok", xstrdup("preempt=full"));
        else
                add(f, "preemption", "info",
                    xstrdup(
                        "preemption model unknown (debugfs not mounted); preempt=full is best for audio"));
}

static void check_services(Findings *f)
{
        TaskScan tasks = {};
        unsigned pid = task_scan_find_comm(&tasks, "irqbalance");

        task_scan_clear(&tasks);

        if (pid)
                add(f, "irqbalance", "warn",
                    xasprintf("irqbalance runs (PID %u): it moves IRQs onto any CPU; let rtctl place them "
                              "(an [IRQ] section; OnConflict=stop in rtctl.conf stops it)",
                              pid));
        else
                add(f, "irqbalance", "ok", xstrdup("not running"));
}

static void check_rt(Findings *f)
{
        _cleanup_free_ char *runtime = NULL, *period = NULL;
        int r = -1, p = 0;

        if (sys_read("/proc/sys/kernel/sched_rt_runtime_us", &runtime) < 0 ||
            safe_atoi(strstrip(runtime), &r) < 0)
                return;
        if (sys_read("/proc/sys/kernel/sched_rt_period_us", &period) >= 0)
                (void)safe_atoi(strstrip(period), &p);
        if (r < 0)
                add(f, "rt-throttling", "info",
                    xstrdup("off: a runaway SCHED_FIFO task can starve its CPU"));
        else
                add(f, "rt-throttling", "ok",
                    xasprintf("real-time tasks may use %d of every %d µs per CPU", r, p));
}

static void check_cpufreq(Findings *f)
{
        _cleanup_closedir_ DIR *d = sys_opendir("/sys/devices/system/cpu/cpufreq");
        struct dirent *de;
        unsigned policies = 0, slow = 0;
        _cleanup_free_ char *example = NULL;

        while (d && (de = readdir(d))) {
                _cleanup_free_ char *p = NULL, *g = NULL;
                if (!startswith(de->d_name, "policy"))
                        continue;
                policies++;
                p = xasprintf("/sys/devices/system/cpu/cpufreq/%s/scaling_governor", de->d_name);
                if (sys_read(p, &g) >= 0 && !streq(strstrip(g), "performance")) {
                        slow++;
                        if (!example)
                                example = xasprintf("%s: %s", de->d_name, g);
                }
        }
        if (policies == 0)
                add(f, "cpufreq", "info",
                    xstrdup("no cpufreq driver: frequency is not under the kernel's control"));
        else if (slow)
                add(f, "cpufreq", "info",
                    xasprintf("%u of %u policies not at the performance governor (%s)", slow, policies,
                              example));
        else
                add(f, "cpufreq", "ok", xasprintf("all %u policies at the performance governor", policies));
}

int verb_check(Cli *c, int argc, char *argv[])
{
        Findings f = {};
        bool warn = false;

        if (argc > 1) {
                fprintf(stderr, "check takes no arguments.\n");
                return EXIT_USAGE;
        }
        check_kernel(&f);
        check_services(&f);
        check_rt(&f);
        check_cpufreq(&f);

        if (c->json) {
                json_object *a = json_object_new_array();
                for (size_t i = 0; i < f.n; i++) {
                        json_object *o = json_object_new_object();
                        json_object_object_add(o, "check", json_object_new_string(f.items[i].check));
                        json_object_object_add(o, "status", json_object_new_string(f.items[i].status));
                        json_object_object_add(o, "detail", json_object_new_string(f.items[i].detail));
                        json_object_array_add(a, o);
                }
                cli_print_json(a);
        } else {
                static const char *const header[] = {"CHECK", "STATUS", "DETAIL"};
                char **cells = NULL;
                for (size_t i = 0; i < f.n; i++) {
                        strv_push(&cells, xstrdup(f.items[i].check));
                        strv_push(&cells, xstrdup(f.items[i].status));
                        strv_push(&cells, xstrdup(f.items[i].detail));
                }
                cli_print_table(header, 3, cells, f.n);
                strv_free(cells);
        }
        for (size_t i = 0; i < f.n; i++) {
                warn = warn || streq(f.items[i].status, "warn");
                free(f.items[i].detail);
        }
        free(f.items);
        return warn ? EXIT_FAILED : EXIT_OK;
}
