/* SPDX-License-Identifier: GPL-2.0-or-later */
/* C-states: MaxExitLatencyUs= caps how long a CPU of the set takes to wake, through its PM QoS resume
 * latency (which the cpuidle governor obeys) and by disabling the idle states whose exit latency is
 * above the cap; "shallowest" caps it at the CPU's first state that does not poll. GlobalMaxExitLatencyUs=
 * is the system-wide request of /dev/cpu_dma_latency, held open for as long as the profile is active. An
 * offlined CPU loses its cpuidle/ directory and comes back with every state enabled: the online event
 * replans it. */
#include <dirent.h>

#include "tuners/registry.h"
#include "shared/sysfs.h"
#include "tuners/irq.h"
#include "tuners/power-config.h"

static bool cpuidle_uses(const void *config)
{
        return power_config_has_idle(config);
}

/* pm_qos_resume_latency_us: "0" means no constraint, "n/a" means 0 µs (poll only). */
static char *pm_qos_value(int us)
{
        return us == 0 ? xstrdup("n/a") : xasprintf("%d", us);
}

/* The exit latency of the CPU's shallowest idle state that does not poll, -1 when it has none: no
 * cpuidle (offline, or no driver). x86 names its polling state POLL (intel_idle, acpi_idle and haltpoll
 * alike), powerpc snooze; a state that takes 0 µs to leave is taken for polling too. */
static int shallowest_latency(unsigned cpu)
{
        _cleanup_free_ char *idle = xasprintf("/sys/devices/system/cpu/cpu%u/cpuidle", cpu);
        _cleanup_closedir_ DIR *d = sys_opendir(idle);
        struct dirent *de;
        int best = -1;

        while (d && (de = readdir(d))) {
                _cleanup_free_ char *p = NULL, *name = NULL, *lat = NULL;
                unsigned us;

                if (!startswith(de->d_name, "state"))
                        continue;
                p = xasprintf("%s/%s/name", idle, de->d_name);
                if (sys_read(p, &name) < 0 || streq(strstrip(name), "POLL") || streq(name, "snooze"))
                        continue;
                free(p);
                p = xasprintf("%s/%s/latency", idle, de->d_name);
                if (sys_read(p, &lat) < 0 || safe_atou(strstrip(lat), &us) < 0 || us == 0 || us > INT_MAX)
                        continue;
                if (best < 0 || (int)us < best)
                        best = (int)us;
        }
        return best;
}

/* An offline CPU has no states to read: its PM QoS value (which survives hotplug) is the lowest of the
 * set's online CPUs, else of any online CPU (one cpuidle driver serves them all), so that going offline
 * changes nothing. -1: no online CPU has a halting state. */
static int lowest_shallowest(const CpuSet *set, const CpuSet *online)
{
        _cleanup_cpuset_ CpuSet *in_set = cpuset_dup(set);
        int best = -1;

        cpuset_and(in_set, online);
        for (int pass = 0; pass < 2 && best < 0; pass++)
                FOREACH_CPU (cpu, pass == 0 ? in_set : online) {
                        int us = shallowest_latency((unsigned)cpu);
                        if (us >= 0 && (best < 0 || us < best))
                                best = us;
                }
        return best;
}

/* The PM QoS value survives hotplug: kept for offline CPUs too (restoring it at offline would only
 * make the online pass write it again). The idle states exist only while the CPU is online. */
static void plan_cpu(unsigned cpu, bool online, int limit, Plan *plan, PlanNotes *notes)
{
        _cleanup_free_ char *base = xasprintf("/sys/devices/system/cpu/cpu%u", cpu);
        _cleanup_free_ char *qos = xasprintf("%s/power/pm_qos_resume_latency_us", base);
        _cleanup_free_ char *idle = xasprintf("%s/cpuidle", base);
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;

        if (sys_exists(qos))
                plan_add(plan, &setting_kind_file, "cpuidle", 0, TAKE_PTR(qos), pm_qos_value(limit));
        if (!online)
                return;
        d = sys_opendir(idle);
        if (!d) {
                plan_notes_add(
                    notes, "cpuidle", TAKE_PTR(idle),
                    xstrdup("no cpuidle states (cpuidle.off or no driver): the PM QoS limit alone applies"));
                return;
        }
        while ((de = readdir(d))) {
                _cleanup_free_ char *lat = NULL, *p = NULL;
                unsigned us;

                if (!startswith(de->d_name, "state"))
                        continue;
                p = xasprintf("%s/%s/latency", idle, de->d_name);
                if (sys_read(p, &lat) < 0 || safe_atou(strstrip(lat), &us) < 0 || us <= (unsigned)limit)
                        continue;
                plan_add(plan, &setting_kind_file, "cpuidle", 0,
                         xasprintf("%s/%s/disable", idle, de->d_name), xstrdup("1"));
        }
}

static int cpuidle_plan(const PlanContext *ctx, const void *config, const char *device, Plan *plan,
                        PlanNotes *notes)
{
        const PowerConfig *c = config;
        _cleanup_cpuset_ CpuSet *done = cpuset_new(ctx->topology->n_cpus);

        power_config_note_beyond(c, ctx, notes);

        for (size_t i = 0; i < c->n; i++) {
                _cleanup_cpuset_ CpuSet *cpus = NULL;
                int limit = c->sets[i].max_exit_latency_us, offline_limit = -2; /* -2: not read yet */

                if (limit == POWER_LATENCY_UNSET)
                        continue;
                cpus = power_set_cpus(&c->sets[i], ctx);
                cpuset_and(cpus, ctx->topology->present);
                cpuset_andnot(cpus, done);
                FOREACH_CPU (cpu, cpus) {
                        bool online = cpuset_has(ctx->topology->online, (unsigned)cpu);
                        int cap = limit;

                        if (limit == POWER_LATENCY_SHALLOWEST) {
                                if (!online && offline_limit == -2)
                                        offline_limit = lowest_shallowest(cpus, ctx->topology->online);
                                cap = online ? shallowest_latency((unsigned)cpu) : offline_limit;
                                if (cap < 0) {
                                        if (online)
                                                plan_notes_add(
                                                    notes, "cpuidle",
                                                    xasprintf("/sys/devices/system/cpu/cpu%d/cpuidle", cpu),
                                                    xstrdup("no idle state that halts (polling only, or no "
                                                            "cpuidle driver): MaxExitLatencyUs=shallowest "
                                                            "leaves it as it is"));
                                        continue;
                                }
                                /* 0 µs would read as poll only (n/a): a state that exits at once is
                                 * still allowed at 1. */
                                cap = MAX(cap, 1);
                        }
                        plan_cpu((unsigned)cpu, online, cap, plan, notes);
                }
                cpuset_or(done, cpus);
        }
        if (c->global_max_exit_latency_us >= 0) {
                if (sys_exists("/dev/cpu_dma_latency"))
                        plan_add(plan, &setting_kind_pmqos, "cpuidle", 0, xstrdup("/dev/cpu_dma_latency"),
                                 xasprintf("%d", c->global_max_exit_latency_us));
                else
                        plan_notes_add(
                            notes, "cpuidle", xstrdup("/dev/cpu_dma_latency"),
                            xstrdup("no /dev/cpu_dma_latency (kernel without CONFIG_CPU_IDLE PM QoS)"));
        }
        return 0;
}

const Tuner tuner_cpuidle = {
    .name = "cpuidle",
    .sections = (const char *const[]){"Power", NULL},
    .cpu_dependent = true,
    .config_from = &tuner_cpufreq,
    .uses = cpuidle_uses,
    .plan = cpuidle_plan,
};
