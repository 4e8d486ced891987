/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The setting kind of the cgroup a process is a member of. */
#include <dirent.h>
#include <glib.h>

#include "core/attach.h"
#include "core/cgroupfs.h"
#include "core/kind-internal.h"
#include "core/member-origin.h"
#include "core/systemd.h"
#include "shared/log.h"
#include "shared/sysfs.h"

/* The cgroup /proc/PID/cpuset (v1) or /proc/PID/cgroup (v2) names. */
static int member_cgroup(const char *object, char **ret)
{
        _cleanup_free_ char *s = NULL;
        int r;

        if (!endswith(object, "/cpuset"))
                return member_origin_read_cgroup(object, ret);
        r = sys_read(object, &s);
        if (r < 0)
                return r;
        *ret = xstrdup(strstrip(s));
        return 0;
}

static int member_read(SettingContext *ctx, const char *object, const char *hint, char **ret)
{
        _cleanup_free_ char *s = NULL;
        unsigned pid;
        int r;

        r = member_cgroup(object, &s);
        if (r < 0 || endswith(object, "/cpuset")) {
                *ret = TAKE_PTR(s);
                return r < 0 ? r : 0;
        }
        /* About to leave for rtctl's scope: what it read is the original, so the cgroup itself. */
        if (hint && startswith(hint, "/rtctl.slice/") && !startswith(s, "/rtctl.slice/") &&
            kind_pid_of(object, &pid) >= 0)
                return member_origin_describe(ctx, pid, s, ret);
        *ret = TAKE_PTR(s);
        return 0;
}

/* Where a desired value sends the process. "PATH/" (a process whose threads the cpuset tuner places one
 * by one in the threaded subtree PATH): into PATH's housekeeping child where it has one, else PATH, so
 * that no thread of it waits in PATH itself, which has every CPU. */
static char *member_target(const char *mount, const char *value)
{
        size_t n = strlen(value);
        _cleanup_free_ char *tree = NULL, *hk = NULL;

        if (n < 2 || value[n - 1] != '/')
                return xstrdup(value);
        tree = xstrndup(value, n - 1);
        hk = xasprintf("%s%s/housekeeping", mount, tree);
        return sys_exists(hk) ? xasprintf("%s/housekeeping", tree) : TAKE_PTR(tree);
}

/* The held process exited while it was moved, and its PID names another process now, which the move
 * may have taken instead (object is the PID's /proc/PID/cgroup or cpuset, target where the move went). That
 * one was born after the held one was checked, in its parent's cgroup: it goes back there. */
static void member_undo(const char *mount, const char *object, unsigned pid, const char *target)
{
        const char *file = strrchr(object, '/') + 1;
        _cleanup_free_ char *now = NULL, *home = NULL, *parent = NULL, *dir = NULL;
        TaskInfo t;
        int r;

        if (task_info(pid, &t) < 0 || member_cgroup(object, &now) < 0 || !streq(now, target))
                return;
        parent = xasprintf("/proc/%u/%s", t.ppid, file);
        if (member_cgroup(parent, &home) < 0 || streq(home, target))
                return; /* born where the move went: nothing to undo */
        dir = xasprintf("%s%s", mount, streq(home, "/") ? "" : home);
        r = cgroup_move(dir, pid);
        _cleanup_free_ char *comm = text_escape(t.comm), *was = text_escape(home);
        if (r < 0)
                log_warning_errno(r,
                                  "Process %u exited while it was moved, and its PID went to another "
                                  "process (%s), which is now in %s; failed to move it back to %s: %m",
                                  pid, comm, target, was);
        else
                log_warning("Process %u exited while it was moved, and its PID went to another process "
                            "(%s): moved that one back to %s.",
                            pid, comm, was);
}

static int member_move(SettingContext *ctx, const CgroupInfo *info, const char *object, unsigned pid,
                       const char *target)
{
        if (info->mode == CGROUP_V2)
                (void)cgroup_gather_threads(info->mount, pid);
        if (info->mode == CGROUP_V2 && info->systemd)
                return member_write_systemd(ctx, object, pid, target);
        _cleanup_free_ char *dir = xasprintf("%s%s", info->mount, streq(target, "/") ? "" : target);
        return cgroup_move(dir, pid);
}

/* The PID is written, as cgroup.procs takes nothing else, while a pidfd holds the planned process: had
 * it exited by then, its PID may have gone to another process (another user's, root's), and the move
 * would take that one; had it gone before, the hold fails. */
static int member_write_task(SettingContext *ctx, const char *object, const char *value,
                             unsigned long long starttime)
{
        _cleanup_free_ char *target = NULL;
        CgroupInfo info;
        TaskHold hold;
        TaskInfo t;
        unsigned pid;
        int r;

        r = kind_pid_of(object, &pid);
        if (r < 0)
                return r;
        r = cgroup_discover(&info);
        if (r < 0)
                return r;
        if (info.mode == CGROUP_NONE) {
                cgroup_info_clear(&info);
                return -EOPNOTSUPP;
        }
        r = task_hold(pid, starttime, &hold);
        if (r < 0) {
                cgroup_info_clear(&info);
                return r;
        }
        target = member_target(info.mount, value);
        r = member_move(ctx, &info, object, pid, target);
        /* A job systemd runs later takes the PID then (systemd 252 takes no pidfd): held until this
         * call only. */
        if (r >= 0 && r != SYSTEMD_QUEUED && !task_hold_alive(&hold) && task_info(pid, &t) >= 0 &&
            t.starttime != hold.starttime) {
                member_undo(info.mount, object, pid, member_origin_path(target));
                r = -ESRCH;
        } else if (r == -ESRCH || (r >= 0 && task_exited(pid)))
                /* A process that exited is gone, as a vanished file is; so is one exiting, which the
                 * kernel's move skips (the write succeeds and it stays where it is). */
                r = -ENOENT;
        task_hold_clear(&hold);
        cgroup_info_clear(&info);
        return r;
}

static int member_write(SettingContext *ctx, const char *object, const char *value)
{
        return member_write_task(ctx, object, value, 0);
}

const SettingKind setting_kind_member = {
    .name = "member",
    .read = member_read,
    .write = member_write,
    .write_task = member_write_task,
    .equal = member_origin_equal,
};

/* Every process with a thread in the cgroup dir (a /sys/fs/cgroup path) or below it, once each. */
static void strays_collect(const char *dir, GHashTable *tgids)
{
        _cleanup_free_ unsigned *tids = NULL;
        _cleanup_closedir_ DIR *d = sys_opendir(dir);
        struct dirent *de;
        size_t n = 0;

        if (cgroup_threads(dir, &tids, &n) >= 0)
                for (size_t i = 0; i < n; i++) {
                        unsigned tgid;
                        if (attach_thread_tgid(tids[i], &tgid) >= 0)
                                g_hash_table_add(tgids, GUINT_TO_POINTER(tgid));
                }
        while (d && (de = readdir(d)))
                if (de->d_type == DT_DIR && !streq(de->d_name, ".") && !streq(de->d_name, "..")) {
                        _cleanup_free_ char *sub = xasprintf("%s/%s", dir, de->d_name);
                        strays_collect(sub, tgids);
                }
}

int member_return_strays(SettingContext *ctx, const char *slice)
{
        _cleanup_free_ char *top = xasprintf("/sys/fs/cgroup%s", slice);
        g_autoptr(GHashTable) tgids = g_hash_table_new(g_direct_hash, g_direct_equal);
        GHashTableIter it;
        gpointer key;
        int left = 0;

        assert(slice);

        strays_collect(top, tgids);
        g_hash_table_iter_init(&it, tgids);
        while (g_hash_table_iter_next(&it, &key, NULL)) {
                unsigned pid = GPOINTER_TO_UINT(key), up = pid;
                _cleanup_free_ char *home = NULL, *object = xasprintf("/proc/%u/cgroup", pid);
                uid_t uid, euid, up_uid, up_euid;
                TaskInfo t;
                /* Its own restore is a job systemd runs: not a stray, and not to be overtaken. */
                if (ctx->queued_restores && g_hash_table_contains(ctx->queued_restores, object)) {
                        left++;
                        continue;
                }
                if (task_uids(pid, &uid, &euid) < 0)
                        continue; /* gone */
                /* The nearest ancestor outside the slice: a child of an attached process finds its
                 * parent back home by now, a grandchild its grandparent. Only an ancestor of the same
                 * user gives its cgroup: an attached process whose own way back failed (its origin
                 * gone), started by root's systemd-run, must not land in root's cgroup. */
                for (unsigned hops = 0; hops < 64 && task_info(up, &t) >= 0 && t.ppid > 1; hops++) {
                        _cleanup_free_ char *cg = NULL, *p = xasprintf("/proc/%u/cgroup", t.ppid);
                        up = t.ppid;
                        if (member_origin_read_cgroup(p, &cg) < 0 || startswith(cg, slice))
                                continue;
                        if (task_uids(up, &up_uid, &up_euid) >= 0 && up_uid == uid)
                                home = TAKE_PTR(cg);
                        break;
                }
                if (!home) {
                        if (task_info(pid, &t) >= 0)
                                left++;
                        continue;
                }
                int r = member_write(ctx, object, home);
                if (r < 0 && r != -ENOENT && r != -ESRCH) {
                        log_warning_errno(r,
                                          "Failed to move process %u, born in %s, to its ancestor's %s: %m",
                                          pid, slice, home);
                        left++;
                } else if (r >= 0)
                        log_info("Process %u, born in %s, moved to its ancestor's %s.", pid, slice, home);
        }
        return left;
}
