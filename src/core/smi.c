/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <fcntl.h>
#include <unistd.h>

#include "core/smi.h"
#include "shared/sysfs.h"
#include "shared/util.h"

int smi_count_read(unsigned cpu, uint32_t *ret)
{
        _cleanup_free_ char *dev = xasprintf("/dev/cpu/%u/msr", cpu), *path = sys_path(dev);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        uint64_t v;
        ssize_t n;

        if (fd < 0)
                return errno == ENOENT && sys_exists("/dev/cpu/0/msr") ? -ENXIO : -errno;
        n = pread(fd, &v, sizeof v, MSR_SMI_COUNT);
        if (n < 0)
                return -errno;
        if (n != (ssize_t)sizeof v)
                return -EIO;
        *ret = (uint32_t)v;
        return 0;
}

const char *smi_missing_reason(int error)
{
        switch (error) {
        case -ENOENT:
                return "no msr driver: `modprobe msr` lets rtctl count SMIs";
        case -EIO:
                return "the CPU has no SMI counter (MSR_SMI_COUNT is Intel's; hypervisors often hide it)";
        case -ENXIO:
                return "the CPU is offline";
        case -EACCES:
        case -EPERM:
                return "no right to read MSRs (root with CAP_SYS_RAWIO; lockdown may forbid it)";
        default:
                return "the SMI counter could not be read";
        }
}
