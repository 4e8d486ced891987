/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <systemd/sd-event.h>

#include "core/daemon-conf.h"

typedef struct Uevent {
        const char *action;    /* add, change, remove, online, offline, bind, unbind, ... */
        const char *subsystem; /* block, cpu, ... */
        const char *sysname;   /* loop3, cpu1 */
        const char *devtype;   /* disk, partition, or NULL */
} Uevent;

/* One kernel uevent datagram of exactly len bytes ("add@/devices/...\0ACTION=add\0DEVPATH=...\0..."), as
 * received: it need not end in a NUL, and a field without one is not read. False when it is not a
 * device event or lacks ACTION, SUBSYSTEM or DEVPATH. ret points into buf. */
bool uevent_parse(const char *buf, size_t len, Uevent *ret);

/* ev NULL: the kernel dropped events (the socket overflowed), so every device may have changed unseen. */
typedef void (*UeventHandler)(const Uevent *ev, void *userdata);

typedef struct UeventMonitor UeventMonitor;

/* With UEVENT_AUTO, udev's events when udevd runs (its control socket exists), the kernel's otherwise.
 * Every message waiting on the socket is handled in one dispatch, so a burst marks its devices dirty
 * before the (lower priority) reconcile pass runs once. */
int uevent_monitor_new(sd_event *e, UeventBackend backend, UeventHandler handler, void *userdata,
                       UeventMonitor **ret);
void uevent_monitor_free(UeventMonitor *m);
const char *uevent_monitor_backend_name(const UeventMonitor *m);
