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
        PHASE_ATTACH,
        PHASE_PARTITION,
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
                add(plan, &setting_kind_member, PHASE_ATTACH, xasprintf("/proc/%u/cpuset", ctx->attached[i]),
                    xstrdup("/" ISOLATED_CG));
        plan_threads_v1(ctx, plan);
}

/* On v2 the threads of a process share one cgroup (threaded subtrees aside, whose root must hold the
 * whole process), and an isolated partition's CPUs belong to the partition alone: a thread outside it
 * cannot be given them, and a local partition needs a partition root above it that owns the
 * housekeeping CPUs as well. See rtctl.profile(5). */
static void note_threads_v2(const PlanContext *ctx, PlanNotes *notes)
{
        _cleanup_strv_free_ char **rules = NULL;

        for (size_t i = 0; i < ctx->n_threads; i++) {
                if (strv_contains(rules, ctx->threads[i].rule))
                        continue;
                strv_push(&rules, xstrdup(ctx->threads[i].rule));
                plan_notes_add(
                    notes, "cpuset", xasprintf("attach:%s", ctx->threads[i].rule),
                    xstrdup("single threads cannot be placed on cgroup v2: every thread of a process "
                            "shares its cgroup, and no thread outside the isolated partition may "
                            "use its CPUs; Threads=all attaches the whole process"));
        }
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

/* cgroup v2 with systemd: systemd owns the tree, so housekeeping is AllowedCPUs= (at run time) on every
 * top-level unit, and the isolated CPUs are a transient slice of ours whose cgroup is made an isolated
 * partition: through systemd's own CPUSetPartition= where the running systemd's slices have that
 * property (found in its introspection data, not by version), else by writing cpuset.cpus.partition, the
 * one file there older systemd leaves alone. An attached process
 * gets a transient scope in that slice; systemd only creates the slice's cgroup once something runs in
 * it, so the partition follows the first attached process. daemon-reload keeps run-time properties; the
 * partition file is read back every pass, and "isolated invalid (reason)" is a failure carrying the
 * kernel's reason. A dash in a slice name means nesting to systemd: the slice is plain rtctl.slice. */
#define ISOLATED_SLICE "rtctl.slice"

static void plan_attach_v2_systemd(const PlanContext *ctx, const CgroupInfo *cg, Plan *plan,
                                   PlanNotes *notes)
{
        for (size_t i = 0; i < ctx->n_attached; i++)
                add(plan, &setting_kind_member, PHASE_ATTACH, xasprintf("/proc/%u/cgroup", ctx->attached[i]),
                    xasprintf("/" ISOLATED_SLICE "/rtctl-attached-%u.scope", ctx->attached[i]));
        note_threads_v2(ctx, notes);
        if (ctx->n_attached == 0)
                return;
        if (ctx->kinds && setting_context_unit_partition(ctx->kinds))
                add(plan, &setting_kind_unit_partition, PHASE_PARTITION,
                    xstrdup("systemd:" ISOLATED_SLICE ":CPUSetPartition"), xstrdup("isolated"));
        else
                add(plan, &setting_kind_partition, PHASE_PARTITION,
                    xasprintf("%s/" ISOLATED_SLICE "/cpuset.cpus.partition", cg->mount),
                    xstrdup("isolated"));
}

static int plan_v2_systemd(const PlanContext *ctx, const CgroupInfo *cg, bool attach_only, Plan *plan,
                           PlanNotes *notes)
{
        _cleanup_closedir_ DIR *d = NULL;
        _cleanup_free_ char *hk = cpuset_format_list(ctx->housekeeping),
                            *iso = cpuset_format_list(ctx->isolated);
        struct dirent *de;

        if (attach_only) {
                plan_attach_v2_systemd(ctx, cg, plan, notes);
                return 0;
        }
        d = sys_opendir(cg->mount);
        if (!d)
                return -errno;
        add(plan, &setting_kind_slice, PHASE_DIRS, xstrdup("systemd:" ISOLATED_SLICE), xstrdup("present"));
        while ((de = readdir(d))) {
                if (de->d_type != DT_DIR || streq(de->d_name, ISOLATED_SLICE) ||
                    !(endswith(de->d_name, ".slice") || endswith(de->d_name, ".scope")))
                        continue;
                add(plan, &setting_kind_unit_cpus, PHASE_CPUS,
                    xasprintf("systemd:%s:AllowedCPUs", de->d_name), xstrdup(hk));
        }
        add(plan, &setting_kind_unit_cpus, PHASE_CPUS, xstrdup("systemd:" ISOLATED_SLICE ":AllowedCPUs"),
            xstrdup(iso));
        plan_attach_v2_systemd(ctx, cg, plan, notes);
        return 0;
}

/* cgroup v2 without systemd: the same split through cgroupfs. rtctl-housekeeping takes every process of
 * the root cgroup that can move (v2 keeps kernel threads in the root: the kthread tuner sets their
 * CPUs), rtctl-isolated is an isolated partition for attached processes. */
static void plan_attach_v2_cgroupfs(const PlanContext *ctx, Plan *plan, PlanNotes *notes)
{
        for (size_t i = 0; i < ctx->n_attached; i++)
                add(plan, &setting_kind_member, PHASE_ATTACH, xasprintf("/proc/%u/cgroup", ctx->attached[i]),
                    xstrdup("/" ISOLATED_CG));
        note_threads_v2(ctx, notes);
}

static int plan_v2_cgroupfs(const PlanContext *ctx, const CgroupInfo *cg, bool attach_only, Plan *plan,
                            PlanNotes *notes)
{
        const char *root = cg->mount;
        _cleanup_free_ char *hk_dir = xasprintf("%s/" HOUSEKEEPING_CG, root);
        _cleanup_free_ char *iso_dir = xasprintf("%s/" ISOLATED_CG, root);

        if (attach_only) {
                plan_attach_v2_cgroupfs(ctx, plan, notes);
                return 0;
        }

        add(plan, &setting_kind_subtree, PHASE_DIRS, xasprintf("%s/cgroup.subtree_control", root),
            xstrdup("cpuset"));
        add(plan, &setting_kind_cgroup, PHASE_DIRS, xstrdup(hk_dir), xstrdup("present"));
        add(plan, &setting_kind_cgroup, PHASE_DIRS, xstrdup(iso_dir), xstrdup("present"));
        add(plan, &setting_kind_cpulist, PHASE_CPUS, xasprintf("%s/cpuset.cpus", hk_dir),
            cpuset_format_list(ctx->housekeeping));
        add(plan, &setting_kind_cpulist, PHASE_CPUS, xasprintf("%s/cpuset.cpus", iso_dir),
            cpuset_format_list(ctx->isolated));
        add(plan, &setting_kind_partition, PHASE_FLAGS, xasprintf("%s/cpuset.cpus.partition", iso_dir),
            xstrdup("isolated"));
        add(plan, &setting_kind_procs, PHASE_MOVE, xasprintf("%s/cgroup.procs", hk_dir),
            xasprintf("all from %s", root));
        plan_attach_v2_cgroupfs(ctx, plan, notes);
        return 0;
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
