/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Setting kinds for systemd units: a unit's AllowedCPUs= and CPUSetPartition=, and rtctl's transient
 * slices. */
#include "core/cgroupfs.h"
#include "core/kind-internal.h"
#include "core/systemd.h"

/* "systemd:UNIT:AllowedCPUs" */
char *kind_unit_of(const char *object)
{
        assert(object);

        const char *u = startswith(object, "systemd:");
        const char *colon = u ? strchr(u, ':') : NULL;

        return u ? xstrndup(u, colon ? (size_t)(colon - u) : strlen(u)) : NULL;
}

static int unit_cpus_read(SettingContext *ctx, const char *object, const char *hint, char **ret)
{
        _cleanup_free_ char *unit = kind_unit_of(object);
        return unit ? systemd_unit_cpus(ctx->systemd, unit, ret) : -EINVAL;
}

static int unit_cpus_write(SettingContext *ctx, const char *object, const char *value)
{
        _cleanup_free_ char *unit = kind_unit_of(object);
        return unit ? systemd_set_unit_cpus(ctx->systemd, unit, value) : -EINVAL;
}

const SettingKind setting_kind_unit_cpus = {
    .name = "unit-cpus",
    .read = unit_cpus_read,
    .write = unit_cpus_write,
    .equal = kind_cpulist_equal,
};

static int unit_partition_read(SettingContext *ctx, const char *object, const char *hint, char **ret)
{
        _cleanup_free_ char *unit = kind_unit_of(object);
        return unit ? systemd_unit_string(ctx->systemd, unit, "CPUSetPartition", ret) : -EINVAL;
}

static int unit_partition_write(SettingContext *ctx, const char *object, const char *value)
{
        _cleanup_free_ char *unit = kind_unit_of(object);
        return unit ? systemd_set_unit_string(ctx->systemd, unit, "CPUSetPartition", value) : -EINVAL;
}

const SettingKind setting_kind_unit_partition = {
    .name = "unit-partition",
    .read = unit_partition_read,
    .write = unit_partition_write,
    .equal = setting_equal_folded,
};

static int slice_read(SettingContext *ctx, const char *object, const char *hint, char **ret)
{
        _cleanup_free_ char *unit = kind_unit_of(object);
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
        _cleanup_free_ char *unit = kind_unit_of(object);

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
                /* Children of attached processes are born in its scope and no pass placed them: they
                 * go where their parents went back to before the slice can stop. */
                if (streq(unit, CGROUP_RTCTL_SLICE))
                        (void)member_return_strays(ctx, "/" CGROUP_RTCTL_SLICE);
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
