/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <systemd/sd-bus.h>

#include "core/systemd.h"

/* What the calls of systemd-units.c use of the client in systemd.c. */

#define SD_NAME  "org.freedesktop.systemd1"
#define SD_PATH  "/org/freedesktop/systemd1"
#define SD_IFACE "org.freedesktop.systemd1.Manager"

/* The connection, opened on first use; SYSTEMD_UNKNOWN in cache-only mode, -EAGAIN while systemd is
 * given a rest or the pass has run long enough (SYSTEMD_QUIET_USEC, SYSTEMD_PASS_USEC). */
int sdc_bus(SystemdClient *c, sd_bus **ret);
/* A failed call's errno: a timeout makes the client quiet (-EAGAIN), a missing unit is -ENOENT. */
int sdc_errno_of(SystemdClient *c, const sd_bus_error *e, int r);

/* What systemd last said of a unit's property: value NULL forgets it. */
void sdc_cache_put(SystemdClient *c, const char *unit, const char *property, const char *value);
void sdc_cache_forget_unit(SystemdClient *c, const char *unit);
/* In cache-only mode: what systemd last said (0), or SYSTEMD_UNKNOWN. Otherwise 1: ask. */
int sdc_cache_get(SystemdClient *c, const char *unit, const char *property, char **ret);

/* A call to the manager's member, then sending it: see systemd.c. */
int sdc_new_call(SystemdClient *c, const char *member, sd_bus **ret_bus, sd_bus_message **ret);
int sdc_send_call(SystemdClient *c, sd_bus *b, sd_bus_message *m, int r, const char *label);
/* Sends a daemon reload, followed as outstanding: SYSTEMD_QUEUED. */
int sdc_reload_async(SystemdClient *c, sd_bus *b, const char *label);
