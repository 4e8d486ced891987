/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdint.h>

typedef struct Manager Manager;

/* Everything rtctld tells the bus without being asked: its signals and PropertiesChanged, in one place,
 * so the vocabulary (which property changes with which event) is read in one file. Each is a no-op
 * without a bus (rtctld --no-bus). */

/* A pass is done: Applied(reason, changes, failures) and the properties a pass changes. */
void bus_emit_applied(Manager *m, const char *reason);
/* The profile directories changed (a reload). */
void bus_emit_profiles_changed(Manager *m);
/* SetProfile, a reload or a restore changed the base profile. */
void bus_emit_base_profile_changed(Manager *m);
/* A hold was taken (released 0) or ended: ProfileReleased(released) then, and the holds' properties. */
void bus_emit_holds_changed(Manager *m, uint32_t released);
/* What [Attach] rules placed changed. */
void bus_emit_attached_threads_changed(Manager *m);
/* How policy changes are followed changed (PolicyEvents). */
void bus_emit_policy_events_changed(Manager *m);
