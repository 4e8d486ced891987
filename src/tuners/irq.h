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

/* What the IRQ tuners carry from one pass to the next: the IRQ tuner's state (Tuner.state_new,
 * irq-state.c), which the daemon holds. A plan reads it and leaves the table it read in seen, which becomes
 * previous only after a pass that really applied (Tuner.state_applied). */
typedef struct IrqPin {
        unsigned irq;
        CpuSet *cpus;
} IrqPin;

typedef struct IrqState {
        IrqTable *previous; /* rates are count differences to it; cumulative counts without it */
        IrqTable *seen;
        unsigned *refused; /* IRQs whose affinity write the kernel refused (EIO/EPERM): not tried again */
        size_t n_refused, refused_allocated;
        IrqPin *pins; /* PinIrq() overrides, until restore or a profile change */
        size_t n_pins, pins_allocated;
} IrqState;

void irq_state_commit(IrqState *s);
void irq_state_forget(IrqState *s); /* refused IRQs and pins: a new profile starts over */
void irq_state_clear(IrqState *s);
bool irq_state_refused(const IrqState *s, unsigned irq);
void irq_state_refuse(IrqState *s, unsigned irq);
/* Remembers the IRQs whose affinity the kernel refused in a pass (SETTING_REFUSED): not tried again
 * under this profile. */
void irq_state_note_results(IrqState *s, const Plan *plan);
const CpuSet *irq_state_pin(const IrqState *s, unsigned irq);
/* Replaces a pin; cpus NULL removes it. Takes cpus. */
void irq_state_set_pin(IrqState *s, unsigned irq, CpuSet *cpus);
/* Interrupts since the previous table (or since boot without one). */
uint64_t irq_state_delta(const IrqState *s, const Irq *irq);
