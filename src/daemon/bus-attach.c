/* SPDX-License-Identifier: GPL-2.0-or-later */
/* What [Attach] rules placed, as the bus shows it: read from the Manager, never from the kernel. */
#include "daemon/bus-attach.h"
#include "daemon/bus.h"
#include "daemon/manager.h"

int bus_property_attached_threads(sd_bus *bus, const char *path, const char *interface, const char *property,
                                  sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
        Manager *m = userdata;
        int r;

        r = sd_bus_message_open_container(reply, 'a', "(uusss)");
        for (size_t i = 0; r >= 0 && i < m->n_matches; i++)
                if (manager_rule_whole(m, &m->matches[i]))
                        r = sd_bus_message_append(reply, "(uusss)", m->matches[i].pid, 0, m->matches[i].comm,
                                                  manager_rule_name(m, &m->matches[i]),
                                                  attach_why_string(ATTACH_WHY_ALL));
        for (size_t i = 0; r >= 0 && i < m->n_rule_threads; i++) {
                const AttachedThread *t = &m->rule_threads[i];
                r = sd_bus_message_append(reply, "(uusss)", t->pid, t->tid, t->comm, t->rule,
                                          attach_why_string(t->why));
        }
        if (r < 0)
                return r;
        return sd_bus_message_close_container(reply);
}

int bus_property_policy_events(sd_bus *bus, const char *path, const char *interface, const char *property,
                               sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
        _cleanup_free_ char *method = manager_sched_method(userdata);

        return sd_bus_message_append(reply, "s", method);
}
