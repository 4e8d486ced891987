/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include "shared/cpuset.h"

typedef struct CpuInfo {
        /* -1 where the kernel does not say (an offline CPU on x86 has no topology/ directory; values
         * seen while it was online are kept across refreshes). */
        int package;
        int die;
        int core_id; /* topology/core_id: unique within a package and die only */
        /* The lowest CPU number with the same package, die and core_id: unique machine-wide, and stable
         * while SMT siblings go offline (thread_siblings_list is not). */
        int core;
        int llc; /* the lowest CPU number sharing its last-level cache */
        int node;
        bool present;
        bool online;
} CpuInfo;

typedef struct Topology {
        unsigned n_cpus; /* highest possible CPU + 1: the size of every CpuSet of this machine */
        CpuSet *possible;
        CpuSet *present;
        CpuSet *online;
        CpuInfo *cpus; /* n_cpus entries */
} Topology;

/* Reads /sys/devices/system/cpu and /sys/devices/system/node (through the root prefix). previous,
 * when given, supplies the core/cache/node of CPUs that are offline now. */
int topology_load(const Topology *previous, Topology **ret);
void topology_free(Topology *t);
static inline void topology_freep(Topology **t)
{
        topology_free(*t);
}
#define _cleanup_topology_ _cleanup_(topology_freep)

/* All CPUs (online or not) with the same core id as cpu; just cpu when unknown. */
CpuSet *topology_core_siblings(const Topology *t, unsigned cpu);
