/* SPDX-License-Identifier: GPL-2.0-or-later */
/* What only rtctl can prove: that its isolation holds in the state the user actually gets. Every
 * movable process off the isolated CPUs, every movable IRQ's effective affinity (where the interrupt
 * controller really delivers it, not the requested mask) on housekeeping CPUs, and the workqueue
 * masks without isolated CPUs. */
#include <sched.h>

#include "core/check-internal.h"
#include "core/irqs.h"
#include "core/topology.h"
#include "shared/sysfs.h"

/* Lists at most this many culprits in a detail; the count says how many more. */
#define LIST_MAX 8

static void list_add(char **list, unsigned n, const char *fmt_item)
{
        char *more;

        if (n > LIST_MAX)
                return;
        more = n == LIST_MAX ? xasprintf("%s, ...", *list)
                             : xasprintf("%s%s%s", *list ? *list : "", *list ? ", " : "", fmt_item);
        free(*list);
        *list = more;
}

static char *status_field(const char *status, const char *field)
{
        _cleanup_free_ char *key = xasprintf("\n%s:", field);
        const char *p = strstr(status, key);

        if (!p)
                return NULL;
        p += strlen(key);
        p += strspn(p, " \t");
        return xstrndup(p, strcspn(p, "\n"));
}

/* Processes rtctl put on the isolated CPUs itself (attached, or by an [Attach] rule) live under
 * rtctl.slice (cgroup v2 with systemd), in /rtctl-attached (v2 without it) or in the rtctl-isolated
 * cpuset (v1): there by design. */
static bool placed_by_rtctl(unsigned pid)
{
        _cleanup_free_ char *path = xasprintf("/proc/%u/cgroup", pid), *cg = NULL;

        return sys_read(path, &cg) >= 0 &&
               (strstr(cg, "/rtctl.slice/") || strstr(cg, "::/rtctl-attached/") ||
                strstr(cg, ":/rtctl-isolated"));
}

static void check_tasks(Audit *a, const AuditOptions *o, TaskScan *tasks, unsigned n_cpus)
{
        size_t n_tasks;
        const TaskInfo *t = task_scan_all(tasks, &n_tasks);
        _cleanup_free_ char *list = NULL;
        unsigned n = 0, checked = 0;

        for (size_t i = 0; i < n_tasks; i++) {
                _cleanup_free_ char *path = NULL, *status = NULL, *cpus = NULL, *item = NULL;
                _cleanup_cpuset_ CpuSet *allowed = NULL;

                /* Kernel-bound threads (per-CPU kthreads) cannot move, and an exiting task never runs
                 * user code again. */
                if (t[i].flags & (PF_NO_SETAFFINITY | PF_EXITING))
                        continue;
                path = xasprintf("/proc/%u/status", t[i].pid);
                if (sys_read(path, &status) < 0 || !(cpus = status_field(status, "Cpus_allowed_list")) ||
                    cpuset_parse_list(cpus, n_cpus, &allowed, NULL) < 0)
                        continue;
                checked++;
                if (!cpuset_intersects(allowed, o->isolated) || placed_by_rtctl(t[i].pid))
                        continue;
                item = xasprintf("%s (PID %u, CPUs %s)", t[i].comm, t[i].pid, cpus);
                list_add(&list, n++, item);
        }
        if (n)
                audit_add(a, "isolated-tasks", "warn",
                          xasprintf("%u movable process%s may run on the isolated CPUs: %s", n,
                                    n == 1 ? "" : "es", list),
                          xstrdup("rtctl profile NAME (rtctld moves every movable process off on each "
                                  "pass); a process that "
                                  "sets its own affinity: run it with rtctl run, or stop it doing so"));
        else
                audit_add(a, "isolated-tasks", "ok",
                          xasprintf("none of %u movable processes may run on the isolated CPUs", checked),
                          NULL);
}

static void check_irqs(Audit *a, const AuditOptions *o, unsigned n_cpus)
{
        _cleanup_irq_table_ IrqTable *t = NULL;
        _cleanup_free_ char *list = NULL, *pending = NULL;
        unsigned n = 0, n_pending = 0, checked = 0;

        if (irq_table_load(IRQ_LOAD_EFFECTIVE, n_cpus, &t) < 0)
                return;
        for (size_t i = 0; i < t->n; i++) {
                const Irq *irq = &t->irqs[i];
                const CpuSet *where = irq->effective ? irq->effective : irq->affinity;
                _cleanup_free_ char *cpus = NULL, *item = NULL;

                if (irq->unmovable || !where)
                        continue;
                checked++;
                if (!cpuset_intersects(where, o->isolated))
                        continue;
                cpus = cpuset_format_list(where);
                item = xasprintf("IRQ %u %s on CPU %s", irq->num, irq->actions ? irq->actions : "", cpus);
                /* Asked for housekeeping CPUs, still delivered to an isolated one: x86 moves an MSI
                 * without interrupt remapping when it next fires, so a quiet IRQ (a NIC's tx queue)
                 * shows its old CPU until then. The move is requested; nothing is left to fix. */
                if (irq->effective && irq->affinity && !cpuset_intersects(irq->affinity, o->isolated))
                        list_add(&pending, n_pending++, item);
                else
                        list_add(&list, n++, item);
        }
        if (n)
                audit_add(a, "isolated-irqs", "warn",
                          xasprintf("%u movable IRQ%s delivered to isolated CPUs (effective affinity): %s",
                                    n, n == 1 ? "" : "s", list),
                          xstrdup("an [IRQ] section in the profile (rtctl places every movable IRQ on "
                                  "housekeeping CPUs), and unpin what rtctl pin-irq put there"));
        else if (n_pending)
                audit_add(a, "isolated-irqs", "ok",
                          xasprintf("all %u movable IRQs are set to housekeeping CPUs; %u still delivered "
                                    "to isolated CPUs until their next interrupt moves them: %s",
                                    checked, n_pending, pending),
                          NULL);
        else
                audit_add(a, "isolated-irqs", "ok",
                          xasprintf("all %u movable IRQs are delivered to housekeeping CPUs", checked),
                          NULL);
}

/* The kernel runs an unbound workqueue's work on its own cpumask within the global one (the global one
 * when they share no CPU), so a per-workqueue mask wider than the global one is harmless: judged is
 * where its work can really run. */
static void check_workqueues(Audit *a, const AuditOptions *o, unsigned n_cpus)
{
        _cleanup_cpuset_ CpuSet *global =
            sys_read_cpuset("/sys/devices/virtual/workqueue/cpumask", n_cpus, true);
        _cleanup_closedir_ DIR *d = NULL;
        _cleanup_free_ char *list = NULL, *global_s = NULL;
        struct dirent *de;
        unsigned n = 0, checked = 0;

        if (!global)
                return;
        global_s = cpuset_format_list(global);
        d = sys_opendir("/sys/devices/virtual/workqueue");
        while (d && (de = readdir(d))) {
                _cleanup_free_ char *path = NULL, *item = NULL, *cpus = NULL;
                _cleanup_cpuset_ CpuSet *set = NULL;

                if (de->d_name[0] == '.')
                        continue;
                path = xasprintf("/sys/devices/virtual/workqueue/%s/cpumask", de->d_name);
                if (!(set = sys_read_cpuset(path, n_cpus, true)))
                        continue;
                checked++;
                cpuset_and(set, global);
                if (cpuset_empty(set) || !cpuset_intersects(set, o->isolated))
                        continue;
                cpus = cpuset_format_list(set);
                item = xasprintf("%s (CPUs %s)", de->d_name, cpus);
                list_add(&list, n++, item);
        }
        if (cpuset_intersects(global, o->isolated))
                audit_add(
                    a, "workqueue", "warn",
                    xasprintf("unbound kernel work may run on isolated CPUs: the global workqueue mask "
                              "is CPUs %s%s%s",
                              global_s, list ? "; workqueues: " : "", list ? list : ""),
                    xstrdup("an isolating profile applied by rtctld (rtctl profile NAME) sets "
                            "/sys/devices/virtual/workqueue/cpumask to the housekeeping CPUs"));
        else
                audit_add(a, "workqueue", "ok",
                          xasprintf("the global workqueue mask (CPUs %s) excludes the isolated CPUs, and "
                                    "with it the %u workqueue%s with masks of their own",
                                    global_s, checked, checked == 1 ? "" : "s"),
                          NULL);
}

/* Whether a thread is where rtctl puts the threads it isolates: the isolated child of its cgroup v2
 * domain, or the isolated v1 cpuset. */
static bool thread_isolated_by_rtctl(unsigned pid, const char *tid)
{
        _cleanup_free_ char *v2 = xasprintf("/proc/%u/task/%s/cgroup", pid, tid),
                            *v1 = xasprintf("/proc/%u/task/%s/cpuset", pid, tid), *s = NULL;

        if (sys_read(v1, &s) >= 0 && streq(strstrip(s), "/rtctl-isolated"))
                return true;
        free(s);
        s = NULL;
        return sys_read(v2, &s) >= 0 && (strstr(s, "0::/rtctl.slice/rtctl-attached.scope/isolated\n") ||
                                         strstr(s, "0::/rtctl-attached/isolated\n"));
}

static const char *policy_name(int policy)
{
        switch (policy & ~SCHED_RESET_ON_FORK) {
        case SCHED_FIFO:
                return "SCHED_FIFO";
        case SCHED_RR:
                return "SCHED_RR";
        case 6: /* SCHED_DEADLINE */
                return "SCHED_DEADLINE";
        default:
                return "not real-time";
        }
}

/* Per process, which of its threads rtctl put on the isolated CPUs, with what tells them apart (name
 * and scheduling policy, what [Attach] rules choose by), and how many stay on housekeeping. */
static void check_isolated_threads(Audit *a, TaskScan *tasks)
{
        size_t n_tasks;
        const TaskInfo *t = task_scan_all(tasks, &n_tasks);
        _cleanup_free_ char *list = NULL;
        unsigned n = 0;

        for (size_t i = 0; i < n_tasks; i++) {
                _cleanup_free_ char *dir = xasprintf("/proc/%u/task", t[i].pid), *these = NULL;
                _cleanup_closedir_ DIR *d = NULL;
                unsigned isolated = 0, others = 0;
                struct dirent *de;

                if (t[i].flags & PF_KTHREAD || !(d = sys_opendir(dir)))
                        continue;
                while ((de = readdir(d))) {
                        _cleanup_free_ char *comm_path = NULL, *comm = NULL, *item = NULL;
                        unsigned tid;

                        if (safe_atou(de->d_name, &tid) < 0)
                                continue;
                        if (!thread_isolated_by_rtctl(t[i].pid, de->d_name)) {
                                others++;
                                continue;
                        }
                        comm_path = xasprintf("/proc/%u/task/%u/comm", t[i].pid, tid);
                        if (sys_read(comm_path, &comm) < 0)
                                continue;
                        int policy = sched_getscheduler((pid_t)tid);
                        item = xasprintf("%s%s%s (TID %u, %s)", strempty(these), these ? ", " : "",
                                         strstrip(comm), tid, policy_name(policy));
                        free(these);
                        these = TAKE_PTR(item);
                        isolated++;
                }
                if (!isolated)
                        continue;
                _cleanup_free_ char *item =
                    xasprintf("%s (PID %u): %s isolated, %u other thread%s on housekeeping", t[i].comm,
                              t[i].pid, these, others, others == 1 ? "" : "s");
                list_add(&list, n++, item);
        }
        if (n)
                audit_add(a, "isolated-threads", "info",
                          xasprintf("%u process%s with threads on the isolated CPUs: %s", n,
                                    n == 1 ? "" : "es", list),
                          NULL);
        else
                audit_add(a, "isolated-threads", "info",
                          xstrdup("no thread is on the isolated CPUs yet (an [Attach] rule, rtctl attach or "
                                  "rtctl run puts them there)"),
                          NULL);
}

void audit_isolation(Audit *a, const AuditOptions *o, TaskScan *tasks)
{
        _cleanup_topology_ Topology *topo = NULL;
        _cleanup_free_ char *cpus = NULL;

        assert(o);

        if (!o->isolated || cpuset_empty(o->isolated)) {
                audit_add(a, "isolation", "info",
                          xasprintf("no isolated CPUs (%s): nothing is kept off any CPU",
                                    o->isolated_source ? o->isolated_source : "no profile"),
                          xstrdup("Isolate= in the profile's [CPU] section (rtctl profile NAME)"));
                return;
        }
        if (topology_load(NULL, &topo) < 0)
                return;
        cpus = cpuset_format_list(o->isolated);
        audit_add(a, "isolation", "info", xasprintf("isolated CPUs %s (%s)", cpus, o->isolated_source),
                  NULL);
        check_tasks(a, o, tasks, topo->n_cpus);
        check_isolated_threads(a, tasks);
        check_irqs(a, o, topo->n_cpus);
        check_workqueues(a, o, topo->n_cpus);
}
