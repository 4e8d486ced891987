/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Setting kinds for the scheduler: an IRQ thread's policy and priority, and the scheduler's features. */
#include <sched.h>

#include "core/kind-internal.h"
#include "shared/sysfs.h"

/* Only IRQ threads: a journalled PID whose thread went (driver unbound) may belong to anything by the
 * time it is restored. */
static int irq_thread_pid(const char *object, unsigned *ret)
{
        TaskInfo t;
        int r = kind_pid_of(object, ret);

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
        *ret = xasprintf("%s:%d", sched_policy_name(policy), param.sched_priority);
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
