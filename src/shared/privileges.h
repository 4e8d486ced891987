/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <sys/types.h>

/* Becomes the user uid for good: name's groups (initgroups()), then gid, then uid, real, effective and
 * saved alike, each checked; then checks that what was set is what the process has and that root cannot
 * be had back. For a process that runs as root; -errno (-EPERM when a check failed). */
int privileges_drop(const char *name, uid_t uid, gid_t gid);
