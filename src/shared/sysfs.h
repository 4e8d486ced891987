/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <dirent.h>
#include <stdbool.h>

#include "shared/cpuset.h"
#include "shared/util.h"

/* Every path under /sys, /proc and /dev that rtctl reads or writes goes through these helpers, which
 * put the root prefix $RTCTL_SYSROOT in front (read once, on first use). With it unset the prefix is
 * empty and the live kernel is used. Paths are passed and stored as the kernel names them ("/sys/..."),
 * so plans, status and the journal read the same with or without a prefix. */
const char *sysroot(void);
/* For tests that switch fixtures inside one process. */
void sysroot_set(const char *prefix);

char *sys_path(const char *path);

/* Reads a file and strips the trailing newline. */
int sys_read(const char *path, char **ret);
int sys_read_uint(const char *path, unsigned *ret);
int sys_read_int(const char *path, int *ret);
/* A CPU list (or, with mask, a hex mask) of n_cpus CPUs; NULL when unreadable or not one. */
CpuSet *sys_read_cpuset(const char *path, unsigned n_cpus, bool mask);
/* Writes value with a single write(2), as sysfs wants. Returns -errno of the write. */
int sys_write(const char *path, const char *value);
bool sys_exists(const char *path);
int sys_access(const char *path, int mode);
DIR *sys_opendir(const char *path);
int sys_readlink(const char *path, char **ret);

/* Why rtctl never writes path, a kernel key whose write runs a program as root, powers the machine off
 * or reaches the firmware or a security module; NULL for any other. Empty and "." components are
 * skipped as the kernel skips them ("kernel//core_pattern" is core_pattern); a ".." is denied. */
const char *sys_path_denied(const char *path);
