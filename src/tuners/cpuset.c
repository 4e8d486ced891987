/* SPDX-License-Identifier: GPL-2.0-or-later */
/* CPU isolation with cpusets: everything movable on the housekeeping CPUs, attached processes on the
 * isolated ones. The mechanism follows what the machine has.
 *
 * cgroup v1 (as `cset shield` does it): rtctl-housekeeping holds every process of the root cpuset that
 * can move; rtctl-isolated is cpu_exclusive with load balancing off; the root's load balancing is off so
 * the isolated CPUs form no scheduling domain with the rest. v1 drops an offline CPU from every cpuset
 * for good (and moves a cpuset's processes to its parent when its last CPU goes), so the plan always
 * follows the online CPUs and is redone when one comes back. */
#include "core/cgroupfs.h"
#include "tuners/registry.h"
#include "shared/sysfs.h"

#define HOUSEKEEPING_CG "rtctl-housekeeping"
#define ISOLATED_CG     "rtctl-isolated"

enum {
        PHASE_DIRS,
        PHASE_CPUS,
        PHASE_FLAGS,
        PHASE_MOVE,
        /* cgroup v2's domain for attached processes (below): made in steps, each needing the last */
        PHASE_V2_DIRS,
        PHASE_V2_TYPE,
        PHASE_V2_SUBTREE,
        PHASE_V2_CPUS,
        PHASE_V2_EXCL,
        PHASE_V2_EXCL2,
        PHASE_V2_PARTITION,
        PHASE_ATTACH,
        PHASE_THREADS,
};

typedef struct CpusetConfig {
        bool isolate;
} CpusetConfig;

static void *cpuset_parse(Conf *conf, char ***errors)
{
        ConfKey *k = conf_key(conf_section(conf, "CPU"), "Isolate");
        CpusetConfig *c;

        if (!k || isempty(k->value))
                return NULL;
        c = xmalloc0(sizeof(CpusetConfig));
        c->isolate = true;
        return c;
}

static void cpuset_free_config(void *p)
{
        free(p);
}

static void add(Plan *plan, const SettingKind *kind, unsigned phase, char *object, char *desired)
{
        plan_add(plan, kind, "cpuset", phase, object, desired);
}

/* Process pid into the cgroup value (OBJECT is its /proc/PID/cpuset or /proc/PID/cgroup), only while
 * the PID is still the process the Manager recorded (starttime). */
static void add_member(Plan *plan, const char *file, unsigned pid, unsigned long long starttime, char *value)
{
        Setting *s = plan_add(plan, &setting_kind_member, "cpuset", PHASE_ATTACH,
                              xasprintf("/proc/%u/%s", pid, file), value);

        s->starttime = starttime;
}

static void note_unmovable(const PlanContext *ctx, const char *root, PlanNotes *notes)
{
        _cleanup_free_ unsigned *pids = NULL;
        _cleanup_free_ char *names = NULL;
        size_t n = 0, stuck = 0;

        if (cgroup_procs(root, &pids, &n) < 0)
                return;
        for (size_t i = 0; i < n; i++) {
                TaskInfo buf;
                const TaskInfo *t = task_scan_find(ctx->tasks, pids[i], &buf);
                if (!t || !(t->flags & PF_NO_SETAFFINITY))
                        continue;
                stuck++;
                if (stuck <= 8) {
                        char *s = xasprintf("%s%s%s", strempty(names), names ? ", " : "", t->comm);
                        free(names);
                        names = s;
                }
        }
        if (stuck)
                plan_notes_add(notes, "cpuset", xasprintf("%s/cgroup.procs", root),
                               xasprintf("%zu per-CPU kernel threads cannot leave the root cpuset (%s%s)",
                                         stuck, names, stuck > 8 ? ", ..." : ""));
}

/* Threads one by one: v1 keeps a cpuset per thread, and its tasks file moves one. */
static void plan_threads_v1(const PlanContext *ctx, Plan *plan)
{
        for (size_t i = 0; i < ctx->n_threads; i++) {
                const AttachedThread *t = &ctx->threads[i];
                _cleanup_free_ char *object = xasprintf("/proc/%u/task/%u/cpuset", t->pid, t->tid),
                                    *cur = NULL;

                if (t->isolate) {
                        add(plan, &setting_kind_thread, PHASE_ATTACH, TAKE_PTR(object),
                            xstrdup("/" ISOLATED_CG));
                        continue;
                }
                /* A thread is born in its creator's cpuset: one an isolated thread started, under a name
                 * the rule does not want, goes to the housekeeping CPUs. */
                if (sys_read(object, &cur) >= 0 && streq(strstrip(cur), "/" ISOLATED_CG))
                        add(plan, &setting_kind_thread, PHASE_ATTACH, TAKE_PTR(object),
                            xstrdup("/" HOUSEKEEPING_CG));
        }
}

static void plan_attach_v1(const PlanContext *ctx, const CpuSet *iso, Plan *plan)
{
        if (cpuset_empty(iso))
                return;
        for (size_t i = 0; i < ctx->n_attached; i++)
                add_member(plan, "cpuset", ctx->attached[i].pid, ctx->attached[i].starttime,
                           xstrdup("/" ISOLATED_CG));
        plan_threads_v1(ctx, plan);
}

static int plan_v1(const PlanContext *ctx, const CgroupInfo *cg, bool attach_only, Plan *plan,
                   PlanNotes *notes)
{
        const char *root = cg->mount;
        _cleanup_free_ char *mems = NULL, *mems_path = xasprintf("%s/cpuset.mems", root);
        _cleanup_cpuset_ CpuSet *iso = cpuset_dup(ctx->isolated), *hk = cpuset_dup(ctx->housekeeping);
        _cleanup_free_ char *hk_dir = xasprintf("%s/" HOUSEKEEPING_CG, root);
        _cleanup_free_ char *iso_dir = xasprintf("%s/" ISOLATED_CG, root);
        int r;

        cpuset_and(iso, ctx->topology->online);
        cpuset_and(hk, ctx->topology->online);
        if (attach_only) {
                plan_attach_v1(ctx, iso, plan);
                return 0;
        }
        r = sys_read(mems_path, &mems);
        if (r < 0)
                return r;

        add(plan, &setting_kind_cgroup, PHASE_DIRS, xstrdup(hk_dir), xstrdup("present"));
        add(plan, &setting_kind_cgroup, PHASE_DIRS, xstrdup(iso_dir), xstrdup("present"));

        add(plan, &setting_kind_cpulist, PHASE_CPUS, xasprintf("%s/cpuset.mems", hk_dir), xstrdup(mems));
        add(plan, &setting_kind_cpulist, PHASE_CPUS, xasprintf("%s/cpuset.cpus", hk_dir),
            cpuset_format_list(hk));
        add(plan, &setting_kind_cpulist, PHASE_CPUS, xasprintf("%s/cpuset.mems", iso_dir), xstrdup(mems));
        /* With every isolated CPU offline the kernel has emptied the cpuset already; it is filled again
         * when one comes back. */
        if (!cpuset_empty(iso)) {
                add(plan, &setting_kind_cpulist, PHASE_CPUS, xasprintf("%s/cpuset.cpus", iso_dir),
                    cpuset_format_list(iso));
                add(plan, &setting_kind_file, PHASE_FLAGS, xasprintf("%s/cpuset.cpu_exclusive", iso_dir),
                    xstrdup("1"));
        }
        add(plan, &setting_kind_file, PHASE_FLAGS, xasprintf("%s/cpuset.sched_load_balance", iso_dir),
            xstrdup("0"));
        add(plan, &setting_kind_file, PHASE_FLAGS, xasprintf("%s/cpuset.sched_load_balance", hk_dir),
            xstrdup("1"));
        add(plan, &setting_kind_file, PHASE_FLAGS, xasprintf("%s/cpuset.sched_load_balance", root),
            xstrdup("0"));

        add(plan, &setting_kind_procs, PHASE_MOVE, xasprintf("%s/cgroup.procs", hk_dir),
            xasprintf("all from %s", root));
        note_unmovable(ctx, root, notes);
        plan_attach_v1(ctx, iso, plan);
        return 0;
}

/* cgroup v2. The threads of one process can sit in different cgroups only inside a threaded subtree
 * (cgroup-v2.rst, "Threads"): a domain cgroup becomes a threaded domain when a child of it is made
 * `threaded` (cgroup.type), every process of the subtree belongs to that domain, and cgroup.threads
 * moves one thread between cgroups of the same domain. cpuset is a threaded controller. So every
 * attached process goes into one domain of ours with two threaded children:
 *
 *   DOMAIN                the threaded domain: rtctl.slice/rtctl-attached.scope (a transient scope
 *                         with Delegate=yes, so systemd leaves what is below it to us) or, without
 *                         systemd, /rtctl-attached; its CPUs are every online CPU
 *   DOMAIN/housekeeping   threaded, the housekeeping CPUs: the other threads of processes attached by
 *                         thread
 *   DOMAIN/isolated       threaded, the isolated CPUs: the wanted threads, and processes attached whole
 *
 * A thread is born in its creator's cgroup. Where the kernel has cpuset.cpus.exclusive (6.7 and later:
 * judged by the file), DOMAIN/isolated also becomes a remote isolated partition: its CPUs leave the
 * scheduler's balancing domains. That needs the CPUs in cpuset.cpus.exclusive of every ancestor below
 * the root. A local partition would need its parent to be a partition root that owns the housekeeping
 * CPUs too, and no thread outside it may use its CPUs: so on 6.1 there is no partition, the isolated
 * CPUs stay in the balancing domain (nothing else is allowed on them), and `isolcpus=domain`, which
 * rtctl bootargs asks for on such a kernel (core/bootargs.c), takes them out. The status says which. One
 * domain for all processes, because only one partition can own the isolated CPUs. */
#define V2_HK  "housekeeping"
#define V2_ISO "isolated"

typedef struct V2Domain {
        const char *mount;
        const char *rel;    /* as /proc/PID/cgroup names it: "/rtctl.slice/rtctl-attached.scope" */
        const char *parent; /* the ancestor below the root that needs cpuset.cpus.exclusive, or NULL */
        bool exists;
} V2Domain;

static char *v2_dir(const V2Domain *d, const char *child)
{
        return child ? xasprintf("%s%s/%s", d->mount, d->rel, child) : xasprintf("%s%s", d->mount, d->rel);
}

/* The threaded children, their CPUs, and the partition where the kernel has one to give. */
static void plan_v2_domain(const PlanContext *ctx, const V2Domain *d, const CpuSet *iso, const CpuSet *hk,
                           Plan *plan, PlanNotes *notes)
{
        _cleanup_free_ char *domain = v2_dir(d, NULL), *isolist = cpuset_format_list(iso);
        _cleanup_free_ char *excl = xasprintf("%s/cpuset.cpus.exclusive", domain);
        bool partition = sys_exists(excl);

        for (int i = 0; i < 2; i++) {
                const char *child = i ? V2_ISO : V2_HK;
                _cleanup_free_ char *dir = v2_dir(d, child);
                add(plan, &setting_kind_cgroup, PHASE_V2_DIRS, xstrdup(dir), xstrdup("present"));
                add(plan, &setting_kind_file, PHASE_V2_TYPE, xasprintf("%s/cgroup.type", dir),
                    xstrdup("threaded"));
                add(plan, &setting_kind_cpulist, PHASE_V2_CPUS, xasprintf("%s/cpuset.cpus", dir),
                    i ? xstrdup(isolist) : cpuset_format_list(hk));
        }
        add(plan, &setting_kind_subtree, PHASE_V2_SUBTREE, xasprintf("%s/cgroup.subtree_control", domain),
            xstrdup("cpuset"));
        if (!partition) {
                plan_notes_add(
                    notes, "cpuset", xasprintf("%s/cpuset.cpus.partition", domain),
                    xstrdup("no isolated partition: this kernel has no cpuset.cpus.exclusive (it came "
                            "with 6.7), so the isolated CPUs are only a cpuset of their own: nothing else "
                            "is allowed on them, but they stay in the scheduler's load balancing (it "
                            "still looks at them, and may move a thread between two of them); "
                            "isolcpus=domain, which rtctl bootargs asks for on such a kernel, takes "
                            "them out from the next boot"));
                return;
        }
        plan_notes_add(notes, "cpuset", xasprintf("%s/" V2_ISO "/cpuset.cpus.partition", domain),
                       xstrdup("an isolated partition: the isolated CPUs are exclusive to the attached "
                               "threads' cgroup (no other cgroup may list them) and out of the "
                               "scheduler's load balancing, so a thread stays on the isolated CPU it "
                               "runs on; undone at stop"));
        if (d->parent)
                add(plan, &setting_kind_file, PHASE_V2_EXCL,
                    xasprintf("%s%s/cpuset.cpus.exclusive", d->mount, d->parent), xstrdup(isolist));
        add(plan, &setting_kind_file, PHASE_V2_EXCL, xstrdup(excl), xstrdup(isolist));
        add(plan, &setting_kind_file, PHASE_V2_EXCL2,
            xasprintf("%s/" V2_ISO "/cpuset.cpus.exclusive", domain), xstrdup(isolist));
        add(plan, &setting_kind_partition, PHASE_V2_PARTITION,
            xasprintf("%s/" V2_ISO "/cpuset.cpus.partition", domain), xstrdup("isolated"));
}

static bool has_pid(const unsigned *pids, size_t n, unsigned pid)
{
        for (size_t i = 0; i < n; i++)
                if (pids[i] == pid)
                        return true;
        return false;
}

/* Processes attached whole go into DOMAIN/isolated; those attached by thread into the domain (its
 * housekeeping child, where it is: the desired path's trailing slash says "anywhere below"), and then
 * each of their threads where the rule wants it. Until the domain exists (systemd makes the scope with
 * the first process, and its job ends after this pass), only the processes move. */
static void plan_attach_v2(const PlanContext *ctx, const V2Domain *d, Plan *plan, PlanNotes *notes)
{
        _cleanup_cpuset_ CpuSet *iso = cpuset_dup(ctx->isolated), *hk = cpuset_dup(ctx->housekeeping);
        _cleanup_free_ unsigned *by_thread = NULL;
        size_t n_by_thread = 0, allocated = 0;

        if (ctx->n_attached == 0 && ctx->n_threads == 0)
                return;
        cpuset_and(iso, ctx->topology->online);
        cpuset_and(hk, ctx->topology->online);
        if (cpuset_empty(iso) || cpuset_empty(hk))
                return; /* redone when a CPU comes back */
        if (d->exists)
                plan_v2_domain(ctx, d, iso, hk, plan, notes);
        for (size_t i = 0; i < ctx->n_attached; i++)
                add_member(plan, "cgroup", ctx->attached[i].pid, ctx->attached[i].starttime,
                           d->exists ? xasprintf("%s/" V2_ISO, d->rel) : xstrdup(d->rel));
        for (size_t i = 0; i < ctx->n_threads; i++) {
                const AttachedThread *t = &ctx->threads[i];
                if (has_pid(by_thread, n_by_thread, t->pid))
                        continue;
                GREEDY_REALLOC(by_thread, allocated, n_by_thread + 1);
                by_thread[n_by_thread++] = t->pid;
                add_member(plan, "cgroup", t->pid, t->starttime, xasprintf("%s/", d->rel));
        }
        if (!d->exists) {
                /* Wanted once systemd made the scope: a setting after the moves makes this pass wait
                 * for that job, and the pass after it plans the children. */
                if (d->parent)
                        add(plan, &setting_kind_subtree, PHASE_THREADS,
                            xasprintf("%s%s/cgroup.subtree_control", d->mount, d->rel), xstrdup("cpuset"));
                return;
        }
        for (size_t i = 0; i < ctx->n_threads; i++) {
                const AttachedThread *t = &ctx->threads[i];
                add(plan, &setting_kind_thread, PHASE_THREADS,
                    xasprintf("/proc/%u/task/%u/cgroup", t->pid, t->tid),
                    xasprintf("%s/%s", d->rel, t->isolate ? V2_ISO : V2_HK));
        }
}

/* cgroup v2 with systemd: systemd owns the tree, so housekeeping is AllowedCPUs= (at run time) on every
 * top-level unit but ours, rtctl.slice, which gets every CPU and holds the attached processes' domain, a
 * transient scope with Delegate=yes. systemd creates a scope with its first process, so the domain's
 * children follow in the pass after that job. A dash in a slice name means nesting to systemd: the
 * slice is plain rtctl.slice. */
#define ISOLATED_SLICE CGROUP_RTCTL_SLICE
#define ATTACHED_SCOPE "rtctl-attached.scope"

static void v2_systemd_domain(const CgroupInfo *cg, V2Domain *ret)
{
        _cleanup_free_ char *dir = xasprintf("%s/" ISOLATED_SLICE "/" ATTACHED_SCOPE, cg->mount);

        *ret = (V2Domain){
            .mount = cg->mount,
            .rel = "/" ISOLATED_SLICE "/" ATTACHED_SCOPE,
            .parent = "/" ISOLATED_SLICE,
            .exists = sys_exists(dir),
        };
}

static int plan_v2_systemd(const PlanContext *ctx, const CgroupInfo *cg, bool attach_only, Plan *plan,
                           PlanNotes *notes)
{
        _cleanup_closedir_ DIR *d = NULL;
        _cleanup_cpuset_ CpuSet *all = cpuset_dup(ctx->housekeeping);
        _cleanup_free_ char *hk = cpuset_format_list(ctx->housekeeping), *every = NULL;
        struct dirent *de;
        V2Domain domain;

        v2_systemd_domain(cg, &domain);
        if (attach_only) {
                plan_attach_v2(ctx, &domain, plan, notes);
                return 0;
        }
        d = sys_opendir(cg->mount);
        if (!d)
                return -errno;
        cpuset_or(all, ctx->isolated);
        every = cpuset_format_list(all);
        add(plan, &setting_kind_slice, PHASE_DIRS, xstrdup("systemd:" ISOLATED_SLICE), xstrdup("present"));
        while ((de = readdir(d))) {
                if (de->d_type != DT_DIR || streq(de->d_name, ISOLATED_SLICE) ||
                    !(endswith(de->d_name, ".slice") || endswith(de->d_name, ".scope")))
                        continue;
                add(plan, &setting_kind_unit_cpus, PHASE_CPUS,
                    xasprintf("systemd:%s:AllowedCPUs", de->d_name), xstrdup(hk));
        }
        add(plan, &setting_kind_unit_cpus, PHASE_CPUS, xstrdup("systemd:" ISOLATED_SLICE ":AllowedCPUs"),
            TAKE_PTR(every));
        plan_attach_v2(ctx, &domain, plan, notes);
        return 0;
}

/* cgroup v2 without systemd: the same split through cgroupfs. rtctl-housekeeping takes every process of
 * the root cgroup that can move (v2 keeps kernel threads in the root: the kthread tuner sets their
 * CPUs), rtctl-attached is the attached processes' domain, with every CPU. */
#define ATTACHED_CG "rtctl-attached"

static int plan_v2_cgroupfs(const PlanContext *ctx, const CgroupInfo *cg, bool attach_only, Plan *plan,
                            PlanNotes *notes)
{
        const char *root = cg->mount;
        _cleanup_free_ char *hk_dir = xasprintf("%s/" HOUSEKEEPING_CG, root);
        _cleanup_free_ char *dom_dir = xasprintf("%s/" ATTACHED_CG, root);
        _cleanup_cpuset_ CpuSet *all = cpuset_dup(ctx->housekeeping);
        V2Domain domain = {.mount = root, .rel = "/" ATTACHED_CG, .exists = true};

        if (attach_only) {
                plan_attach_v2(ctx, &domain, plan, notes);
                return 0;
        }
        cpuset_or(all, ctx->isolated);
        add(plan, &setting_kind_subtree, PHASE_DIRS, xasprintf("%s/cgroup.subtree_control", root),
            xstrdup("cpuset"));
        add(plan, &setting_kind_cgroup, PHASE_DIRS, xstrdup(hk_dir), xstrdup("present"));
        add(plan, &setting_kind_cgroup, PHASE_DIRS, xstrdup(dom_dir), xstrdup("present"));
        add(plan, &setting_kind_cpulist, PHASE_CPUS, xasprintf("%s/cpuset.cpus", hk_dir),
            cpuset_format_list(ctx->housekeeping));
        add(plan, &setting_kind_cpulist, PHASE_CPUS, xasprintf("%s/cpuset.cpus", dom_dir),
            cpuset_format_list(all));
        add(plan, &setting_kind_procs, PHASE_MOVE, xasprintf("%s/cgroup.procs", hk_dir),
            xasprintf("all from %s", root));
        plan_attach_v2(ctx, &domain, plan, notes);
        return 0;
}

/* Isolated CPUs the machine could hot-add but does not have now (possible, not present: a typo on a
 * laptop whose firmware lists spare slots, or a VM's CPU not yet plugged in): accepted, since the
 * isolation follows CPU hotplug, but said, because nothing is isolated there until they come. */
static void note_absent(const PlanContext *ctx, PlanNotes *notes)
{
        const Topology *t = ctx->topology;

        if (!t || !t->present)
                return;
        _cleanup_cpuset_ CpuSet *absent = cpuset_dup(ctx->isolated);
        cpuset_andnot(absent, t->present);
        if (cpuset_empty(absent))
                return;
        _cleanup_free_ char *list = cpuset_format_list(absent), *present = cpuset_format_list(t->present);
        bool all = cpuset_equal(absent, ctx->isolated);
        plan_notes_add(
            notes, "cpuset", xstrdup("/sys/devices/system/cpu/present"),
            xasprintf("isolated CPUs %s are not present (the machine has %s; they may be hot-added): "
                      "%s until they are",
                      list, present, all ? "no CPU is isolated" : "they are not isolated"));
}

/* device "attach": only the attached processes and threads (an [Attach] rule matched one); the rest of
 * the split stands as the last whole pass made it. */
static int cpuset_plan(const PlanContext *ctx, const void *config, const char *device, Plan *plan,
                       PlanNotes *notes)
{
        bool attach_only = streq_ptr(device, CPUSET_ATTACH_DEVICE);
        CgroupInfo cg;
        int r;

        if (cpuset_empty(ctx->isolated))
                return 0;
        if (!attach_only)
                note_absent(ctx, notes);
        r = cgroup_discover(&cg);
        if (r < 0 || cg.mode == CGROUP_NONE) {
                plan_notes_add(
                    notes, "cpuset", xstrdup("/proc/self/mounts"),
                    xstrdup("no cpuset controller is mounted: CPU isolation needs boot parameters "
                            "(isolcpus=) here"));
                cgroup_info_clear(&cg);
                return 0;
        }
        if (cg.mode == CGROUP_V1)
                r = plan_v1(ctx, &cg, attach_only, plan, notes);
        else if (cg.systemd)
                r = plan_v2_systemd(ctx, &cg, attach_only, plan, notes);
        else
                r = plan_v2_cgroupfs(ctx, &cg, attach_only, plan, notes);
        cgroup_info_clear(&cg);
        return r;
}

const Tuner tuner_cpuset = {
    .name = "cpuset",
    .sections = NULL, /* reads [CPU], which the policy core owns */
    .cpu_dependent = true,
    .parse = cpuset_parse,
    .free_config = cpuset_free_config,
    .plan = cpuset_plan,
};
