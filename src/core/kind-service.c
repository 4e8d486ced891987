/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The setting kind of a rival service: active, inactive, or stopped and masked until reboot. */
#include "core/kind-internal.h"
#include "core/systemd.h"

static int service_read(SettingContext *ctx, const char *object, const char *hint, char **ret)
{
        _cleanup_free_ char *unit = kind_unit_of(object), *load = NULL, *active = NULL, *file = NULL;
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
        _cleanup_free_ char *unit = kind_unit_of(object);
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
