/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Setting kinds for CPU lists and masks: cpulist, irq-affinity, cpumask. */
#include "core/kind-internal.h"
#include "shared/sysfs.h"

CpuSet *kind_parse_list_or_null(const char *s)
{
        CpuSet *set = NULL;

        if (isempty(s))
                return cpuset_new(1);
        if (cpuset_parse_list(s, CPUSET_MAX_CPUS, &set, NULL) < 0)
                return NULL;
        return set;
}

bool kind_cpulist_equal(const char *a, const char *b)
{
        _cleanup_cpuset_ CpuSet *x = kind_parse_list_or_null(a), *y = kind_parse_list_or_null(b);

        if (!x || !y)
                return setting_equal_folded(a, b);
        return cpuset_equal(x, y);
}

const SettingKind setting_kind_cpulist = {
    .name = "cpulist",
    .read = setting_file_read,
    .write = setting_file_write,
    .equal = kind_cpulist_equal,
};

const SettingKind setting_kind_irq_affinity = {
    .name = "irq-affinity",
    .read = setting_file_read,
    .write = setting_file_write,
    .equal = kind_cpulist_equal,
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
        _cleanup_cpuset_ CpuSet *set = kind_parse_list_or_null(value), *sized = NULL;
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
    .equal = kind_cpulist_equal,
};
