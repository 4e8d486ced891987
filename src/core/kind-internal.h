/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include "core/setting.h"
#include "shared/cpuset.h"

/* What the setting kinds' files (kind-*.c) share. */

/* kind-cpumask.c: a CPU list, "" the empty set; NULL when s is none. */
CpuSet *kind_parse_list_or_null(const char *s);
/* kind-cpumask.c: the same CPUs, or the same text when either is no CPU list. */
bool kind_cpulist_equal(const char *a, const char *b);
/* kind-thread.c: the PID of "/proc/PID/...". */
int kind_pid_of(const char *object, unsigned *ret);
/* kind-unit.c: the unit of "systemd:UNIT:PROPERTY"; NULL when object names none. */
char *kind_unit_of(const char *object);
/* kind-member.c: every process still in the cgroup of slice ("/rtctl.slice"), born there to a process
 * that was placed in it, moved to the cgroup of its nearest ancestor outside it when that ancestor is
 * the same user's (through systemd where it owns the tree). How many are left: alive with no such
 * ancestor, its own restore still a systemd job, or their move failed (logged). */
int member_return_strays(SettingContext *ctx, const char *slice);
