/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Where an attached process came from on cgroup v2 with systemd, and putting it back exactly there
 * (member-origin.h says why the path alone is not to be trusted). */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cgroupfs.h"
#include "core/member-origin.h"
#include "core/systemd.h"
#include "core/tasks.h"
#include "shared/log.h"
#include "shared/sysfs.h"

#define CGROUP_MOUNT "/sys/fs/cgroup"

int member_origin_read_cgroup(const char *object, char **ret)
{
        return cgroup_read_unified(object, ret);
}

int member_origin_describe(SettingContext *ctx, unsigned pid, const char *path, char **ret)
{
        assert(path);
        assert(ret);

        _cleanup_free_ char *dir = xasprintf("%s" CGROUP_MOUNT "%s", sysroot(), path), *object = NULL,
                            *again = NULL, *unit = NULL;
        struct stat st;
        TaskInfo t;
        int r;

        if (task_info(pid, &t) < 0)
                return -ENOENT;
        if (stat(dir, &st) < 0)
                return -errno;
        /* The directory is the process's cgroup only if the process did not move meanwhile. */
        object = xasprintf("/proc/%u/cgroup", pid);
        r = member_origin_read_cgroup(object, &again);
        if (r < 0)
                return r;
        if (!streq(again, path))
                return -EAGAIN;
        /* What systemd says, not a unit derived from the path; a dry run does not ask (unknown). */
        if (systemd_unit_by_pid(ctx->systemd, pid, &unit) < 0)
                unit = NULL;
        *ret = xasprintf("cgroup:%llu start:%llu unit:%s %s", (unsigned long long)st.st_ino, t.starttime,
                         unit ?: "?", path);
        return 0;
}

void member_origin_clear(MemberOrigin *o)
{
        assert(o);

        free(o->unit);
        free(o->path);
        *o = (MemberOrigin){};
}

int member_origin_parse(const char *value, MemberOrigin *ret)
{
        unsigned long long id, start;
        char unit[256], tail;
        int n = 0;

        assert(value);

        if (!startswith(value, "cgroup:") ||
            sscanf(value, "cgroup:%llu start:%llu unit:%255s%c%n", &id, &start, unit, &tail, &n) != 4 ||
            tail != ' ' || value[n] != '/')
                return -EINVAL;
        *ret = (MemberOrigin){.id = id,
                              .starttime = start,
                              .unit = streq(unit, "?") ? NULL : xstrdup(unit),
                              .path = xstrdup(value + n)};
        return 0;
}

const char *member_origin_path(const char *value)
{
        const char *p;

        if (!value || !startswith(value, "cgroup:") || !(p = strchr(value, '/')))
                return value;
        return p;
}

/* Where the restore of an origin whose cgroup went puts the process: rtctl-restored-PID under an
 * ancestor of that cgroup (restore_nearby() below), as good as back. */
static bool restored_near(const char *current, const char *origin)
{
        const char *leaf = current ? strrchr(current, '/') : NULL;
        size_t n;

        if (!leaf || !origin || !startswith(leaf + 1, "rtctl-restored-"))
                return false;
        n = (size_t)(leaf - current);
        return n > 0 && strncmp(current, origin, n) == 0 && origin[n] == '/';
}

/* A desired path that ends in a slash: anywhere in that cgroup or below it (a process whose threads
 * are placed one by one in a threaded subtree; its leader may be in any of them). */
static bool within_tree(const char *current, const char *desired)
{
        size_t n = desired ? strlen(desired) : 0;

        if (!current || n < 2 || desired[n - 1] != '/')
                return false;
        return strncmp(current, desired, n - 1) == 0 && (current[n - 1] == 0 || current[n - 1] == '/');
}

bool member_origin_equal(const char *current, const char *desired)
{
        const char *p = member_origin_path(current), *want = member_origin_path(desired);

        return setting_equal_folded(p, want) || within_tree(p, want) ||
               (desired && startswith(desired, "cgroup:") && restored_near(p, want));
}

/* No "." or ".." component: the path names a directory below the mount, and only that one. */
static bool path_below(const char *path)
{
        const char *p = path;

        if (*p != '/')
                return false;
        while (*p) {
                size_t n;
                p += strspn(p, "/");
                n = strcspn(p, "/");
                if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
                        return false;
                p += n;
        }
        return true;
}

static int write_procs(int dfd, unsigned pid)
{
        char buf[16];
        int fd, r = 0, n = snprintf(buf, sizeof buf, "%u", pid);

        fd = openat(dfd, "cgroup.procs", O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        if (write(fd, buf, (size_t)n) != n)
                r = -errno;
        close(fd);
        return r == -ESRCH ? -ENOENT : r;
}

/* The directory path names, opened; -ESTALE when it is not the one of id (0: any directory root owns,
 * for an original journalled before ids were: a directory a user made is not replayed as root). */
static int open_origin(const char *path, unsigned long long id)
{
        _cleanup_free_ char *dir = NULL;
        struct stat st;
        int dfd;

        if (!path_below(path))
                return -EINVAL;
        dir = xasprintf("%s" CGROUP_MOUNT "%s", sysroot(), path);
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (dfd < 0)
                return errno == ENOENT ? -ESTALE : -errno;
        if (fstat(dfd, &st) < 0 || (id ? st.st_ino != id : st.st_uid != 0)) {
                close(dfd);
                return id ? -ESTALE : -EPERM;
        }
        return dfd;
}

/* The real uid of pid, from /proc/PID/status. */
static int task_uid(unsigned pid, uid_t *ret)
{
        _cleanup_free_ char *object = xasprintf("/proc/%u/status", pid), *s = NULL;
        unsigned long u;
        const char *p;
        int r = sys_read(object, &s);

        if (r < 0)
                return r;
        p = strstr(s, "\nUid:");
        if (!p || sscanf(p + 5, "%lu", &u) != 1)
                return -ENODATA;
        *ret = (uid_t)u;
        return 0;
}

/* Its cgroup went (the user's manager removes a scope once it is empty): into a new leaf under the
 * nearest surviving ancestor of the path, and only when that ancestor is in the process's own user's
 * delegated tree (owned by its real uid, not root). The leaf is chowned to that user as systemd does a
 * delegated cgroup; a new, empty leaf is one the kernel's no-internal-process rule accepts. -ESTALE
 * when there is no such place. */
static int restore_nearby(unsigned pid, const char *path)
{
        _cleanup_free_ char *dir = xstrdup(path), *name = xasprintf("rtctl-restored-%u", pid);
        struct stat st;
        uid_t uid;
        gid_t gid;
        char *slash;
        int dfd = -1, leaf, r;

        if (!path_below(path) || task_uid(pid, &uid) < 0 || uid == 0)
                return -ESTALE;
        while ((slash = strrchr(dir, '/')) && slash != dir) {
                *slash = 0;
                _cleanup_free_ char *full = xasprintf("%s" CGROUP_MOUNT "%s", sysroot(), dir);
                dfd = open(full, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
                if (dfd >= 0 || errno != ENOENT)
                        break;
        }
        if (dfd < 0)
                return -ESTALE;
        if (fstat(dfd, &st) < 0 || st.st_uid != uid) {
                close(dfd);
                return -ESTALE; /* not this user's tree: no place of theirs left */
        }
        gid = st.st_gid;
        if (mkdirat(dfd, name, 0755) < 0 && errno != EEXIST) {
                r = -errno;
                close(dfd);
                return r;
        }
        leaf = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        close(dfd);
        if (leaf < 0)
                return -errno;
        if (fstat(leaf, &st) < 0 || (st.st_uid != 0 && st.st_uid != uid)) {
                close(leaf);
                return -ESTALE;
        }
        (void)fchown(leaf, uid, gid);
        static const char *const delegated[] = {"cgroup.procs", "cgroup.threads", "cgroup.subtree_control"};
        for (size_t i = 0; i < ELEMENTSOF(delegated); i++)
                (void)fchownat(leaf, delegated[i], uid, gid, AT_SYMLINK_NOFOLLOW);
        r = write_procs(leaf, pid);
        close(leaf);
        if (r >= 0) {
                _cleanup_free_ char *was = text_escape(path), *now = text_escape(dir);
                log_notice(
                    "Process %u: the cgroup it came from (%s) is gone; put back into a new cgroup %s/%s "
                    "of its user's tree.",
                    pid, was, now, name);
        }
        return r;
}

static int restore(SettingContext *ctx, unsigned pid, const MemberOrigin *o)
{
        TaskInfo t;
        int dfd, r;

        if (task_info(pid, &t) < 0 || t.starttime != o->starttime)
                return -ENOENT; /* gone, or its PID is another process's now */
        dfd = open_origin(o->path, o->id);
        if (dfd >= 0) {
                r = write_procs(dfd, pid);
                close(dfd);
                return r;
        }
        if (dfd != -ESTALE)
                return dfd;
        /* Its cgroup went: first the nearest place in its own user's tree (the system manager's unit
         * for a user's process is user@UID.service, whose own cgroup the kernel refuses: it has
         * children), then the unit systemd said it was in, never one named by a path. */
        r = restore_nearby(pid, o->path);
        if (r != -ESTALE || !o->unit)
                return r;
        r = systemd_attach(ctx->systemd, o->unit, "", pid);
        if (r == -ESRCH || (r < 0 && task_exited(pid)))
                return -ENOENT;
        return r == -ENOENT ? -ESTALE : r; /* a unit systemd does not know is no process gone */
}

int member_write_systemd(SettingContext *ctx, const char *object, unsigned pid, const char *value)
{
        MemberOrigin o;
        int r;

        assert(value);

        if (startswith(value, "/rtctl.slice/")) {
                /* "/rtctl.slice/SCOPE[/SUB]": systemd makes the scope with its first process; the
                 * others join it, in SUB below it (a cgroup of the scope's delegated subtree). A SUB
                 * not made yet: busy, tried again. */
                const char *rest = value + strlen("/rtctl.slice/");
                _cleanup_free_ char *scope = xstrndup(rest, strcspn(rest, "/"));

                if (!endswith(scope, ".scope"))
                        return -EINVAL;
                /* It is rtctld's own, delegated scope: joining it is a write to its cgroup. */
                _cleanup_free_ char *top = xasprintf("/sys/fs/cgroup/rtctl.slice/%s", scope),
                                    *dir = xasprintf("/sys/fs/cgroup%s", value);
                if (sys_exists(top)) {
                        r = cgroup_move(dir, pid);
                        if (r != -ENOENT)
                                return r;
                        if (sys_exists(top))
                                return -EBUSY;
                }
                r = systemd_start_scope(ctx->systemd, scope, "rtctl.slice", pid, object);
                /* The unit is still there while systemd removes it, once its last process left. */
                return r == -EEXIST || r == -EIO ? -EBUSY : r;
        }
        if (member_origin_parse(value, &o) < 0) {
                /* A plain path, journalled before origins were recorded. */
                TaskInfo t;
                if (task_info(pid, &t) < 0)
                        return -ENOENT;
                int dfd = open_origin(value, 0);
                if (dfd < 0)
                        return dfd;
                r = write_procs(dfd, pid);
                close(dfd);
                return r;
        }
        r = restore(ctx, pid, &o);
        member_origin_clear(&o);
        return r;
}
