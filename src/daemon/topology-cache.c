/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The CPU topology, reread once per burst of CPU events rather than once per event. */
#include <assert.h>

#include "daemon/topology-cache.h"
#include "shared/log.h"

int topology_cache_load(TopologyCache *c)
{
        int r;

        assert(c);
        assert(!c->topology);

        r = topology_load(NULL, &c->topology);
        if (r < 0)
                return r;
        c->stale = false;
        c->loads++;
        return 0;
}

void topology_cache_invalidate(TopologyCache *c)
{
        assert(c);

        c->stale = true;
}

void topology_cache_invalidate_places(TopologyCache *c)
{
        assert(c);

        c->stale = c->places_stale = true;
}

Topology *topology_cache_get(TopologyCache *c)
{
        Topology *t = NULL;
        int r;

        assert(c);
        assert(c->topology);

        if (!c->stale)
                return c->topology;
        /* Tried once per invalidation: a failure is not tried again by every reader until the next event. */
        c->stale = false;
        r = topology_load(c->places_stale ? NULL : c->topology, &t);
        c->places_stale = false;
        if (r < 0) {
                log_warning_errno(r, "Failed to reread the CPU topology: %m, ignoring");
                return c->topology;
        }
        topology_free(c->topology);
        c->topology = t;
        c->loads++;
        return t;
}

void topology_cache_clear(TopologyCache *c)
{
        assert(c);

        topology_free(c->topology);
        *c = (TopologyCache){0};
}
