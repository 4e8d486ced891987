/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The setting kind of the cgroup a process is a member of. */
#include "core/cgroupfs.h"
#include "core/kind-internal.h"
#include "core/member-origin.h"
#include "shared/sysfs.h"

static int member_read(SettingContext *ctx, const char *object, const char *hint, char **ret)
{
        _cleanup_free_ char *s = NULL;
        unsigned pid;
        int r;

        if (endswith(object, "/cpuset")) {
                r = sys_read(object, &s);
                if (r >= 0)
                        *ret = xstrdup(strstrip(s));
                return r < 0 ? r : 0;
        }
        r = member_origin_read_cgroup(object, &s);
        if (r < 0)
                return r;
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

static int member_write(SettingContext *ctx, const char *object, const char *value)
{
        _cleanup_free_ char *target = NULL;
        CgroupInfo info;
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
        target = member_target(info.mount, value);
        if (info.mode == CGROUP_V2)
                (void)cgroup_gather_threads(info.mount, pid);
        if (info.mode == CGROUP_V2 && info.systemd) {
                cgroup_info_clear(&info);
                r = member_write_systemd(ctx, object, pid, target);
                /* An exiting process is skipped by the kernel's move (the write succeeds and it stays
                 * where it is): it is on its way out, gone. */
                return r == -ESRCH || (r >= 0 && task_exited(pid)) ? -ENOENT : r;
        }
        _cleanup_free_ char *dir = xasprintf("%s%s", info.mount, streq(target, "/") ? "" : target);
        cgroup_info_clear(&info);
        r = cgroup_move(dir, pid);
        /* A process that exited is gone, as a vanished file is; so is one exiting, which the kernel's
         * move skips. */
        return r == -ESRCH || (r >= 0 && task_exited(pid)) ? -ENOENT : r;
}

const SettingKind setting_kind_member = {
    .name = "member",
    .read = member_read,
    .write = member_write,
    .equal = member_origin_equal,
};
