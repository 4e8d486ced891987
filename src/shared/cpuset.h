/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>

#include "shared/util.h"

/* The kernel's NR_CPUS upper bound that distributions build with. */
#define CPUSET_MAX_CPUS 8192u

/* A set of CPU numbers, sized to the number of possible CPUs of the machine (or of a fixture), so a
 * 2-CPU machine does not pay for 8192 bits in every IRQ's plan. */
typedef struct CpuSet {
        unsigned size; /* number of CPU numbers it can hold: 0..size-1 */
        unsigned long bits[];
} CpuSet;

CpuSet *cpuset_new(unsigned size);
CpuSet *cpuset_dup(const CpuSet *s);
void cpuset_free(CpuSet *s);
static inline void cpuset_freep(CpuSet **s)
{
        cpuset_free(*s);
}
#define _cleanup_cpuset_ _cleanup_(cpuset_freep)

void cpuset_add(CpuSet *s, unsigned cpu);
bool cpuset_has(const CpuSet *s, unsigned cpu);
unsigned cpuset_count(const CpuSet *s);
bool cpuset_empty(const CpuSet *s);
bool cpuset_equal(const CpuSet *a, const CpuSet *b);
bool cpuset_subset(const CpuSet *a, const CpuSet *of);
bool cpuset_intersects(const CpuSet *a, const CpuSet *b);
/* -1 when there is none. */
int cpuset_next(const CpuSet *s, int after);
#define FOREACH_CPU(cpu, set) for (int cpu = cpuset_next((set), -1); cpu >= 0; cpu = cpuset_next((set), cpu))

void cpuset_or(CpuSet *s, const CpuSet *other);
void cpuset_and(CpuSet *s, const CpuSet *other);
void cpuset_andnot(CpuSet *s, const CpuSet *other);

/* "0-3,8,10-11" as the kernel writes it. Strict: any malformed input returns -EINVAL (or -ERANGE for a
 * CPU number >= size) and, when ret_error is given, a sentence saying what was wrong. An empty string
 * is an error; the empty set has no cpulist spelling in configuration. */
int cpuset_parse_list(const char *s, unsigned size, CpuSet **ret, char **ret_error);
char *cpuset_format_list(const CpuSet *s);

/* The comma-separated 32-bit hex words of /proc/irq/N/smp_affinity, most significant first. */
int cpuset_parse_mask(const char *s, unsigned size, CpuSet **ret, char **ret_error);
char *cpuset_format_mask(const CpuSet *s);
