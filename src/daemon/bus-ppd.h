/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>

typedef struct Manager Manager;
typedef struct Hold Hold;

/* power-profiles-daemon's D-Bus API, which the desktop's power slider (GNOME, KDE) and powerprofilesctl
 * use: 0.20 and later serve both names, each on its own object with the interface of its name; 0.12
 * (Debian 12, and the desktops there) only the old one. */
#define PPD_NAME     "org.freedesktop.UPower.PowerProfiles"
#define PPD_PATH     "/org/freedesktop/UPower/PowerProfiles"
#define PPD_NAME_OLD "net.hadess.PowerProfiles"
#define PPD_PATH_OLD "/net/hadess/PowerProfiles"

/* With [PowerProfiles] Serve=yes: both objects, and both names asked for without taking them from
 * power-profiles-daemon (rtctld queues behind it and answers once it is gone). */
int bus_ppd_setup(Manager *m);
/* The slider's properties may have changed: ActiveProfile is signalled when the profile it shows did
 * (not on every pass: a hotplug storm makes many), ActiveProfileHolds when holds_changed. */
void bus_ppd_emit_changed(Manager *m, bool holds_changed);
/* A hold ends: one taken through this API gets ProfileReleased, sent to its holder alone. */
void bus_ppd_hold_ended(Manager *m, const Hold *h);
