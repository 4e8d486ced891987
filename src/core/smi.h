/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdint.h>

/* System management interrupts, counted. The firmware's time in SMM is invisible to the kernel and to
 * any trace: only Intel's MSR_SMI_COUNT (0x34, since Nehalem) tells that they happened. It is read
 * through the msr driver (/dev/cpu/N/msr, `modprobe msr`), which asks the CPU itself for it: each read
 * is an IPI to that CPU. The register is 32 bits wide and starts over at reset and after a suspend. */

#define MSR_SMI_COUNT 0x34

/* The count of CPU cpu: -ENOENT without the msr driver, -EIO where the CPU has no such register (AMD,
 * a hypervisor that does not offer it), -ENXIO when the CPU is offline, -EACCES/-EPERM without the
 * right to read MSRs (CAP_SYS_RAWIO). */
int smi_count_read(unsigned cpu, uint32_t *ret);

/* Why there is no count, for a user: what smi_count_read()'s error means. */
const char *smi_missing_reason(int error);

/* The SMIs between two readings of the 32-bit counter. */
static inline uint32_t smi_count_since(uint32_t before, uint32_t now)
{
        return now - before; /* modulo 2^32: a wrap is one turn, not a huge negative */
}
