/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The kernel's own movable work off the isolated CPUs: unbound kernel threads' affinity, the unbound
 * workqueue and writeback cpumasks, the lockup detector's CPUs. Threads the kernel binds to one CPU
 * (PF_NO_SETAFFINITY) are counted, not failed. What only boot parameters can move (nohz_full,
 * rcu_nocbs, isolcpus) is src/core/bootargs.c's: status calls it a pending reboot. */
#include <sched.h>

#include "core/cgroupfs.h"
#include "tuners/registry.h"
#include "shared/sysfs.h"

typedef struct KthreadConfig {
        bool move;
} KthreadConfig;

static void *kthread_parse(Conf *conf, char ***errors)
{
        ConfSection *cpu = conf_section(conf, "CPU");
        ConfKey *iso = conf_key(cpu, "Isolate");
        ConfKey *k = conf_key(cpu, "KernelThreads");
        KthreadConfig *c;

        if (k && !streq(k->value, "housekeeping") && !streq(k->value, "leave")) {
                strv_push(errors, conf_key_error(k, "expected housekeeping or leave"));
                return NULL;
        }
        if (!iso || isempty(iso->value) || (k && streq(k->value, "leave")))
                return NULL;
        c = xmalloc0(sizeof(KthreadConfig));
        c->move = true;
        return c;
}

static void kthread_free_config(void *p)
{
        free(p);
}

/* A task's affinity from sched_getaffinity(2), which gives only its CPUs that are active: the same as
 * /proc/PID/status's Cpus_allowed_list while every possible CPU is online, without a file. NULL where
 * it cannot say (the task is gone). */
static CpuSet *affinity_by_syscall(unsigned pid, unsigned n_cpus, char **ret_list)
{
        size_t size = CPU_ALLOC_SIZE(CPUSET_MAX_CPUS);
        cpu_set_t *mask = CPU_ALLOC(CPUSET_MAX_CPUS);
        CpuSet *s = NULL;

        if (!mask)
                return NULL;
        if (sched_getaffinity((pid_t)pid, size, mask) == 0) {
                s = cpuset_new(n_cpus);
                for (unsigned cpu = 0; cpu < n_cpus; cpu++)
                        if (CPU_ISSET_S(cpu, size, mask))
                                cpuset_add(s, cpu);
                *ret_list = cpuset_format_list(s);
        }
        CPU_FREE(mask);
        return s;
}

/* A task's affinity as the kind reads it, and as a set. While every possible CPU is online (and not
 * on fixtures), the syscall says the same as the kind's file with no path walk: a pass after a CPU
 * came back reads each kernel thread's this way. With a CPU offline only the file keeps it, and it is
 * what the journal must hold for the restore. */
static CpuSet *affinity_of(const PlanContext *ctx, unsigned pid, char **ret_list)
{
        _cleanup_free_ char *object = xasprintf("/proc/%u/affinity", pid);
        CpuSet *s = NULL;

        if (isempty(sysroot()) && cpuset_equal(ctx->topology->online, ctx->topology->possible))
                return affinity_by_syscall(pid, ctx->topology->n_cpus, ret_list);
        if (setting_kind_affinity.read(NULL, object, NULL, ret_list) < 0)
                return NULL;
        if (cpuset_parse_list(*ret_list, CPUSET_MAX_CPUS, &s, NULL) < 0) {
                free(*ret_list);
                *ret_list = NULL;
                return NULL;
        }
        return s;
}

/* Every movable kernel thread, cgroup v1 or not: the kernel refuses to move some of them (kthreadd, kswapd,
 * kcompactd) between cgroups although they may change CPUs, and the rest get the same CPUs from the
 * housekeeping cpuset anyway. This tuner runs before the cpuset tuner so that on restore the cpusets go
 * first and the affinities, journalled earlier, come back last. */
static void plan_threads(const PlanContext *ctx, Plan *plan, PlanNotes *notes)
{
        size_t n;
        const TaskInfo *tasks = task_scan_kthreads(ctx->tasks, &n);
        unsigned pinned = 0;

        for (size_t i = 0; i < n; i++) {
                const TaskInfo *t = &tasks[i];
                _cleanup_cpuset_ CpuSet *cur = NULL;
                _cleanup_free_ char *list = NULL;
                Setting *s;

                if (!(t->flags & PF_KTHREAD))
                        continue;
                if (t->flags & PF_NO_SETAFFINITY) {
                        pinned++;
                        continue;
                }
                /* IRQ threads follow their interrupt's affinity: the IRQ tuner's business. */
                if (irq_thread_parse(t->comm, &(unsigned){0}, NULL))
                        continue;
                cur = affinity_of(ctx, t->pid, &list);
                if (!cur)
                        continue;
                /* Keep a thread's own narrowing (kswapd to its node) where it leaves housekeeping CPUs,
                 * else all of them. Planned for every movable thread on every pass, not only those still
                 * on isolated CPUs: a plan that changed with the state it made would restore itself. */
                cpuset_andnot(cur, ctx->isolated);
                if (cpuset_empty(cur))
                        cpuset_or(cur, ctx->housekeeping);
                /* The kernel keeps a task's CPUs within those that are online; the plan follows hotplug. */
                cpuset_and(cur, ctx->topology->online);
                if (cpuset_empty(cur))
                        continue;
                s = plan_add(plan, &setting_kind_affinity, "kthread", 0,
                             xasprintf("/proc/%u/affinity", t->pid), cpuset_format_list(cur));
                /* Read in this pass: the applier need not read it again. Where it will be written the
                 * applier may journal it as the original, which only the file gives whole (the syscall
                 * leaves out a CPU that is going or not yet active): then the applier reads it. */
                if (s->kind->equal(list, s->desired))
                        s->current = TAKE_PTR(list);
        }
        if (pinned)
                plan_notes_add(
                    notes, "kthread", xstrdup("/proc"),
                    xasprintf("%u per-CPU kernel threads are bound by the kernel (PF_NO_SETAFFINITY) and "
                              "stay",
                              pinned));
}

static int kthread_plan(const PlanContext *ctx, const void *config, const char *device, Plan *plan,
                        PlanNotes *notes)
{
        static const char *const masks[] = {
            "/sys/devices/virtual/workqueue/cpumask",
            "/sys/devices/virtual/workqueue/writeback/cpumask",
        };

        if (cpuset_empty(ctx->isolated))
                return 0;
        plan_threads(ctx, plan, notes);
        for (size_t i = 0; i < ELEMENTSOF(masks); i++)
                if (sys_exists(masks[i]))
                        plan_add(plan, &setting_kind_cpumask, "kthread", 0, xstrdup(masks[i]),
                                 cpuset_format_list(ctx->housekeeping));
        if (sys_exists("/proc/sys/kernel/watchdog_cpumask"))
                plan_add(plan, &setting_kind_cpulist, "kthread", 0,
                         xstrdup("/proc/sys/kernel/watchdog_cpumask"),
                         cpuset_format_list(ctx->housekeeping));
        return 0;
}

const Tuner tuner_kthread = {
    .name = "kthread",
    .cpu_dependent = true,
    .parse = kthread_parse,
    .free_config = kthread_free_config,
    .plan = kthread_plan,
};
