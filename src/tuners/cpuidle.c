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

/* CPUIDLE_STATE_MAX of the kernel's include/linux/cpuidle.h. */
#define IDLE_STATES_MAX 10

/* An online CPU's idle states, read once per pass: the cap and the states it disables come from one
 * read. */
typedef struct IdleStates {
        size_t n;
        struct {
                unsigned index, latency_us;
                bool polls;
        } v[IDLE_STATES_MAX];
} IdleStates;

/* Reads cpu's states; false when it has no cpuidle/ (offline, cpuidle.off, no driver). Names are read
 * only when want_polls: a numeric cap needs latencies alone. A state polls when x86 calls it POLL
 * (intel_idle, acpi_idle and haltpoll alike) or powerpc snooze, or when it takes 0 µs to leave. */
static bool idle_states_read(unsigned cpu, bool want_polls, IdleStates *s)
{
        _cleanup_free_ char *idle = xasprintf("/sys/devices/system/cpu/cpu%u/cpuidle", cpu);
        _cleanup_closedir_ DIR *d = sys_opendir(idle);
        struct dirent *de;

        s->n = 0;
        if (!d)
                return false;
        while (s->n < IDLE_STATES_MAX && (de = readdir(d))) {
                _cleanup_free_ char *p = NULL, *lat = NULL, *name = NULL;
                unsigned index, us;
                bool polls = false;

                if (!startswith(de->d_name, "state") || safe_atou(de->d_name + 5, &index) < 0)
                        continue;
                p = xasprintf("%s/%s/latency", idle, de->d_name);
                if (sys_read(p, &lat) < 0 || safe_atou(strstrip(lat), &us) < 0)
                        continue;
                if (want_polls) {
                        free(p);
                        p = xasprintf("%s/%s/name", idle, de->d_name);
                        polls = us == 0 || sys_read(p, &name) < 0 || streq(strstrip(name), "POLL") ||
                                streq(name, "snooze");
                }
                s->v[s->n].index = index;
                s->v[s->n].latency_us = us;
                s->v[s->n].polls = polls;
                s->n++;
        }
        return true;
}

/* The exit latency of the shallowest state that does not poll, -1 when there is none. Never 0: a
 * state that exits at once is taken for polling, and a cap of 0 would read as poll only (n/a). */
static int shallowest_latency(const IdleStates *s)
{
        int best = -1;

        for (size_t i = 0; i < s->n; i++)
                if (!s->v[i].polls && s->v[i].latency_us <= INT_MAX &&
                    (best < 0 || (int)s->v[i].latency_us < best))
                        best = (int)s->v[i].latency_us;
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
                        IdleStates s;
                        int us = idle_states_read((unsigned)cpu, true, &s) ? shallowest_latency(&s) : -1;

                        if (us >= 0 && (best < 0 || us < best))
                                best = us;
                }
        return best;
}

/* The PM QoS value survives hotplug: kept for offline CPUs too (restoring it at offline would only
 * make the online pass write it again). The idle states exist only while the CPU is online: states is
 * NULL for an offline CPU, and has_states false for one without cpuidle. */
static void plan_cpu(unsigned cpu, const IdleStates *states, bool has_states, int limit, Plan *plan,
                     PlanNotes *notes)
{
        _cleanup_free_ char *qos =
            xasprintf("/sys/devices/system/cpu/cpu%u/power/pm_qos_resume_latency_us", cpu);

        if (sys_exists(qos))
                plan_add(plan, &setting_kind_file, "cpuidle", 0, TAKE_PTR(qos), pm_qos_value(limit));
        if (!states)
                return;
        if (!has_states) {
                plan_notes_add(
                    notes, "cpuidle", xasprintf("/sys/devices/system/cpu/cpu%u/cpuidle", cpu),
                    xstrdup("no cpuidle states (cpuidle.off or no driver): the PM QoS limit alone applies"));
                return;
        }
        for (size_t i = 0; i < states->n; i++)
                if (states->v[i].latency_us > (unsigned)limit)
                        plan_add(plan, &setting_kind_file, "cpuidle", 0,
                                 xasprintf("/sys/devices/system/cpu/cpu%u/cpuidle/state%u/disable", cpu,
                                           states->v[i].index),
                                 xstrdup("1"));
}

static int cpuidle_plan(const PlanContext *ctx, const void *config, const char *device, Plan *plan,
                        PlanNotes *notes)
{
        const PowerConfig *c = config;
        _cleanup_cpuset_ CpuSet *done = cpuset_new(ctx->topology->n_cpus);

        power_config_note_beyond(c, ctx, notes);

        for (size_t i = 0; i < c->n; i++) {
                _cleanup_cpuset_ CpuSet *cpus = NULL;
                int limit = c->sets[i].max_exit_latency_us, offline_limit = -1;
                bool shallowest = limit == POWER_LATENCY_SHALLOWEST, offline_read = false;

                if (limit == POWER_LATENCY_UNSET)
                        continue;
                cpus = power_set_cpus(&c->sets[i], ctx);
                cpuset_and(cpus, ctx->topology->present);
                cpuset_andnot(cpus, done);
                FOREACH_CPU (cpu, cpus) {
                        bool online = cpuset_has(ctx->topology->online, (unsigned)cpu);
                        IdleStates states;
                        bool has_states = online && idle_states_read((unsigned)cpu, shallowest, &states);
                        int cap = limit;

                        if (shallowest && online) {
                                cap = shallowest_latency(&states);
                                if (cap < 0) {
                                        plan_notes_add(
                                            notes, "cpuidle",
                                            xasprintf("/sys/devices/system/cpu/cpu%u/cpuidle",
                                                      (unsigned)cpu),
                                            xstrdup("no idle state that halts (polling only, or no "
                                                    "cpuidle driver): MaxExitLatencyUs=shallowest "
                                                    "leaves it as it is"));
                                        continue;
                                }
                        } else if (shallowest) {
                                if (!offline_read) {
                                        offline_limit = lowest_shallowest(cpus, ctx->topology->online);
                                        offline_read = true;
                                }
                                cap = offline_limit;
                                if (cap < 0)
                                        continue;
                        }
                        plan_cpu((unsigned)cpu, online ? &states : NULL, has_states, cap, plan, notes);
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
