/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <systemd/sd-bus.h>

typedef struct Manager Manager;

/* AttachedThreads a(uuss): (pid, tid, comm, rule) of what [Attach] rules put on the isolated CPUs; tid 0
 * is the whole process (Threads=all). */
int bus_property_attached_threads(sd_bus *bus, const char *path, const char *interface, const char *property,
                                  sd_bus_message *reply, void *userdata, sd_bus_error *error);
