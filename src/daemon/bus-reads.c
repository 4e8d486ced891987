/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The read-only methods anyone may call, and the queue that keeps them behind everything else.
 *
 * sd-bus dispatches one message per loop iteration from its sources at SD_EVENT_PRIORITY_NORMAL, and the
 * pass runs from a defer source at IDLE (at NORMAL - 10 while a caller waits for it). A read answered in
 * place would hold the loop for a whole reading of the machine (100 ms on a 128-CPU machine) and a
 * thousand of them ahead of a SetProfile would hold it for minutes. Here the bus filter only queues a
 * read (microseconds) and answers it later from a source below IDLE: the loop serves, in this order,
 * what the bus brings (writes run in place), the pass, and then one read, the callers taking turns. */
#include <glib.h>

#include "core/check.h"
#include "daemon/bus-reads.h"
#include "daemon/bus.h"
#include "daemon/manager.h"
#include "shared/log.h"

#define READS_PRIORITY (SD_EVENT_PRIORITY_IDLE + 10)

typedef struct ReadCaller {
        struct BusReads *q;
        char *sender;        /* unique bus name */
        uid_t uid;           /* whose share its calls count against, once known */
        sd_bus_slot *asking; /* while the bus is asked for uid: the calls wait without a turn */
        GQueue calls;        /* sd_bus_message *: copies that hold no descriptor (bus_call_copy()) */
} ReadCaller;

struct BusReads {
        Manager *m;
        sd_bus_slot *filter;
        sd_event_source *serve;
        GHashTable *callers; /* sender -> ReadCaller */
        GQueue turns;        /* the ReadCallers with calls waiting, the next one to be served first */
        GHashTable *users;   /* uid -> how many calls of that user wait */
        size_t n_calls;
};

typedef struct ReadMethod {
        const char *member;
        const char *signature;
        sd_bus_message_handler_t handler;
} ReadMethod;

static const ReadMethod read_methods[] = {
    {"Plan", "s", bus_method_plan},         {"PlanWithNotes", "s", bus_method_plan},
    {"ListIrqs", "", bus_method_list_irqs}, {"Verify", "", bus_method_verify},
    {"Check", "", bus_method_check},
};

/* A call of one of the read methods with the arguments it takes; anything else (a wrong signature too)
 * is the vtable's to answer. */
static const ReadMethod *read_method_of(sd_bus_message *msg)
{
        const char *iface, *member, *signature;

        if (sd_bus_message_is_method_call(msg, NULL, NULL) <= 0 ||
            !streq_ptr(sd_bus_message_get_path(msg), RTCTL_BUS_PATH))
                return NULL;
        iface = sd_bus_message_get_interface(msg);
        if (iface && !streq(iface, RTCTL_BUS_IFACE))
                return NULL;
        member = sd_bus_message_get_member(msg);
        signature = strempty(sd_bus_message_get_signature(msg, true));
        for (size_t i = 0; member && i < ELEMENTSOF(read_methods); i++)
                if (streq(member, read_methods[i].member) && streq(signature, read_methods[i].signature))
                        return &read_methods[i];
        return NULL;
}

static void call_unref(gpointer msg)
{
        sd_bus_message_unref(msg);
}

static void caller_free(gpointer p)
{
        ReadCaller *c = p;

        sd_bus_slot_unref(c->asking);
        g_queue_clear_full(&c->calls, call_unref);
        free(c->sender);
        free(c);
}

static unsigned user_calls(BusReads *q, uid_t uid)
{
        return GPOINTER_TO_UINT(g_hash_table_lookup(q->users, GUINT_TO_POINTER(uid)));
}

static void user_count(BusReads *q, uid_t uid, unsigned added, unsigned removed)
{
        unsigned n = user_calls(q, uid) + added - removed;

        if (n == 0)
                g_hash_table_remove(q->users, GUINT_TO_POINTER(uid));
        else
                g_hash_table_insert(q->users, GUINT_TO_POINTER(uid), GUINT_TO_POINTER(n));
}

static void reply_busy_user(sd_bus_message *msg)
{
        (void)sd_bus_reply_method_errorf(msg, RTCTL_ERROR_BUSY,
                                         "%u calls of this user (over all its connections) are waiting "
                                         "already; call again once they are answered",
                                         READS_PER_USER);
}

/* Whether the caller's call may wait; else it is answered here, whatever the reply's fate: a filter that
 * returns 0 hands the call to the vtable, which would read the machine in place. The user's share is
 * checked once the bus said whose the caller is (on_uid()). */
static bool may_wait(BusReads *q, sd_bus_message *msg, const ReadCaller *c)
{
        if (c && c->calls.length >= READS_PER_CALLER) {
                (void)sd_bus_reply_method_errorf(
                    msg, RTCTL_ERROR_BUSY,
                    "%u calls of yours are waiting already; call again once they are answered",
                    READS_PER_CALLER);
                return false;
        }
        if (c && !c->asking && user_calls(q, c->uid) >= READS_PER_USER) {
                reply_busy_user(msg);
                return false;
        }
        if (q->n_calls >= READS_MAX) {
                (void)sd_bus_reply_method_errorf(
                    msg, RTCTL_ERROR_BUSY, "%u calls are waiting already; call again shortly", READS_MAX);
                return false;
        }
        return true;
}

/* The bus said whose a new caller is: its calls within the user's share take their turns, the rest are
 * answered Busy (the newest first). */
static int on_uid(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error)
{
        ReadCaller *c = userdata;
        BusReads *q = c->q;
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        uint32_t uid;
        int r = e ? -sd_bus_error_get_errno(e) : sd_bus_message_read(reply, "u", &uid);
        sd_bus_message *msg;

        c->asking = sd_bus_slot_unref(c->asking);
        if (r < 0) {
                /* Reads are open to all: a caller the bus could not name (it is flooded) may call again. */
                while ((msg = g_queue_pop_head(&c->calls))) {
                        (void)sd_bus_reply_method_errorf(msg, RTCTL_ERROR_BUSY,
                                                         "The bus did not say who the caller is (%s); call "
                                                         "again shortly",
                                                         strerror(-r));
                        sd_bus_message_unref(msg);
                        q->n_calls--;
                }
                g_hash_table_remove(q->callers, c->sender);
                return 0;
        }
        c->uid = uid;
        while (c->calls.length > 0 && user_calls(q, uid) + c->calls.length > READS_PER_USER) {
                msg = g_queue_pop_tail(&c->calls);
                reply_busy_user(msg);
                sd_bus_message_unref(msg);
                q->n_calls--;
        }
        if (g_queue_is_empty(&c->calls)) {
                g_hash_table_remove(q->callers, c->sender);
                return 0;
        }
        user_count(q, uid, c->calls.length, 0);
        g_queue_push_tail(&q->turns, c);
        (void)sd_event_source_set_enabled(q->serve, SD_EVENT_ON);
        return 0;
}

/* Asked without waiting: a synchronous call would read every message that arrives meanwhile, with the
 * descriptors in them, into sd-bus's queue. */
static ReadCaller *caller_new(BusReads *q, sd_bus_message *msg, const char *sender)
{
        ReadCaller *c = xmalloc0(sizeof(ReadCaller));
        int r;

        *c = (ReadCaller){.q = q, .sender = xstrdup(sender)};
        g_queue_init(&c->calls);
        r = sd_bus_call_method_async(sd_bus_message_get_bus(msg), &c->asking, "org.freedesktop.DBus",
                                     "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                     "GetConnectionUnixUser", on_uid, c, "s", sender);
        if (r < 0) {
                (void)sd_bus_reply_method_errorf(msg, RTCTL_ERROR_BUSY,
                                                 "Cannot ask the bus who the caller is (%s); call again "
                                                 "shortly",
                                                 strerror(-r));
                caller_free(c);
                return NULL;
        }
        g_hash_table_insert(q->callers, c->sender, c);
        return c;
}

static int on_message(sd_bus_message *msg, void *userdata, sd_bus_error *error)
{
        BusReads *q = userdata;
        sd_bus_message *copy;
        const char *sender;
        ReadCaller *c;
        int r;

        if (!read_method_of(msg))
                return 0;
        if (!sd_bus_message_get_expect_reply(msg))
                return 1; /* a read no one waits for changes nothing */
        sender = strempty(sd_bus_message_get_sender(msg));
        c = g_hash_table_lookup(q->callers, sender);
        if (!may_wait(q, msg, c))
                return 1;
        /* The call itself goes once this returns, and every descriptor attached to it (a call without a
         * sender is refused here). */
        r = bus_call_copy(msg, &copy);
        if (r < 0) {
                (void)sd_bus_reply_method_errno(msg, r, NULL);
                return 1;
        }
        if (!c && !(c = caller_new(q, msg, sender))) {
                sd_bus_message_unref(copy);
                return 1;
        }
        g_queue_push_tail(&c->calls, copy);
        q->n_calls++;
        if (!c->asking) {
                user_count(q, c->uid, 1, 0);
                (void)sd_event_source_set_enabled(q->serve, SD_EVENT_ON);
        }
        return 1;
}

static void answer(Manager *m, sd_bus_message *msg)
{
        sd_bus_error error = SD_BUS_ERROR_NULL;
        const ReadMethod *method = read_method_of(msg);
        int r;

        r = sd_bus_message_rewind(msg, true);
        if (r >= 0)
                r = method->handler(msg, m, &error);
        if (r < 0 || sd_bus_error_is_set(&error))
                (void)sd_bus_reply_method_errno(msg, r, &error);
        sd_bus_error_free(&error);
}

static int on_serve(sd_event_source *s, void *userdata)
{
        BusReads *q = userdata;
        ReadCaller *c = g_queue_pop_head(&q->turns);
        sd_bus_message *msg;

        if (!c) {
                (void)sd_event_source_set_enabled(s, SD_EVENT_OFF);
                return 0;
        }
        msg = g_queue_pop_head(&c->calls);
        q->n_calls--;
        user_count(q, c->uid, 0, 1);
        if (g_queue_is_empty(&c->calls))
                g_hash_table_remove(q->callers, c->sender);
        else
                g_queue_push_tail(&q->turns, c);
        if (g_queue_is_empty(&q->turns))
                (void)sd_event_source_set_enabled(s, SD_EVENT_OFF);
        answer(q->m, msg);
        sd_bus_message_unref(msg);
        return 0;
}

void bus_reads_forget(BusReads *q, const char *sender)
{
        ReadCaller *c = q ? g_hash_table_lookup(q->callers, sender) : NULL;

        if (!c)
                return;
        log_debug("%s left the bus: its %u waiting reads are dropped.", sender,
                  g_queue_get_length(&c->calls));
        q->n_calls -= g_queue_get_length(&c->calls);
        if (!c->asking)
                user_count(q, c->uid, 0, c->calls.length);
        g_queue_remove(&q->turns, c);
        g_hash_table_remove(q->callers, sender);
        if (g_queue_is_empty(&q->turns))
                (void)sd_event_source_set_enabled(q->serve, SD_EVENT_OFF);
}

void bus_reads_free(BusReads *q)
{
        if (!q)
                return;
        sd_bus_slot_unref(q->filter);
        sd_event_source_disable_unref(q->serve);
        g_queue_clear(&q->turns);
        g_hash_table_destroy(q->callers);
        g_hash_table_destroy(q->users);
        free(q);
}

int bus_reads_setup(Manager *m)
{
        BusReads *q = xmalloc0(sizeof(BusReads));
        int r;

        assert(m);

        *q = (BusReads){.m = m,
                        .callers = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, caller_free),
                        .users = g_hash_table_new(g_direct_hash, g_direct_equal)};
        g_queue_init(&q->turns);
        m->bus_reads = q;
        r = sd_event_add_defer(m->event, &q->serve, on_serve, q);
        if (r < 0)
                return log_error_errno(r, "Failed to add the source that answers reads: %m");
        (void)sd_event_source_set_priority(q->serve, READS_PRIORITY);
        (void)sd_event_source_set_enabled(q->serve, SD_EVENT_OFF);
        (void)sd_event_source_set_description(q->serve, "bus-reads");
        r = sd_bus_add_filter(m->bus, &q->filter, on_message, q);
        if (r < 0)
                return log_error_errno(r, "Failed to add the bus filter for reads: %m");
        return 0;
}

/* Plan: the writes. PlanWithNotes: the writes, then what the profile names that the pass leaves alone. */
static int reply_plan(sd_bus_message *msg, const PlanRow *rows, size_t n)
{
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        bool notes = sd_bus_message_is_method_call(msg, NULL, "PlanWithNotes") > 0;
        int r;

        r = sd_bus_message_new_method_return(msg, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "(sss)");
        for (size_t i = 0; r >= 0 && i < n; i++)
                if (!rows[i].note)
                        r = sd_bus_message_append(reply, "(sss)", rows[i].object, rows[i].current,
                                                  rows[i].desired);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r >= 0 && notes) {
                r = sd_bus_message_open_container(reply, 'a', "(ss)");
                for (size_t i = 0; r >= 0 && i < n; i++)
                        if (rows[i].note)
                                r = sd_bus_message_append(reply, "(ss)", rows[i].object, rows[i].note);
                if (r >= 0)
                        r = sd_bus_message_close_container(reply);
        }
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

int bus_method_plan(sd_bus_message *msg, void *userdata, sd_bus_error *error)
{
        Manager *m = userdata;
        _cleanup_free_ char *err = NULL;
        const PlanRow *rows = NULL;
        PlanRow *loaded = NULL;
        const char *name, *why;
        size_t n = 0;
        int r;

        r = sd_bus_message_read(msg, "s", &name);
        if (r < 0)
                return r;
        r = bus_check_text(error, "profile", name);
        if (r < 0)
                return r;
        if (isempty(name)) {
                r = manager_plan_active(m, &rows, &n, &why);
                if (r < 0)
                        return sd_bus_error_setf(error, RTCTL_ERROR_INVALID_PROFILE, "%s", why);
                return reply_plan(msg, rows, n);
        }
        r = manager_plan_profile(m, name, &loaded, &n, &err);
        switch (r) {
        case 0:
                break;
        case -ENOENT:
                return sd_bus_error_setf(error, RTCTL_ERROR_NO_SUCH_PROFILE, "No profile named '%s'", name);
        case -EINVAL:
                return sd_bus_error_setf(error, RTCTL_ERROR_INVALID_ARGUMENT, "%s", strempty(err));
        case -EBADMSG:
                return sd_bus_error_setf(error, RTCTL_ERROR_INVALID_PROFILE, "Profile '%s' is invalid:\n%s",
                                         name, strempty(err));
        default:
                return sd_bus_error_setf(error, RTCTL_ERROR_INVALID_PROFILE, "%s", strempty(err));
        }
        r = reply_plan(msg, loaded, n);
        plan_rows_free(loaded, n);
        return r;
}

int bus_method_list_irqs(sd_bus_message *msg, void *userdata, sd_bus_error *error)
{
        Manager *m = userdata;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const IrqTable *t;
        const double *rates;
        char *const *threads;
        int r;

        r = manager_irqs_cached(m, &t, &rates, &threads);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Cannot read the IRQs: %m");
        r = sd_bus_message_new_method_return(msg, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "(ussssssdssi)");
        for (size_t i = 0; r >= 0 && i < t->n; i++) {
                const Irq *q = &t->irqs[i];
                _cleanup_free_ char *cpus = q->affinity ? cpuset_format_list(q->affinity) : xstrdup("");
                _cleanup_free_ char *eff = q->effective ? cpuset_format_list(q->effective) : xstrdup("");
                const char *sched = threads[i];
                const char *colon = sched ? strchr(sched, ':') : NULL;
                _cleanup_free_ char *policy = colon ? xstrndup(sched, (size_t)(colon - sched)) : xstrdup("");
                const char *why = q->unmovable ? q->unmovable
                                  : irq_state_refused(manager_irq_state(m), q->num)
                                      ? "the kernel refused to move it"
                                      : "";

                r = sd_bus_message_append(reply, "(ussssssdssi)", q->num, q->actions,
                                          irq_class_to_string(q->class), strempty(q->device),
                                          strempty(q->driver), cpus, eff, rates[i], why, policy,
                                          colon ? atoi(colon + 1) : -1);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

int bus_method_verify(sd_bus_message *msg, void *userdata, sd_bus_error *error)
{
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        VerifyRow *rows;
        size_t n;
        int r;

        manager_verify(userdata, &rows, &n);
        r = sd_bus_message_new_method_return(msg, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "(ssss)");
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = sd_bus_message_append(reply, "(ssss)", rows[i].object, rows[i].desired, rows[i].actual,
                                          rows[i].why);
        verify_rows_free(rows, n);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

int bus_method_check(sd_bus_message *msg, void *userdata, sd_bus_error *error)
{
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        Manager *m = userdata;
        _cleanup_free_ char *source = xasprintf("rtctld, profile %s", manager_active_profile(m));
        _cleanup_free_ char *policy_events = manager_sched_method(m);
        /* The CPUs the last pass really isolated, not what the profile asks for. */
        AuditOptions o = {.isolated = m->status.isolated,
                          .isolated_source = source,
                          .boot_known = m->policy != NULL,
                          .boot_missing = m->status.boot_missing,
                          .profile = manager_active_profile(m),
                          .realtime_rules = policy_uses_realtime(m->policy),
                          .policy_events = *policy_events ? policy_events : NULL};
        Audit a = {};
        int r;

        audit_run(&o, &a);
        r = sd_bus_message_new_method_return(msg, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "(ssss)");
        for (size_t i = 0; r >= 0 && i < a.n; i++)
                r = sd_bus_message_append(reply, "(ssss)", a.items[i].check, a.items[i].status,
                                          a.items[i].detail, a.items[i].fix ? a.items[i].fix : "");
        audit_clear(&a);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}
