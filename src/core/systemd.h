/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <glib.h>
#include <systemd/sd-event.h>

#include "shared/cpuset.h"

/* The few calls to systemd's manager (org.freedesktop.systemd1) that CPU isolation and rival services
 * need. systemd owns the cgroup tree there: rtctl changes it only through these, and writes only the
 * cgroup files systemd leaves alone (cpuset.cpus.partition). Negative errno on failure; -ENOENT when
 * the unit does not exist.
 *
 * Calls systemd answers from memory (properties, SetUnitProperties, queueing a job) are made directly.
 * What takes systemd time is never waited for in place: a start or stop returns SYSTEMD_QUEUED once
 * the job is queued, a daemon reload is sent without waiting, and the client follows both on the bus
 * (JobRemoved, the reload's reply). With an event loop that happens on the loop, and `settled` runs
 * when nothing is outstanding any more; without one, systemd_client_wait() processes the bus. */

#define SYSTEMD_QUEUED 1

/* Every call waits for systemd's answer at most SYSTEMD_CALL_USEC (what it answers from memory takes it
 * milliseconds), against the unit's WatchdogSec=30s; after a call that timed out the next
 * SYSTEMD_QUIET_USEC fail at once with -EAGAIN (tried again shortly), or until systemd answers a Ping. A
 * daemon reload is followed for SYSTEMD_RELOAD_USEC. */
#define SYSTEMD_CALL_USEC   (5 * 1000000ULL)
#define SYSTEMD_QUIET_USEC  (10 * 1000000ULL)
#define SYSTEMD_RELOAD_USEC (90 * 1000000ULL)
/* A pass that has run this long makes no more calls (-EAGAIN: the next pass makes them). */
#define SYSTEMD_PASS_USEC (10 * 1000000ULL)
/* A read in cache-only mode of what systemd was never asked. */
#define SYSTEMD_UNKNOWN (-ENOMEDIUM)

typedef struct SystemdClient SystemdClient;

/* What a job or a reload ended with, when that was not success: label is what the caller named the
 * request after (the setting's object). */
typedef struct SystemdFailure {
        char *label;
        char *message;
} SystemdFailure;

/* event NULL: no loop (the CLI); the bus is connected on first use either way. */
SystemdClient *systemd_client_new(sd_event *event);
void systemd_client_free(SystemdClient *c);
/* Called (on the loop) when the last outstanding job or reload ended. */
void systemd_client_on_settled(SystemdClient *c, void (*settled)(void *userdata), void *userdata);
size_t systemd_client_pending(const SystemdClient *c);
/* The failures since the last call; the caller frees them with systemd_failures_free(). */
SystemdFailure *systemd_client_take_failures(SystemdClient *c, size_t *ret_n);
void systemd_failures_free(SystemdFailure *f, size_t n);
/* The jobs that ended since the last call: label -> systemd's result ("done" when it did what was
 * asked). The caller destroys the table. */
GHashTable *systemd_client_take_ended(SystemdClient *c);
/* Cache-only mode, for the dry runs behind read-only calls (Plan, Verify, Check): nothing is sent to
 * systemd; reads answer what systemd said last (in a pass), or SYSTEMD_UNKNOWN. */
void systemd_client_cache_only(SystemdClient *c, bool cache_only);
/* A pass begins (true) or ends (false): see SYSTEMD_PASS_USEC. */
void systemd_client_pass_start(SystemdClient *c, bool start);
/* Without an event loop: processes the bus until nothing is outstanding, or -ETIMEDOUT. */
int systemd_client_wait(SystemdClient *c, uint64_t timeout_usec);

/* AllowedCPUs= of a unit, as a CPU list ("" when unset: all CPUs). */
int systemd_unit_cpus(SystemdClient *c, const char *unit, char **ret);
/* Sets AllowedCPUs= at run time only (lost at reboot, like everything rtctl does); "" unsets it. */
int systemd_set_unit_cpus(SystemdClient *c, const char *unit, const char *cpulist);
/* Whether systemd's units have property (of D-Bus type type) on interface
 * ("org.freedesktop.systemd1.Slice"): 1 or 0, from the running manager's introspection data, so a
 * property that arrives with a newer systemd is found without comparing version numbers. No tuner asks
 * today: CPUSetPartition=, the one it was for, partitions a unit's cgroup, and rtctl's partition is a
 * threaded cgroup below its delegated scope (ARCHITECTURE.md, "cgroup v2: threads"). */
int systemd_has_property(SystemdClient *c, const char *interface, const char *property, const char *type);
/* The answer from introspection data: interface's block (up to its </interface>) holds
 * <property name="PROPERTY" type="TYPE" ...>. */
bool systemd_introspection_has(const char *xml, const char *interface, const char *property,
                               const char *type);
/* A string property of a unit, and setting one at run time only. */
int systemd_unit_string(SystemdClient *c, const char *unit, const char *property, char **ret);
int systemd_set_unit_string(SystemdClient *c, const char *unit, const char *property, const char *value);
int systemd_unit_active(SystemdClient *c, const char *unit, bool *ret);
/* LoadState ("loaded", "not-found", "masked"), ActiveState and UnitFileState ("enabled",
 * "masked-runtime", ...) of a unit, loading it if needed. */
int systemd_unit_file_state(SystemdClient *c, const char *unit, char **ret_load, char **ret_active,
                            char **ret_file);

/* These queue a job: SYSTEMD_QUEUED (or 0 when there was nothing to do), negative errno when systemd
 * refused. label names the request in failures. */
/* A transient slice with AllowedCPUs= (kept until stopped: a started slice is not collected). */
int systemd_start_slice(SystemdClient *c, const char *unit, const char *description, const char *cpulist,
                        const char *label);
/* Moves pid into a new transient scope in slice. */
int systemd_start_scope(SystemdClient *c, const char *unit, const char *slice, unsigned pid,
                        const char *label);
int systemd_start_unit(SystemdClient *c, const char *unit, const char *label);
int systemd_stop_unit(SystemdClient *c, const char *unit, const char *label);
/* Masks (or unmasks) a unit until reboot (/run) and has systemd reload, so that a masked service
 * cannot be started, not even by D-Bus activation. The reload is outstanding until systemd answers. */
int systemd_mask_runtime(SystemdClient *c, const char *unit, bool mask, const char *label);

/* Moves pid into an existing unit's cgroup, or a sub-cgroup of a delegated one ("" for the unit's own). */
int systemd_attach(SystemdClient *c, const char *unit, const char *subcgroup, unsigned pid);
/* The unit systemd's manager puts pid in (the innermost unit it knows: for a process in a user's
 * manager, user@UID.service), by its name. */
int systemd_unit_by_pid(SystemdClient *c, unsigned pid, char **ret);
