/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The client of systemd's manager: the connection, what systemd last said (the cache), the jobs and
 * reloads it follows until they end, and calls systemd does not answer in time. The calls themselves
 * are in systemd-units.c. */
#include <glib.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>

#include "core/systemd-internal.h"
#include "shared/log.h"

struct SystemdClient {
        sd_event *event;
        sd_bus *bus;
        sd_bus_slot *job_removed;
        GHashTable *jobs;   /* job object path -> label */
        size_t reloads;     /* daemon reloads sent, not yet answered, or waiting for the jobs to end */
        char *reload_waits; /* the label of a reload sent once no job is outstanding any more */
        SystemdFailure *failures;
        size_t n_failures, failures_allocated;
        GHashTable *ended; /* label -> systemd's result ("done", "failed", ...), since last taken */
        void (*settled)(void *userdata);
        void *userdata;
        /* What systemd last answered, by "UNIT\nPROPERTY": a read-only call answers from here. */
        GHashTable *cache;
        bool cache_only;
        /* After a call systemd did not answer in time, every call fails at once until then, or until
         * systemd answers the Ping sent then. */
        uint64_t quiet_until;
        bool pinging;
        /* When the pass began: once it has run SYSTEMD_PASS_USEC, its calls are left to the next one. */
        uint64_t pass_start;
        uint64_t last_alive; /* when the last call told the service manager's watchdog we progress */
};

SystemdClient *systemd_client_new(sd_event *event)
{
        SystemdClient *c = xmalloc0(sizeof(SystemdClient));

        c->event = event ? sd_event_ref(event) : NULL;
        c->jobs = g_hash_table_new_full(g_str_hash, g_str_equal, free, free);
        c->ended = g_hash_table_new_full(g_str_hash, g_str_equal, free, free);
        c->cache = g_hash_table_new_full(g_str_hash, g_str_equal, free, free);
        return c;
}

void systemd_failures_free(SystemdFailure *f, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                free(f[i].label);
                free(f[i].message);
        }
        free(f);
}

void systemd_client_free(SystemdClient *c)
{
        if (!c)
                return;
        sd_bus_slot_unref(c->job_removed);
        sd_bus_flush_close_unref(c->bus);
        sd_event_unref(c->event);
        g_hash_table_destroy(c->jobs);
        g_hash_table_destroy(c->ended);
        g_hash_table_destroy(c->cache);
        systemd_failures_free(c->failures, c->n_failures);
        free(c->reload_waits);
        free(c);
}

void systemd_client_on_settled(SystemdClient *c, void (*settled)(void *userdata), void *userdata)
{
        assert(c);

        c->settled = settled;
        c->userdata = userdata;
}

size_t systemd_client_pending(const SystemdClient *c)
{
        assert(c);

        return g_hash_table_size(c->jobs) + c->reloads;
}

SystemdFailure *systemd_client_take_failures(SystemdClient *c, size_t *ret_n)
{
        assert(c);

        *ret_n = c->n_failures;
        c->n_failures = c->failures_allocated = 0;
        return TAKE_PTR(c->failures);
}

GHashTable *systemd_client_take_ended(SystemdClient *c)
{
        assert(c);

        GHashTable *ended = c->ended;

        c->ended = g_hash_table_new_full(g_str_hash, g_str_equal, free, free);
        return ended;
}

static void add_failure(SystemdClient *c, const char *label, char *message)
{
        GREEDY_REALLOC(c->failures, c->failures_allocated, c->n_failures + 1);
        c->failures[c->n_failures++] = (SystemdFailure){.label = xstrdup(label), .message = message};
}

static int send_reload(SystemdClient *c, sd_bus *b, const char *label);

static void maybe_settled(SystemdClient *c)
{
        if (systemd_client_pending(c) == 0 && c->settled)
                c->settled(c->userdata);
}

/* JobRemoved(u id, o job, s unit, s result): systemd sends it to the client that queued the job (it
 * tracks the sender), so no Subscribe() is needed, and no other unit's changes wake this process. */
static int on_job_removed(sd_bus_message *msg, void *userdata, sd_bus_error *error)
{
        SystemdClient *c = userdata;
        const char *job, *unit, *result;
        gpointer path, label;
        uint32_t id;

        if (sd_bus_message_read(msg, "uoss", &id, &job, &unit, &result) < 0)
                return 0;
        if (!g_hash_table_steal_extended(c->jobs, job, &path, &label))
                return 0; /* someone else's job */
        if (!streq(result, "done"))
                add_failure(c, label, xasprintf("systemd's job for %s ended '%s'", unit, result));
        g_hash_table_replace(c->ended, label, xstrdup(result));
        free(path);
        if (g_hash_table_size(c->jobs) == 0 && c->reload_waits) {
                _cleanup_free_ char *waited = TAKE_PTR(c->reload_waits);
                c->reloads--; /* counted while it waited; sending counts it again */
                int r = send_reload(c, c->bus, waited);
                if (r < 0)
                        add_failure(c, waited,
                                    xasprintf("systemd's reload after a unit was masked: %s", strerror(-r)));
        }
        maybe_settled(c);
        return 0;
}

void systemd_client_pass_start(SystemdClient *c, bool start)
{
        assert(c);

        c->pass_start = start ? now_usec(CLOCK_MONOTONIC) : 0;
}

void systemd_client_cache_only(SystemdClient *c, bool cache_only)
{
        assert(c);

        c->cache_only = cache_only;
}

static char *cache_key(const char *unit, const char *property)
{
        return xasprintf("%s\n%s", unit, property);
}

void sdc_cache_put(SystemdClient *c, const char *unit, const char *property, const char *value)
{
        if (value)
                g_hash_table_replace(c->cache, cache_key(unit, property), xstrdup(value));
        else {
                _cleanup_free_ char *key = cache_key(unit, property);
                g_hash_table_remove(c->cache, key);
        }
}

/* A job or a mask changes what systemd would say of the unit. */
void sdc_cache_forget_unit(SystemdClient *c, const char *unit)
{
        _cleanup_free_ char *prefix = xasprintf("%s\n", unit);
        GHashTableIter i;
        gpointer key;

        assert(c);

        g_hash_table_iter_init(&i, c->cache);
        while (g_hash_table_iter_next(&i, &key, NULL))
                if (startswith(key, prefix))
                        g_hash_table_iter_remove(&i);
}

/* In cache-only mode: what systemd last said (0), or SYSTEMD_UNKNOWN. Otherwise 1: ask. */
int sdc_cache_get(SystemdClient *c, const char *unit, const char *property, char **ret)
{
        _cleanup_free_ char *key = cache_key(unit, property);
        const char *v;

        assert(c);

        if (!c->cache_only)
                return 1;
        v = g_hash_table_lookup(c->cache, key);
        if (!v)
                return SYSTEMD_UNKNOWN;
        *ret = xstrdup(v);
        return 0;
}

/* The loop pings the watchdog between dispatches; a pass is one dispatch. Each call is bounded by
 * SYSTEMD_CALL_USEC, but a pass's calls add up on a slow systemd (about 20 of them to restore a CPU split,
 * each taking a second on a loaded machine): a pass whose calls keep being answered is progressing, not
 * hung, and says so. A call that hangs still trips the watchdog past its bound. */
static void alive(SystemdClient *c)
{
        uint64_t now = now_usec(CLOCK_MONOTONIC);

        if (!c->event || sd_event_get_watchdog(c->event) <= 0 || now - c->last_alive < 5 * 1000000ULL)
                return;
        c->last_alive = now;
        (void)sd_notify(false, "WATCHDOG=1");
}

int sdc_bus(SystemdClient *c, sd_bus **ret)
{
        int r;

        assert(c);

        if (c->cache_only)
                return SYSTEMD_UNKNOWN;
        alive(c);
        if (c->quiet_until && now_usec(CLOCK_MONOTONIC) < c->quiet_until)
                return -EAGAIN;
        /* A systemd that answers, but slowly, must not hold one pass past the watchdog either: what is
         * left is busy, and the next pass (after the loop ran) asks again. */
        if (c->pass_start && now_usec(CLOCK_MONOTONIC) - c->pass_start > SYSTEMD_PASS_USEC)
                return -EAGAIN;
        if (c->bus && sd_bus_is_open(c->bus) > 0) {
                *ret = c->bus;
                return 0;
        }
        c->job_removed = sd_bus_slot_unref(c->job_removed);
        c->bus = sd_bus_flush_close_unref(c->bus);
        /* A new connection cannot hear about the old one's jobs: they are not outstanding any more. */
        g_hash_table_remove_all(c->jobs);
        c->reloads = 0;
        free(c->reload_waits);
        c->reload_waits = NULL;
        r = sd_bus_open_system(&c->bus);
        if (r < 0)
                return r;
        /* Every call, sd-bus's helpers included, is bounded far below the unit's WatchdogSec=. */
        r = sd_bus_set_method_call_timeout(c->bus, SYSTEMD_CALL_USEC);
        if (r < 0)
                return r;
        if (c->event) {
                r = sd_bus_attach_event(c->bus, c->event, SD_EVENT_PRIORITY_NORMAL);
                if (r < 0)
                        return r;
        }
        r = sd_bus_match_signal(c->bus, &c->job_removed, SD_NAME, SD_PATH, SD_IFACE, "JobRemoved",
                                on_job_removed, c);
        if (r < 0)
                return r;
        *ret = c->bus;
        return 0;
}

int systemd_client_wait(SystemdClient *c, uint64_t timeout_usec)
{
        uint64_t end = now_usec(CLOCK_MONOTONIC) + timeout_usec;
        int r;

        assert(c);

        while (c->bus && systemd_client_pending(c) > 0) {
                uint64_t now = now_usec(CLOCK_MONOTONIC);

                r = sd_bus_process(c->bus, NULL);
                if (r < 0)
                        return r;
                if (r > 0)
                        continue;
                if (now >= end)
                        return -ETIMEDOUT;
                r = sd_bus_wait(c->bus, end - now);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int on_ping(sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
        SystemdClient *c = userdata;

        c->pinging = false;
        if (!sd_bus_message_is_method_error(reply, NULL))
                c->quiet_until = 0; /* it answers again */
        return 0;
}

/* A call systemd did not answer within SYSTEMD_CALL_USEC: the calls of the next SYSTEMD_QUIET_USEC fail
 * at once (-EAGAIN: the Manager tries again shortly), so that a pass with many calls to a hung PID 1 is
 * bounded by one timeout, not their sum; a Ping ends that early once systemd answers again. */
static void timed_out(SystemdClient *c)
{
        if (!c->pinging && c->bus &&
            sd_bus_call_method_async(c->bus, NULL, SD_NAME, SD_PATH, "org.freedesktop.DBus.Peer", "Ping",
                                     on_ping, c, "") >= 0)
                c->pinging = true;
        if (!c->quiet_until || now_usec(CLOCK_MONOTONIC) >= c->quiet_until)
                log_warning("systemd did not answer within %llu ms; not asking it again for %llu s.",
                            (unsigned long long)(SYSTEMD_CALL_USEC / 1000),
                            (unsigned long long)(SYSTEMD_QUIET_USEC / 1000000));
        c->quiet_until = now_usec(CLOCK_MONOTONIC) + SYSTEMD_QUIET_USEC;
}

int sdc_errno_of(SystemdClient *c, const sd_bus_error *e, int r)
{
        if (r == -ETIMEDOUT || sd_bus_error_has_name(e, SD_BUS_ERROR_TIMEOUT) ||
            sd_bus_error_has_name(e, SD_BUS_ERROR_NO_REPLY)) {
                timed_out(c);
                return -EAGAIN;
        }
        if (sd_bus_error_has_names(e, "org.freedesktop.systemd1.NoSuchUnit",
                                   "org.freedesktop.systemd1.LoadFailed"))
                return -ENOENT;
        return r < 0 ? r : -EIO;
}

/* Builds a call to the manager: sd-bus messages collect the first error, so builders run on and
 * sdc_send_call() looks at r once. */
int sdc_new_call(SystemdClient *c, const char *member, sd_bus **ret_bus, sd_bus_message **ret)
{
        int r = sdc_bus(c, ret_bus);

        if (r < 0)
                return r;
        return sd_bus_message_new_method_call(*ret_bus, ret, SD_NAME, SD_PATH, SD_IFACE, member);
}

/* Sends m (taking it) unless building it failed (r < 0). With label, the reply is a job path, which
 * becomes outstanding: SYSTEMD_QUEUED. */
int sdc_send_call(SystemdClient *c, sd_bus *b, sd_bus_message *m, int r, const char *label)
{
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        const char *job;

        if (r >= 0) {
                r = sd_bus_call(b, m, 0, &e, &reply); /* the bus's SYSTEMD_CALL_USEC */
                if (r < 0)
                        r = sdc_errno_of(c, &e, r);
        }
        if (r >= 0 && label) {
                r = sd_bus_message_read(reply, "o", &job);
                if (r >= 0) {
                        g_hash_table_replace(c->jobs, xstrdup(job), xstrdup(label));
                        r = SYSTEMD_QUEUED;
                }
        }
        sd_bus_error_free(&e);
        sd_bus_message_unref(reply);
        sd_bus_message_unref(m);
        return r < 0 ? r : label ? r : 0;
}

typedef struct ReloadCall {
        SystemdClient *client;
        char *label;
} ReloadCall;

static int on_reload_reply(sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
        ReloadCall *call = userdata;
        SystemdClient *c = call->client;
        const sd_bus_error *e = sd_bus_message_get_error(reply);

        if (e)
                add_failure(c, call->label,
                            xasprintf("systemd's reload after a unit was masked failed: %s", e->message));
        free(call->label);
        free(call);
        c->reloads--;
        maybe_settled(c);
        return 0;
}

/* A daemon reload takes systemd a while (it answers when done): sent, and followed as outstanding. */
static int send_reload(SystemdClient *c, sd_bus *b, const char *label)
{
        ReloadCall *call = xmalloc0(sizeof(ReloadCall));
        int r;

        *call = (ReloadCall){.client = c, .label = xstrdup(label)};
        sd_bus_message *m = NULL;
        /* Not waited for: it may take systemd longer than a call is given on this bus. */
        r = sd_bus_message_new_method_call(b, &m, SD_NAME, SD_PATH, SD_IFACE, "Reload");
        if (r >= 0)
                r = sd_bus_call_async(b, NULL, m, on_reload_reply, call, SYSTEMD_RELOAD_USEC);
        sd_bus_message_unref(m);
        if (r < 0) {
                free(call->label);
                free(call);
                return r;
        }
        c->reloads++;
        return SYSTEMD_QUEUED;
}

/* The reload that makes a mask take effect waits for the jobs under way. A rival service is stopped and
 * then masked, and systemd runs its jobs only when its bus is quiet: a reload sent at once may reload
 * the unit as masked, with no ExecStop= or ExecStopPost= lines, before its stop job ran, and the stop
 * then only kills its processes (Debian 13's systemd 257, twice in CI). One reload serves every mask
 * made meanwhile. */
int sdc_reload_async(SystemdClient *c, sd_bus *b, const char *label)
{
        assert(c);

        if (g_hash_table_size(c->jobs) == 0)
                return send_reload(c, b, label);
        if (!c->reload_waits)
                c->reloads++;
        free(c->reload_waits);
        c->reload_waits = xstrdup(label);
        return SYSTEMD_QUEUED;
}
