/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <stdio.h>

#include "shared/version.h"

/* Each HAVE_* / RTCTL_* is 0 or 1 in config.h, set by meson.build from what the build found and how it
 * was configured. */
#define FEATURE(on, name) ((on) ? "+" name : "-" name)

const char *rtctl_features(void)
{
        static char buf[256];

        if (!buf[0])
                snprintf(buf, sizeof buf, "%s %s %s %s %s %s %s", FEATURE(HAVE_LIBSYSTEMD, "SD_BUS"),
                         FEATURE(HAVE_GLIB, "GLIB"), FEATURE(HAVE_JSON_C, "JSON_C"),
                         FEATURE(HAVE_LIBNL, "LIBNL"), FEATURE(HAVE_ZLIB, "ZLIB"),
                         FEATURE(RTCTL_ASAN, "ASAN"), FEATURE(RTCTL_UBSAN, "UBSAN"));
        return buf;
}
