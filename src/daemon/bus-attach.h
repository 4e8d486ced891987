/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <systemd/sd-bus.h>

typedef struct Manager Manager;

/* AttachedThreads a(uusss): (pid, tid, comm, rule, why) of what [Attach] rules put on the isolated CPUs;
 * tid 0 is the whole process (Threads=all, why "all"); why is "realtime", "name" or "realtime,name". */
int bus_property_attached_threads(sd_bus *bus, const char *path, const char *interface, const char *property,
                                  sd_bus_message *reply, void *userdata, sd_bus_error *error);
/* PolicyEvents s: how real-time threads are followed ("tracepoints", "re-check after thread creation:
 * WHY"), "" when no rule says Threads=realtime. */
int bus_property_policy_events(sd_bus *bus, const char *path, const char *interface, const char *property,
                               sd_bus_message *reply, void *userdata, sd_bus_error *error);
