/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The audit behind `rtctl check` and Check(): rival services, RT throttling, cpufreq, and the priority
 * order of the sound card's interrupt thread, the audio server's threads and rtkit's ceiling; the other
 * families are in check-*.c (check-internal.h lists them). */
#include <dirent.h>
#include <sched.h>

#include "core/audiodev.h"
#include "core/check-internal.h"
#include "core/irqs.h"
#include "core/sched-ext.h"
#include "core/tasks.h"
#include "core/topology.h"
#include "shared/sysfs.h"

void audit_add(Audit *a, const char *check, const char *status, char *detail, char *fix)
{
        assert(a);

        GREEDY_REALLOC(a->items, a->allocated, a->n + 1);
        a->items[a->n++] = (AuditFinding){.check = check, .status = status, .detail = detail, .fix = fix};
}

static void check_services(Audit *a, TaskScan *tasks)
{
        /* The same rivals as the conflict tuner's (src/tuners/conflict.c), with what each moves. */
        static const struct {
                const char *comm, *does, *fix;
        } power[] = {
            {"power-profiles-daemon", "sets the governor, EPP and boost",
             "systemctl mask --now power-profiles-daemon, or OnConflict=stop in rtctl.conf"},
            {"tuned", "sets governors, EPP and /dev/cpu_dma_latency",
             "systemctl disable --now tuned, or OnConflict=stop in rtctl.conf"},
            {"gamemoded", "sets the governor while a game runs", "stop gamemoded (a user service)"},
        };
        unsigned pid = task_scan_find_comm(tasks, "irqbalance");
        _cleanup_free_ char *found = NULL, *fixes = NULL;

        if (pid)
                audit_add(a, "irqbalance", "warn",
                          xasprintf("irqbalance runs (PID %u): it moves IRQs onto any CPU; let rtctl place "
                                    "them (an [IRQ] section; OnConflict=stop in rtctl.conf stops it)",
                                    pid),
                          xstrdup("systemctl disable --now irqbalance, or OnConflict=stop in rtctl.conf"));
        else
                audit_add(a, "irqbalance", "ok", xstrdup("not running"), NULL);

        for (size_t i = 0; i < ELEMENTSOF(power); i++) {
                char *more;
                if (!(pid = task_scan_find_comm(tasks, power[i].comm)))
                        continue;
                more = xasprintf("%s%s%s (PID %u) %s", found ? found : "", found ? "; " : "", power[i].comm,
                                 pid, power[i].does);
                free(found);
                found = more;
                more = xasprintf("%s%s%s", fixes ? fixes : "", fixes ? "; " : "", power[i].fix);
                free(fixes);
                fixes = more;
        }
        if (found)
                audit_add(a, "power-rivals", "warn",
                          xasprintf("%s: it undoes the profile's [Power] settings", found), TAKE_PTR(fixes));
        else
                audit_add(a, "power-rivals", "ok",
                          xstrdup("no power-profiles-daemon, tuned or gamemoded running"), NULL);
}

/* A BPF scheduler (sched_ext) schedules every task that is not real-time in the kernel's stead: the
 * audio clients' threads that are not at SCHED_FIFO, and everything rtctl keeps on the housekeeping
 * CPUs. Users report more PipeWire crackles under scx_lavd and scx_bpfland (sched-ext/scx issue 2496). */
static void check_sched_ext(Audit *a, TaskScan *tasks)
{
        _cleanup_free_ char *what = NULL;
        SchedExt s;
        unsigned pid;
        int r;

        r = sched_ext_read(&s);
        if (r == -ENOENT) {
                audit_add(a, "sched-ext", "ok", xstrdup("this kernel has no sched_ext: its own scheduler"),
                          NULL);
                return;
        }
        if (r < 0) {
                audit_add(a, "sched-ext", "info",
                          xasprintf("cannot read /sys/kernel/sched_ext/state: %s", strerror(-r)), NULL);
                return;
        }
        if (!sched_ext_active(&s)) {
                pid = task_scan_find_comm(tasks, "scx_loader");
                audit_add(a, "sched-ext", "ok",
                          pid ? xasprintf("no BPF scheduler in force (sched_ext %s); scx_loader (PID %u) "
                                          "loads one when asked",
                                          s.state, pid)
                              : xasprintf("no BPF scheduler in force (sched_ext %s)", s.state),
                          NULL);
                sched_ext_clear(&s);
                return;
        }
        what = sched_ext_describe(&s);
        audit_add(a, "sched-ext", "warn",
                  xasprintf("%s is in force: it decides when the audio clients' threads that are not "
                            "real-time run, and what runs beside the audio graph; users report more "
                            "xruns under scx_lavd and scx_bpfland",
                            what),
                  xstrdup("scxctl stop, or systemctl disable --now scx_loader.service (scx.service); "
                          "OnConflict=stop in rtctl.conf stops them while a profile isolates CPUs"));
        sched_ext_clear(&s);
}

static void add_item(char **list, char *item)
{
        char *more = xasprintf("%s%s%s", *list ? *list : "", *list ? "; " : "", item);
        free(item);
        free(*list);
        *list = more;
}

/* The sound devices' own power saving, which the audio profile's [AudioDevices] turns off: an HDA codec
 * powering down between sounds, a USB interface (or a hub above it) allowed to autosuspend, a sound
 * controller's PCIe link in ASPM. rtcqs has no such check. */
static void check_audio_devices(Audit *a)
{
        _cleanup_strv_free_ char **devs = audiodev_list();
        _cleanup_free_ char *found = NULL, *save = NULL;
        for (char **d = devs; d && *d; d++) {
                if (audiodev_is_usb(*d)) {
                        _cleanup_strv_free_ char **chain = audiodev_usb_chain(*d);
                        for (char **u = chain; u && *u; u++) {
                                _cleanup_free_ char *ctl = xasprintf("%s/power/control", *u), *v = NULL,
                                                    *product = xasprintf("%s/product", *u), *name = NULL;
                                if (sys_read(ctl, &v) < 0 || !streq(strstrip(v), "auto"))
                                        continue;
                                (void)sys_read(product, &name);
                                add_item(&found,
                                         xasprintf("USB %s %s may autosuspend (%s: auto)",
                                                   u == chain ? "device" : "hub", name ? name : *u, ctl));
                        }
                        continue;
                }
                _cleanup_strv_free_ char **aspm = audiodev_on_gpu_link(*d) ? NULL : audiodev_aspm_files(*d);
                for (char **f = aspm; f && *f; f++) {
                        _cleanup_free_ char *v = NULL;
                        if (sys_read(*f, &v) >= 0 && streq(strstrip(v), "1"))
                                add_item(&found,
                                         xasprintf("ASPM on the sound controller's link (%s: 1)", *f));
                }
        }
        if (devs && sys_read(HDA_PARAMS_DIR "/power_save", &save) >= 0 && !streq(strstrip(save), "0"))
                add_item(
                    &found,
                    xasprintf("the HDA codecs power down after %s s idle (snd_hda_intel power_save)", save));
        if (found)
                audit_add(
                    a, "audio-devices", "warn", TAKE_PTR(found),
                    xstrdup("[AudioDevices] PowerSave=off USBAutosuspend=off ASPM=off (the audio profile "
                            "has them), or rtctl profile audio"));
        else
                audit_add(a, "audio-devices", "ok",
                          devs ? xstrdup("the sound devices do not power-save")
                               : xstrdup("no sound devices"),
                          NULL);
}

static void check_rt(Audit *a)
{
        _cleanup_free_ char *runtime = NULL, *period = NULL;
        int r = -1, p = 0;

        if (sys_read("/proc/sys/kernel/sched_rt_runtime_us", &runtime) < 0 ||
            safe_atoi(strstrip(runtime), &r) < 0)
                return;
        if (sys_read("/proc/sys/kernel/sched_rt_period_us", &period) >= 0)
                (void)safe_atoi(strstrip(period), &p);
        if (r < 0)
                audit_add(a, "rt-throttling", "info",
                          xstrdup("off: a runaway SCHED_FIFO task can starve its CPU"), NULL);
        else
                audit_add(a, "rt-throttling", "ok",
                          xasprintf("real-time tasks may use %d of every %d µs per CPU", r, p), NULL);
}

static void check_cpufreq(Audit *a)
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
                audit_add(a, "cpufreq", "info",
                          xstrdup("no cpufreq driver: frequency is not under the kernel's control"), NULL);
        else if (slow)
                audit_add(a, "cpufreq", "info",
                          xasprintf("%u of %u policies not at the performance governor (%s): the first "
                                    "period after a quiet spell runs at a low clock",
                                    slow, policies, example),
                          xstrdup("Governor=performance in the profile's [Power] section"));
        else
                audit_add(a, "cpufreq", "ok",
                          xasprintf("all %u policies at the performance governor", policies), NULL);
}

int thread_sched_parse(const char *stat, ThreadSched *ret)
{
        assert(stat);

        const char *open = strchr(stat, '('), *close = strrchr(stat, ')');
        unsigned long long v;
        const char *p;
        int field;

        if (!open || !close || close < open || close[1] != ' ')
                return -EBADMSG;
        snprintf(ret->comm, sizeof ret->comm, "%.*s",
                 (int)MIN((size_t)(close - open - 1), sizeof ret->comm - 1), open + 1);
        /* After "pid (comm) " come field 3 (state), ..., 9 (flags), ..., 40 (rt_priority), 41 (policy). */
        p = close + 2;
        for (field = 3; field <= 41 && *p; field++) {
                char *end;
                if (field > 3) {
                        v = strtoull(p, &end, 10);
                        if (end == p)
                                return -EBADMSG;
                        if (field == 9)
                                ret->flags = (unsigned)v;
                        else if (field == 40)
                                ret->rt_priority = (unsigned)v;
                        else if (field == 41)
                                ret->policy = (unsigned)v;
                        p = end;
                } else
                        p++;
                while (*p == ' ')
                        p++;
        }
        return field > 41 ? 0 : -EBADMSG;
}

static bool realtime(const ThreadSched *t)
{
        return t->policy == SCHED_FIFO || t->policy == SCHED_RR;
}

/* An RT priority to compare: SCHED_OTHER ranks below every real-time priority. */
static int rank(const ThreadSched *t)
{
        return realtime(t) ? (int)t->rt_priority : 0;
}

static bool audio_irq_thread(const ThreadSched *t, const unsigned *audio_irqs, size_t n)
{
        const char *name;
        unsigned irq;

        if (!(t->flags & PF_KTHREAD) || !irq_thread_parse(t->comm, &irq, &name))
                return false;
        if (startswith(name, "snd"))
                return true;
        for (size_t i = 0; i < n; i++)
                if (audio_irqs[i] == irq)
                        return true;
        return false;
}

/* PipeWire names its real-time threads data-loop.N; jackd's are whatever runs real-time in it. */
static bool audio_server_thread(const ThreadSched *t)
{
        if ((t->flags & PF_KTHREAD) || !realtime(t))
                return false;
        return startswith(t->comm, "data-loop") || streq(t->process_comm, "jackd") ||
               streq(t->process_comm, "jackdbus");
}

static char *describe(const ThreadSched *t)
{
        if (t->flags & PF_KTHREAD)
                return xasprintf("%s (%s %u)", t->comm, sched_policy_name(t->policy), t->rt_priority);
        return xasprintf("%s of %s (PID %u, %s %u)", t->comm, t->process_comm, t->pid,
                         sched_policy_name(t->policy), t->rt_priority);
}

void audit_inversion(Audit *a, const ThreadSched *threads, size_t n, const unsigned *audio_irqs,
                     size_t n_audio_irqs)
{
        const ThreadSched *irq = NULL, *server = NULL;
        _cleanup_free_ char *irq_s = NULL, *server_s = NULL;

        /* The lowest audio IRQ thread against the highest audio server thread. */
        for (size_t i = 0; i < n; i++) {
                const ThreadSched *t = &threads[i];
                if (audio_irq_thread(t, audio_irqs, n_audio_irqs) && (!irq || rank(t) < rank(irq)))
                        irq = t;
                else if (audio_server_thread(t) && (!server || rank(t) > rank(server)))
                        server = t;
        }
        irq_s = irq ? describe(irq) : NULL;
        server_s = server ? describe(server) : NULL;
        if (!irq && !server)
                audit_add(a, "inversion", "info",
                          xstrdup("neither an audio IRQ thread nor a real-time audio server thread runs"),
                          NULL);
        else if (!irq)
                audit_add(
                    a, "inversion", "info",
                    xasprintf("no audio IRQ thread (no sound card IRQ, or IRQs not threaded) to compare "
                              "with the audio server's %s",
                              server_s),
                    xstrdup("boot argument threadirqs (rtctl bootargs)"));
        else if (!server)
                audit_add(
                    a, "inversion", "info",
                    xasprintf("no real-time audio server thread (PipeWire's data-loop, jackd) to compare "
                              "with %s",
                              irq_s),
                    NULL);
        else if (rank(server) >= rank(irq))
                audit_add(
                    a, "inversion", "warn",
                    xasprintf("%s is not below the sound card's interrupt thread %s: the interrupt that "
                              "wakes the audio graph waits for it; give the audio IRQ a higher priority "
                              "(ThreadPriority= in an [IRQ] section matching class:audio)",
                              server_s, irq_s),
                    xstrdup("ThreadPriority= above the server's in the profile's [IRQ audio] section"));
        else if (rank(server) <= RTKIT_CEILING)
                /* rtkit hands any desktop client up to its ceiling: a browser's or a game's thread can then
                 * equal the server and take turns with it. */
                audit_add(a, "inversion", "warn",
                          xasprintf("the audio server's %s is at or below rtkit's ceiling (%d), where any "
                                    "desktop client's real-time thread can equal it",
                                    server_s, RTKIT_CEILING),
                          xstrdup("an rtprio limit for the audio server's user (@audio - rtprio 95 in "
                                  "/etc/security/limits.d/) so it does not go through rtkit; PipeWire's "
                                  "module-rt rt.prio=88"));
        else
                audit_add(a, "inversion", "ok",
                          xasprintf("the sound card's interrupt thread %s is above the audio server's %s, "
                                    "above rtkit's ceiling (%d)",
                                    irq_s, server_s, RTKIT_CEILING),
                          NULL);
}

static int read_thread(unsigned pid, const char *process_comm, const char *tid, ThreadSched *ret)
{
        _cleanup_free_ char *path = xasprintf("/proc/%u/task/%s/stat", pid, tid), *stat = NULL;
        int r;

        *ret = (ThreadSched){.pid = pid};
        r = sys_read(path, &stat);
        if (r < 0)
                return r;
        r = thread_sched_parse(stat, ret);
        if (r < 0)
                return r;
        (void)safe_atou(tid, &ret->tid);
        snprintf(ret->process_comm, sizeof ret->process_comm, "%s", process_comm);
        return 0;
}

/* Every thread that could take part: the kernel's IRQ threads and the real-time threads of processes. */
static ThreadSched *read_threads(TaskScan *tasks, size_t *ret_n)
{
        size_t n_tasks, n = 0, alloc = 0;
        const TaskInfo *t = task_scan_all(tasks, &n_tasks);
        ThreadSched *threads = NULL;

        for (size_t i = 0; i < n_tasks; i++) {
                _cleanup_free_ char *dir = xasprintf("/proc/%u/task", t[i].pid);
                _cleanup_closedir_ DIR *d = NULL;
                struct dirent *de;
                unsigned irq;

                if ((t[i].flags & PF_KTHREAD) && !irq_thread_parse(t[i].comm, &irq, NULL))
                        continue;
                d = sys_opendir(dir);
                while (d && (de = readdir(d))) {
                        ThreadSched s;
                        if (de->d_name[0] == '.' || read_thread(t[i].pid, t[i].comm, de->d_name, &s) < 0)
                                continue;
                        if (!(s.flags & PF_KTHREAD) && !realtime(&s))
                                continue;
                        GREEDY_REALLOC(threads, alloc, n + 1);
                        threads[n++] = s;
                }
        }
        *ret_n = n;
        return threads;
}

/* The IRQs of sound devices, by class (a USB sound card's is its controller's). */
static unsigned *audio_irqs(size_t *ret_n)
{
        _cleanup_topology_ Topology *topo = NULL;
        _cleanup_irq_table_ IrqTable *t = NULL;
        unsigned *nums;
        size_t n = 0;

        *ret_n = 0;
        if (topology_load(NULL, &topo) < 0 || irq_table_load(0, topo->n_cpus, &t) < 0)
                return NULL;
        nums = xmalloc0(sizeof(unsigned) * (t->n + 1));
        for (size_t i = 0; i < t->n; i++)
                if (t->irqs[i].class == IRQ_CLASS_AUDIO)
                        nums[n++] = t->irqs[i].num;
        *ret_n = n;
        return nums;
}

static void check_inversion(Audit *a, TaskScan *tasks)
{
        size_t n = 0, n_irqs = 0;
        _cleanup_free_ ThreadSched *threads = read_threads(tasks, &n);
        _cleanup_free_ unsigned *irqs = audio_irqs(&n_irqs);

        audit_inversion(a, threads, n, irqs, n_irqs);
}

/* How the profile's Threads=realtime rules learn of a policy change (src/daemon/manager-sched.c): the
 * syscall tracepoints see every one; without them rtctld looks at a process only in the second after
 * it creates a thread. */
static void check_policy_events(Audit *a, const AuditOptions *o, const KernelInfo *k)
{
        static const char prefix[] = "re-check after thread creation: ";
        _cleanup_free_ char *why = NULL;
        char buf[8];

        if (!o->realtime_rules)
                return;
        if (o->policy_events && !streq(o->policy_events, "tracepoints"))
                why = xstrdup(startswith(o->policy_events, prefix) ?: o->policy_events);
        else if (!o->policy_events && !k->config) {
                audit_add(a, "policy-events", "info",
                          xasprintf("no kernel configuration: whether rtctld sees every policy change for "
                                    "profile %s's Threads=realtime rules (the syscall tracepoints, "
                                    "CONFIG_FTRACE_SYSCALLS) is known once it runs (rtctl status)",
                                    o->profile),
                          NULL);
                return;
        } else if (!o->policy_events && !kernel_config(k, "FTRACE_SYSCALLS", buf))
                why = xstrdup("this kernel is built without CONFIG_FTRACE_SYSCALLS");
        if (!why) {
                audit_add(
                    a, "policy-events", "ok",
                    xasprintf("profile %s's Threads=realtime rules see every policy change through the "
                              "syscall tracepoints",
                              o->profile),
                    NULL);
                return;
        }
        audit_add(a, "policy-events", "warn",
                  xasprintf("profile %s's Threads=realtime rules see a policy change only by a look at a "
                            "process 10 ms, 100 ms and 1 s after it creates a thread, as %s: a thread that "
                            "turns real-time more than 1 s after it was created, and one that goes back to "
                            "SCHED_OTHER, stay where they are until the process creates or renames a "
                            "thread or a pass replans the isolated CPUs",
                            o->profile, why),
                  xstrdup("a kernel with CONFIG_FTRACE_SYSCALLS=y and tracefs (rtctld mounts it itself); or "
                          "Threads= by thread name, whose renames are seen at once"));
}

/* What only a reboot applies: the profile's boot arguments (src/core/bootargs.c) against /proc/cmdline. */
static void check_reboot(Audit *a, const AuditOptions *o)
{
        if (!o->boot_known)
                return;
        if (o->boot_missing)
                audit_add(a, "reboot-pending", "warn",
                          xasprintf("profile %s wants boot arguments the running kernel lacks: %s",
                                    o->profile, o->boot_missing),
                          xstrdup("rtctl bootargs apply, then reboot"));
        else
                audit_add(
                    a, "reboot-pending", "ok",
                    xasprintf("the running kernel has every boot argument profile %s wants", o->profile),
                    NULL);
}

void audit_run(const AuditOptions *o, Audit *ret)
{
        TaskScan tasks = {};
        KernelInfo k;

        assert(ret);

        *ret = (Audit){};
        kernel_info_load(&k);
        audit_kernel(ret, &k);
        check_policy_events(ret, o, &k);
        kernel_info_clear(&k);
        check_services(ret, &tasks);
        check_sched_ext(ret, &tasks);
        check_audio_devices(ret);
        check_rt(ret);
        check_cpufreq(ret);
        audit_machine(ret);
        check_inversion(ret, &tasks);
        audit_isolation(ret, o, &tasks);
        check_reboot(ret, o);
        task_scan_clear(&tasks);
}

bool audit_warns(const Audit *a)
{
        assert(a);

        for (size_t i = 0; i < a->n; i++)
                if (streq(a->items[i].status, "warn"))
                        return true;
        return false;
}

void audit_clear(Audit *a)
{
        assert(a);

        for (size_t i = 0; i < a->n; i++) {
                free(a->items[i].detail);
                free(a->items[i].fix);
        }
        free(a->items);
        strv_free(a->strings);
        *a = (Audit){};
}
