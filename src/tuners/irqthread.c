/* SPDX-License-Identifier: GPL-2.0-or-later */
/* IRQ thread priorities, the job rtirq does: with threadirqs or on PREEMPT_RT each handler runs in a
 * kernel thread "irq/N-name", SCHED_FIFO 50 by default; rules raise the sound card's above the rest.
 * The threads follow their IRQ's affinity by themselves: only their scheduling is set here. */
#include <sched.h>

#include "core/cgroupfs.h"
#include "tuners/registry.h"
#include "shared/sysfs.h"
#include "tuners/irq.h"

static bool irqthread_uses(const void *config)
{
        const IrqConfig *c = config;

        for (size_t i = 0; i < c->n_rules; i++)
                if (c->rules[i].policy >= 0)
                        return true;
        return false;
}

/* Thread priorities only take effect when IRQ handlers run in threads. */
static unsigned irqthread_boot_needs(const void *config)
{
        const IrqConfig *c = config;

        for (size_t i = 0; i < c->n_rules; i++)
                if (c->rules[i].priority > 0)
                        return BOOT_NEEDS_IRQ_THREADS;
        return 0;
}

static const IrqRule *thread_rule(const IrqConfig *c, const Irq *irq)
{
        for (size_t i = 0; i < c->n_rules; i++)
                if (c->rules[i].policy >= 0 && irq_match(c->rules[i].match, irq))
                        return &c->rules[i];
        return NULL;
}

/* The full name of the handler a thread runs: comm is "irq/N-NAME" or "irq/N-s-NAME" (a secondary
 * handler) cut at 15 characters, so the handler is the one of the line whose name starts with what is
 * left. The whole list when none does. */
static char *thread_action(const char *prefix, const char *actions)
{
        _cleanup_strv_free_ char **names = strv_split(actions, ",");

        if (isempty(prefix))
                return xstrdup(actions);
        for (char **n = names; *n; n++)
                if (startswith(strstrip(*n), prefix))
                        return xstrdup(strstrip(*n));
        if (startswith(prefix, "s-"))
                for (char **n = names; *n; n++)
                        if (startswith(strstrip(*n), prefix + 2))
                                return xstrdup(strstrip(*n));
        return xstrdup(actions);
}

static bool threaded_kernel(void)
{
        _cleanup_free_ char *cmdline = NULL, *rt = NULL;

        if (sys_read("/sys/kernel/realtime", &rt) >= 0 && streq(strstrip(rt), "1"))
                return true;
        return sys_read("/proc/cmdline", &cmdline) >= 0 && strstr(cmdline, "threadirqs");
}

static int irqthread_plan(const PlanContext *ctx, const void *config, const char *device, Plan *plan,
                          PlanNotes *notes)
{
        const IrqConfig *c = config;
        _cleanup_irq_table_ IrqTable *owned = NULL;
        const IrqTable *t = NULL;
        _cleanup_free_ bool *has_thread = NULL;
        unsigned unthreaded = 0, first = 0;
        size_t n_tasks;
        const TaskInfo *tasks = task_scan_kthreads(ctx->tasks, &n_tasks);
        int r;

        r = irq_table_for_pass(ctx, "irqthread", notes, &t, &owned);
        if (r < 0)
                return r;
        has_thread = xmalloc0(sizeof(bool) * (t->n + 1));
        for (size_t k = 0; k < n_tasks; k++) {
                const TaskInfo *task = &tasks[k];
                const IrqRule *rule;
                const Irq *irq;
                const char *handler;
                unsigned num;

                if (!(task->flags & PF_KTHREAD) || !irq_thread_parse(task->comm, &num, &handler))
                        continue;
                irq = irq_table_find(t, num);
                if (!irq)
                        continue;
                has_thread[irq - t->irqs] = true;
                /* Matched as the handler the thread runs: on a shared line each handler has its own
                 * thread, and name:GLOB picks among them as rtirq does. */
                _cleanup_free_ char *action = thread_action(handler, irq->actions);
                Irq view = *irq;
                view.actions = action;
                rule = thread_rule(c, &view);
                if (!rule)
                        continue;
                plan_add(plan, &setting_kind_sched, "irqthread", 0, xasprintf("/proc/%u/sched", task->pid),
                         xasprintf("%s:%d", sched_policy_name(rule->policy),
                                   rule->priority > 0 ? rule->priority : 0));
        }
        /* Rules that found an IRQ but no thread for it: the kernel runs those handlers in hard IRQ context.
         */
        for (size_t i = 0; i < t->n; i++)
                if (!has_thread[i] && !isempty(t->irqs[i].actions) && thread_rule(c, &t->irqs[i])) {
                        if (!unthreaded)
                                first = t->irqs[i].num;
                        unthreaded++;
                }
        if (unthreaded)
                plan_notes_add(
                    notes, "irqthread", xstrdup("/proc/interrupts"),
                    threaded_kernel()
                        ? xasprintf("%u IRQs the rules match (IRQ %u first) have no thread", unthreaded,
                                    first)
                        : xasprintf(
                              "IRQs are not threaded: %u IRQs the rules match (IRQ %u first) "
                              "run in hard IRQ context; needs the boot argument threadirqs (rtctl bootargs)",
                              unthreaded, first));
        return 0;
}

const Tuner tuner_irqthread = {
    .name = "irqthread",
    .sections = (const char *const[]){"IRQ", NULL},
    .subsystems = (const char *const[]){"pci", "usb", "sound", "net", "virtio", NULL},
    .cpu_dependent = true,
    .replan_whole = true,
    .config_from = &tuner_irq,
    .uses = irqthread_uses,
    .plan = irqthread_plan,
    .boot_needs = irqthread_boot_needs,
};
