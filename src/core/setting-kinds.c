/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Setting kinds for CPU sets, cgroups and tasks. */
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <time.h>

#include "core/cgroupfs.h"
#include "core/member-origin.h"
#include "core/setting.h"
#include "core/systemd.h"
#include "shared/cpuset.h"
#include "shared/sysfs.h"

static CpuSet *parse_list_or_null(const char *s)
{
        CpuSet *set = NULL;

        if (isempty(s))
                return cpuset_new(1);
        if (cpuset_parse_list(s, CPUSET_MAX_CPUS, &set, NULL) < 0)
                return NULL;
        return set;
}

static bool cpulist_equal(const char *a, const char *b)
{
        _cleanup_cpuset_ CpuSet *x = parse_list_or_null(a), *y = parse_list_or_null(b);

        if (!x || !y)
                return setting_equal_folded(a, b);
        return cpuset_equal(x, y);
}

const SettingKind setting_kind_cpulist = {
    .name = "cpulist",
    .read = setting_file_read,
    .write = setting_file_write,
    .equal = cpulist_equal,
};

const SettingKind setting_kind_irq_affinity = {
    .name = "irq-affinity",
    .read = setting_file_read,
    .write = setting_file_write,
    .equal = cpulist_equal,
    .refusals = (const int[]){EIO, EPERM, 0},
};

static int cpumask_read(SettingContext *ctx, const char *object, const char *hint, char **ret)
{
        _cleanup_free_ char *s = NULL;
        _cleanup_cpuset_ CpuSet *set = NULL;
        int r;

        r = sys_read(object, &s);
        if (r < 0)
                return r;
        r = cpuset_parse_mask(strstrip(s), CPUSET_MAX_CPUS, &set, NULL);
        if (r < 0)
                return r;
        *ret = cpuset_format_list(set);
        return 0;
}

static int cpumask_write(SettingContext *ctx, const char *object, const char *value)
{
        _cleanup_cpuset_ CpuSet *set = parse_list_or_null(value), *sized = NULL;
        _cleanup_free_ char *mask = NULL;
        int last = -1;

        if (!set)
                return -EINVAL;
        FOREACH_CPU (cpu, set)
                last = cpu;
        /* The kernel takes a mask shorter than nr_cpu_ids: only as many words as the highest CPU needs. */
        sized = cpuset_new((unsigned)MAX(last + 1, 1));
        cpuset_or(sized, set);
        mask = cpuset_format_mask(sized);
        return sys_write(object, mask);
}

const SettingKind setting_kind_cpumask = {
    .name = "cpumask",
    .read = cpumask_read,
    .write = cpumask_write,
    .equal = cpulist_equal,
};

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

/* Empties a cgroup into its parent and removes it. A process exiting meanwhile (a zombie still listed)
 * makes rmdir fail with EBUSY for a moment: a few immediate tries, then EBUSY, which the pass reports as
 * busy and retries later from the event loop. A pass never sleeps. */
static int cgroup_remove(SettingContext *ctx, const char *dir)
{
        _cleanup_free_ char *parent = parent_of(dir), *path = sys_path(dir);
        int r = 0;

        for (int attempt = 0; attempt < 3; attempt++) {
                _cleanup_free_ unsigned *pids = NULL;
                size_t n = 0;

                if (!sys_exists(dir))
                        return 0;
                r = cgroup_procs(dir, &pids, &n);
                if (r < 0)
                        return r;
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
        TaskInfo t;

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

static int pid_of(const char *object, unsigned *ret)
{
        const char *p = startswith(object, "/proc/");
        char buf[16];
        size_t n;

        if (!p)
                return -EINVAL;
        n = strcspn(p, "/");
        if (n == 0 || n >= sizeof buf)
                return -EINVAL;
        memcpy(buf, p, n);
        buf[n] = 0;
        return safe_atou(buf, ret);
}

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
            pid_of(object, &pid) >= 0)
                return member_origin_describe(ctx, pid, s, ret);
        *ret = TAKE_PTR(s);
        return 0;
}

static int member_write(SettingContext *ctx, const char *object, const char *value)
{
        CgroupInfo info;
        unsigned pid;
        int r;

        r = pid_of(object, &pid);
        if (r < 0)
                return r;
        r = cgroup_discover(&info);
        if (r < 0)
                return r;
        if (info.mode == CGROUP_V2 && info.systemd) {
                cgroup_info_clear(&info);
                r = member_write_systemd(ctx, object, pid, value);
                return r == -ESRCH ? -ENOENT : r;
        }
        if (info.mode == CGROUP_NONE) {
                cgroup_info_clear(&info);
                return -EOPNOTSUPP;
        }
        _cleanup_free_ char *dir = xasprintf("%s%s", info.mount, streq(value, "/") ? "" : value);
        cgroup_info_clear(&info);
        r = cgroup_move(dir, pid);
        /* A process that exited is gone, as a vanished file is. */
        return r == -ESRCH ? -ENOENT : r;
}

const SettingKind setting_kind_member = {
    .name = "member",
    .read = member_read,
    .write = member_write,
    .equal = member_origin_equal,
};

static int affinity_read(SettingContext *ctx, const char *object, const char *hint, char **ret)
{
        _cleanup_free_ char *status_path = NULL, *s = NULL;
        unsigned pid;
        int r;

        r = pid_of(object, &pid);
        if (r < 0)
                return r;
        status_path = xasprintf("/proc/%u/status", pid);
        r = sys_read(status_path, &s);
        if (r < 0)
                return r;
        for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n")) {
                const char *v = startswith(line, "Cpus_allowed_list:");
                if (v) {
                        *ret = xstrdup(v + strspn(v, " \t"));
                        return 0;
                }
        }
        return -ENODATA;
}

static int affinity_write(SettingContext *ctx, const char *object, const char *value)
{
        _cleanup_cpuset_ CpuSet *set = parse_list_or_null(value);
        cpu_set_t *mask;
        size_t size = CPU_ALLOC_SIZE(CPUSET_MAX_CPUS);
        unsigned pid;
        int r;

        if (!isempty(sysroot()))
                return -EOPNOTSUPP; /* a fixture's PIDs are not this machine's */
        r = pid_of(object, &pid);
        if (r < 0)
                return r;
        if (!set || cpuset_empty(set))
                return -EINVAL;
        mask = CPU_ALLOC(CPUSET_MAX_CPUS);
        if (!mask)
                return -ENOMEM;
        CPU_ZERO_S(size, mask);
        FOREACH_CPU (cpu, set)
                CPU_SET_S((size_t)cpu, size, mask);
        r = sched_setaffinity((pid_t)pid, size, mask) < 0 ? -errno : 0;
        CPU_FREE(mask);
        return r == -ESRCH ? -ENOENT : r;
}

/* Kernel threads start with every possible CPU; after any write the kernel keeps only the online ones.
 * Only online CPUs can tell two affinities apart. */
static bool affinity_equal(const char *a, const char *b)
{
        _cleanup_cpuset_ CpuSet *x = parse_list_or_null(a), *y = parse_list_or_null(b), *online = NULL;
        _cleanup_free_ char *s = NULL;

        if (!x || !y)
                return setting_equal_folded(a, b);
        if (sys_read("/sys/devices/system/cpu/online", &s) >= 0 &&
            cpuset_parse_list(strstrip(s), CPUSET_MAX_CPUS, &online, NULL) >= 0) {
                cpuset_and(x, online);
                cpuset_and(y, online);
        }
        return cpuset_equal(x, y);
}

const SettingKind setting_kind_affinity = {
    .name = "affinity",
    .read = affinity_read,
    .write = affinity_write,
    .equal = affinity_equal,
};

/* "/proc/PID/task/TID/cpuset" */
static int tid_of(const char *object, unsigned *ret)
{
        unsigned pid;
        const char *t = strstr(object, "/task/");

        if (pid_of(object, &pid) < 0 || !t || sscanf(t, "/task/%u/", ret) != 1)
                return -EINVAL;
        return 0;
}

/* "CPUSET CPULIST" -> the cpuset, and the CPU list when there is one. */
static char *thread_split(const char *value, const char **ret_cpus)
{
        size_t n = strcspn(value, " ");

        *ret_cpus = value[n] ? value + n + strspn(value + n, " ") : NULL;
        if (*ret_cpus && !**ret_cpus)
                *ret_cpus = NULL;
        return xstrndup(value, n);
}

static int thread_read(SettingContext *ctx, const char *object, const char *hint, char **ret)
{
        _cleanup_free_ char *cpuset = NULL, *cpus = NULL, *affinity = NULL;
        unsigned tid;
        int r;

        r = tid_of(object, &tid);
        if (r < 0)
                return r;
        r = sys_read(object, &cpuset);
        if (r < 0)
                return r == -ESRCH ? -ENOENT : r;
        affinity = xasprintf("/proc/%u/affinity", tid);
        r = affinity_read(ctx, affinity, NULL, &cpus);
        if (r < 0)
                return r;
        *ret = xasprintf("%s %s", strstrip(cpuset), cpus);
        return 0;
}

/* The move gives the thread the cpuset's CPUs (within the affinity it asked for itself, on kernels since
 * 6.2); an affinity is only written when the value names one and the move left another. */
static int thread_write(SettingContext *ctx, const char *object, const char *value)
{
        _cleanup_free_ char *want = NULL, *now = NULL, *affinity = NULL;
        const char *cpus, *now_cpus;
        CgroupInfo info;
        unsigned tid;
        int r;

        r = tid_of(object, &tid);
        if (r < 0)
                return r;
        want = thread_split(value, &cpus);
        r = thread_read(ctx, object, value, &now);
        if (r < 0)
                return r;
        _cleanup_free_ char *now_cpuset = thread_split(now, &now_cpus);
        if (!streq(now_cpuset, want)) {
                r = cgroup_discover(&info);
                if (r < 0)
                        return r;
                if (info.mode != CGROUP_V1) {
                        cgroup_info_clear(&info);
                        return -EOPNOTSUPP; /* v2 keeps the threads of a process together */
                }
                _cleanup_free_ char *dir = xasprintf("%s%s", info.mount, streq(want, "/") ? "" : want);
                cgroup_info_clear(&info);
                r = cgroup_move_thread(dir, tid);
                if (r < 0)
                        return r == -ESRCH ? -ENOENT : r;
        }
        if (!cpus)
                return 0;
        affinity = xasprintf("/proc/%u/affinity", tid);
        free(now);
        now = NULL;
        r = affinity_read(ctx, affinity, NULL, &now);
        if (r < 0)
                return r;
        return affinity_equal(now, cpus) ? 0 : affinity_write(ctx, affinity, cpus);
}

static bool thread_equal(const char *current, const char *desired)
{
        const char *cur_cpus, *want_cpus;
        _cleanup_free_ char *cur = thread_split(current, &cur_cpus),
                            *want = thread_split(desired, &want_cpus);

        if (!streq(cur, want))
                return false;
        return !want_cpus || (cur_cpus && affinity_equal(cur_cpus, want_cpus));
}

const SettingKind setting_kind_thread = {
    .name = "thread",
    .read = thread_read,
    .write = thread_write,
    .equal = thread_equal,
};

/* "systemd:UNIT:AllowedCPUs" */
static char *unit_of(const char *object)
{
        const char *u = startswith(object, "systemd:");
        const char *colon = u ? strchr(u, ':') : NULL;

        return u ? xstrndup(u, colon ? (size_t)(colon - u) : strlen(u)) : NULL;
}

static int unit_cpus_read(SettingContext *ctx, const char *object, const char *hint, char **ret)
{
        _cleanup_free_ char *unit = unit_of(object);
        return unit ? systemd_unit_cpus(ctx->systemd, unit, ret) : -EINVAL;
}

static int unit_cpus_write(SettingContext *ctx, const char *object, const char *value)
{
        _cleanup_free_ char *unit = unit_of(object);
        return unit ? systemd_set_unit_cpus(ctx->systemd, unit, value) : -EINVAL;
}

const SettingKind setting_kind_unit_cpus = {
    .name = "unit-cpus",
    .read = unit_cpus_read,
    .write = unit_cpus_write,
    .equal = cpulist_equal,
};

static int unit_partition_read(SettingContext *ctx, const char *object, const char *hint, char **ret)
{
        _cleanup_free_ char *unit = unit_of(object);
        return unit ? systemd_unit_string(ctx->systemd, unit, "CPUSetPartition", ret) : -EINVAL;
}

static int unit_partition_write(SettingContext *ctx, const char *object, const char *value)
{
        _cleanup_free_ char *unit = unit_of(object);
        return unit ? systemd_set_unit_string(ctx->systemd, unit, "CPUSetPartition", value) : -EINVAL;
}

const SettingKind setting_kind_unit_partition = {
    .name = "unit-partition",
    .read = unit_partition_read,
    .write = unit_partition_write,
    .equal = setting_equal_folded,
};

bool setting_context_unit_partition(SettingContext *ctx)
{
        if (ctx->unit_partition < 0) {
                int r = systemd_has_property(ctx->systemd, "org.freedesktop.systemd1.Slice",
                                             "CPUSetPartition", "s");

                if (r < 0)
                        return false;
                ctx->unit_partition = r > 0;
        }
        return ctx->unit_partition > 0;
}

static int slice_read(SettingContext *ctx, const char *object, const char *hint, char **ret)
{
        _cleanup_free_ char *unit = unit_of(object);
        bool active;
        int r;

        if (!unit)
                return -EINVAL;
        r = systemd_unit_active(ctx->systemd, unit, &active);
        if (r < 0)
                return r;
        *ret = xstrdup(active ? "present" : "absent");
        return 0;
}

static int slice_write(SettingContext *ctx, const char *object, const char *value)
{
        _cleanup_free_ char *unit = unit_of(object);

        if (!unit)
                return -EINVAL;
        if (streq(value, "present")) {
                int r = systemd_start_slice(ctx->systemd, unit, "CPUs isolated by rtctl", "", object);
                /* Still loaded from its last stop (stopping, or stopped and not yet collected): systemd
                 * refuses a new transient unit of that name, but starts the loaded one again. */
                if (r == -EEXIST) {
                        r = systemd_start_unit(ctx->systemd, unit, object);
                        if (r == -ENOENT) /* collected meanwhile */
                                r = systemd_start_slice(ctx->systemd, unit, "CPUs isolated by rtctl", "",
                                                        object);
                }
                return r;
        }
        if (streq(value, "absent")) {
                if (cgroup_slice_populated(unit))
                        return -EBUSY; /* stopping it would kill the processes still in it */
                int r = systemd_stop_unit(ctx->systemd, unit, object);
                return r == -ENOENT ? 0 : r;
        }
        return -EINVAL;
}

const SettingKind setting_kind_slice = {
    .name = "slice",
    .read = slice_read,
    .write = slice_write,
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

/* Only IRQ threads: a journalled PID whose thread went (driver unbound) may belong to anything by the
 * time it is restored. */
static int irq_thread_pid(const char *object, unsigned *ret)
{
        TaskInfo t;
        int r = pid_of(object, ret);

        if (r < 0)
                return r;
        if (task_info(*ret, &t) < 0 || !(t.flags & PF_KTHREAD) || !startswith(t.comm, "irq/"))
                return -ENOENT;
        return 0;
}

static int sched_read(SettingContext *ctx, const char *object, const char *hint, char **ret)
{
        struct sched_param param = {};
        unsigned pid;
        int r, policy;

        if (!isempty(sysroot()))
                return -EOPNOTSUPP; /* a fixture's PIDs are not this machine's */
        r = irq_thread_pid(object, &pid);
        if (r < 0)
                return r;
        policy = sched_getscheduler((pid_t)pid);
        if (policy < 0 || sched_getparam((pid_t)pid, &param) < 0)
                return errno == ESRCH ? -ENOENT : -errno;
        policy &= ~SCHED_RESET_ON_FORK;
        *ret = xasprintf("%s:%d",
                         policy == SCHED_FIFO    ? "fifo"
                         : policy == SCHED_RR    ? "rr"
                         : policy == SCHED_OTHER ? "other"
                         : policy == SCHED_IDLE  ? "idle"
                                                 : "batch",
                         param.sched_priority);
        return 0;
}

static int sched_write(SettingContext *ctx, const char *object, const char *value)
{
        struct sched_param param = {};
        const char *colon = strchr(value, ':');
        unsigned pid;
        int r, policy, prio;

        if (!isempty(sysroot()))
                return -EOPNOTSUPP;
        r = irq_thread_pid(object, &pid);
        if (r < 0)
                return r;
        if (!colon || safe_atoi(colon + 1, &prio) < 0)
                return -EINVAL;
        if (startswith(value, "fifo:"))
                policy = SCHED_FIFO;
        else if (startswith(value, "rr:"))
                policy = SCHED_RR;
        else if (startswith(value, "other:"))
                policy = SCHED_OTHER;
        else if (startswith(value, "batch:"))
                policy = SCHED_BATCH;
        else if (startswith(value, "idle:"))
                policy = SCHED_IDLE;
        else
                return -EINVAL;
        param.sched_priority = prio;
        if (sched_setscheduler((pid_t)pid, policy, &param) < 0)
                return errno == ESRCH ? -ENOENT : -errno;
        return 0;
}

const SettingKind setting_kind_sched = {
    .name = "sched",
    .read = sched_read,
    .write = sched_write,
    .equal = setting_equal_folded,
};

static int service_read(SettingContext *ctx, const char *object, const char *hint, char **ret)
{
        _cleanup_free_ char *unit = unit_of(object), *load = NULL, *active = NULL, *file = NULL;
        int r;

        if (!unit)
                return -EINVAL;
        r = systemd_unit_file_state(ctx->systemd, unit, &load, &active, &file);
        if (r < 0)
                return r;
        if (streq(load, "not-found"))
                *ret = xstrdup("absent");
        else if (streq(active, "active") || streq(active, "activating") || streq(active, "reloading"))
                *ret = xstrdup("active");
        else if (startswith(file, "masked") || streq(load, "masked"))
                *ret = xstrdup("masked");
        else
                *ret = xstrdup("inactive");
        return 0;
}

/* "masked": stopped and masked until reboot, so that nothing (D-Bus activation of
 * power-profiles-daemon, a package script, an admin's reflex) starts it behind rtctl's back. "active"
 * and "inactive" unmask it first: what restore puts back. */
static int service_write(SettingContext *ctx, const char *object, const char *value)
{
        _cleanup_free_ char *unit = unit_of(object);
        int r;

        if (!unit)
                return -EINVAL;
        if (streq(value, "masked")) {
                r = systemd_stop_unit(ctx->systemd, unit, object);
                if (r < 0 && r != -ENOENT)
                        return r;
                return systemd_mask_runtime(ctx->systemd, unit, true, object);
        }
        if (!streq(value, "active") && !streq(value, "inactive"))
                return -EINVAL;
        r = systemd_mask_runtime(ctx->systemd, unit, false, object);
        if (r < 0 && r != -ENOENT)
                return r;
        if (streq(value, "active"))
                return systemd_start_unit(ctx->systemd, unit, object);
        r = systemd_stop_unit(ctx->systemd, unit, object);
        return r == -ENOENT ? 0 : r;
}

/* A unit that is not installed is as good as masked: there is nothing to start. */
static bool service_equal(const char *current, const char *desired)
{
        return streq_ptr(current, desired) || (streq_ptr(current, "absent") && streq_ptr(desired, "masked"));
}

const SettingKind setting_kind_service = {
    .name = "service",
    .read = service_read,
    .write = service_write,
    .equal = service_equal,
};

/* The PM QoS request of /dev/cpu_dma_latency lives as long as the file descriptor that made it: rtctld
 * holds it open. "none" is no request (the descriptor closed); the kernel drops the request by itself
 * when the daemon dies, so the journalled "none" is always right after a crash. */
static int pmqos_read(SettingContext *ctx, const char *object, const char *hint, char **ret)
{
        *ret = ctx->pmqos_fd >= 0 ? xasprintf("%d", ctx->pmqos_value) : xstrdup("none");
        return 0;
}

static int pmqos_write(SettingContext *ctx, const char *object, const char *value)
{
        int32_t v;
        int n;

        if (streq(value, "none")) {
                if (ctx->pmqos_fd >= 0)
                        close(ctx->pmqos_fd);
                ctx->pmqos_fd = -EBADF;
                return 0;
        }
        if (safe_atoi(value, &n) < 0 || n < 0)
                return -EINVAL;
        if (ctx->pmqos_fd < 0) {
                _cleanup_free_ char *p = sys_path(object);
                ctx->pmqos_fd = open(p, O_WRONLY | O_CLOEXEC);
                if (ctx->pmqos_fd < 0)
                        return -errno;
        }
        v = n;
        /* The kernel takes a binary s32 (or a hex string); a rewrite on the same descriptor updates it. */
        if (pwrite(ctx->pmqos_fd, &v, sizeof v, 0) != (ssize_t)sizeof v &&
            write(ctx->pmqos_fd, &v, sizeof v) != (ssize_t)sizeof v)
                return -errno;
        ctx->pmqos_value = n;
        return 0;
}

const SettingKind setting_kind_pmqos = {
    .name = "pmqos-fd",
    .read = pmqos_read,
    .write = pmqos_write,
    .equal = setting_equal_folded,
};

/* The features file lists every feature as NAME or NO_NAME and takes one of them per write. */
static char *sched_feature_file(const char *object, const char **ret_name)
{
        const char *slash = strrchr(object, '/');

        if (!slash || slash == object || !slash[1])
                return NULL;
        *ret_name = slash + 1;
        return xstrndup(object, (size_t)(slash - object));
}

static int sched_feature_read(SettingContext *ctx, const char *object, const char *hint, char **ret)
{
        _cleanup_free_ char *s = NULL, *file = NULL;
        _cleanup_strv_free_ char **words = NULL;
        const char *name = NULL;
        int r;

        file = sched_feature_file(object, &name);
        if (!file)
                return -EINVAL;
        r = sys_read(file, &s);
        if (r < 0)
                return r;
        words = strv_split(s, " \t\n");
        for (size_t i = 0; words && words[i]; i++) {
                const char *no = startswith(words[i], "NO_");

                if (streq(words[i], name) || (no && streq(no, name))) {
                        *ret = xstrdup(no ? "off" : "on");
                        return 0;
                }
        }
        return -ENOENT;
}

static int sched_feature_write(SettingContext *ctx, const char *object, const char *value)
{
        _cleanup_free_ char *file = NULL, *word = NULL;
        const char *name = NULL;

        file = sched_feature_file(object, &name);
        if (!file)
                return -EINVAL;
        if (streq(value, "on"))
                word = xstrdup(name);
        else if (streq(value, "off"))
                word = xasprintf("NO_%s", name);
        else
                return -EINVAL;
        return sys_write(file, word);
}

const SettingKind setting_kind_sched_feature = {
    .name = "sched-feature",
    .read = sched_feature_read,
    .write = sched_feature_write,
    .equal = setting_equal_folded,
};
