/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The signals and property changes rtctld emits. Every other file calls these; none emits itself. */
#include "daemon/bus-ppd.h"
#include "daemon/bus-signals.h"
#include "daemon/bus.h"
#include "daemon/manager.h"

void bus_emit_applied(Manager *m, const char *reason)
{
        assert(m);

        if (!m->bus)
                return;
        (void)sd_bus_emit_signal(m->bus, RTCTL_BUS_PATH, RTCTL_BUS_IFACE, "Applied", "suu", reason,
                                 m->status.last_pass.changes, m->status.last_pass.failures);
        (void)sd_bus_emit_properties_changed(
            m->bus, RTCTL_BUS_PATH, RTCTL_BUS_IFACE, "ActiveProfile", "State", "Failures", "Unsupported",
            "IsolatedCPUs", "HousekeepingCPUs", "IsolationReason", "LastPass", "AttachedProcesses",
            "DMALatencyRequest", "RebootPending", NULL);
        (void)sd_bus_emit_properties_changed(m->bus, RTCTL_BUS_PATH, RTCTL_BUS_IFACE, "CPUPower", NULL);
        bus_ppd_emit_changed(m, false);
}

void bus_emit_profiles_changed(Manager *m)
{
        assert(m);

        if (m->bus)
                (void)sd_bus_emit_properties_changed(m->bus, RTCTL_BUS_PATH, RTCTL_BUS_IFACE, "Profiles",
                                                     NULL);
}

void bus_emit_base_profile_changed(Manager *m)
{
        assert(m);

        if (!m->bus)
                return;
        (void)sd_bus_emit_properties_changed(m->bus, RTCTL_BUS_PATH, RTCTL_BUS_IFACE, "BaseProfile", NULL);
        bus_ppd_emit_changed(m, false);
}

void bus_emit_holds_changed(Manager *m, uint32_t released)
{
        assert(m);

        if (!m->bus)
                return;
        if (released)
                (void)sd_bus_emit_signal(m->bus, RTCTL_BUS_PATH, RTCTL_BUS_IFACE, "ProfileReleased", "u",
                                         released);
        (void)sd_bus_emit_properties_changed(m->bus, RTCTL_BUS_PATH, RTCTL_BUS_IFACE, "ActiveProfileHolds",
                                             "BaseProfile", NULL);
        bus_ppd_emit_changed(m, true);
}

void bus_emit_attached_threads_changed(Manager *m)
{
        assert(m);

        if (m->bus)
                (void)sd_bus_emit_properties_changed(m->bus, RTCTL_BUS_PATH, RTCTL_BUS_IFACE,
                                                     "AttachedThreads", NULL);
}

void bus_emit_policy_events_changed(Manager *m)
{
        assert(m);

        if (m->bus)
                (void)sd_bus_emit_properties_changed(m->bus, RTCTL_BUS_PATH, RTCTL_BUS_IFACE, "PolicyEvents",
                                                     NULL);
}
