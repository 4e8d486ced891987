/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include "core/setting.h"

/* Where an attached process came from, on cgroup v2 with systemd, and how it goes back there.
 *
 * The path in /proc/PID/cgroup is not rtctld's to trust: inside a delegated tree (a user's manager,
 * user@UID.service) the user names the directories, and may name one after another user's or a
 * service's unit. So the original a `member` setting journals when the process leaves for rtctl's
 * scope is the cgroup itself, not a unit derived from its path:
 *
 *     cgroup:ID start:STARTTIME unit:UNIT PATH
 *
 * ID is the cgroup's id (its directory's inode), STARTTIME the process's (with the PID, who it is),
 * UNIT what systemd's manager said the process was in ("?" when it did not say), PATH the path as
 * read. The restore writes the PID into that very directory's cgroup.procs, opened and checked by ID
 * first (root may move a process into any cgroup; systemd's AttachProcessesToUnit would take a
 * sub-cgroup path of any delegated unit). A directory of the same name but another id is not where the
 * process came from: it goes into a new leaf under the nearest surviving ancestor when that one is in the
 * process's own user's tree, else into UNIT's own cgroup, through systemd. The process is gone only
 * when it is: the PID does not exist or has another start time. A unit systemd does not know is a
 * failure, never "gone". */

typedef struct MemberOrigin {
        unsigned long long id;
        unsigned long long starttime;
        char *unit; /* NULL: unknown */
        char *path;
} MemberOrigin;

/* The cgroup in /proc/PID/cgroup (object), v2's "0::" line. */
int member_origin_read_cgroup(const char *object, char **ret);
/* The original to journal for process pid, now in cgroup path, about to move to rtctl's scope. */
int member_origin_describe(SettingContext *ctx, unsigned pid, const char *path, char **ret);
/* 0 and ret filled for a value of the form above; -EINVAL for anything else (a plain path). */
int member_origin_parse(const char *value, MemberOrigin *ret);
void member_origin_clear(MemberOrigin *o);
/* Compares where two member values are, origins by their path. */
bool member_origin_equal(const char *current, const char *desired);
/* The path a member value names: PATH of an origin, the value itself otherwise. */
const char *member_origin_path(const char *value);

/* The member kind's write on cgroup v2 with systemd: into a new scope of rtctl.slice, or back where
 * the process came from. -ENOENT only when the process is gone. */
int member_write_systemd(SettingContext *ctx, const char *object, unsigned pid, const char *value);
