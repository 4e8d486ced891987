/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include "shared/cpuset.h"

/* Hybrid parts name their core types under /sys/devices/cpu_core and /sys/devices/cpu_atom. */
typedef enum CoreType {
        CORE_TYPE_UNKNOWN,
        CORE_TYPE_PERFORMANCE, /* /sys/devices/cpu_core/cpus: Intel P-cores */
        CORE_TYPE_EFFICIENT,   /* /sys/devices/cpu_atom/cpus: Intel E-cores */
} CoreType;

typedef struct CpuInfo {
        /* -1 where the kernel does not say (an offline CPU on x86 has no topology/ directory; values
         * seen while it was online are kept across refreshes). */
        int package;
        int die;
        int core_id; /* topology/core_id: unique within a package and die only */
        /* The lowest CPU number with the same package, die and core_id: unique machine-wide, and stable
         * while SMT siblings go offline (thread_siblings_list is not). */
        int core;
        int llc;     /* the lowest CPU number sharing its last-level cache */
        int cluster; /* the lowest CPU number of topology/cluster_cpus_list (a shared L2 on E-cores) */
        int node;
        uint64_t llc_bytes; /* the size of that cache; 0 where the kernel does not say */
        CoreType type;
        /* How fast the CPU is, each 0 where the kernel does not say: cpu_capacity (the scheduler's
         * 0-1024 scale), acpi_cppc/highest_perf, cpufreq/cpuinfo_max_freq (kHz). */
        unsigned capacity;
        unsigned highest_perf;
        unsigned max_freq_khz;
        bool present;
        bool online;
} CpuInfo;

typedef struct Topology {
        unsigned n_cpus; /* highest possible CPU + 1: the size of every CpuSet of this machine */
        CpuSet *possible;
        CpuSet *present;
        CpuSet *online;
        CpuInfo *cpus; /* n_cpus entries */
        bool hybrid;   /* the kernel lists core types (cpu_core / cpu_atom) */
} Topology;

/* Reads /sys/devices/system/cpu and /sys/devices/system/node (through the root prefix). previous,
 * when given, supplies the core/cache/node of CPUs that are offline now, and of every CPU whose
 * presence and online state did not change, whose own files are not read again. */
int topology_load(const Topology *previous, Topology **ret);
void topology_free(Topology *t);
static inline void topology_freep(Topology **t)
{
        topology_free(*t);
}
#define _cleanup_topology_ _cleanup_(topology_freep)
