/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <glib.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>

#include "core/systemd.h"
#include "shared/log.h"

#define SD_NAME  "org.freedesktop.systemd1"
#define SD_PATH  "/org/freedesktop/systemd1"
#define SD_IFACE "org.freedesktop.systemd1.Manager"

struct SystemdClient {
        sd_event *event;
        sd_bus *bus;
        sd_bus_slot *job_removed;
        GHashTable *jobs; /* job object path -> label */
        size_t reloads;   /* daemon reloads sent, not yet answered */
        SystemdFailure *failures;
        size_t n_failures;
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
        free(c);
}

void systemd_client_on_settled(SystemdClient *c, void (*settled)(void *userdata), void *userdata)
{
        c->settled = settled;
        c->userdata = userdata;
}

size_t systemd_client_pending(const SystemdClient *c)
{
        return g_hash_table_size(c->jobs) + c->reloads;
}

SystemdFailure *systemd_client_take_failures(SystemdClient *c, size_t *ret_n)
{
        *ret_n = c->n_failures;
        c->n_failures = 0;
        return TAKE_PTR(c->failures);
}

GHashTable *systemd_client_take_ended(SystemdClient *c)
{
        GHashTable *ended = c->ended;

        c->ended = g_hash_table_new_full(g_str_hash, g_str_equal, free, free);
        return ended;
}

static void add_failure(SystemdClient *c, const char *label, char *message)
{
        c->failures = realloc(c->failures, sizeof(SystemdFailure) * (c->n_failures + 1));
        if (!c->failures)
                abort();
        c->failures[c->n_failures++] = (SystemdFailure){.label = xstrdup(label), .message = message};
}

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
        maybe_settled(c);
        return 0;
}

void systemd_client_pass_start(SystemdClient *c, bool start)
{
        c->pass_start = start ? now_usec(CLOCK_MONOTONIC) : 0;
}

void systemd_client_cache_only(SystemdClient *c, bool cache_only)
{
        c->cache_only = cache_only;
}

static char *cache_key(const char *unit, const char *property)
{
        return xasprintf("%s\n%s", unit, property);
}

static void cache_put(SystemdClient *c, const char *unit, const char *property, const char *value)
{
        if (value)
                g_hash_table_replace(c->cache, cache_key(unit, property), xstrdup(value));
        else {
                _cleanup_free_ char *key = cache_key(unit, property);
                g_hash_table_remove(c->cache, key);
        }
}

/* A job or a mask changes what systemd would say of the unit. */
static void cache_forget_unit(SystemdClient *c, const char *unit)
{
        _cleanup_free_ char *prefix = xasprintf("%s\n", unit);
        GHashTableIter i;
        gpointer key;

        g_hash_table_iter_init(&i, c->cache);
        while (g_hash_table_iter_next(&i, &key, NULL))
                if (startswith(key, prefix))
                        g_hash_table_iter_remove(&i);
}

/* In cache-only mode: what systemd last said (0), or SYSTEMD_UNKNOWN. Otherwise 1: ask. */
static int cache_get(SystemdClient *c, const char *unit, const char *property, char **ret)
{
        _cleanup_free_ char *key = cache_key(unit, property);
        const char *v;

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

static int bus(SystemdClient *c, sd_bus **ret)
{
        int r;

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

static int errno_of(SystemdClient *c, const sd_bus_error *e, int r)
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

static const char *unit_interface(const char *unit)
{
        if (endswith(unit, ".slice"))
                return "org.freedesktop.systemd1.Slice";
        if (endswith(unit, ".scope"))
                return "org.freedesktop.systemd1.Scope";
        return "org.freedesktop.systemd1.Service";
}

/* Calls method of systemd's object path, with arg as its one string argument (NULL: none), and returns
 * the one value of the reply (type "o" or "s"). */
static int call_for_string(SystemdClient *c, sd_bus *b, const char *path, const char *interface,
                           const char *method, const char *arg, const char *type, char **ret)
{
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        const char *value;
        int r;

        if (arg)
                r = sd_bus_call_method(b, SD_NAME, path, interface, method, &e, &reply, "s", arg);
        else
                r = sd_bus_call_method(b, SD_NAME, path, interface, method, &e, &reply, "");
        if (r < 0) {
                r = errno_of(c, &e, r);
                sd_bus_error_free(&e);
                return r;
        }
        r = sd_bus_message_read(reply, type, &value);
        if (r >= 0)
                *ret = xstrdup(value);
        sd_bus_message_unref(reply);
        return r < 0 ? r : 0;
}

static int unit_path(SystemdClient *c, sd_bus *b, const char *unit, char **ret)
{
        return call_for_string(c, b, SD_PATH, SD_IFACE, "GetUnit", unit, "o", ret);
}

int systemd_unit_cpus(SystemdClient *c, const char *unit, char **ret)
{
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        _cleanup_free_ char *path = NULL;
        _cleanup_cpuset_ CpuSet *set = cpuset_new(CPUSET_MAX_CPUS);
        const void *bytes;
        size_t n;
        sd_bus *b;
        int r;

        if ((r = cache_get(c, unit, "AllowedCPUs", ret)) <= 0)
                return r;
        if ((r = bus(c, &b)) < 0 || (r = unit_path(c, b, unit, &path)) < 0)
                return r;
        r = sd_bus_get_property(b, SD_NAME, path, unit_interface(unit), "AllowedCPUs", &e, &reply, "ay");
        if (r < 0) {
                r = errno_of(c, &e, r);
                sd_bus_error_free(&e);
                return r;
        }
        r = sd_bus_message_read_array(reply, 'y', &bytes, &n);
        if (r >= 0)
                for (size_t i = 0; i < n * 8 && i < CPUSET_MAX_CPUS; i++)
                        if (((const uint8_t *)bytes)[i / 8] & (1u << (i % 8)))
                                cpuset_add(set, (unsigned)i);
        sd_bus_message_unref(reply);
        if (r < 0)
                return r;
        *ret = cpuset_format_list(set);
        cache_put(c, unit, "AllowedCPUs", *ret);
        return 0;
}

static int append_cpus(sd_bus_message *m, const char *cpulist)
{
        _cleanup_cpuset_ CpuSet *set = NULL;
        uint8_t bytes[CPUSET_MAX_CPUS / 8] = {};
        size_t n = 0;
        int r;

        if (!isempty(cpulist)) {
                r = cpuset_parse_list(cpulist, CPUSET_MAX_CPUS, &set, NULL);
                if (r < 0)
                        return r;
                FOREACH_CPU (cpu, set) {
                        bytes[cpu / 8] |= (uint8_t)(1u << (cpu % 8));
                        n = (size_t)cpu / 8 + 1;
                }
        }
        r = sd_bus_message_open_container(m, 'r', "sv");
        if (r >= 0)
                r = sd_bus_message_append(m, "s", "AllowedCPUs");
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'v', "ay");
        if (r >= 0)
                r = sd_bus_message_append_array(m, 'y', bytes, n);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        return r;
}

/* Builds a call to the manager: sd-bus messages collect the first error, so builders run on and
 * send_call() looks at r once. */
static int new_call(SystemdClient *c, const char *member, sd_bus **ret_bus, sd_bus_message **ret)
{
        int r = bus(c, ret_bus);

        if (r < 0)
                return r;
        return sd_bus_message_new_method_call(*ret_bus, ret, SD_NAME, SD_PATH, SD_IFACE, member);
}

/* Sends m (taking it) unless building it failed (r < 0). With label, the reply is a job path, which
 * becomes outstanding: SYSTEMD_QUEUED. */
static int send_call(SystemdClient *c, sd_bus *b, sd_bus_message *m, int r, const char *label)
{
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        const char *job;

        if (r >= 0) {
                r = sd_bus_call(b, m, 0, &e, &reply); /* the bus's SYSTEMD_CALL_USEC */
                if (r < 0)
                        r = errno_of(c, &e, r);
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

/* SetUnitProperties(unit, runtime=true, ...) up to its properties: run time only, like everything rtctl
 * does. */
static int new_set_properties(SystemdClient *c, const char *unit, sd_bus **ret_bus, sd_bus_message **ret)
{
        int r = new_call(c, "SetUnitProperties", ret_bus, ret);

        if (r < 0)
                return r;
        r = sd_bus_message_append(*ret, "sb", unit, 1);
        if (r < 0)
                *ret = sd_bus_message_unref(*ret);
        return r;
}

int systemd_set_unit_cpus(SystemdClient *c, const char *unit, const char *cpulist)
{
        sd_bus_message *m = NULL;
        sd_bus *b = NULL;
        int r;

        r = new_set_properties(c, unit, &b, &m);
        if (r < 0)
                return r;
        cache_put(c, unit, "AllowedCPUs", NULL);
        r = sd_bus_message_open_container(m, 'a', "(sv)");
        if (r >= 0)
                r = append_cpus(m, cpulist);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        return send_call(c, b, m, r, NULL);
}

bool systemd_introspection_has(const char *xml, const char *interface, const char *property,
                               const char *type)
{
        _cleanup_free_ char *open = xasprintf("<interface name=\"%s\">", interface);
        _cleanup_free_ char *want = xasprintf("<property name=\"%s\" type=\"%s\"", property, type);
        const char *start = strstr(xml, open), *end, *found;

        if (!start)
                return false;
        end = strstr(start, "</interface>");
        found = strstr(start, want);
        return found && (!end || found < end);
}

int systemd_has_property(SystemdClient *c, const char *interface, const char *property, const char *type)
{
        _cleanup_free_ char *path = NULL, *xml = NULL, *key = xasprintf("%s.%s", interface, property),
                            *cached = NULL;
        sd_bus *b;
        int r;

        if ((r = cache_get(c, "(introspection)", key, &cached)) <= 0)
                return r < 0 ? r : streq(cached, "1");
        /* The root slice always exists, and a unit object lists every property of its interfaces. */
        if ((r = bus(c, &b)) < 0 || (r = unit_path(c, b, "-.slice", &path)) < 0 ||
            (r = call_for_string(c, b, path, "org.freedesktop.DBus.Introspectable", "Introspect", NULL, "s",
                                 &xml)) < 0)
                return r;
        r = systemd_introspection_has(xml, interface, property, type);
        cache_put(c, "(introspection)", key, r ? "1" : "0");
        return r;
}

int systemd_unit_string(SystemdClient *c, const char *unit, const char *property, char **ret)
{
        sd_bus_error e = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *path = NULL;
        sd_bus *b;
        int r;

        if ((r = cache_get(c, unit, property, ret)) <= 0)
                return r;
        if ((r = bus(c, &b)) < 0 || (r = unit_path(c, b, unit, &path)) < 0)
                return r;
        r = sd_bus_get_property_string(b, SD_NAME, path, unit_interface(unit), property, &e, ret);
        if (r < 0)
                r = errno_of(c, &e, r);
        else
                cache_put(c, unit, property, *ret);
        sd_bus_error_free(&e);
        return r < 0 ? r : 0;
}

int systemd_set_unit_string(SystemdClient *c, const char *unit, const char *property, const char *value)
{
        sd_bus_message *m = NULL;
        sd_bus *b = NULL;
        int r;

        cache_put(c, unit, property, NULL);
        r = new_set_properties(c, unit, &b, &m);
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "a(sv)", 1, property, "s", value);
        return send_call(c, b, m, r, NULL);
}

int systemd_unit_active(SystemdClient *c, const char *unit, bool *ret)
{
        sd_bus_error e = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *path = NULL, *state = NULL;
        sd_bus *b;
        int r;

        if ((r = cache_get(c, unit, "ActiveState", &state)) < 0)
                return r;
        if (r > 0) {
                if ((r = bus(c, &b)) < 0)
                        return r;
                r = unit_path(c, b, unit, &path);
                if (r == -ENOENT)
                        state = xstrdup("absent");
                else if (r < 0)
                        return r;
                else {
                        r = sd_bus_get_property_string(b, SD_NAME, path, "org.freedesktop.systemd1.Unit",
                                                       "ActiveState", &e, &state);
                        if (r < 0)
                                r = errno_of(c, &e, r);
                        sd_bus_error_free(&e);
                        if (r < 0)
                                return r;
                }
                cache_put(c, unit, "ActiveState", state);
        }
        *ret = streq(state, "active") || streq(state, "activating");
        return 0;
}

/* StartTransientUnit(unit, "fail", properties, no aux units). props appends the properties inside the
 * open a(sv). */
static int start_transient(SystemdClient *c, const char *unit,
                           int (*props)(sd_bus_message *m, const void *userdata), const void *userdata,
                           const char *label)
{
        sd_bus_message *m = NULL;
        sd_bus *b = NULL;
        int r;

        cache_forget_unit(c, unit);
        r = new_call(c, "StartTransientUnit", &b, &m);
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "ss", unit, "fail");
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "(sv)");
        if (r >= 0)
                r = props(m, userdata);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r >= 0)
                r = sd_bus_message_append(m, "a(sa(sv))", 0);
        return send_call(c, b, m, r, label);
}

typedef struct SliceProps {
        const char *description;
        const char *cpulist;
} SliceProps;

static int slice_props(sd_bus_message *m, const void *userdata)
{
        const SliceProps *p = userdata;
        int r = sd_bus_message_append(m, "(sv)", "Description", "s", p->description);

        return r < 0 ? r : append_cpus(m, p->cpulist);
}

int systemd_start_slice(SystemdClient *c, const char *unit, const char *description, const char *cpulist,
                        const char *label)
{
        return start_transient(c, unit, slice_props, &(SliceProps){description, cpulist}, label);
}

typedef struct ScopeProps {
        const char *slice;
        uint32_t pid;
} ScopeProps;

static int scope_props(sd_bus_message *m, const void *userdata)
{
        const ScopeProps *p = userdata;

        return sd_bus_message_append(m, "(sv)(sv)(sv)", "Description", "s",
                                     "Process attached to the isolated CPUs by rtctl", "Slice", "s",
                                     p->slice, "PIDs", "au", 1, p->pid);
}

int systemd_start_scope(SystemdClient *c, const char *unit, const char *slice, unsigned pid,
                        const char *label)
{
        return start_transient(c, unit, scope_props, &(ScopeProps){slice, (uint32_t)pid}, label);
}

/* StartUnit or StopUnit(unit, mode). */
static int unit_job(SystemdClient *c, const char *method, const char *unit, const char *mode,
                    const char *label)
{
        sd_bus_message *m = NULL;
        sd_bus *b = NULL;
        int r;

        cache_forget_unit(c, unit);
        r = new_call(c, method, &b, &m);
        if (r < 0)
                return r;
        return send_call(c, b, m, sd_bus_message_append(m, "ss", unit, mode), label);
}

int systemd_stop_unit(SystemdClient *c, const char *unit, const char *label)
{
        return unit_job(c, "StopUnit", unit, "fail", label);
}

int systemd_start_unit(SystemdClient *c, const char *unit, const char *label)
{
        return unit_job(c, "StartUnit", unit, "replace", label);
}

int systemd_unit_file_state(SystemdClient *c, const char *unit, char **ret_load, char **ret_active,
                            char **ret_file)
{
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        const char *path;
        _cleanup_free_ char *cached = NULL;
        sd_bus *b;
        int r;

        if ((r = cache_get(c, unit, "FileState", &cached)) < 0)
                return r;
        if (r == 0) {
                /* "LOAD\nACTIVE\nFILE", where FILE may be empty */
                char *active = strchr(cached, '\n'), *file = active ? strchr(active + 1, '\n') : NULL;
                if (!file)
                        return SYSTEMD_UNKNOWN;
                *ret_load = xstrndup(cached, (size_t)(active - cached));
                *ret_active = xstrndup(active + 1, (size_t)(file - active - 1));
                *ret_file = xstrdup(file + 1);
                return 0;
        }
        if ((r = bus(c, &b)) < 0)
                return r;
        /* LoadUnit, not GetUnit: a unit nobody started yet is not loaded, but may well be installed. */
        r = sd_bus_call_method(b, SD_NAME, SD_PATH, SD_IFACE, "LoadUnit", &e, &reply, "s", unit);
        if (r >= 0)
                r = sd_bus_message_read(reply, "o", &path);
        if (r >= 0)
                r = sd_bus_get_property_string(b, SD_NAME, path, "org.freedesktop.systemd1.Unit",
                                               "LoadState", &e, ret_load);
        if (r >= 0)
                r = sd_bus_get_property_string(b, SD_NAME, path, "org.freedesktop.systemd1.Unit",
                                               "ActiveState", &e, ret_active);
        if (r >= 0)
                r = sd_bus_get_property_string(b, SD_NAME, path, "org.freedesktop.systemd1.Unit",
                                               "UnitFileState", &e, ret_file);
        if (r < 0)
                r = errno_of(c, &e, r);
        else {
                _cleanup_free_ char *v = xasprintf("%s\n%s\n%s", *ret_load, *ret_active, *ret_file);
                cache_put(c, unit, "FileState", v);
        }
        sd_bus_error_free(&e);
        sd_bus_message_unref(reply);
        return r < 0 ? r : 0;
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
static int reload_async(SystemdClient *c, sd_bus *b, const char *label)
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

int systemd_mask_runtime(SystemdClient *c, const char *unit, bool mask, const char *label)
{
        sd_bus_message *m = NULL;
        sd_bus *b = NULL;
        int r;

        cache_forget_unit(c, unit);
        r = new_call(c, mask ? "MaskUnitFiles" : "UnmaskUnitFiles", &b, &m);
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "as", 1, unit);
        if (r >= 0)
                r = mask ? sd_bus_message_append(m, "bb", true, true) : sd_bus_message_append(m, "b", true);
        r = send_call(c, b, m, r, NULL);
        if (r < 0)
                return r;
        /* Unit file changes take effect with a reload, as systemctl does after mask and unmask. */
        return reload_async(c, b, label);
}

int systemd_attach(SystemdClient *c, const char *unit, const char *subcgroup, unsigned pid)
{
        sd_bus_message *m = NULL;
        sd_bus *b = NULL;
        int r;

        r = new_call(c, "AttachProcessesToUnit", &b, &m);
        if (r < 0)
                return r;
        return send_call(c, b, m, sd_bus_message_append(m, "ssau", unit, subcgroup, 1, (uint32_t)pid), NULL);
}

int systemd_unit_by_pid(SystemdClient *c, unsigned pid, char **ret)
{
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        const char *path;
        sd_bus *b;
        int r;

        if ((r = bus(c, &b)) < 0)
                return r;
        r = sd_bus_call_method(b, SD_NAME, SD_PATH, SD_IFACE, "GetUnitByPID", &e, &reply, "u",
                               (uint32_t)pid);
        if (r < 0)
                r = errno_of(c, &e, r);
        else if ((r = sd_bus_message_read(reply, "o", &path)) >= 0)
                r = sd_bus_path_decode(path, SD_PATH "/unit", ret) > 0 ? 0 : -EBADMSG;
        sd_bus_error_free(&e);
        sd_bus_message_unref(reply);
        return r;
}
