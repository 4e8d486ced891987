/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Holds: a profile an application (a DAW, `rtctl run`) asks for, for as long as its bus name lives, as
 * power-profiles-daemon's HoldProfile does it. The profile in force is the highest-ranked of the base
 * profile and the held ones; when a hold ends, the next one (or the base profile) goes straight in. */
#include <sys/random.h>
#include <time.h>

#include "daemon/bus-ppd.h"
#include "daemon/bus-signals.h"
#include "daemon/bus.h"
#include "daemon/manager.h"
#include "shared/log.h"

static void hold_free(Hold *h)
{
        if (!h)
                return;
        free(h->profile);
        free(h->reason);
        free(h->application_id);
        free(h->bus_name);
        free(h->ppd_path);
        sd_bus_track_unref(h->track);
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

static int on_holder_gone(sd_bus_track *track, void *userdata);

/* A hold lasts as long as its holder's unique name: one sd_bus_track per holder, shared by its holds,
 * ends them all when the name leaves the bus. Adding the name asks the bus whether it still has an
 * owner, so a holder already gone when its call is served (it asked and left) never gets its hold. */
static int track_holder(Manager *m, Hold *h)
{
        int r;

        assert(m);
        assert(h);

        if (!m->bus || h->bus_name[0] != ':')
                return 0;
        for (size_t i = 0; i < m->n_holds; i++)
                if (m->holds[i]->track && streq(m->holds[i]->bus_name, h->bus_name)) {
                        h->track = sd_bus_track_ref(m->holds[i]->track);
                        return 0;
                }
        r = sd_bus_track_new(m->bus, &h->track, on_holder_gone, m);
        if (r < 0)
                return r;
        r = sd_bus_track_add_name(h->track, h->bus_name);
        if (r < 0)
                h->track = sd_bus_track_unref(h->track);
        return r < 0 ? r : 0;
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
        h->realtime = policy_uses_realtime(p);
        h->reason = xstrdup(reason);
        h->application_id = xstrdup(application_id);
        h->bus_name = xstrdup(strempty(bus_name));
        h->uid = uid;
        h->since_usec = now_realtime_usec();
        h->seq = ++m->hold_seq;
        r = track_holder(m, h);
        if (r < 0) {
                if (r == -ENXIO)
                        log_info("The caller %s left the bus before its hold was taken.", h->bus_name);
                else
                        log_warning_errno(r, "Failed to follow the caller %s on the bus: %m", h->bus_name);
                hold_free(h);
                return -ENOTCONN;
        }
        GREEDY_REALLOC(m->holds, m->holds_allocated, m->n_holds + 1);
        m->holds[m->n_holds++] = h;
        shown = text_escape(reason);
        log_info("Hold %u: %s for %s (%s), from %s.", h->cookie, profile, application_id, shown,
                 strna(bus_name));

        *ret_cookie = h->cookie;
        manager_apply_in_force(m, TAKE_PTR(p), "hold");
        bus_emit_holds_changed(m, 0);
        return 0;
}

static void remove_at(Manager *m, size_t i)
{
        Hold *h = m->holds[i];
        uint32_t cookie = h->cookie;

        log_info("Hold %u (%s for %s) ends.", cookie, h->profile, h->application_id);
        memmove(&m->holds[i], &m->holds[i + 1], sizeof(Hold *) * (m->n_holds - i - 1));
        m->n_holds--;
        bus_ppd_hold_ended(m, h);
        hold_free(h);
        bus_emit_holds_changed(m, cookie);
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

void manager_release_holder(Manager *m, const char *bus_name)
{
        assert(m);

        for (size_t i = m->n_holds; i > 0; i--)
                if (streq(m->holds[i - 1]->bus_name, bus_name))
                        remove_at(m, i - 1);
}

void manager_release_all(Manager *m)
{
        assert(m);

        while (m->n_holds > 0)
                remove_at(m, m->n_holds - 1);
}

static int on_holder_gone(sd_bus_track *track, void *userdata)
{
        Manager *m = userdata;
        bool released = false;

        assert(track);
        assert(m);

        for (size_t i = m->n_holds; i > 0; i--)
                if (m->holds[i - 1]->track == track) {
                        if (!released)
                                log_info("The holder %s left the bus.", m->holds[i - 1]->bus_name);
                        remove_at(m, i - 1);
                        released = true;
                }
        if (released)
                manager_apply_in_force(m, NULL, "holder gone");
        return 0;
}

void manager_holds_free(Manager *m)
{
        assert(m);

        for (size_t i = 0; i < m->n_holds; i++)
                hold_free(m->holds[i]);
        free(m->holds);
        m->holds = NULL;
        m->n_holds = m->holds_allocated = 0;
}
