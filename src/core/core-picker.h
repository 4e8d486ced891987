/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include "core/topology.h"

/* What Isolate=auto:N[:PREFERENCE] asks for besides N whole cores. */
typedef enum CorePreference {
        CORE_PREFER_FAST,      /* auto:N: the fastest core type, away from housekeeping's cache */
        CORE_PREFER_EFFICIENT, /* auto:N:efficient: the slowest core type (E-cores) */
        CORE_PREFER_CACHE,     /* auto:N:cache: the largest last-level cache first */
} CorePreference;

const char *core_preference_to_string(CorePreference p);
int core_preference_from_string(const char *s, CorePreference *ret);

/* The cores of one speed: a hybrid part's P-cores or E-cores; without core types, cores whose
 * performance (cpu_capacity, else acpi_cppc/highest_perf, else cpuinfo_max_freq) lies within 15% of
 * the next faster one. 0 is the fastest tier. ret_n_tiers may be NULL. */
int *cores_tiers(const Topology *t, unsigned *ret_n_tiers);

/* N whole cores (every present SMT sibling) in one last-level cache, never CPU 0's core, chosen by the
 * rules of rtctl.profile(5). ret_reason says in one line which cores and why. */
int cores_pick(const Topology *t, unsigned n, CorePreference pref, CpuSet **ret, char **ret_reason,
               char **ret_error);
