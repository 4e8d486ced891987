/* SPDX-License-Identifier: GPL-2.0-or-later */
/* How the running kernel was built and booted, as an audio user needs it: its configuration found,
 * high-resolution timers, tickless idle, threaded IRQs, the preemption model, CPU mitigations, SMT.
 * Everything is read under the root prefix, uname -v included (/proc/sys/kernel/version), so a fixture
 * can model each kernel. */
#include <zlib.h>

#include "core/bootargs.h"
#include "core/check-internal.h"
#include "shared/sysfs.h"

bool cmdline_has(const char *cmdline, const char *word)
{
        assert(word);

        size_t n = strlen(word);

        for (const char *p = cmdline; p && (p = strstr(p, word)); p += n)
                if ((p == cmdline || p[-1] == ' ') &&
                    (p[n] == 0 || p[n] == ' ' || p[n] == '=' || p[n] == '\n'))
                        return true;
        return false;
}

/* /proc/config.gz, through zlib: the kernel's own copy of its configuration (CONFIG_IKCONFIG_PROC). */
static int read_gz(const char *path, char **ret)
{
        _cleanup_free_ char *full = sys_path(path);
        gzFile f = gzopen(full, "rb");
        size_t n = 0, alloc = 0;
        char *buf = NULL;
        int got;

        if (!f)
                return -errno ?: -ENOENT;
        do {
                if (alloc - n < 65536 + 1)
                        GREEDY_REALLOC(buf, alloc, MAX(n + 65536 + 1, (size_t)262144));
                got = gzread(f, buf + n, (unsigned)(alloc - n - 1));
                if (got > 0)
                        n += (size_t)got;
        } while (got > 0);
        gzclose(f);
        if (got < 0) {
                free(buf);
                return -EIO;
        }
        buf[n] = 0;
        *ret = buf;
        return 0;
}

void kernel_info_load(KernelInfo *ret)
{
        assert(ret);

        *ret = (KernelInfo){};
        (void)sys_read("/proc/cmdline", &ret->cmdline);
        (void)sys_read("/proc/sys/kernel/version", &ret->version);
        (void)sys_read("/proc/sys/kernel/osrelease", &ret->release);
        if (read_gz("/proc/config.gz", &ret->config) >= 0)
                ret->where = xstrdup("/proc/config.gz");
        else if (ret->release) {
                _cleanup_free_ char *p = xasprintf("/boot/config-%s", strstrip(ret->release));
                if (sys_read(p, &ret->config) >= 0)
                        ret->where = TAKE_PTR(p);
        }
}

void kernel_info_clear(KernelInfo *k)
{
        assert(k);

        free(k->config);
        free(k->where);
        free(k->version);
        free(k->release);
        free(k->cmdline);
        *k = (KernelInfo){};
}

const char *kernel_config(const KernelInfo *k, const char *name, char buf[static 8])
{
        _cleanup_free_ char *key = xasprintf("CONFIG_%s=", name);
        size_t n = strlen(key);

        assert(k);

        for (const char *p = k->config; p && (p = strstr(p, key)); p += n)
                if (p == k->config || p[-1] == '\n') {
                        snprintf(buf, 8, "%.*s", (int)strcspn(p + n, "\n"), p + n);
                        return buf;
                }
        return NULL;
}

static bool config_y(const KernelInfo *k, const char *name)
{
        char buf[8];
        const char *v = kernel_config(k, name, buf);

        return v && streq(v, "y");
}

/* uname -v names the model the kernel was built with: "#1 SMP PREEMPT_RT ...", "#1 SMP PREEMPT_DYNAMIC
 * ...", "#1 SMP PREEMPT ..." (full). */
static bool version_has(const KernelInfo *k, const char *word)
{
        return k->version && cmdline_has(k->version, word);
}

static void check_config(Audit *a, const KernelInfo *k)
{
        if (k->config)
                audit_add(a, "kernel-config", "ok", xasprintf("the kernel's configuration: %s", k->where),
                          NULL);
        else
                audit_add(a, "kernel-config", "info",
                          xasprintf("no kernel configuration (/proc/config.gz, /boot/config-%s): the "
                                    "timer and tickless checks go by what the running kernel shows",
                                    k->release ? k->release : "RELEASE"),
                          xstrdup("install the kernel's config file, or build with CONFIG_IKCONFIG_PROC=y"));
}

static void check_timers(Audit *a, const KernelInfo *k)
{
        _cleanup_free_ char *list = NULL;
        const char *res;

        if (k->config) {
                if (config_y(k, "HIGH_RES_TIMERS"))
                        audit_add(a, "high-res-timers", "ok", xstrdup("CONFIG_HIGH_RES_TIMERS=y"), NULL);
                else
                        audit_add(a, "high-res-timers", "warn",
                                  xstrdup("the kernel has no high-resolution timers: timer wakeups come a "
                                          "tick late"),
                                  xstrdup("a kernel built with CONFIG_HIGH_RES_TIMERS=y"));
                return;
        }
        /* Without a config the kernel's own word: /proc/timer_list says "resolution: 1 nsecs" per CPU with
         * high-resolution timers, the tick's length without. */
        if (sys_read("/proc/timer_list", &list) < 0 || !(res = strstr(list, "resolution: "))) {
                audit_add(a, "high-res-timers", "info",
                          xstrdup("unknown: no kernel configuration and /proc/timer_list unreadable"), NULL);
                return;
        }
        if (startswith(res, "resolution: 1 nsecs"))
                audit_add(a, "high-res-timers", "ok", xstrdup("/proc/timer_list: resolution 1 ns"), NULL);
        else
                audit_add(a, "high-res-timers", "warn",
                          xasprintf("/proc/timer_list: %.*s: timer wakeups come a tick late",
                                    (int)strcspn(res, "\n"), res),
                          xstrdup("a kernel built with CONFIG_HIGH_RES_TIMERS=y"));
}

static void check_tickless(Audit *a, const KernelInfo *k)
{
        if (!k->config)
                audit_add(a, "tickless", "info", xstrdup("unknown without the kernel's configuration"),
                          NULL);
        else if (config_y(k, "NO_HZ_FULL"))
                audit_add(a, "tickless", "ok",
                          xstrdup(cmdline_has(k->cmdline, "nohz_full")
                                      ? "CONFIG_NO_HZ_FULL, and nohz_full= stops the tick on busy isolated "
                                        "CPUs"
                                      : "CONFIG_NO_HZ_FULL: idle CPUs skip the tick (nohz_full= would stop "
                                        "it on busy isolated CPUs too)"),
                          NULL);
        else if (config_y(k, "NO_HZ_IDLE") || config_y(k, "NO_HZ"))
                audit_add(a, "tickless", "ok", xstrdup("CONFIG_NO_HZ_IDLE: idle CPUs skip the tick"), NULL);
        else
                audit_add(a, "tickless", "warn",
                          xstrdup("periodic tick (CONFIG_HZ_PERIODIC): every CPU wakes on every tick, idle "
                                  "or not"),
                          xstrdup("a kernel built with CONFIG_NO_HZ_IDLE=y"));
}

/* Threaded IRQs are what lets the sound card's interrupt get a priority; threadirqs gives them on any
 * kernel, but it does not make the kernel preemptible: that is the preemption check's. */
static void check_irq_threads(Audit *a, const KernelInfo *k, bool rt)
{
        if (rt)
                audit_add(a, "irq-threads", "ok",
                          xstrdup("PREEMPT_RT kernel: every IRQ handler runs in a thread"), NULL);
        else if (cmdline_has(k->cmdline, "threadirqs"))
                audit_add(a, "irq-threads", "ok",
                          xstrdup("threadirqs: IRQ handlers run in threads rtctl can prioritise"), NULL);
        else
                audit_add(a, "irq-threads", "warn",
                          xstrdup("IRQs are not threaded: the sound card's IRQ cannot be given a priority "
                                  "above the rest; needs boot parameters: threadirqs"),
                          xstrdup("boot argument threadirqs (rtctl bootargs)"));
}

/* The model debugfs shows brackets the current one: "none voluntary (full) lazy". */
static char *current_model(char *s)
{
        char *open = strchr(s, '('), *close = open ? strchr(open, ')') : NULL;

        if (!close)
                return NULL;
        *close = 0;
        return open + 1;
}

static void check_preemption(Audit *a, const KernelInfo *k, bool rt)
{
        _cleanup_free_ char *preempt = NULL;
        const char *model;

        if (rt) {
                audit_add(a, "preemption", "ok", xstrdup("PREEMPT_RT"), NULL);
                return;
        }
        if (sys_read("/sys/kernel/debug/sched/preempt", &preempt) >= 0 && (model = current_model(preempt))) {
                if (streq(model, "full") || streq(model, "lazy"))
                        audit_add(a, "preemption", "ok", xasprintf("PREEMPT_DYNAMIC, %s (debugfs)", model),
                                  NULL);
                else
                        audit_add(a, "preemption", "warn",
                                  xasprintf("PREEMPT_DYNAMIC, running %s: kernel code is not preempted "
                                            "everywhere, so a wakeup of the audio thread can wait; needs "
                                            "boot parameters: preempt=full",
                                            model),
                                  xstrdup("boot argument preempt=full (rtctl bootargs)"));
                return;
        }
        if (version_has(k, "PREEMPT_DYNAMIC") || config_y(k, "PREEMPT_DYNAMIC")) {
                _cleanup_free_ char *arg = NULL;
                bool given = k->cmdline && cmdline_find(k->cmdline, "preempt", &arg) > 0;

                /* The boot argument decides (its last occurrence); without it the build's default. */
                if (given && arg && (streq(arg, "full") || streq(arg, "lazy")))
                        audit_add(a, "preemption", "ok", xasprintf("PREEMPT_DYNAMIC, preempt=%s", arg),
                                  NULL);
                else if (!given && config_y(k, "PREEMPT"))
                        audit_add(a, "preemption", "ok",
                                  xstrdup("PREEMPT_DYNAMIC, full by the kernel's build default"), NULL);
                else
                        audit_add(
                            a, "preemption", "warn",
                            given ? xasprintf("PREEMPT_DYNAMIC, and the boot arguments choose preempt=%s",
                                              arg ? arg : "")
                                  : xstrdup("PREEMPT_DYNAMIC, model unknown (debugfs is not mounted and "
                                            "no preempt= boot argument): the build's default is rarely "
                                            "full"),
                            xstrdup("boot argument preempt=full (rtctl bootargs)"));
                return;
        }
        /* Lazy preemption defers only normal tasks' preemption to the tick: a real-time thread still
         * preempts at once. */
        if (version_has(k, "PREEMPT_LAZY") || config_y(k, "PREEMPT_LAZY")) {
                audit_add(a, "preemption", "ok", xstrdup("PREEMPT_LAZY (built in)"), NULL);
                return;
        }
        if (version_has(k, "PREEMPT") || config_y(k, "PREEMPT"))
                audit_add(a, "preemption", "ok", xstrdup("PREEMPT (full, built in)"), NULL);
        else if (k->version || k->config)
                audit_add(a, "preemption", "warn",
                          xstrdup("the kernel is built without full preemption (voluntary or none), and "
                                  "cannot switch at boot"),
                          xstrdup("a kernel built with CONFIG_PREEMPT_DYNAMIC=y or CONFIG_PREEMPT=y (or "
                                  "PREEMPT_RT)"));
        else
                audit_add(a, "preemption", "info", xstrdup("preemption model unknown"),
                          xstrdup("boot argument preempt=full (rtctl bootargs)"));
}

/* Mitigations cost time on every kernel entry and context switch, but turning them off opens the
 * machine to the attacks they stop: reported with the trade-off, never as something to fix. */
static void check_mitigations(Audit *a, const KernelInfo *k)
{
        _cleanup_closedir_ DIR *d = sys_opendir("/sys/devices/system/cpu/vulnerabilities");
        _cleanup_free_ char *names = NULL;
        struct dirent *de;
        unsigned n = 0;

        _cleanup_free_ char *arg = NULL;

        if (k->cmdline && cmdline_find(k->cmdline, "mitigations", &arg) > 0 && arg && streq(arg, "off")) {
                audit_add(
                    a, "mitigations", "info",
                    xstrdup("mitigations=off: no mitigation cost, and no protection from Spectre-class "
                            "attacks: right only for a machine that runs no untrusted code (no web "
                            "browser)"),
                    NULL);
                return;
        }
        while (d && (de = readdir(d))) {
                _cleanup_free_ char *p = NULL, *v = NULL;
                if (de->d_name[0] == '.')
                        continue;
                p = xasprintf("/sys/devices/system/cpu/vulnerabilities/%s", de->d_name);
                if (sys_read(p, &v) < 0 || !startswith(v, "Mitigation"))
                        continue;
                n++;
                char *more = xasprintf("%s%s%s", names ? names : "", names ? ", " : "", de->d_name);
                free(names);
                names = more;
        }
        if (n == 0)
                audit_add(a, "mitigations", "info", xstrdup("no CPU vulnerability mitigation is active"),
                          NULL);
        else
                audit_add(a, "mitigations", "info",
                          xasprintf("%u active (%s): they add time to kernel entries and context switches; "
                                    "mitigations=off takes that away and with it the protection, so only "
                                    "for a machine that runs no untrusted code",
                                    n, names),
                          xstrdup("boot argument mitigations=off, only if you accept the risk"));
}

static void check_smt(Audit *a)
{
        _cleanup_free_ char *active = NULL;

        if (sys_read("/sys/devices/system/cpu/smt/active", &active) < 0)
                audit_add(a, "smt", "info", xstrdup("the kernel does not say (no SMT support)"), NULL);
        else if (streq(strstrip(active), "1"))
                audit_add(a, "smt", "info",
                          xstrdup("on: a thread on a sibling shares the core's execution units with the "
                                  "audio thread, which makes its timing vary; isolate whole cores, or turn "
                                  "SMT off"),
                          xstrdup("echo off > /sys/devices/system/cpu/smt/control, or boot argument nosmt"));
        else
                audit_add(a, "smt", "ok", xstrdup("off"), NULL);
}

void audit_kernel(Audit *a, const KernelInfo *k)
{
        assert(a);
        assert(k);

        _cleanup_free_ char *realtime = NULL;
        bool rt = (sys_read("/sys/kernel/realtime", &realtime) >= 0 && streq(strstrip(realtime), "1")) ||
                  version_has(k, "PREEMPT_RT") || config_y(k, "PREEMPT_RT");

        check_config(a, k);
        check_timers(a, k);
        check_tickless(a, k);
        check_irq_threads(a, k, rt);
        check_preemption(a, k, rt);
        check_mitigations(a, k);
        check_smt(a);
}
