/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include "core/tuner.h"

/* Every tuner, by its place in a pass: code above the core names a tuner by its TunerId, which a typo
 * cannot compile into, and indexes what it keeps per tuner with it. */
typedef enum TunerId {
        TUNER_CONFLICT,
        TUNER_SYSCTL,
        TUNER_SCHED,
        TUNER_KTHREAD,
        TUNER_CPUSET,
        TUNER_CACHE,
        TUNER_IRQ,
        TUNER_IRQTHREAD,
        TUNER_CPUFREQ,
        TUNER_CPUIDLE,
        TUNER_BLOCK,
        TUNER_AUDIODEV,
        _TUNER_MAX,
} TunerId;

extern const Tuner tuner_block;
extern const Tuner tuner_audiodev;
extern const Tuner tuner_sysctl;
extern const Tuner tuner_sched;
extern const Tuner tuner_cpuset;
/* The cpuset tuner's one "device": replanning it plans the attached processes and threads alone. */
#define CPUSET_ATTACH_DEVICE "attach"
extern const Tuner tuner_cache;
extern const Tuner tuner_kthread;
extern const Tuner tuner_irq;
extern const Tuner tuner_irqthread;
extern const Tuner tuner_cpufreq;
extern const Tuner tuner_cpuidle;
extern const Tuner tuner_conflict;

/* Registers every tuner with the core (tuners_register()), in the order of a pass. */
void tuners_register_all(void);
