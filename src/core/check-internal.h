/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include "core/check.h"
#include "core/tasks.h"

/* The checks audit_run() runs, one file per family: check-kernel.c (how the kernel was built and
 * booted), check-machine.c (memory, filesystems, interrupt lines), check-isolation.c (what rtctl's
 * isolation leaves where), check-user.c (the judged user's session). */

/* The kernel's configuration, from /proc/config.gz or /boot/config-RELEASE; NULL when neither is there. */
typedef struct KernelInfo {
        char *config;  /* the whole text */
        char *where;   /* which file */
        char *version; /* uname -v, from /proc/sys/kernel/version */
        char *release; /* uname -r, from /proc/sys/kernel/osrelease */
        char *cmdline;
} KernelInfo;

void kernel_info_load(KernelInfo *ret);
void kernel_info_clear(KernelInfo *k);
/* "y", "m", or NULL when CONFIG_name is not set (or there is no config). */
const char *kernel_config(const KernelInfo *k, const char *name, char buf[static 8]);
bool cmdline_has(const char *cmdline, const char *word);

void audit_kernel(Audit *a, const KernelInfo *k);
void audit_machine(Audit *a);
void audit_isolation(Audit *a, const AuditOptions *o, TaskScan *tasks);
