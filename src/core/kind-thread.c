/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Setting kinds for tasks: a process's CPU affinity, and a thread's cpuset and affinity (cgroup v1) or
 * its cgroup in a threaded subtree (v2, where the cgroup's CPUs are the thread's: the kernel sets them
 * on the move, within the affinity the thread asked for itself since 6.2). */
#include <sched.h>

#include "core/cgroupfs.h"
#include "core/kind-internal.h"
#include "shared/sysfs.h"

int kind_pid_of(const char *object, unsigned *ret)
{
        assert(object);

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

static int affinity_read(SettingContext *ctx, const char *object, const char *hint, char **ret)
{
        _cleanup_free_ char *status_path = NULL, *s = NULL;
        unsigned pid;
        int r;

        r = kind_pid_of(object, &pid);
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
        _cleanup_cpuset_ CpuSet *set = kind_parse_list_or_null(value);
        cpu_set_t *mask;
        size_t size = CPU_ALLOC_SIZE(CPUSET_MAX_CPUS);
        unsigned pid;
        int r;

        if (!isempty(sysroot()))
                return -EOPNOTSUPP; /* a fixture's PIDs are not this machine's */
        r = kind_pid_of(object, &pid);
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
        _cleanup_cpuset_ CpuSet *x = kind_parse_list_or_null(a), *y = kind_parse_list_or_null(b),
                                *online = NULL;
        _cleanup_free_ char *s = NULL;

        if (!x || !y)
                return setting_equal_folded(a, b);
        /* The same CPUs are equal whatever is online: only sets that differ need the online ones (a
         * pass compares every kernel thread's, nearly all already in place). */
        if (cpuset_equal(x, y))
                return true;
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

/* "/proc/PID/task/TID/cpuset" (cgroup v1) or "/proc/PID/task/TID/cgroup" (v2) */
static int tid_of(const char *object, unsigned *ret)
{
        unsigned pid;
        const char *t = strstr(object, "/task/");

        if (kind_pid_of(object, &pid) < 0 || !t || sscanf(t, "/task/%u/", ret) != 1)
                return -EINVAL;
        return 0;
}

static bool thread_v2(const char *object)
{
        return endswith(object, "/cgroup");
}

/* The unified hierarchy's line of /proc/PID/task/TID/cgroup: "0::/path". */
static int thread_read_v2(const char *object, char **ret)
{
        int r = cgroup_read_unified(object, ret);

        return r == -ESRCH ? -ENOENT : r;
}

/* cgroup.threads moves one thread, within its threaded domain only: the target's parent. A thread
 * outside it has left with its process (a restore that put the process home took it along): gone. */
static int thread_write_v2(const char *object, const char *value)
{
        _cleanup_free_ char *now = NULL, *domain = NULL, *dir = NULL;
        const char *slash = strrchr(value, '/');
        CgroupInfo info;
        unsigned tid;
        int r;

        r = tid_of(object, &tid);
        if (r < 0)
                return r;
        if (!slash || slash == value)
                return -EINVAL;
        domain = xstrndup(value, (size_t)(slash - value));
        r = thread_read_v2(object, &now);
        if (r < 0)
                return r;
        if (!streq(now, domain) && !(startswith(now, domain) && now[strlen(domain)] == '/'))
                return -ENOENT;
        r = cgroup_discover(&info);
        if (r < 0)
                return r;
        if (info.mode != CGROUP_V2) {
                cgroup_info_clear(&info);
                return -EOPNOTSUPP;
        }
        dir = xasprintf("%s%s", info.mount, value);
        cgroup_info_clear(&info);
        r = cgroup_move_thread_v2(dir, tid);
        /* An exiting thread is skipped by the move: on its way out, gone. */
        return r == -ESRCH || (r >= 0 && task_exited(tid)) ? -ENOENT : r;
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
        if (thread_v2(object))
                return thread_read_v2(object, ret);
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

        if (thread_v2(object))
                return thread_write_v2(object, value);
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
