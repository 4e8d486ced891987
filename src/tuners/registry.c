/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "tuners/registry.h"

/* The order is the order of a pass: rival services stopped first (and, restore going newest first,
 * started again last, after rtctl put their knobs back), then sysctls and the scheduler's knobs, then the
 * CPU split (kernel threads' own CPUs before the cpusets, so that restore, newest first, dissolves the
 * cpusets before it puts affinities back) and the isolated CPUs' cache ways, then interrupts (placed
 * within the CPU split just made, their threads after them), then power (frequency, then idle
 * states), then devices. */
static const Tuner *const tuners[_TUNER_MAX] = {
    [TUNER_CONFLICT] = &tuner_conflict, [TUNER_SYSCTL] = &tuner_sysctl,
    [TUNER_SCHED] = &tuner_sched,       [TUNER_KTHREAD] = &tuner_kthread,
    [TUNER_CPUSET] = &tuner_cpuset,     [TUNER_CACHE] = &tuner_cache,
    [TUNER_IRQ] = &tuner_irq,           [TUNER_IRQTHREAD] = &tuner_irqthread,
    [TUNER_CPUFREQ] = &tuner_cpufreq,   [TUNER_CPUIDLE] = &tuner_cpuidle,
    [TUNER_BLOCK] = &tuner_block,       [TUNER_AUDIODEV] = &tuner_audiodev,
};
_Static_assert(_TUNER_MAX <= TUNERS_MAX, "the core's arrays must hold every tuner");

void tuners_register_all(void)
{
        tuners_register(tuners, _TUNER_MAX);
}
