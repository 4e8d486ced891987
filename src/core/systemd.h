/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include "shared/cpuset.h"

/* The few calls to systemd's manager (org.freedesktop.systemd1) that CPU isolation on a systemd machine
 * needs. systemd owns the cgroup tree there: rtctl changes it only through these, and writes only the
 * cgroup files systemd leaves alone (cpuset.cpus.partition). Negative errno on failure; -ENOENT when
 * the unit does not exist. */

/* AllowedCPUs= of a unit, as a CPU list ("" when unset: all CPUs). */
int systemd_unit_cpus(const char *unit, char **ret);
/* Sets AllowedCPUs= at run time only (lost at reboot, like everything rtctl does); "" unsets it. */
int systemd_set_unit_cpus(const char *unit, const char *cpulist);
int systemd_unit_active(const char *unit, bool *ret);
/* Starts a transient slice with AllowedCPUs= (kept until stopped: a started slice is not collected). */
int systemd_start_slice(const char *unit, const char *description, const char *cpulist);
int systemd_stop_unit(const char *unit);
/* LoadState ("loaded", "not-found", "masked"), ActiveState and UnitFileState ("enabled",
 * "masked-runtime", ...) of a unit, loading it if needed. */
int systemd_unit_file_state(const char *unit, char **ret_load, char **ret_active, char **ret_file);
/* Masks (or unmasks) a unit until reboot (/run), then reloads systemd: a masked service cannot be
 * started, not even by D-Bus activation. */
int systemd_mask_runtime(const char *unit, bool mask);
/* Starts a unit (StartUnit, mode "replace") and waits until it is active. */
int systemd_start_unit(const char *unit);
/* Moves pid into a new transient scope in slice. */
int systemd_start_scope(const char *unit, const char *slice, unsigned pid);
/* Moves pid into an existing unit's cgroup, or a sub-cgroup of a delegated one ("" for the unit's own). */
int systemd_attach(const char *unit, const char *subcgroup, unsigned pid);
