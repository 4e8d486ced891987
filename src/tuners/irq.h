/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include "core/irqs.h"
#include "core/policy.h"

/* The profile's [IRQ] section and [IRQ NAME] rules, read by both IRQ tuners: irq places interrupts,
 * irqthread sets the priorities of their threads. */

typedef enum IrqBalance {
        IRQ_BALANCE_OFF,
        IRQ_BALANCE_HOUSEKEEPING,
        IRQ_BALANCE_ALL,
} IrqBalance;

typedef struct IrqRule {
        char *name;
        char **match;
        CpuSpec cpus; /* CPU_SPEC_UNSET: the rule does not place */
        int policy;   /* SCHED_FIFO, SCHED_RR, SCHED_OTHER; -1 unset */
        int priority; /* 1-99 for fifo/rr; -1 unset */
} IrqRule;

typedef struct IrqConfig {
        bool has_irq_section;
        IrqBalance balance;
        CpuSpec cpus; /* where balanced IRQs go; unset: housekeeping (Balance=housekeeping) or all */
        unsigned rebalance_sec;
        IrqRule *rules;
        size_t n_rules;
} IrqConfig;

/* NULL when the profile has no [IRQ] section, no [IRQ NAME] rule and isolates no CPUs. */
IrqConfig *irq_config_parse(Conf *conf, char ***errors);
void irq_config_free(void *config);
/* Whether a profile places IRQs at all ([IRQ], or a rule with CPUs=), not only sets thread priorities. */
bool irq_config_places(const IrqConfig *c);

/* The table of this pass: read once and shared by both tuners through the IRQ tuner's state (IrqState).
 * Negative errno, with a failure in notes naming what could not be read, when /proc/interrupts cannot be
 * read. */
int irq_table_for_pass(const PlanContext *ctx, const char *tuner, PlanNotes *notes, const IrqTable **ret,
                       IrqTable **ret_owned);

/* A CPU set word on this machine: housekeeping, isolated, all (online) or a list. */
CpuSet *cpu_spec_resolve(const CpuSpec *spec, const PlanContext *ctx);
