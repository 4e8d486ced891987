/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

typedef struct Manager Manager;

#define RTCTL_BUS_NAME  "org.rtctl.Manager1"
#define RTCTL_BUS_PATH  "/org/rtctl/Manager1"
#define RTCTL_BUS_IFACE "org.rtctl.Manager1"

#define RTCTL_ERROR_NOT_AUTHORIZED   "org.rtctl.Error.NotAuthorized"
#define RTCTL_ERROR_NO_SUCH_PROFILE  "org.rtctl.Error.NoSuchProfile"
#define RTCTL_ERROR_INVALID_ARGUMENT "org.rtctl.Error.InvalidArgument"
#define RTCTL_ERROR_INVALID_PROFILE  "org.rtctl.Error.InvalidProfile"
#define RTCTL_ERROR_NOT_SUPPORTED    "org.rtctl.Error.NotSupported"
#define RTCTL_ERROR_NO_SUCH_PROCESS  "org.rtctl.Error.NoSuchProcess"
#define RTCTL_ERROR_ALREADY_ATTACHED "org.rtctl.Error.AlreadyAttached"
#define RTCTL_ERROR_NOT_ATTACHED     "org.rtctl.Error.NotAttached"
#define RTCTL_ERROR_NOT_ISOLATED     "org.rtctl.Error.NotIsolated"
#define RTCTL_ERROR_NO_SUCH_IRQ      "org.rtctl.Error.NoSuchIrq"
#define RTCTL_ERROR_UNMOVABLE        "org.rtctl.Error.Unmovable"
#define RTCTL_ERROR_ISOLATED_CPU     "org.rtctl.Error.IsolatedCPU"
#define RTCTL_ERROR_NOT_PINNED       "org.rtctl.Error.NotPinned"
#define RTCTL_ERROR_NO_SUCH_HOLD     "org.rtctl.Error.NoSuchHold"
#define RTCTL_ERROR_LIMIT_EXCEEDED   "org.rtctl.Error.LimitExceeded"
#define RTCTL_ERROR_SHUTTING_DOWN    "org.rtctl.Error.ShuttingDown"

#include <systemd/sd-bus.h>

/* Text a caller passes is data that ends up in logs, systemd's STATUS= and terminals: 0 when text, the
 * argument named arg, is printable (text_printable()), else InvalidArgument naming arg, and < 0. */
int bus_check_text(sd_bus_error *error, const char *arg, const char *text);
/* Every method that changes something comes here first. 0: go ahead. 1: polkit was asked and the call
 * comes back when it answers; the handler returns 1 ("handled", without a reply for now). < 0: refused,
 * with the error set. */
int bus_authorize(sd_bus_message *msg, Manager *m, const char *action, sd_bus_error *error);
/* manager_hold()'s errors as the caller reads them. */
int bus_hold_error(sd_bus_error *error, int r, const char *profile, const char *msg);

/* A copy of call, for keeping while it waits (its turn, polkit), that holds only the descriptors its
 * arguments name. A caller may attach descriptors to any call, as many as the bus lets a message carry
 * (16 on the system bus), and sd-bus tells nobody how many a received message holds: a kept call would
 * keep them all, and a few thousand would use up the daemon's. A reply to the copy answers the call (same
 * sender, same cookie); the copy is rewound for reading. -EBADMSG when call has no sender. */
int bus_call_copy(sd_bus_message *call, sd_bus_message **ret);

/* Connects to the system bus ($DBUS_SYSTEM_BUS_ADDRESS when set), registers the object and only then
 * takes the name, so no caller ever sees a half-registered service. */
int bus_setup(Manager *m);
