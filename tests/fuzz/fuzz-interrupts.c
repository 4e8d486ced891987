/* SPDX-License-Identifier: GPL-2.0-or-later */
/* /proc/interrupts, of any architecture and any damage. */
#include "core/irqs.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        _cleanup_irq_table_ IrqTable *t = irq_table_parse((const char *)data, size);

        for (size_t i = 0; i < t->n; i++) {
                const Irq *irq = &t->irqs[i];

                fuzz_check(i == 0 || t->irqs[i - 1].num <= irq->num); /* sorted */
                fuzz_check(irq->chip && irq->actions);
                fuzz_check(!strchr(irq->actions, '\n'));
                fuzz_check(irq_table_find(t, irq->num) && irq_table_find(t, irq->num)->num == irq->num);
        }
        fuzz_check(t->n || !irq_table_find(t, 0));
        return 0;
}
