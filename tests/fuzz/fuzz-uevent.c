/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Kernel uevent datagrams, of exactly the length received and not NUL-terminated as a whole. */
#include "daemon/uevent-monitor.h"
#include "fuzz.h"

static bool inside(const char *s, const char *buf, size_t size)
{
        return s >= buf && s < buf + size && memchr(s, 0, (size_t)(buf + size - s));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        _cleanup_free_ char *buf = xmalloc0(size ? size : 1);
        Uevent ev = {};

        memcpy(buf, data, size);
        if (!uevent_parse(buf, size, &ev))
                return 0;
        /* Every string the handler gets ends inside the datagram. */
        fuzz_check(inside(ev.action, buf, size));
        fuzz_check(inside(ev.subsystem, buf, size));
        fuzz_check(inside(ev.sysname, buf, size));
        fuzz_check(!ev.devtype || inside(ev.devtype, buf, size));
        fuzz_check(!strchr(ev.sysname, '/'));
        return 0;
}
