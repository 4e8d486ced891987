/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>

#include "core/topology.h"

/* The CPU topology as the daemon keeps it: read at start, marked stale by CPU events and reread once,
 * when it is next used (the pass after a burst of them), so a resume that brings N CPUs back reads it
 * once, not N times. */
typedef struct TopologyCache {
        Topology *topology;
        bool stale;
        bool places_stale; /* a CPU was added or removed: every CPU's place is read again */
        unsigned loads;    /* successful reads since start, for tests */
} TopologyCache;

/* The first read; < 0 (nothing kept) when the topology cannot be read. */
int topology_cache_load(TopologyCache *c);
/* CPUs came, went, or events were lost: the next topology_cache_get() reads the topology again. */
void topology_cache_invalidate(TopologyCache *c);
/* A CPU was added or removed (hot-add, or events lost): it may be another CPU in another place, so the
 * next read takes nothing from the last one. */
void topology_cache_invalidate_places(TopologyCache *c);
/* The topology, reread first when stale; a reread that fails is logged and the last one kept. Never
 * NULL after topology_cache_load() succeeded. */
Topology *topology_cache_get(TopologyCache *c);
void topology_cache_clear(TopologyCache *c);
