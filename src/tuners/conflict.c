/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Services that move the knobs rtctl holds: irqbalance (IRQ affinities), power-profiles-daemon, tuned
 * and gamemode (governors, EPP, the PM QoS request), and, where the profile isolates CPUs, the loaders
 * of sched_ext BPF schedulers (scx_loader, scx.service), which take every task that is not real-time
 * from the kernel's scheduler. Reported with what each owns, or with
 * OnConflict=stop stopped through systemd for as long as the profile is active: a unit's state is a
 * setting like any other, journalled, so restore (even after a crash) starts it again.
 *
 * A tuner of its own, replanned when a profile is applied but not on CPU hotplug: looking for rivals
 * reads every process's name, which a hotplug pass has no time for. */
#include "core/cgroupfs.h"
#include "core/sched-ext.h"
#include "tuners/registry.h"
#include "shared/sysfs.h"
#include "tuners/irq.h"
#include "tuners/power-config.h"

typedef struct ConflictConfig {
        bool irq;   /* the profile places IRQs */
        bool power; /* the profile has a [Power] section */
        bool sched; /* the profile isolates CPUs */
} ConflictConfig;

static void *conflict_parse(Conf *conf, char ***errors)
{
        _cleanup_strv_free_ char **ignored = NULL; /* the irq and cpufreq tuners report them */
        IrqConfig *irq = irq_config_parse(conf, &ignored);
        PowerConfig *power = power_config_parse(conf, &ignored);
        ConfKey *isolate = conf_key(conf_section(conf, "CPU"), "Isolate");
        ConflictConfig c = {.power = power != NULL, .sched = isolate && !isempty(isolate->value)};

        c.irq = irq && irq->balance != IRQ_BALANCE_OFF;
        for (size_t i = 0; irq && i < irq->n_rules; i++)
                c.irq = c.irq || irq->rules[i].cpus.kind != CPU_SPEC_UNSET;
        irq_config_free(irq);
        power_config_free(power);
        if (!c.irq && !c.power && !c.sched)
                return NULL;
        ConflictConfig *ret = xmalloc0(sizeof(ConflictConfig));
        *ret = c;
        return ret;
}

static void conflict_free(void *p)
{
        free(p);
}

typedef struct Rival {
        const char *comm;
        const char *unit; /* NULL: not a system service (gamemode runs per user) */
        bool power;       /* a power knob rival, else an IRQ one */
        const char *does;
} Rival;

static const Rival rivals[] = {
    {"irqbalance", "irqbalance.service", false, "moves the IRQs rtctl places"},
    {"power-profiles-daemon", "power-profiles-daemon.service", true,
     "sets the governor, EPP and boost (power profiles)"},
    {"tuned", "tuned.service", true, "sets governors, EPP and /dev/cpu_dma_latency (force_latency)"},
    {"gamemoded", NULL, true, "sets the governor while a game runs"},
};

/* Whether systemd has the unit file, where a package or an admin puts one. */
static bool unit_installed(const char *unit)
{
        static const char *const dirs[] = {"/etc/systemd/system", "/run/systemd/system",
                                           "/usr/lib/systemd/system", "/lib/systemd/system"};

        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                _cleanup_free_ char *p = xasprintf("%s/%s", dirs[i], unit);
                if (sys_exists(p))
                        return true;
        }
        return false;
}

/* Whether the BPF scheduler in force runs in one of the loaders' units (its process, scx_NAME, in their
 * cgroup), so that stopping them ends it. */
static bool loaded_by_unit(const PlanContext *ctx)
{
        const TaskInfo *t;
        size_t n;

        t = task_scan_all(ctx->tasks, &n);
        for (size_t i = 0; i < n; i++) {
                if (!startswith(t[i].comm, "scx_") || (t[i].flags & PF_KTHREAD))
                        continue;
                _cleanup_free_ char *path = xasprintf("/proc/%u/cgroup", t[i].pid), *cg = NULL;
                if (sys_read(path, &cg) < 0)
                        continue;
                for (size_t u = 0; sched_ext_units[u]; u++) {
                        _cleanup_free_ char *suffix = xasprintf("/%s", sched_ext_units[u]);
                        if (strstr(cg, suffix))
                                return true;
                }
        }
        return false;
}

/* sched_ext: its loaders stopped (those installed: they are rarely there, and each mask is a call to
 * systemd), or the BPF scheduler in force reported: always, unless it runs in a loader's unit that is
 * being stopped. */
static void plan_sched_ext(const PlanContext *ctx, bool systemd, Plan *plan, PlanNotes *notes)
{
        _cleanup_free_ char *what = NULL;
        bool stopping = false;
        SchedExt s;

        if (ctx->stop_conflicts && systemd)
                for (size_t i = 0; sched_ext_units[i]; i++)
                        if (unit_installed(sched_ext_units[i])) {
                                plan_add(plan, &setting_kind_service, "conflict", 0,
                                         xasprintf("systemd:%s", sched_ext_units[i]), xstrdup("masked"));
                                stopping = true;
                        }
        if (sched_ext_read(&s) < 0)
                return;
        if (sched_ext_active(&s) && !(stopping && loaded_by_unit(ctx))) {
                what = sched_ext_describe(&s);
                plan_notes_add(
                    notes, "conflict", xstrdup("sched_ext"),
                    ctx->stop_conflicts
                        ? xasprintf(
                              "%s is in force, loaded by no service rtctl stops: it decides when "
                              "every task that is not real-time runs; stop it by hand (scxctl stop, or "
                              "end the scx_ program)",
                              what)
                        : xasprintf("%s is in force: it decides when every task that is not real-time "
                                    "runs; stop it (scxctl stop), or set OnConflict=stop in rtctl.conf",
                                    what));
        }
        sched_ext_clear(&s);
}

static int conflict_plan(const PlanContext *ctx, const void *config, const char *device, Plan *plan,
                         PlanNotes *notes)
{
        const ConflictConfig *c = config;
        bool systemd = sys_exists("/run/systemd/system");

        if (c->sched)
                plan_sched_ext(ctx, systemd, plan, notes);

        for (size_t i = 0; i < ELEMENTSOF(rivals); i++) {
                const Rival *r = &rivals[i];
                unsigned pid;

                if (r->power ? !c->power : !c->irq)
                        continue;
                if (ctx->stop_conflicts && systemd && r->unit) {
                        plan_add(plan, &setting_kind_service, "conflict", 0,
                                 xasprintf("systemd:%s", r->unit), xstrdup("masked"));
                        continue;
                }
                pid = task_scan_find_comm(ctx->tasks, r->comm);
                if (!pid)
                        continue;
                plan_notes_add(
                    notes, "conflict", xstrdup(r->comm),
                    ctx->stop_conflicts
                        ? xasprintf("%s runs (PID %u) %s: rtctl cannot stop it, and it %s; stop it "
                                    "by hand",
                                    r->comm, pid, r->unit ? "outside systemd" : "as a user service", r->does)
                        : xasprintf("%s runs (PID %u) and %s: stop it, or set OnConflict=stop in "
                                    "rtctl.conf",
                                    r->comm, pid, r->does));
        }
        return 0;
}

const Tuner tuner_conflict = {
    .name = "conflict",
    .parse = conflict_parse,
    .free_config = conflict_free,
    .plan = conflict_plan,
};
