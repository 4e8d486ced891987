/* SPDX-License-Identifier: GPL-2.0-or-later */
/* What the machine's events mark dirty: uevents (CPU hotplug, disks, devices bringing IRQs) and resume
 * from suspend. The pass itself runs once the event queue drained. */
#include "daemon/manager.h"
#include "shared/log.h"

static bool is_cpu_event(const Uevent *ev)
{
        return streq(ev->subsystem, "cpu") && (streq(ev->action, "online") || streq(ev->action, "offline") ||
                                               streq(ev->action, "add") || streq(ev->action, "remove"));
}

/* CPUs came or went: the topology is reread once, when the pass this schedules (or a caller) next uses
 * it, however many CPU events come before; places too after an add or remove (places). */
static void on_cpu_event(Manager *m, const char *reason, bool places)
{
        if (places)
                topology_cache_invalidate_places(&m->topology);
        else
                topology_cache_invalidate(&m->topology);
        manager_mark_cpu_tuners(m);
        manager_schedule_pass(m, reason);
        manager_schedule_settle(m);
}

static bool tuner_cares(const Tuner *t, const char *subsystem)
{
        for (const char *const *sub = t->subsystems; sub && *sub; sub++)
                if (streq(*sub, subsystem))
                        return true;
        return false;
}

void manager_on_uevent(const Uevent *ev, void *userdata)
{
        Manager *m = userdata;
        _cleanup_free_ char *reason = NULL;

        /* Stopping restores everything and plans nothing more: a new device keeps the kernel's values. */
        if (m->stopping)
                return;
        if (!ev) {
                /* Lost events: CPUs and devices may have come and gone unseen. A whole pass plans every
                 * device there is now, as at start. */
                on_cpu_event(m, "lost uevents", true);
                dirty_mark_all(&m->dirty);
                return;
        }
        reason = xasprintf("%s %s %s", ev->subsystem, ev->action, ev->sysname);
        if (is_cpu_event(ev)) {
                on_cpu_event(m, reason, streq(ev->action, "add") || streq(ev->action, "remove"));
                return;
        }
        for (size_t i = 0; i < tuners_n(); i++) {
                if (!tuner_cares(tuner_nth(i), ev->subsystem))
                        continue;
                if (tuner_nth(i)->replan_whole) {
                        /* New or departed devices bring or take IRQs: a driver's bind (or unbind)
                         * requests or frees them. */
                        if (streq(ev->action, "add") || streq(ev->action, "remove") ||
                            streq(ev->action, "bind") || streq(ev->action, "unbind")) {
                                dirty_mark_full(&m->dirty, (int)i);
                                manager_schedule_pass(m, reason);
                        }
                        continue;
                }
                if (streq(ev->subsystem, "block") && !streq(strempty(ev->devtype), "disk"))
                        continue;
                if (streq(ev->action, "remove")) {
                        /* The kernel forgot the device's values with it. */
                        _cleanup_free_ char *prefix = xasprintf("/sys/block/%s/", ev->sysname);
                        journal_forget_prefix(m->journal, prefix);
                        (void)journal_save(m->journal);
                        status_forget_under(&m->status, prefix);
                        continue;
                }
                if (!streq(ev->action, "add") && !streq(ev->action, "change") && !streq(ev->action, "bind"))
                        continue;
                dirty_mark_device(&m->dirty, (int)i, ev->sysname);
                manager_schedule_pass(m, reason);
        }
}

/* Firmware and drivers may reset IRQ affinities, cpufreq and idle states, and the sound devices' power
 * saving, across suspend: re-apply every CPU-dependent tuner and those marked after_resume when logind
 * says the machine woke up. */
int manager_on_sleep(sd_bus_message *msg, void *userdata, sd_bus_error *error)
{
        Manager *m = userdata;
        int going;

        if (m->stopping || sd_bus_message_read(msg, "b", &going) < 0 || going)
                return 0;
        log_info("Resumed from suspend; re-applying.");
        manager_mark_resume_tuners(m);
        manager_schedule_pass(m, "resume");
        return 0;
}
