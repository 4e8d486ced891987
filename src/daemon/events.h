/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <systemd/sd-event.h>

#include "shared/util.h"

typedef struct Uevent {
        const char *action;    /* add, change, remove, online, offline, bind, unbind, ... */
        const char *subsystem; /* block, cpu, ... */
        const char *sysname;   /* loop3, cpu1 */
        const char *devtype;   /* disk, partition, or NULL */
} Uevent;

typedef void (*UeventHandler)(const Uevent *ev, void *userdata);

typedef struct UeventMonitor UeventMonitor;

typedef enum UeventBackend {
        UEVENT_AUTO,
        UEVENT_KERNEL, /* NETLINK_KOBJECT_UEVENT through libnl: where no udevd runs */
        UEVENT_UDEV,   /* sd-device-monitor: after udev's rules ran */
} UeventBackend;

/* With UEVENT_AUTO, udev's events when udevd runs (its control socket exists), the kernel's otherwise.
 * Every message waiting on the socket is handled in one dispatch, so a burst marks its devices dirty
 * before the (lower priority) reconcile pass runs once. */
int uevent_monitor_new(sd_event *e, UeventBackend backend, UeventHandler handler, void *userdata,
                       UeventMonitor **ret);
void uevent_monitor_free(UeventMonitor *m);
const char *uevent_monitor_backend_name(const UeventMonitor *m);
