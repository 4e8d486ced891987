/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Holds: a profile an application (a DAW, `rtctl run`) asks for, for as long as its bus name lives, as
 * power-profiles-daemon's HoldProfile does it. The profile in force is the highest-ranked of the base
 * profile and the held ones; when a hold ends, the next one (or the base profile) goes straight in. */
#include <sys/random.h>
#include <time.h>

#include "daemon/bus-reads.h"
#include "daemon/bus.h"
#include "daemon/manager.h"
#include "daemon/polkit.h"
#include "shared/log.h"

static void hold_free(Hold *h)
{
        if (!h)
                return;
        free(h->profile);
        free(h->reason);
        free(h->application_id);
        free(h->bus_name);
        free(h);
}

const Hold *manager_find_hold(const Manager *m, uint32_t cookie)
{
        assert(m);

        for (size_t i = 0; i < m->n_holds; i++)
                if (m->holds[i]->cookie == cookie)
                        return m->holds[i];
        return NULL;
}

const Hold *manager_winning_hold(const Manager *m)
{
        const Hold *best = NULL;

        assert(m);

        for (size_t i = 0; i < m->n_holds; i++) {
                const Hold *h = m->holds[i];
                if (!best || h->rank > best->rank || (h->rank == best->rank && h->seq > best->seq))
                        best = h;
        }
        /* A hold never lowers the tuning below the base profile. */
        if (best && m->base_profile && best->rank < m->base_rank)
                return NULL;
        return best;
}

char *manager_holds_summary(const Manager *m)
{
        g_autoptr(GString) out = NULL;

        assert(m);

        if (m->n_holds == 0)
                return NULL;
        out = g_string_new(NULL);
        g_string_append_printf(out, "%zu hold%s (", m->n_holds, m->n_holds == 1 ? "" : "s");
        for (size_t i = 0; i < m->n_holds; i++)
                g_string_append_printf(out, "%s%s", i ? ", " : "", m->holds[i]->application_id);
        g_string_append(out, ")");
        return xstrdup(out->str);
}

static uint32_t new_cookie(const Manager *m)
{
        uint32_t c = 0;

        while (c == 0 || manager_find_hold(m, c)) {
                if (getrandom(&c, sizeof c, 0) != sizeof c)
                        c = (uint32_t)g_random_int();
        }
        return c;
}

static uint64_t now_realtime_usec(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static void emit_holds_changed(Manager *m, uint32_t released)
{
        if (!m->bus)
                return;
        if (released)
                (void)sd_bus_emit_signal(m->bus, RTCTL_BUS_PATH, RTCTL_BUS_IFACE, "ProfileReleased", "u",
                                         released);
        (void)sd_bus_emit_properties_changed(m->bus, RTCTL_BUS_PATH, RTCTL_BUS_IFACE, "ActiveProfileHolds",
                                             "BaseProfile", NULL);
}

/* The holder may already have left the bus before its hold was taken (while polkit was asked, say):
 * NameOwnerChanged came too early to end it, so ask the bus whether the name still has an owner. */
typedef struct OwnerCheck {
        Manager *manager;
        uint32_t cookie;
} OwnerCheck;

static int on_owner_checked(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error)
{
        OwnerCheck *c = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);

        if (e && sd_bus_error_has_name(e, SD_BUS_ERROR_NAME_HAS_NO_OWNER) &&
            manager_find_hold(c->manager, c->cookie)) {
                log_info("The holder of hold %u left the bus before it was taken.", c->cookie);
                (void)manager_release(c->manager, c->cookie);
        }
        return 0;
}

static void check_owner(Manager *m, const Hold *h)
{
        OwnerCheck *c = xmalloc0(sizeof(OwnerCheck));
        sd_bus_slot *slot = NULL;

        *c = (OwnerCheck){.manager = m, .cookie = h->cookie};
        if (sd_bus_call_method_async(m->bus, &slot, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                     "org.freedesktop.DBus", "GetNameOwner", on_owner_checked, c, "s",
                                     h->bus_name) < 0) {
                free(c);
                return;
        }
        (void)sd_bus_slot_set_destroy_callback(slot, free);
        (void)sd_bus_slot_set_floating(slot, 1);
        sd_bus_slot_unref(slot);
}

int manager_hold(Manager *m, const char *profile, const char *reason, const char *application_id,
                 const char *bus_name, uid_t uid, uint32_t *ret_cookie, char **ret_error)
{
        _cleanup_policy_ Policy *p = NULL;
        _cleanup_free_ char *shown = NULL;
        size_t mine = 0, theirs = 0;
        Hold *h;
        int r;

        assert(m);

        for (size_t i = 0; i < m->n_holds; i++) {
                if (streq(m->holds[i]->bus_name, strempty(bus_name)))
                        mine++;
                if (m->holds[i]->uid == uid)
                        theirs++;
        }
        if (mine >= HOLDS_PER_CALLER_MAX)
                return -EDQUOT;
        if (uid != 0 && theirs >= HOLDS_PER_USER_MAX)
                return -ENOSPC;
        if (m->n_holds >= HOLDS_MAX)
                return -EUSERS;
        r = manager_load_profile(m, profile, &p, ret_error);
        if (r < 0)
                return r;
        h = xmalloc0(sizeof(Hold));
        h->cookie = new_cookie(m);
        h->profile = xstrdup(profile);
        h->rank = p->rank;
        h->reason = xstrdup(reason);
        h->application_id = xstrdup(application_id);
        h->bus_name = xstrdup(strempty(bus_name));
        h->uid = uid;
        h->since_usec = now_realtime_usec();
        h->seq = ++m->hold_seq;
        GREEDY_REALLOC(m->holds, m->holds_allocated, m->n_holds + 1);
        m->holds[m->n_holds++] = h;
        shown = text_escape(reason);
        log_info("Hold %u: %s for %s (%s), from %s.", h->cookie, profile, application_id, shown,
                 strna(bus_name));

        if (m->bus && h->bus_name[0] == ':')
                check_owner(m, h);
        *ret_cookie = h->cookie;
        manager_apply_in_force(m, TAKE_PTR(p), "hold");
        emit_holds_changed(m, 0);
        return 0;
}

static void remove_at(Manager *m, size_t i)
{
        Hold *h = m->holds[i];
        uint32_t cookie = h->cookie;

        log_info("Hold %u (%s for %s) ends.", cookie, h->profile, h->application_id);
        memmove(&m->holds[i], &m->holds[i + 1], sizeof(Hold *) * (m->n_holds - i - 1));
        m->n_holds--;
        hold_free(h);
        emit_holds_changed(m, cookie);
}

int manager_release(Manager *m, uint32_t cookie)
{
        assert(m);

        for (size_t i = 0; i < m->n_holds; i++)
                if (m->holds[i]->cookie == cookie) {
                        remove_at(m, i);
                        manager_apply_in_force(m, NULL, "hold released");
                        return 0;
                }
        return -ENOENT;
}

void manager_release_all(Manager *m)
{
        assert(m);

        while (m->n_holds > 0)
                remove_at(m, m->n_holds - 1);
}

static int on_name_owner_changed(sd_bus_message *msg, void *userdata, sd_bus_error *ret_error)
{
        Manager *m = userdata;
        const char *name, *old_owner, *new_owner;
        bool released = false;

        if (sd_bus_message_read(msg, "sss", &name, &old_owner, &new_owner) < 0 || !isempty(new_owner))
                return 0;
        bus_reads_forget(m->bus_reads, name);
        polkit_forget(m->polkit, name);
        for (size_t i = m->n_holds; i > 0; i--)
                if (streq(m->holds[i - 1]->bus_name, name)) {
                        log_info("The holder %s left the bus.", name);
                        remove_at(m, i - 1);
                        released = true;
                }
        if (released)
                manager_apply_in_force(m, NULL, "holder gone");
        return 0;
}

int manager_watch_holders(Manager *m)
{
        return sd_bus_match_signal_async(m->bus, &m->name_slot, "org.freedesktop.DBus",
                                         "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameOwnerChanged",
                                         on_name_owner_changed, NULL, m);
}

void manager_holds_free(Manager *m)
{
        assert(m);

        for (size_t i = 0; i < m->n_holds; i++)
                hold_free(m->holds[i]);
        free(m->holds);
        m->holds = NULL;
        m->n_holds = m->holds_allocated = 0;
        m->name_slot = sd_bus_slot_unref(m->name_slot);
}
