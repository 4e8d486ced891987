/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include "core/policy.h"

/* The profile's [Power] and [Power NAME] sections, read by both power tuners: cpufreq (governor, EPP,
 * minimum frequency, boost) and cpuidle (PM QoS and idle states). For each CPU and key, the first
 * section whose CPUs= covers the CPU and that sets the key wins. */

typedef struct PowerSet {
        char *section;
        CpuSpec cpus; /* unset: all */
        char *governor;
        char *epp;
        char *min_freq;          /* "max", "N%" or kHz */
        int boost;               /* -1 unset */
        int max_exit_latency_us; /* POWER_LATENCY_UNSET, POWER_LATENCY_SHALLOWEST or µs */
} PowerSet;

#define POWER_LATENCY_UNSET (-1)
/* MaxExitLatencyUs=shallowest: each CPU's first idle state that does not poll (C1, a VM's halt) and no
 * deeper one, as tuned's cstate.id_no_zero:1 picks it. */
#define POWER_LATENCY_SHALLOWEST (-2)

typedef struct PowerConfig {
        PowerSet *sets;
        size_t n;
        int global_max_exit_latency_us; /* -1 unset */
} PowerConfig;

/* NULL when no [Power] section exists; *errors gets one line per problem. */
PowerConfig *power_config_parse(Conf *conf, char ***errors);
void power_config_free(void *config);
bool power_config_has_cpufreq(const PowerConfig *c);
bool power_config_has_idle(const PowerConfig *c);
CpuSet *power_set_cpus(const PowerSet *s, const PlanContext *ctx);
/* Each [Power NAME] CPUs= that names CPUs this machine cannot have, as a failure (once, though two tuners
 * read [Power]). */
void power_config_note_beyond(const PowerConfig *c, const PlanContext *ctx, PlanNotes *notes);
