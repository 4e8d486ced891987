/* SPDX-License-Identifier: GPL-2.0-or-later */
/* IRQ pins (PinIrq) and the IRQ listing (ListIrqs). */
#include "core/tasks.h"
#include "daemon/manager.h"
#include "shared/log.h"
#include "tuners/irq.h"

static void replan_irqs(Manager *m, const char *reason)
{
        dirty_mark_full(&m->dirty, TUNER_IRQ);
        manager_schedule_pass(m, reason);
}

static int unpin(Manager *m, unsigned irq, char **ret_error)
{
        /* Unpinning works for an IRQ that is gone too: its number may come back with another device. */
        if (!irq_state_pin(manager_irq_state(m), irq)) {
                *ret_error = xasprintf("IRQ %u is not pinned", irq);
                return -ESRCH;
        }
        irq_state_set_pin(manager_irq_state(m), irq, NULL);
        log_info("IRQ %u is no longer pinned.", irq);
        replan_irqs(m, "unpin");
        return 0;
}

/* "isolated", "housekeeping", "all" or a CPU list, as a set on this machine. */
static int pin_cpus(Manager *m, const char *cpus, bool *allow_isolated, CpuSet **ret, char **ret_error)
{
        const Status *s = &m->status;

        if (streq(cpus, "isolated") || streq(cpus, "housekeeping")) {
                if (!s->isolated || !s->housekeeping) {
                        *ret_error = xasprintf("The CPU split of profile %s is not in place",
                                               manager_active_profile(m));
                        return -EINVAL;
                }
                *allow_isolated = *allow_isolated || streq(cpus, "isolated");
                *ret = cpuset_dup(streq(cpus, "isolated") ? s->isolated : s->housekeeping);
                return 0;
        }
        if (streq(cpus, "all")) {
                *ret = cpuset_dup(manager_topology(m)->online);
                return 0;
        }
        return cpuset_parse_list(cpus, manager_topology(m)->n_cpus, ret, ret_error) < 0 ? -EINVAL : 0;
}

int manager_pin_irq(Manager *m, unsigned irq, const char *cpus, bool allow_isolated, char **ret_error)
{
        _cleanup_irq_table_ IrqTable *t = NULL;
        _cleanup_cpuset_ CpuSet *set = NULL, *online = NULL;
        const Irq *i;
        int r;

        assert(m);

        if (isempty(cpus))
                return unpin(m, irq, ret_error);
        if (!m->policy || !irq_config_places(m->policy->config[TUNER_IRQ])) {
                *ret_error =
                    xasprintf("The active profile %s places no IRQs (it has no [IRQ] section): a pin "
                              "would not be kept",
                              manager_active_profile(m));
                return -EOPNOTSUPP;
        }
        r = irq_table_load(0, manager_topology(m)->n_cpus, &t);
        if (r < 0) {
                *ret_error = xasprintf("Cannot read /proc/interrupts: %s", strerror(-r));
                return r;
        }
        i = irq_table_find(t, irq);
        if (!i) {
                *ret_error = xasprintf("No IRQ %u on this machine", irq);
                return -ENOENT;
        }
        if (i->unmovable || irq_state_refused(manager_irq_state(m), irq)) {
                *ret_error = xasprintf("IRQ %u (%s) cannot be moved: %s", irq, i->actions,
                                       i->unmovable ?: "the kernel refused");
                return -EPERM;
        }
        r = pin_cpus(m, cpus, &allow_isolated, &set, ret_error);
        if (r < 0)
                return r;
        if (!set || cpuset_empty(set)) {
                _cleanup_free_ char *shown = echo_text(cpus);
                *ret_error = xasprintf("'%s' names no CPU here", shown);
                return -EINVAL;
        }
        if (!allow_isolated && m->status.isolated && cpuset_intersects(set, m->status.isolated)) {
                _cleanup_free_ char *iso = cpuset_format_list(m->status.isolated);
                *ret_error = xasprintf("CPUs %s are isolated; pin there only when asked explicitly "
                                       "(rtctl irq pin --isolated, or PinIrqWithFlags with flag 1)",
                                       iso);
                return -EXDEV;
        }
        online = cpuset_dup(set);
        cpuset_and(online, manager_topology(m)->online);
        if (cpuset_empty(online)) {
                *ret_error = xasprintf("CPUs %s are offline", cpus);
                return -ENXIO;
        }
        log_info("Pinning IRQ %u (%s) to CPUs %s.", irq, i->actions, cpus);
        irq_state_set_pin(manager_irq_state(m), irq, TAKE_PTR(set));
        replan_irqs(m, "pin");
        return 0;
}

/* The scheduling of each IRQ's first thread, by position in t; NULL where it has none. */
static char **irq_thread_scheduling(const IrqTable *t, SettingContext *kinds)
{
        char **sched = xmalloc0(sizeof(char *) * (t->n + 1));
        TaskScan scan = {};
        size_t n;
        const TaskInfo *tasks = task_scan_all(&scan, &n);

        for (size_t k = 0; k < n; k++) {
                _cleanup_free_ char *obj = NULL;
                const Irq *irq;
                unsigned num;

                if (!(tasks[k].flags & PF_KTHREAD) || !irq_thread_parse(tasks[k].comm, &num, NULL) ||
                    !(irq = irq_table_find(t, num)) || sched[irq - t->irqs])
                        continue;
                obj = xasprintf("/proc/%u/sched", tasks[k].pid);
                (void)setting_kind_sched.read(kinds, obj, NULL, &sched[irq - t->irqs]);
        }
        task_scan_clear(&scan);
        return sched;
}

int manager_irqs(Manager *m, IrqTable **ret, double **ret_rates, char ***ret_threads)
{
        IrqTable *t = NULL;
        double *rates;
        int r;

        assert(m);

        r = irq_table_load(IRQ_LOAD_EFFECTIVE, manager_topology(m)->n_cpus, &t);
        if (r < 0)
                return r;
        rates = xmalloc0(sizeof(double) * (t->n + 1));
        for (size_t i = 0; i < t->n; i++) {
                const Irq *prev = irq_table_find(manager_irq_state(m)->previous, t->irqs[i].num);
                uint64_t dt = manager_irq_state(m)->previous
                                  ? t->timestamp_usec - manager_irq_state(m)->previous->timestamp_usec
                                  : 0;
                if (prev && dt > 0 && streq(prev->actions, t->irqs[i].actions) &&
                    prev->count <= t->irqs[i].count)
                        rates[i] = (double)(t->irqs[i].count - prev->count) * 1e6 / (double)dt;
        }
        *ret_threads = irq_thread_scheduling(t, &m->kinds);
        *ret = t;
        *ret_rates = rates;
        return 0;
}
