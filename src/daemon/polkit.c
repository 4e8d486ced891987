/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Authorization through polkit's CheckAuthorization, asynchronously. A method handler that needs an
 * answer asks here; the first time, the question goes to polkit and the handler returns without a reply.
 * When polkit answers, the call is put back into the bus's read queue, its handler runs again and finds
 * the answer waiting. So the loop never blocks on polkit, however long a password prompt takes. An
 * answered query is freed once the call was dispatched again, whatever its handler then did. */
#include <glib.h>
#include <systemd/sd-event.h>

#include "daemon/bus.h"
#include "daemon/polkit.h"
#include "shared/log.h"
#include "shared/util.h"

#define POLKIT_NAME  "org.freedesktop.PolicyKit1"
#define POLKIT_PATH  "/org/freedesktop/PolicyKit1/Authority"
#define POLKIT_IFACE "org.freedesktop.PolicyKit1.Authority"

/* CheckAuthorization's flag AllowUserInteraction. */
#define POLKIT_ALLOW_INTERACTION 1u

/* A password prompt may take the user a while; a question without one is answered at once. */
#define POLKIT_INTERACTIVE_TIMEOUT_USEC (5ULL * 60 * 1000000)

/* A query keeps a copy of its call, with the descriptors its arguments name (bus_call_copy(): one pidfd
 * at most), for as long as polkit thinks, up to 5 minutes; and each waits for a reply from polkit that
 * dbus-daemon counts against rtctld, which may have 128 on the system bus (max_replies_per_connection),
 * some of them for systemd. So one user, over all its connections, may have only so many in progress,
 * and all users together only so many more. */
#define POLKIT_QUERIES_PER_USER_MAX 16
#define POLKIT_QUERIES_MAX          96

typedef enum Answer {
        ANSWER_PENDING,
        ANSWER_YES,
        ANSWER_NO,
} Answer;

typedef struct Query {
        Polkit *polkit;
        sd_bus_message *call;
        char *sender; /* the caller's unique name */
        uid_t uid;    /* whose share it counts against */
        char *action;
        sd_bus_slot *slot;
        Answer answer;
        char *why;             /* for ANSWER_NO */
        sd_event_source *done; /* once answered: frees the query after the call's second dispatch */
} Query;

struct Polkit {
        GHashTable *queries; /* sd_bus_message* (the call) -> Query* */
};

static void query_free(gpointer data)
{
        Query *q = data;

        sd_bus_slot_unref(q->slot);
        sd_event_source_disable_unref(q->done);
        sd_bus_message_unref(q->call);
        free(q->sender);
        free(q->action);
        free(q->why);
        free(q);
}

Polkit *polkit_new(void)
{
        Polkit *p = xmalloc0(sizeof(Polkit));

        p->queries = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, query_free);
        return p;
}

void polkit_free(Polkit *p)
{
        if (!p)
                return;
        g_hash_table_destroy(p->queries);
        free(p);
}

int bus_caller_uid(sd_bus_message *call, uid_t *ret)
{
        sd_bus_creds *creds = NULL;
        int r;

        assert(call);
        assert(ret);

        r = sd_bus_query_sender_creds(call, SD_BUS_CREDS_EUID | SD_BUS_CREDS_UID, &creds);
        if (r >= 0) {
                r = sd_bus_creds_get_euid(creds, ret);
                if (r < 0)
                        r = sd_bus_creds_get_uid(creds, ret);
        }
        sd_bus_creds_unref(creds);
        return r;
}

/* The answered call went back into the bus's read queue, which the bus's sources (at
 * SD_EVENT_PRIORITY_NORMAL) drain before any source below them runs: by now its handler ran again. A
 * handler that found the answer took it; one that returned before asking (the pidfd's process exited,
 * the hold ended meanwhile) left it here, with the call and any descriptor in it. Either way the query is
 * done. */
static int on_redispatched(sd_event_source *s, void *userdata)
{
        Query *q = userdata;

        g_hash_table_remove(q->polkit->queries, q->call);
        return 0;
}

static int free_after_redispatch(Query *q)
{
        sd_event *event = sd_bus_get_event(sd_bus_message_get_bus(q->call));
        int r;

        if (!event)
                return -ENXIO;
        r = sd_event_add_defer(event, &q->done, on_redispatched, q);
        if (r < 0)
                return r;
        (void)sd_event_source_set_description(q->done, "polkit-answered");
        return sd_event_source_set_priority(q->done, SD_EVENT_PRIORITY_NORMAL + 1);
}

static int on_polkit_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error)
{
        Query *q = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        int authorized = 0, challenge = 0, r;

        q->slot = sd_bus_slot_unref(q->slot);
        if (e) {
                if (sd_bus_error_has_names(e, SD_BUS_ERROR_SERVICE_UNKNOWN, SD_BUS_ERROR_NAME_HAS_NO_OWNER))
                        q->why = xstrdup("polkit is not running, and without it only root may");
                else
                        q->why =
                            xasprintf("polkit could not answer (%s: %s)", e->name, strempty(e->message));
        } else {
                r = sd_bus_message_enter_container(reply, 'r', "bba{ss}");
                if (r >= 0)
                        r = sd_bus_message_read(reply, "bb", &authorized, &challenge);
                if (r < 0)
                        q->why = xasprintf("polkit's answer could not be read: %s", strerror(-r));
                else if (!authorized)
                        q->why = xstrdup(challenge ? "polkit asks for authentication, and the call did not "
                                                     "allow it (run from a terminal, or ask an admin)"
                                                   : "polkit says no");
        }
        q->answer = authorized ? ANSWER_YES : ANSWER_NO;
        log_debug("polkit: %s for %s: %s", q->action, strna(sd_bus_message_get_sender(q->call)),
                  authorized ? "yes" : q->why);

        /* The handler runs again, reads its arguments from the start, and finds the answer. */
        r = sd_bus_message_rewind(q->call, true);
        if (r >= 0)
                r = free_after_redispatch(q);
        if (r >= 0)
                r = sd_bus_enqueue_for_read(sd_bus_message_get_bus(q->call), q->call);
        if (r < 0) {
                log_error_errno(r, "Failed to dispatch a call polkit answered again: %m");
                (void)sd_bus_reply_method_errorf(q->call, RTCTL_ERROR_NOT_AUTHORIZED,
                                                 "The authorization could not be completed: %s",
                                                 strerror(-r));
                g_hash_table_remove(q->polkit->queries, q->call);
        }
        return 0;
}

static int ask(Polkit *p, sd_bus_message *call, uid_t uid, const char *action)
{
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *req = NULL, *copy = NULL;
        sd_bus *bus = sd_bus_message_get_bus(call);
        const char *sender = sd_bus_message_get_sender(call);
        bool interactive = sd_bus_message_get_allow_interactive_authorization(call) > 0;
        Query *q;
        int r;

        if (!sender)
                return -EBADMSG;
        r = sd_bus_message_new_method_call(bus, &req, POLKIT_NAME, POLKIT_PATH, POLKIT_IFACE,
                                           "CheckAuthorization");
        if (r >= 0)
                r = sd_bus_message_append(req, "(sa{sv})sa{ss}us", "system-bus-name", 1, "name", "s", sender,
                                          action, 0, interactive ? POLKIT_ALLOW_INTERACTION : 0u, "");
        if (r >= 0)
                r = bus_call_copy(call, &copy);
        if (r < 0)
                return r;

        /* The copy is what comes back when polkit answered; the call goes, with whatever descriptors
         * it carried beyond its arguments. */
        q = xmalloc0(sizeof(Query));
        q->polkit = p;
        q->call = TAKE_PTR(copy);
        q->sender = xstrdup(sender);
        q->uid = uid;
        q->action = xstrdup(action);
        r = sd_bus_call_async(bus, &q->slot, req, on_polkit_reply, q,
                              interactive ? POLKIT_INTERACTIVE_TIMEOUT_USEC : 0);
        if (r < 0) {
                query_free(q);
                return r;
        }
        g_hash_table_replace(p->queries, q->call, q);
        return 0;
}

/* A user's questions polkit has not answered yet: an answered one only waits for its call's second
 * dispatch to be freed (a loop iteration), and a caller's next calls may come before that. */
static unsigned queries_of(Polkit *p, uid_t uid)
{
        GHashTableIter i;
        gpointer value;
        unsigned n = 0;

        g_hash_table_iter_init(&i, p->queries);
        while (g_hash_table_iter_next(&i, NULL, &value))
                if (((Query *)value)->uid == uid && ((Query *)value)->answer == ANSWER_PENDING)
                        n++;
        return n;
}

static gboolean pending_of(gpointer key, gpointer value, gpointer sender)
{
        Query *q = value;

        return q->answer == ANSWER_PENDING && streq(q->sender, sender);
}

/* Answered queries go once their call was dispatched again (its read queue holds it); pending ones
 * would wait for polkit up to POLKIT_INTERACTIVE_TIMEOUT_USEC for nobody. Unref'ing the slot cancels the
 * question. */
void polkit_forget(Polkit *p, const char *sender)
{
        assert(p);

        guint n = g_hash_table_foreach_remove(p->queries, pending_of, (gpointer)sender);

        if (n > 0)
                log_debug("polkit: dropped %u questions of %s, which left the bus", n, sender);
}

int polkit_authorize(Polkit *p, sd_bus_message *call, const char *action, sd_bus_error *error)
{
        assert(p);

        Query *q = g_hash_table_lookup(p->queries, call);
        uid_t uid;
        int r;

        if (q && streq(q->action, action)) {
                Answer a = q->answer;
                _cleanup_free_ char *why = TAKE_PTR(q->why);

                if (a == ANSWER_PENDING)
                        return 0;
                g_hash_table_remove(p->queries, call);
                if (a == ANSWER_YES)
                        return 1;
                return sd_bus_error_setf(error, RTCTL_ERROR_NOT_AUTHORIZED, "Not authorized for %s: %s.",
                                         action, why);
        }
        if (q) /* the same call now needs another action: ask again */
                g_hash_table_remove(p->queries, call);

        r = bus_caller_uid(call, &uid);
        if (r < 0)
                return sd_bus_error_setf(error, RTCTL_ERROR_NOT_AUTHORIZED,
                                         "Cannot tell who the caller is (%s); only root may change tuning",
                                         strerror(-r));
        if (uid == 0)
                return 1;

        if (g_hash_table_size(p->queries) >= POLKIT_QUERIES_MAX)
                return sd_bus_error_setf(error, RTCTL_ERROR_LIMIT_EXCEEDED,
                                         "%d calls wait for polkit already, the most rtctld keeps; try "
                                         "again once polkit answered some",
                                         POLKIT_QUERIES_MAX);
        if (queries_of(p, uid) >= POLKIT_QUERIES_PER_USER_MAX)
                return sd_bus_error_setf(error, RTCTL_ERROR_LIMIT_EXCEEDED,
                                         "This user has %d calls waiting for polkit already (over all its "
                                         "connections), the most one may; wait for their answers first",
                                         POLKIT_QUERIES_PER_USER_MAX);
        r = ask(p, call, uid, action);
        if (r < 0)
                return sd_bus_error_setf(error, RTCTL_ERROR_NOT_AUTHORIZED,
                                         "Not authorized for %s: polkit could not be asked (%s).", action,
                                         strerror(-r));
        return 0;
}
