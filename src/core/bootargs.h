/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include "core/policy.h"
#include "core/topology.h"

/* What only a reboot gives: kernel command-line arguments computed from a profile, compared with the
 * command line the running kernel booted with. Pure reads (through the root prefix): `rtctl bootargs`,
 * the daemon's RebootPending and `rtctl check` share it. */

typedef struct BootArg {
        char *key;    /* "nohz_full" */
        char *value;  /* "2-3"; NULL for a flag ("threadirqs") */
        char *reason; /* one line for a person: why the profile wants it */
} BootArg;

typedef struct BootArgs {
        BootArg *args;
        size_t n;
} BootArgs;

/* What the running kernel is, as the arguments depend on it. */
typedef struct KernelFlavour {
        bool realtime;        /* PREEMPT_RT: /sys/kernel/realtime, or "PREEMPT_RT" in the version */
        bool preempt_dynamic; /* "PREEMPT_DYNAMIC" in the version, or debugfs sched/preempt */
        bool nohz_full;       /* built with NO_HZ_FULL: /sys/devices/system/cpu/nohz_full exists */
        /* Only the boot can take CPUs out of the scheduler's load balancing: cgroup v2 whose kernel has
         * no isolated partitions to make at run time (cpuset.cpus.exclusive, 6.7 and later; or the
         * root's cpuset.cpus.isolated, 6.8). v1 cpusets do it at run time (sched_load_balance), and so
         * does a v2 partition. */
        bool domain_at_boot;
} KernelFlavour;

/* Reads /proc/sys/kernel/version (uname -v), /sys/kernel/realtime and the rest under the root prefix. */
void kernel_flavour_read(KernelFlavour *ret);

/* The arguments policy p wants on this machine and kernel; none for NULL or a profile that neither
 * isolates CPUs nor sets IRQ thread priorities. Negative errno (and ret empty) when the policy cannot be
 * placed on t (ret_error says why, may be NULL). */
int bootargs_plan_for(const Policy *p, const Topology *t, const KernelFlavour *k, BootArgs *ret,
                      char **ret_error);
/* The same for the running kernel (kernel_flavour_read()). */
int bootargs_plan(const Policy *p, const Topology *t, BootArgs *ret);
void bootargs_clear(BootArgs *b);

/* "key=value", or "key" for a flag. */
char *boot_arg_format(const BootArg *a);
/* Every argument, space-separated ("" when none). */
char *bootargs_format(const BootArgs *b);

/* The value cmdline gives key (the last occurrence wins, as for most kernel parameters; arguments after
 * "--" are init's, not the kernel's): 1 and *ret_value (NULL for a bare flag) when present, 0 when not. */
int cmdline_find(const char *cmdline, const char *key, char **ret_value);
/* Whether cmdline already has a: the same key with an equal value (CPU lists compare as sets,
 * isolcpus flags as a set). */
bool boot_arg_in_cmdline(const BootArg *a, const char *cmdline);
/* The arguments of b that the running kernel's cmdline lacks, or has with another value; NULL when none
 * (nothing waits for a reboot). */
char *bootargs_missing(const BootArgs *b, const char *running_cmdline);
