/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Which profile is active: switching, reloading, restoring, and the one remembered across restarts. */
#include "daemon/bus-signals.h"
#include "daemon/manager.h"
#include "shared/log.h"

const char *manager_active_profile(const Manager *m)
{
        assert(m);

        return m->policy ? m->policy->name : "";
}

const char *manager_state(const Manager *m)
{
        assert(m);

        if (!m->policy)
                return "off";
        if (status_n_failures(&m->status) > 0)
                return "degraded";
        return "applied";
}

static void persist_profile(Manager *m, const char *name)
{
        _cleanup_free_ char *path = xasprintf("%s/active-profile", m->state_dir);
        _cleanup_free_ char *content = xasprintf("%s\n", name);
        int r;

        r = mkdir_p(m->state_dir, 0755);
        if (r >= 0)
                r = write_file_atomic(path, content, true);
        if (r < 0)
                log_warning_errno(r, "Failed to remember the active profile in %s: %m, ignoring", path);
}

/* A profile that loads but cannot be placed on this machine (auto:N with too few cores) is refused as
 * well: the last good policy stays. */
int manager_load_profile(Manager *m, const char *name, Policy **ret, char **ret_error)
{
        _cleanup_policy_ Policy *p = NULL;
        _cleanup_cpuset_ CpuSet *iso = NULL, *hk = NULL;
        int r;

        assert(m);

        r = policy_load(m->search_path, name, &p, ret_error);
        if (r < 0)
                return r;
        r = policy_cpus(p, manager_topology(m), &iso, &hk, ret_error);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(p);
        return 0;
}

static void activate(Manager *m, Policy *p, const char *reason)
{
        /* Pins and refusals belong to the profile they were made under; a reload keeps them. */
        if (!p || !m->policy || !streq(p->name, m->policy->name))
                irq_state_forget(manager_irq_state(m));
        /* Originals a damaged journal lost stay in status until a restore reported them and a profile
         * is applied again. */
        if (p && journal_n_lost(m->journal) == 0)
                status_forget_tuner(&m->status, "journal");
        policy_free(m->policy);
        m->policy = p;
        manager_rules_apply(m);
        dirty_mark_all(&m->dirty);
        manager_schedule_pass(m, reason);
}

/* The profile that should be in force: the highest-ranked of the base profile and the holds (a hold wins
 * a tie with the base profile, a newer hold one with an older). NULL: none. */
static const char *in_force_name(const Manager *m)
{
        const Hold *h = manager_winning_hold(m);

        return h ? h->profile : m->base_profile;
}

/* Only the base profile's [Hold] rules are followed: a held profile taking holds itself would chain
 * holds no one asked for. Said each time such a profile comes into force or is reloaded, not silently
 * dropped. */
static void say_holds_not_followed(Manager *m, const Policy *p)
{
        if (p->holds && p->holds->n > 0 && !streq_ptr(p->name, m->base_profile))
                log_notice("Profile %s is held, not the base profile: its %zu [Hold] rule%s not followed "
                           "(only the base profile's are; `rtctl profile %s` makes it the base).",
                           p->name, p->holds->n, p->holds->n == 1 ? " is" : "s are", p->name);
}

static void apply_in_force(Manager *m, Policy *preloaded, const char *reason)
{
        _cleanup_policy_ Policy *own = preloaded;
        _cleanup_free_ char *err = NULL;
        const char *name = in_force_name(m);
        Policy *p = NULL;

        if (!name) {
                if (m->policy)
                        activate(m, NULL, reason);
                return;
        }
        if (own && streq(own->name, name))
                p = TAKE_PTR(own);
        else if (m->policy && streq(m->policy->name, name))
                return;
        else if (manager_load_profile(m, name, &p, &err) < 0) {
                /* Its file changed since it was checked: what is in force stays. */
                log_error("Cannot put profile %s in force, %s stays:\n%s", name, manager_active_profile(m),
                          err);
                return;
        }
        log_info("Profile %s in force (%s).", name, reason);
        say_holds_not_followed(m, p);
        activate(m, p, reason);
}

void manager_apply_in_force(Manager *m, Policy *preloaded, const char *reason)
{
        assert(m);

        apply_in_force(m, preloaded, reason);
        /* The holds changed even where the profile in force did not: whether a profile that may come
         * back into force needs policy changes followed. */
        manager_sched_update(m);
}

static int switch_profile(Manager *m, const char *name, bool persist, char **ret_error)
{
        Policy *p = NULL;
        int r;

        r = manager_load_profile(m, name, &p, ret_error);
        if (r < 0)
                return r;
        log_info("Base profile: %s.", name);
        free(m->base_profile);
        m->base_profile = xstrdup(name);
        m->base_rank = p->rank;
        m->base_realtime = policy_uses_realtime(p);
        if (persist)
                persist_profile(m, name);
        /* The slider's choice was over the base profile it replaces: this one is chosen now. */
        manager_release_holder(m, SLIDER_HOLDER);
        bus_emit_base_profile_changed(m);
        /* Its [Hold] rules, whichever profile ends up in force. */
        AttachRules *holds = TAKE_PTR(p->holds);
        manager_apply_in_force(m, p, "profile");
        manager_hold_rules_set(m, holds);
        return 0;
}

int manager_set_profile(Manager *m, const char *name, char **ret_error)
{
        assert(m);

        return switch_profile(m, name, true, ret_error);
}

int manager_use_profile(Manager *m, const char *name, char **ret_error)
{
        assert(m);

        return switch_profile(m, name, false, ret_error);
}

int manager_reload(Manager *m, char **ret_error)
{
        _cleanup_strv_free_ char **path = conf_search_path();
        DaemonConf conf;
        Policy *p = NULL;
        int r;

        assert(m);

        r = daemon_conf_load(path, &conf, ret_error);
        if (r < 0)
                return r;
        strv_free(m->search_path);
        m->search_path = TAKE_PTR(path);
        if (m->policy) {
                r = manager_load_profile(m, m->policy->name, &p, ret_error);
                if (r < 0) {
                        daemon_conf_clear(&conf);
                        return r;
                }
        }
        daemon_conf_clear(&m->conf);
        m->conf = conf;
        if (p) {
                say_holds_not_followed(m, p);
                activate(m, p, "reload");
        }
        /* The base profile's [Hold] rules as its file says now (kept when it no longer loads). */
        if (m->base_profile) {
                _cleanup_policy_ Policy *base = NULL;
                _cleanup_free_ char *err = NULL;
                if (manager_load_profile(m, m->base_profile, &base, &err) >= 0) {
                        m->base_realtime = policy_uses_realtime(base);
                        manager_hold_rules_set(m, TAKE_PTR(base->holds));
                        manager_sched_update(m);
                } else
                        log_warning("Cannot reload the [Hold] rules of profile %s, they stay: %s",
                                    m->base_profile, err);
        }
        bus_emit_profiles_changed(m);
        log_info("Configuration reloaded.");
        return 0;
}

void manager_restore(Manager *m)
{
        assert(m);

        log_info("Restoring every value rtctl changed; every hold ends.");
        manager_hold_rules_set(m, NULL);
        manager_release_all(m);
        free(m->base_profile);
        m->base_profile = NULL;
        m->base_realtime = false;
        bus_emit_base_profile_changed(m);
        activate(m, NULL, "restore");
}
