/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "daemon/bus-reads.h"
#include "daemon/bus-ppd.h"
#include "daemon/bus.h"
#include "core/tasks.h"
#include "daemon/manager.h"
#include "daemon/polkit.h"
#include "shared/log.h"

/* From SIGTERM on, the daemon puts every value back and exits: a change served meanwhile would leave a
 * profile in force behind the restore. */
static int refuse_while_stopping(const Manager *m, sd_bus_error *error)
{
        if (!m->stopping)
                return 0;
        return sd_bus_error_setf(error, RTCTL_ERROR_SHUTTING_DOWN,
                                 "rtctld is stopping and putting every value back; call again once it "
                                 "has started again");
}

int bus_authorize(sd_bus_message *msg, Manager *m, const char *action, sd_bus_error *error)
{
        int r = refuse_while_stopping(m, error);

        if (r < 0)
                return r;
        r = polkit_authorize(m->polkit, msg, action, error);
        return r > 0 ? 0 : r == 0 ? 1 : r;
}

int bus_call_copy(sd_bus_message *call, sd_bus_message **ret)
{
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *copy = NULL;
        const char *sender = sd_bus_message_get_sender(call);
        uint64_t cookie;
        int r;

        assert(call);
        assert(ret);

        if (!sender)
                return -EBADMSG;
        r = sd_bus_message_get_cookie(call, &cookie);
        if (r < 0)
                return r;
        /* The destination too: sd-bus's dispatch leaves a call without one alone (a broadcast). */
        r = sd_bus_message_new_method_call(sd_bus_message_get_bus(call), &copy,
                                           sd_bus_message_get_destination(call),
                                           sd_bus_message_get_path(call), sd_bus_message_get_interface(call),
                                           sd_bus_message_get_member(call));
        if (r >= 0)
                r = sd_bus_message_set_sender(copy, sender);
        if (r >= 0)
                r = sd_bus_message_set_expect_reply(copy, sd_bus_message_get_expect_reply(call) > 0);
        if (r >= 0)
                r = sd_bus_message_set_allow_interactive_authorization(
                    copy, sd_bus_message_get_allow_interactive_authorization(call) > 0);
        if (r >= 0)
                r = sd_bus_message_rewind(call, true);
        if (r >= 0)
                r = sd_bus_message_copy(copy, call, true);
        /* The caller's cookie: the reply to the copy answers the call. */
        if (r >= 0)
                r = sd_bus_message_seal(copy, cookie, 0);
        if (r >= 0)
                r = sd_bus_message_rewind(copy, true);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(copy);
        return 0;
}

/* The longest reason a hold keeps, and the longest application id. */
#define HOLD_TEXT_MAX   256
#define APPLICATION_MAX 128

int bus_check_text(sd_bus_error *error, const char *arg, const char *text)
{
        _cleanup_free_ char *shown = NULL;

        if (text_printable(text))
                return 0;
        shown = echo_text(text);
        return sd_bus_error_setf(error, RTCTL_ERROR_INVALID_ARGUMENT,
                                 "The %s '%s' holds control characters or is not UTF-8 text; it may hold "
                                 "printable characters only",
                                 arg, shown);
}

/* An application id names a program as D-Bus and desktop files do (org.example.Daw): letters, digits,
 * '.', '-' and '_'. Empty is allowed (power-profiles-daemon's clients may send none). */
static bool application_id_valid(const char *id)
{
        if (strlen(id) > APPLICATION_MAX)
                return false;
        for (const char *p = id; *p; p++)
                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_", *p))
                        return false;
        return true;
}

static int profile_error(sd_bus_error *error, int r, const char *name, const char *msg)
{
        if (r == -ENOENT)
                return sd_bus_error_setf(error, RTCTL_ERROR_NO_SUCH_PROFILE, "No profile named '%s'", name);
        if (!profile_name_valid(name))
                return sd_bus_error_setf(error, RTCTL_ERROR_INVALID_ARGUMENT, "%s", msg);
        return sd_bus_error_setf(error, RTCTL_ERROR_INVALID_PROFILE, "Profile '%s' is invalid:\n%s", name,
                                 msg);
}

static int method_set_profile(sd_bus_message *msg, void *userdata, sd_bus_error *error)
{
        Manager *m = userdata;
        _cleanup_free_ char *err = NULL;
        const char *name;
        int r;

        r = sd_bus_message_read(msg, "s", &name);
        if (r < 0)
                return r;
        r = bus_check_text(error, "name", name);
        if (r < 0)
                return r;
        r = bus_authorize(msg, m, ACTION_SET_PROFILE, error);
        if (r != 0)
                return r;
        r = manager_set_profile(m, name, &err);
        if (r < 0)
                return profile_error(error, r, name, err);
        manager_wait_for_pass(m, msg);
        return 1;
}

static int method_reload(sd_bus_message *msg, void *userdata, sd_bus_error *error)
{
        Manager *m = userdata;
        _cleanup_free_ char *err = NULL;
        int r;

        r = bus_authorize(msg, m, ACTION_RELOAD, error);
        if (r != 0)
                return r;
        r = manager_reload(m, &err);
        if (r < 0)
                return sd_bus_error_setf(error, RTCTL_ERROR_INVALID_PROFILE,
                                         "Reload failed, the last good configuration stays:\n%s", err);
        return sd_bus_reply_method_return(msg, NULL);
}

static int method_restore(sd_bus_message *msg, void *userdata, sd_bus_error *error)
{
        Manager *m = userdata;
        int r;

        r = bus_authorize(msg, m, ACTION_RESTORE, error);
        if (r != 0)
                return r;
        manager_restore(m);
        manager_wait_for_pass(m, msg);
        return 1;
}

/* Attaching (or detaching) one's own process is one action, someone else's another. A process whose
 * owner cannot be read counts as someone else's. */
static int authorize_for_process(sd_bus_message *msg, Manager *m, unsigned pid, sd_bus_error *error)
{
        uid_t caller, uid, euid;
        bool own = bus_caller_uid(msg, &caller) >= 0 && task_uids(pid, &uid, &euid) >= 0 && uid == caller &&
                   euid == caller;

        return bus_authorize(msg, m, own ? ACTION_ATTACH_OWN : ACTION_ATTACH_OTHER, error);
}

/* Who an authorized call counts against (polkit_authorize read it already; root too has a uid). */
static int caller_uid(sd_bus_message *msg, uid_t *ret, sd_bus_error *error)
{
        int r = bus_caller_uid(msg, ret);

        if (r < 0)
                return sd_bus_error_setf(error, RTCTL_ERROR_NOT_AUTHORIZED,
                                         "Cannot tell who the caller is (%s)", strerror(-r));
        return 0;
}

/* Authorizes attaching pid and reads whom it counts against; returns as bus_authorize() does. */
static int authorize_attach(sd_bus_message *msg, Manager *m, unsigned pid, uid_t *ret_uid,
                            sd_bus_error *error)
{
        int r = authorize_for_process(msg, m, pid, error);

        return r != 0 ? r : caller_uid(msg, ret_uid, error);
}

static int attach_error(sd_bus_error *error, int r, unsigned pid)
{
        switch (r) {
        case -EDQUOT:
                return sd_bus_error_setf(error, RTCTL_ERROR_LIMIT_EXCEEDED,
                                         "This user attached %d processes already, the most one may; detach "
                                         "one first",
                                         ATTACHED_PER_USER_MAX);
        case -EUSERS:
                return sd_bus_error_setf(
                    error, RTCTL_ERROR_LIMIT_EXCEEDED,
                    "%d processes are attached already, the most rtctld keeps; try again "
                    "once some are detached or gone",
                    ATTACHED_MAX);
        case -ESRCH:
                return sd_bus_error_setf(error, RTCTL_ERROR_NO_SUCH_PROCESS, "No process with PID %u", pid);
        case -EPERM:
                return sd_bus_error_setf(error, RTCTL_ERROR_INVALID_ARGUMENT,
                                         "PID %u is %s: it cannot be moved to the isolated CPUs", pid,
                                         pid == 1 ? "init" : "a kernel thread");
        case -EEXIST:
                return sd_bus_error_setf(error, RTCTL_ERROR_ALREADY_ATTACHED, "PID %u is attached already",
                                         pid);
        case -ENXIO:
                return sd_bus_error_setf(
                    error, RTCTL_ERROR_NOT_ISOLATED,
                    "The active profile isolates no CPU; choose one that does (e.g. audio)");
        default:
                return r;
        }
}

static int method_attach(sd_bus_message *msg, void *userdata, sd_bus_error *error)
{
        Manager *m = userdata;
        uint32_t pid;
        uid_t uid;
        int r;

        r = sd_bus_message_read(msg, "u", &pid);
        if (r < 0)
                return r;
        r = authorize_attach(msg, m, pid, &uid, error);
        if (r != 0)
                return r;
        r = manager_attach(m, pid, uid);
        if (r < 0)
                return attach_error(error, r, pid);
        manager_wait_for_pass(m, msg);
        return 1;
}

/* A pidfd names one process for its whole life: a PID that was recycled can never move another. */
static int method_attach_pidfd(sd_bus_message *msg, void *userdata, sd_bus_error *error)
{
        Manager *m = userdata;
        unsigned pid;
        uid_t uid;
        int fd, r;

        r = sd_bus_message_read(msg, "h", &fd);
        if (r < 0)
                return r;
        /* Authorization needs the owner, so the PID is read first; the attach reads it again, from the
         * pidfd, and checks the process is still the pidfd's. */
        r = pidfd_get_pid(fd);
        if (r == -EBADF)
                return sd_bus_error_setf(error, RTCTL_ERROR_INVALID_ARGUMENT,
                                         "The file descriptor is not a pidfd (pidfd_open(2))");
        if (r <= 0)
                return sd_bus_error_setf(error, RTCTL_ERROR_NO_SUCH_PROCESS,
                                         "The pidfd's process has exited");
        pid = (unsigned)r;
        r = authorize_attach(msg, m, pid, &uid, error);
        if (r != 0)
                return r;
        r = manager_attach_pidfd(m, fd, uid, &pid);
        if (r == -ESRCH || r == -EBADF)
                return sd_bus_error_setf(error, RTCTL_ERROR_NO_SUCH_PROCESS,
                                         "The pidfd's process has exited");
        if (r < 0)
                return attach_error(error, r, pid);
        manager_wait_for_pass(m, msg);
        return 1;
}

int bus_hold_error(sd_bus_error *error, int r, const char *profile, const char *msg)
{
        if (r == -EDQUOT)
                return sd_bus_error_setf(error, RTCTL_ERROR_LIMIT_EXCEEDED,
                                         "This caller holds %d profiles already, the most one may; release "
                                         "one first",
                                         HOLDS_PER_CALLER_MAX);
        if (r == -ENOSPC)
                return sd_bus_error_setf(error, RTCTL_ERROR_LIMIT_EXCEEDED,
                                         "This user holds %d profiles already (over all its connections), "
                                         "the most one may; release one first",
                                         HOLDS_PER_USER_MAX);
        if (r == -EUSERS)
                return sd_bus_error_setf(
                    error, RTCTL_ERROR_LIMIT_EXCEEDED,
                    "%d profiles are held already, the most rtctld keeps; try again once "
                    "some are released",
                    HOLDS_MAX);
        if (r == -ENOTCONN)
                return sd_bus_error_set_errnof(error, ENOTCONN, "Cannot follow the caller on the bus");
        return profile_error(error, r, profile, msg);
}

static int method_hold_profile(sd_bus_message *msg, void *userdata, sd_bus_error *error)
{
        Manager *m = userdata;
        _cleanup_free_ char *err = NULL;
        const char *profile, *reason, *app;
        uint32_t cookie;
        uid_t uid;
        int r;

        r = sd_bus_message_read(msg, "sss", &profile, &reason, &app);
        if (r < 0)
                return r;
        if ((r = bus_check_text(error, "profile", profile)) < 0 ||
            (r = bus_check_text(error, "reason", reason)) < 0 ||
            (r = bus_check_text(error, "application_id", app)) < 0)
                return r;
        if (!profile_name_valid(profile)) {
                _cleanup_free_ char *shown = echo_text(profile);
                return sd_bus_error_setf(error, RTCTL_ERROR_INVALID_ARGUMENT, "'%s' is not a profile name",
                                         shown);
        }
        /* Kept for as long as the hold lasts and shown to every reader of ActiveProfileHolds. */
        if (strlen(reason) > HOLD_TEXT_MAX)
                return sd_bus_error_setf(error, RTCTL_ERROR_INVALID_ARGUMENT,
                                         "The reason is %zu bytes long; at most %d are kept", strlen(reason),
                                         HOLD_TEXT_MAX);
        if (!application_id_valid(app)) {
                _cleanup_free_ char *shown = echo_text(app);
                return sd_bus_error_setf(error, RTCTL_ERROR_INVALID_ARGUMENT,
                                         "The application_id '%s' is no application id: at most %d letters, "
                                         "digits, '.', '-' and '_' (e.g. org.example.Daw)",
                                         shown, APPLICATION_MAX);
        }
        r = bus_authorize(msg, m, ACTION_HOLD_PROFILE, error);
        if (r != 0)
                return r;
        r = caller_uid(msg, &uid, error);
        if (r < 0)
                return r;
        r = manager_hold(m, profile, reason, app, sd_bus_message_get_sender(msg), uid, &cookie, &err);
        if (r < 0)
                return bus_hold_error(error, r, profile, err);
        manager_wait_for_pass_cookie(m, msg, cookie);
        return 1;
}

/* The holder may release its hold; anyone else needs polkit's release-other-hold. */
static int method_release_profile(sd_bus_message *msg, void *userdata, sd_bus_error *error)
{
        Manager *m = userdata;
        const Hold *h;
        uint32_t cookie;
        int r;

        r = sd_bus_message_read(msg, "u", &cookie);
        if (r < 0)
                return r;
        r = refuse_while_stopping(m, error); /* the holder's own release asks no one */
        if (r < 0)
                return r;
        h = manager_find_hold(m, cookie);
        if (!h)
                return sd_bus_error_setf(error, RTCTL_ERROR_NO_SUCH_HOLD, "No hold with cookie %u", cookie);
        if (!streq_ptr(h->bus_name, sd_bus_message_get_sender(msg))) {
                r = bus_authorize(msg, m, ACTION_RELEASE_OTHER_HOLD, error);
                if (r != 0)
                        return r;
                if (!manager_find_hold(m, cookie)) /* it ended while polkit was asked */
                        return sd_bus_error_setf(error, RTCTL_ERROR_NO_SUCH_HOLD, "No hold with cookie %u",
                                                 cookie);
        }
        (void)manager_release(m, cookie);
        manager_wait_for_pass(m, msg);
        return 1;
}

static int property_holds(sd_bus *bus, const char *path, const char *interface, const char *property,
                          sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
        Manager *m = userdata;
        int r;

        r = sd_bus_message_open_container(reply, 'a', "a{sv}");
        for (size_t i = 0; r >= 0 && i < m->n_holds; i++) {
                const Hold *h = m->holds[i];
                r = sd_bus_message_append(reply, "a{sv}", 6, "Cookie", "u", h->cookie, "Profile", "s",
                                          h->profile, "Reason", "s", h->reason, "ApplicationId", "s",
                                          h->application_id, "BusName", "s", h->bus_name, "Since", "t",
                                          h->since_usec);
        }
        if (r < 0)
                return r;
        return sd_bus_message_close_container(reply);
}

static int property_base_profile(sd_bus *bus, const char *path, const char *interface, const char *property,
                                 sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
        return sd_bus_message_append(reply, "s", strempty(((Manager *)userdata)->base_profile));
}

static int method_detach(sd_bus_message *msg, void *userdata, sd_bus_error *error)
{
        Manager *m = userdata;
        uint32_t pid;
        int r;

        r = sd_bus_message_read(msg, "u", &pid);
        if (r < 0)
                return r;
        r = authorize_for_process(msg, m, pid, error);
        if (r != 0)
                return r;
        r = manager_detach(m, pid);
        if (r == -ENOENT)
                return sd_bus_error_setf(error, RTCTL_ERROR_NOT_ATTACHED, "PID %u is not attached", pid);
        if (r < 0)
                return r;
        manager_wait_for_pass(m, msg);
        return 1;
}

static int property_attached(sd_bus *bus, const char *path, const char *interface, const char *property,
                             sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
        Manager *m = userdata;
        int r;

        r = sd_bus_message_open_container(reply, 'a', "u");
        for (size_t i = 0; r >= 0 && i < m->n_attached; i++)
                r = sd_bus_message_append(reply, "u", m->attached[i].pid);
        if (r < 0)
                return r;
        return sd_bus_message_close_container(reply);
}

static int pin_irq(sd_bus_message *msg, Manager *m, uint32_t irq, const char *cpus, uint64_t flags,
                   sd_bus_error *error)
{
        _cleanup_free_ char *err = NULL;
        int r;

        r = bus_check_text(error, "cpus", cpus);
        if (r < 0)
                return r;
        if (flags & ~(uint64_t)1)
                return sd_bus_error_setf(error, RTCTL_ERROR_INVALID_ARGUMENT, "Unknown flags 0x%" PRIx64,
                                         flags);
        r = bus_authorize(msg, m, ACTION_PIN_IRQ, error);
        if (r != 0)
                return r;
        r = manager_pin_irq(m, irq, cpus, flags & 1, &err);
        switch (r) {
        case 0:
                manager_wait_for_pass(m, msg);
                return 1;
        case -ENOENT:
                return sd_bus_error_setf(error, RTCTL_ERROR_NO_SUCH_IRQ, "%s", err);
        case -EPERM:
                return sd_bus_error_setf(error, RTCTL_ERROR_UNMOVABLE, "%s", err);
        case -EXDEV:
                return sd_bus_error_setf(error, RTCTL_ERROR_ISOLATED_CPU, "%s", err);
        case -EOPNOTSUPP:
                return sd_bus_error_setf(error, RTCTL_ERROR_NOT_SUPPORTED, "%s", err);
        case -ESRCH:
                return sd_bus_error_setf(error, RTCTL_ERROR_NOT_PINNED, "%s", err);
        default:
                return sd_bus_error_setf(error, RTCTL_ERROR_INVALID_ARGUMENT, "%s", strempty(err));
        }
}

static int method_pin_irq(sd_bus_message *msg, void *userdata, sd_bus_error *error)
{
        uint32_t irq;
        const char *cpus;
        int r = sd_bus_message_read(msg, "us", &irq, &cpus);

        return r < 0 ? r : pin_irq(msg, userdata, irq, cpus, 0, error);
}

static int method_pin_irq_with_flags(sd_bus_message *msg, void *userdata, sd_bus_error *error)
{
        uint32_t irq;
        const char *cpus;
        uint64_t flags;
        int r = sd_bus_message_read(msg, "ust", &irq, &cpus, &flags);

        return r < 0 ? r : pin_irq(msg, userdata, irq, cpus, flags, error);
}

/* Per online CPU, as the last pass that touched CPUs left it: (cpu, cpufreq driver, governor, EPP, min
 * kHz, max kHz, disabled idle states, PM QoS resume latency). Empty strings and 0 where the machine has no
 * such thing. */
static int property_cpus_power(sd_bus *bus, const char *path, const char *interface, const char *property,
                               sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
        const Status *s = &((Manager *)userdata)->status;
        int r = sd_bus_message_open_container(reply, 'a', "(usssuuss)");

        for (size_t i = 0; r >= 0 && i < s->n_power; i++) {
                const CpuPower *p = &s->power[i];
                r = sd_bus_message_append(reply, "(usssuuss)", p->cpu, p->driver, p->governor, p->epp,
                                          p->min_khz, p->max_khz, p->disabled_states, p->pm_qos);
        }
        if (r < 0)
                return r;
        return sd_bus_message_close_container(reply);
}

static int property_dma_latency(sd_bus *bus, const char *path, const char *interface, const char *property,
                                sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
        const SettingContext *k = &((Manager *)userdata)->kinds;

        return sd_bus_message_append(reply, "i", k->pmqos_fd >= 0 ? k->pmqos_value : -1);
}

static int property_version(sd_bus *bus, const char *path, const char *interface, const char *property,
                            sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
        return sd_bus_message_append(reply, "s", RTCTL_VERSION);
}

static int property_active_profile(sd_bus *bus, const char *path, const char *interface,
                                   const char *property, sd_bus_message *reply, void *userdata,
                                   sd_bus_error *error)
{
        return sd_bus_message_append(reply, "s", manager_active_profile(userdata));
}

static int property_state(sd_bus *bus, const char *path, const char *interface, const char *property,
                          sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
        return sd_bus_message_append(reply, "s", manager_state(userdata));
}

static int property_profiles(sd_bus *bus, const char *path, const char *interface, const char *property,
                             sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
        Manager *m = userdata;
        ProfileInfo *l = NULL;
        size_t n = 0;
        int r;

        (void)profiles_list(m->search_path, &l, &n);
        r = sd_bus_message_open_container(reply, 'a', "(ss)");
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = sd_bus_message_append(reply, "(ss)", l[i].name, l[i].description);
        profiles_free(l, n);
        if (r < 0)
                return r;
        return sd_bus_message_close_container(reply);
}

static int cmp_failure(const void *a, const void *b)
{
        return strcmp((*(Failure *const *)a)->object, (*(Failure *const *)b)->object);
}

static int append_failures(sd_bus_message *reply, GHashTable *table, bool with_errno)
{
        GPtrArray *arr = g_ptr_array_new();
        GHashTableIter it;
        gpointer v;
        guint n;
        int r;

        g_hash_table_iter_init(&it, table);
        while (g_hash_table_iter_next(&it, NULL, &v))
                g_ptr_array_add(arr, v);
        n = arr->len;
        if (n > 1)
                qsort(arr->pdata, n, sizeof(gpointer), cmp_failure);

        r = sd_bus_message_open_container(reply, 'a', with_errno ? "(ssis)" : "(sss)");
        for (guint i = 0; r >= 0 && i < n; i++) {
                Failure *f = arr->pdata[i];
                r = with_errno
                        ? sd_bus_message_append(reply, "(ssis)", f->tuner, f->object, f->error, f->message)
                        : sd_bus_message_append(reply, "(sss)", f->tuner, f->object, f->message);
        }
        g_ptr_array_free(arr, true);
        if (r < 0)
                return r;
        return sd_bus_message_close_container(reply);
}

static int property_failures(sd_bus *bus, const char *path, const char *interface, const char *property,
                             sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
        return append_failures(reply, ((Manager *)userdata)->status.failures, true);
}

static int property_unsupported(sd_bus *bus, const char *path, const char *interface, const char *property,
                                sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
        return append_failures(reply, ((Manager *)userdata)->status.unsupported, false);
}

static int property_cpus(sd_bus *bus, const char *path, const char *interface, const char *property,
                         sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
        Manager *m = userdata;
        const CpuSet *s = streq(property, "IsolatedCPUs") ? m->status.isolated : m->status.housekeeping;
        _cleanup_free_ char *list = s ? cpuset_format_list(s) : xstrdup("");

        return sd_bus_message_append(reply, "s", list);
}

static int property_isolation_reason(sd_bus *bus, const char *path, const char *interface,
                                     const char *property, sd_bus_message *reply, void *userdata,
                                     sd_bus_error *error)
{
        return sd_bus_message_append(reply, "s", strempty(((Manager *)userdata)->status.isolation_reason));
}

static int property_last_pass(sd_bus *bus, const char *path, const char *interface, const char *property,
                              sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
        const LastPass *p = &((Manager *)userdata)->status.last_pass;

        return sd_bus_message_append(reply, "(tuut)", p->timestamp_usec, p->changes, p->failures,
                                     p->duration_usec);
}

static int property_reboot_pending(sd_bus *bus, const char *path, const char *interface,
                                   const char *property, sd_bus_message *reply, void *userdata,
                                   sd_bus_error *error)
{
        return sd_bus_message_append(reply, "b", ((Manager *)userdata)->status.boot_missing != NULL);
}

static const sd_bus_vtable manager_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_PROPERTY("Version", "s", property_version, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("ActiveProfile", "s", property_active_profile, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_PROPERTY("BaseProfile", "s", property_base_profile, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_PROPERTY("ActiveProfileHolds", "aa{sv}", property_holds, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_PROPERTY("Profiles", "a(ss)", property_profiles, 0, SD_BUS_VTABLE_PROPERTY_EMITS_INVALIDATION),
    SD_BUS_PROPERTY("State", "s", property_state, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_PROPERTY("Failures", "a(ssis)", property_failures, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_PROPERTY("Unsupported", "a(sss)", property_unsupported, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_PROPERTY("IsolatedCPUs", "s", property_cpus, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_PROPERTY("HousekeepingCPUs", "s", property_cpus, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_PROPERTY("IsolationReason", "s", property_isolation_reason, 0,
                    SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_PROPERTY("LastPass", "(tuut)", property_last_pass, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_PROPERTY("AttachedProcesses", "au", property_attached, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_PROPERTY("AttachedThreads", "a(uusss)", bus_property_attached_threads, 0,
                    SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_PROPERTY("PolicyEvents", "s", bus_property_policy_events, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_PROPERTY("CPUPower", "a(usssuuss)", property_cpus_power, 0,
                    SD_BUS_VTABLE_PROPERTY_EMITS_INVALIDATION),
    SD_BUS_PROPERTY("DMALatencyRequest", "i", property_dma_latency, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_PROPERTY("RebootPending", "b", property_reboot_pending, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_METHOD_WITH_ARGS("SetProfile", SD_BUS_ARGS("s", name), SD_BUS_RESULT("u", changes, "u", failures),
                            method_set_profile, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("Reload", NULL, NULL, method_reload, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("Restore", SD_BUS_NO_ARGS, SD_BUS_RESULT("u", changes, "u", failures),
                            method_restore, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("Plan", SD_BUS_ARGS("s", profile), SD_BUS_RESULT("a(sss)", settings),
                            bus_method_plan, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("PlanWithNotes", SD_BUS_ARGS("s", profile),
                            SD_BUS_RESULT("a(sss)", settings, "a(ss)", left_alone), bus_method_plan,
                            SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("AttachProcess", SD_BUS_ARGS("u", pid),
                            SD_BUS_RESULT("u", changes, "u", failures), method_attach,
                            SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("AttachProcessByPIDFD", SD_BUS_ARGS("h", pidfd),
                            SD_BUS_RESULT("u", changes, "u", failures), method_attach_pidfd,
                            SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("HoldProfile", SD_BUS_ARGS("s", profile, "s", reason, "s", application_id),
                            SD_BUS_RESULT("u", cookie), method_hold_profile, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("ReleaseProfile", SD_BUS_ARGS("u", cookie),
                            SD_BUS_RESULT("u", changes, "u", failures), method_release_profile,
                            SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("DetachProcess", SD_BUS_ARGS("u", pid),
                            SD_BUS_RESULT("u", changes, "u", failures), method_detach,
                            SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("ListIrqs", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(ussssssdssi)", irqs),
                            bus_method_list_irqs, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("PinIrq", SD_BUS_ARGS("u", irq, "s", cpus),
                            SD_BUS_RESULT("u", changes, "u", failures), method_pin_irq,
                            SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("PinIrqWithFlags", SD_BUS_ARGS("u", irq, "s", cpus, "t", flags),
                            SD_BUS_RESULT("u", changes, "u", failures), method_pin_irq_with_flags,
                            SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("Verify", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(ssss)", settings), bus_method_verify,
                            SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("Check", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(ssss)", findings), bus_method_check,
                            SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_SIGNAL_WITH_ARGS("Applied", SD_BUS_ARGS("s", reason, "u", changes, "u", failures), 0),
    SD_BUS_SIGNAL_WITH_ARGS("ProfileReleased", SD_BUS_ARGS("u", cookie), 0),
    SD_BUS_VTABLE_END,
};

/* A caller left the bus: what waits for it (calls for polkit, reads) is dropped. One match for every
 * name rather than an sd_bus_track each, as holds have: up to 256 callers may wait for polkit and 1024 for
 * reads, and the system bus allows a connection 512 match rules. */
static int on_caller_left(sd_bus_message *msg, void *userdata, sd_bus_error *ret_error)
{
        Manager *m = userdata;
        const char *name, *old_owner, *new_owner;

        if (sd_bus_message_read(msg, "sss", &name, &old_owner, &new_owner) < 0 || !isempty(new_owner))
                return 0;
        bus_reads_forget(m->bus_reads, name);
        polkit_forget(m->polkit, name);
        return 0;
}

int bus_setup(Manager *m)
{
        int r;

        assert(m);

        r = sd_bus_open_system(&m->bus);
        if (r < 0)
                return log_error_errno(r, "Failed to connect to the system bus: %m");
        r = sd_bus_add_object_vtable(m->bus, NULL, RTCTL_BUS_PATH, RTCTL_BUS_IFACE, manager_vtable, m);
        if (r < 0)
                return log_error_errno(r, "Failed to register the D-Bus object: %m");
        r = sd_bus_attach_event(m->bus, m->event, SD_EVENT_PRIORITY_NORMAL);
        if (r < 0)
                return log_error_errno(r, "Failed to attach the bus to the event loop: %m");
        r = bus_reads_setup(m);
        if (r < 0)
                return r;
        r = sd_bus_match_signal_async(m->bus, &m->name_slot, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                      "org.freedesktop.DBus", "NameOwnerChanged", on_caller_left, NULL, m);
        if (r < 0)
                return log_error_errno(r, "Failed to watch callers leaving the bus: %m");
        r = sd_bus_request_name(m->bus, RTCTL_BUS_NAME, 0);
        if (r < 0)
                return log_error_errno(r, "Failed to take the name " RTCTL_BUS_NAME ": %m");
        return bus_ppd_setup(m);
}
