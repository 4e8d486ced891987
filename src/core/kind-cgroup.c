/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Setting kinds for cgroupfs: a cgroup, the processes moved into it, a v2 partition and the
 * controllers enabled for its children. */
#include <sys/stat.h>

#include "core/cgroupfs.h"
#include "core/setting.h"
#include "shared/sysfs.h"

static int cgroup_read(SettingContext *ctx, const char *object, const char *hint, char **ret)
{
        *ret = xstrdup(sys_exists(object) ? "present" : "absent");
        return 0;
}

static char *parent_of(const char *dir)
{
        const char *slash = strrchr(dir, '/');
        return xstrndup(dir, slash && slash != dir ? (size_t)(slash - dir) : 1);
}

/* Moving into or out of a v1 cpuset gives a task the cpuset's CPUs. An IRQ thread's CPUs are the
 * kernel's: it puts the thread on its IRQ's effective CPUs when the thread next runs after the IRQ moved,
 * and not otherwise (an ACPI:Ged thread may never run again). So an IRQ thread that leaves a cpuset gets
 * those CPUs back at once: the ones it had when its IRQ stayed put, the ones the kernel would give it at
 * its next run when the IRQ moved. */
static void irq_thread_rejoin(SettingContext *ctx, unsigned pid)
{
        _cleanup_free_ char *eff = NULL, *list = NULL, *object = NULL;
        TaskInfo t;
        unsigned irq;

        if (task_info(pid, &t) < 0 || !(t.flags & PF_KTHREAD) || !irq_thread_parse(t.comm, &irq, NULL))
                return;
        eff = xasprintf("/proc/irq/%u/effective_affinity_list", irq);
        if (sys_read(eff, &list) < 0) {
                free(eff);
                eff = xasprintf("/proc/irq/%u/smp_affinity_list", irq);
                if (sys_read(eff, &list) < 0)
                        return;
        }
        object = xasprintf("/proc/%u/affinity", pid);
        (void)setting_kind_affinity.write(ctx, object, strstrip(list));
}

/* Empties a cgroup into its parent and removes it. A process that forks while it is moved leaves its
 * child behind (a build: make, sh, gcc, cc1, one generation per round), and one exiting meanwhile (a
 * zombie still listed) makes rmdir fail with EBUSY for a moment: up to CGROUP_REMOVE_ROUNDS rounds of
 * moving what is listed and trying rmdir, then EBUSY, which the pass reports as busy and retries later
 * (rtctld from its event loop, `rtctl restore` a few times). A pass never sleeps. */
#define CGROUP_REMOVE_ROUNDS 64

static int cgroup_remove(SettingContext *ctx, const char *dir)
{
        _cleanup_free_ char *parent = parent_of(dir), *path = sys_path(dir);
        int r = 0;

        for (int attempt = 0; attempt < CGROUP_REMOVE_ROUNDS; attempt++) {
                _cleanup_free_ unsigned *pids = NULL;
                size_t n = 0;

                if (!sys_exists(dir))
                        return 0;
                r = cgroup_procs(dir, &pids, &n);
                if (r == -EOPNOTSUPP) {
                        /* A threaded cgroup (v2) lists no processes: its threads go to the parent,
                         * within their threaded domain. */
                        r = cgroup_threads(dir, &pids, &n);
                        if (r < 0)
                                return r;
                        for (size_t i = 0; i < n; i++)
                                (void)cgroup_move_thread_v2(parent, pids[i]);
                } else if (r < 0)
                        return r;
                else
                        for (size_t i = 0; i < n; i++)
                                if (cgroup_move(parent, pids[i]) >= 0) /* ESRCH: it exited */
                                        irq_thread_rejoin(ctx, pids[i]);
                if (rmdir(path) >= 0)
                        return 0;
                r = -errno;
                if (r != -EBUSY)
                        return r;
        }
        return r;
}

static int cgroup_write(SettingContext *ctx, const char *object, const char *value)
{
        if (streq(value, "present")) {
                _cleanup_free_ char *path = sys_path(object);
                return mkdir(path, 0755) < 0 && errno != EEXIST ? -errno : 0;
        }
        if (streq(value, "absent"))
                return cgroup_remove(ctx, object);
        return -EINVAL;
}

const SettingKind setting_kind_cgroup = {
    .name = "cgroup",
    .read = cgroup_read,
    .write = cgroup_write,
    .equal = setting_equal_folded,
    .owns_children = true,
};

static const char *procs_source(const char *desired)
{
        return desired ? startswith(desired, "all from ") : NULL;
}

static char *dir_of(const char *procs_file)
{
        const char *slash = strrchr(procs_file, '/');
        return xstrndup(procs_file, slash ? (size_t)(slash - procs_file) : 0);
}

/* v2 keeps every kernel thread in the root cgroup; v1 lets those without PF_NO_SETAFFINITY move. A
 * process the kernel refused once (EINVAL) is not counted again. An exiting process is on its way out:
 * the kernel skips it when moving (a write of its PID succeeds and leaves it where it is), and a leader
 * that exited before its other threads stays listed in the old cgroup while those threads move. Read
 * now, not from the pass's scan: what matters is whether it is exiting at this moment. */
static bool movable(SettingContext *ctx, unsigned pid, bool v2)
{
        const TaskInfo *k = task_scan_cached_kthread(ctx->tasks, pid);
        TaskInfo t;

        /* A kernel thread's flags are set for good when it starts: one the pass's cache holds (alive at
         * its scan) needs no read to say it stays. */
        if (k && ((k->flags & PF_NO_SETAFFINITY) || v2))
                return false;
        if (task_info(pid, &t) < 0 || (t.flags & (PF_NO_SETAFFINITY | PF_EXITING)) ||
            (v2 && (t.flags & PF_KTHREAD)))
                return false;
        return !setting_context_refused(ctx, &t);
}

static void note_refused(SettingContext *ctx, unsigned pid)
{
        TaskInfo t;

        if (task_info(pid, &t) >= 0)
                setting_context_refuse(ctx, &t);
}

static bool is_v2(const char *dir)
{
        _cleanup_free_ char *p = xasprintf("%s/cgroup.controllers", dir);
        return sys_exists(p);
}

static int procs_read(SettingContext *ctx, const char *object, const char *hint, char **ret)
{
        _cleanup_free_ char *dir = dir_of(object);
        _cleanup_free_ unsigned *pids = NULL;
        const char *src = procs_source(hint);
        size_t n = 0, left = 0;
        int r;

        if (!sys_exists(dir))
                return -ENOENT;
        if (!src) {
                *ret = xstrdup(strempty(hint));
                return 0;
        }
        r = cgroup_procs(src, &pids, &n);
        if (r < 0)
                return r;
        bool v2 = is_v2(src);
        for (size_t i = 0; i < n; i++)
                if (movable(ctx, pids[i], v2))
                        left++;
        *ret = left == 0 ? xasprintf("all from %s", src) : xasprintf("%zu left in %s", left, src);
        return 0;
}

/* Moves every movable process listed in src once; ret_found says how many there were. */
static int procs_move_listed(SettingContext *ctx, const char *src, const char *dir, bool v2,
                             size_t *ret_found)
{
        _cleanup_free_ unsigned *pids = NULL;
        size_t n = 0, found = 0;
        int r;

        r = cgroup_procs(src, &pids, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                if (!movable(ctx, pids[i], v2))
                        continue;
                found++;
                r = cgroup_move(dir, pids[i]);
                if (r == -EINVAL)
                        note_refused(ctx, pids[i]);
                else if (r < 0 && r != -ESRCH)
                        return r;
        }
        *ret_found = found;
        return 0;
}

/* A process forks all the time on a desktop, and a child born before its parent moved stays in src. So
 * src is read again and what is new moved, until a read finds nothing movable: each round leaves behind
 * only children of processes that were still in src, one generation deeper. Bounded all the same; what
 * is left then is counted by the read back. */
#define PROCS_MOVE_ROUNDS 64

static int procs_write(SettingContext *ctx, const char *object, const char *value)
{
        _cleanup_free_ char *dir = dir_of(object);
        const char *src = procs_source(value);
        int r;

        if (!src)
                return 0; /* nothing to put back: the processes go with their cgroup's removal */
        bool v2 = is_v2(src);
        for (unsigned round = 0; round < PROCS_MOVE_ROUNDS; round++) {
                size_t found;

                r = procs_move_listed(ctx, src, dir, v2, &found);
                if (r < 0)
                        return r;
                if (found == 0)
                        break;
        }
        return 0;
}

const SettingKind setting_kind_procs = {
    .name = "procs",
    .read = procs_read,
    .write = procs_write,
    .equal = setting_equal_folded,
};

/* cpuset.cpus.partition: while its CPUs change (hotplug moves the isolated CPU) a partition can turn
 * "isolated invalid (reason)"; writing "isolated" again is then no change to the kernel. Dropping to
 * "member" first makes it check the partition anew. */
static int partition_write(SettingContext *ctx, const char *object, const char *value)
{
        _cleanup_free_ char *cur = NULL;

        if (sys_read(object, &cur) >= 0 && strstr(cur, "invalid"))
                (void)sys_write(object, "member");
        return sys_write(object, value);
}

const SettingKind setting_kind_partition = {
    .name = "partition",
    .read = setting_file_read,
    .write = partition_write,
    .equal = setting_equal_folded,
};

/* DIR/cgroup.subtree_control, desired "cpuset": the controller is enabled for DIR's children; "no
 * cpuset" when it is not (what restore writes back). */
static int subtree_read(SettingContext *ctx, const char *object, const char *hint, char **ret)
{
        _cleanup_free_ char *s = NULL;
        _cleanup_strv_free_ char **l = NULL;
        const char *name = hint && startswith(hint, "no ") ? hint + 3 : hint;
        int r;

        if (isempty(name))
                return -EINVAL;
        r = sys_read(object, &s);
        if (r < 0)
                return r;
        l = strv_split(s, " \n");
        *ret = strv_contains(l, name) ? xstrdup(name) : xasprintf("no %s", name);
        return 0;
}

static int subtree_write(SettingContext *ctx, const char *object, const char *value)
{
        _cleanup_free_ char *w =
            startswith(value, "no ") ? xasprintf("-%s", value + 3) : xasprintf("+%s", value);
        return sys_write(object, w);
}

const SettingKind setting_kind_subtree = {
    .name = "subtree",
    .read = subtree_read,
    .write = subtree_write,
    .equal = setting_equal_folded,
};
