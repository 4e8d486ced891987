/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "shared/log.h"
#include "tuners/irq.h"

void irq_state_commit(IrqState *s)
{
        assert(s);

        if (!s->seen)
                return;
        irq_table_free(s->previous);
        s->previous = TAKE_PTR(s->seen);
        irq_table_keep_counts(s->previous);
}

void irq_state_forget(IrqState *s)
{
        assert(s);

        free(s->refused);
        s->refused = NULL;
        s->n_refused = s->refused_allocated = 0;
        for (size_t i = 0; i < s->n_pins; i++)
                cpuset_free(s->pins[i].cpus);
        free(s->pins);
        s->pins = NULL;
        s->n_pins = s->pins_allocated = 0;
}

void irq_state_clear(IrqState *s)
{
        assert(s);

        irq_state_forget(s);
        irq_table_free(s->previous);
        irq_table_free(s->seen);
        *s = (IrqState){};
}

bool irq_state_refused(const IrqState *s, unsigned irq)
{
        for (size_t i = 0; s && i < s->n_refused; i++)
                if (s->refused[i] == irq)
                        return true;
        return false;
}

void irq_state_refuse(IrqState *s, unsigned irq)
{
        if (irq_state_refused(s, irq))
                return;
        GREEDY_REALLOC(s->refused, s->refused_allocated, s->n_refused + 1);
        s->refused[s->n_refused++] = irq;
}

const CpuSet *irq_state_pin(const IrqState *s, unsigned irq)
{
        for (size_t i = 0; s && i < s->n_pins; i++)
                if (s->pins[i].irq == irq)
                        return s->pins[i].cpus;
        return NULL;
}

void irq_state_set_pin(IrqState *s, unsigned irq, CpuSet *cpus)
{
        assert(s);

        for (size_t i = 0; i < s->n_pins; i++)
                if (s->pins[i].irq == irq) {
                        cpuset_free(s->pins[i].cpus);
                        if (cpus)
                                s->pins[i].cpus = cpus;
                        else
                                s->pins[i] = s->pins[--s->n_pins];
                        return;
                }
        if (!cpus)
                return;
        GREEDY_REALLOC(s->pins, s->pins_allocated, s->n_pins + 1);
        s->pins[s->n_pins++] = (IrqPin){.irq = irq, .cpus = cpus};
}

uint64_t irq_state_delta(const IrqState *s, const Irq *irq)
{
        assert(irq);

        const Irq *prev = s ? irq_table_find(s->previous, irq->num) : NULL;

        /* A number given to another device since counts again from its own start. */
        if (!prev || !streq(prev->actions, irq->actions) || prev->count > irq->count)
                return irq->count;
        return irq->count - prev->count;
}

void irq_state_note_results(IrqState *s, const Plan *plan)
{
        assert(plan);

        for (size_t i = 0; i < plan->n; i++) {
                const Setting *set = &plan->settings[i];
                unsigned irq;

                if (set->result == SETTING_REFUSED && sscanf(set->object, "/proc/irq/%u/", &irq) == 1 &&
                    !irq_state_refused(s, irq)) {
                        log_info("The kernel refused to move IRQ %u (%s); leaving it where it is.", irq,
                                 strerror(set->error < 0 ? -set->error : set->error));
                        irq_state_refuse(s, irq);
                }
        }
}
