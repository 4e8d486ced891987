/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The setting kind of the PM QoS request rtctld holds on /dev/cpu_dma_latency. */
#include <fcntl.h>

#include "core/setting.h"
#include "shared/sysfs.h"

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
