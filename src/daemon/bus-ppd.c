/* SPDX-License-Identifier: GPL-2.0-or-later */
/* power-profiles-daemon's D-Bus API, answered by rtctld while that daemon does not run, so that the
 * desktop's power slider and powerprofilesctl keep working (rtctl.conf [PowerProfiles]).
 *
 * Its three profiles are rtctl profiles. The slider's write (ActiveProfile) sets the base profile while
 * that is one of the three; over another (realtime, audio: an admin's choice, org.rtctl.set-profile,
 * which the session's switch-profile action must neither undo nor replace across reboots) it is held
 * instead, as HoldProfile holds. Both are rtctl holds, ranked as any other, so neither ever lowers a held
 * audio profile or a base profile that outranks them. What the slider shows is the power profile in
 * force, else its own choice over the base, else the base profile's, else balanced: always one of the
 * three names, which GNOME looks up, and a write of it changes nothing. Served in rtctld itself rather
 * than by a companion: the holds with their ranks, the trackers of their holders, polkit and the base
 * profile are all here, and a companion would need each of them again over D-Bus.
 *
 * Semantics as power-profiles-daemon 0.30 (Debian 13) has them, which its 0.12 clients (Debian 12) accept
 * too: only performance and power-saver can be held; a write of the profile already shown does nothing;
 * a write of another one releases the holds taken through this API (not rtctl's own: the audio hold of a
 * DAW stays); ProfileReleased goes to the holder alone, on the object it held through. Unlike
 * power-profiles-daemon, only the holder (or whom polkit lets release another's hold) may release a hold,
 * and a power-saver hold never lowers the base profile (it is ranked below it). */
#include "core/daemon-conf.h"
#include "daemon/bus-ppd.h"
#include "daemon/bus.h"
#include "daemon/manager.h"
#include "daemon/polkit.h"
#include "shared/log.h"

/* As power-profiles-daemon bounds them: rtctl's HoldProfile keeps the same. */
#define PPD_TEXT_MAX 256

/* Each name with its object; Manager.ppd_owned follows the same order. */
static const char *const ppd_names[][2] = {{PPD_NAME, PPD_PATH}, {PPD_NAME_OLD, PPD_PATH_OLD}};

/* Which of the objects a path is, -1 for neither. */
static int ppd_index(const char *path)
{
        for (size_t i = 0; path && i < ELEMENTSOF(ppd_names); i++)
                if (streq(path, ppd_names[i][1]))
                        return (int)i;
        return -1;
}

static const char *iface_of(const char *path)
{
        return streq_ptr(path, PPD_PATH_OLD) ? PPD_NAME_OLD : PPD_NAME;
}

/* The power profile an rtctl profile stands for, -1 for none. */
static int power_profile_of(const Manager *m, const char *profile)
{
        for (int i = 0; profile && i < _POWER_PROFILE_MAX; i++)
                if (streq(m->conf.power_profiles[i], profile))
                        return i;
        return -1;
}

static bool is_slider_hold(const Hold *h)
{
        return streq(h->bus_name, SLIDER_HOLDER);
}

/* The slider's choice over a base profile it does not show, NULL for none. */
static const Hold *slider_hold(const Manager *m)
{
        for (size_t i = 0; i < m->n_holds; i++)
                if (is_slider_hold(m->holds[i]))
                        return m->holds[i];
        return NULL;
}

/* The power profile in force, else the slider's choice over the base profile (when the base or another
 * hold outranks it), else the base profile's, else balanced. */
static PowerProfile shown_profile(const Manager *m)
{
        const Hold *h = slider_hold(m);
        int p = power_profile_of(m, manager_active_profile(m));

        if (p < 0 && h)
                p = power_profile_of(m, h->profile);
        if (p < 0)
                p = power_profile_of(m, m->base_profile);
        return p < 0 ? POWER_PROFILE_BALANCED : (PowerProfile)p;
}

static int property_active(sd_bus *bus, const char *path, const char *interface, const char *property,
                           sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
        return sd_bus_message_append(reply, "s", power_profile_name(shown_profile(userdata)));
}

/* The write is the filter's (on_set): it may wait for polkit, which a property setter cannot. */
static int property_set_active(sd_bus *bus, const char *path, const char *interface, const char *property,
                               sd_bus_message *value, void *userdata, sd_bus_error *error)
{
        return sd_bus_error_set(error, SD_BUS_ERROR_FAILED, "ActiveProfile is written through its filter");
}

static int property_no_string(sd_bus *bus, const char *path, const char *interface, const char *property,
                              sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
        return sd_bus_message_append(reply, "s", "");
}

static int property_profiles(sd_bus *bus, const char *path, const char *interface, const char *property,
                             sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
        Manager *m = userdata;
        int r;

        r = sd_bus_message_open_container(reply, 'a', "a{sv}");
        /* Driver other than "placeholder": KDE hides every profile of one. */
        for (int i = 0; r >= 0 && i < _POWER_PROFILE_MAX; i++)
                r = sd_bus_message_append(reply, "a{sv}", 4, "Profile", "s", power_profile_name(i), "Driver",
                                          "s", "rtctl", "PlatformDriver", "s", "rtctl", "RtctlProfile", "s",
                                          m->conf.power_profiles[i]);
        return r < 0 ? r : sd_bus_message_close_container(reply);
}

static int property_no_strings(sd_bus *bus, const char *path, const char *interface, const char *property,
                               sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
        return sd_bus_message_append(reply, "as", 0);
}

static int property_no_dicts(sd_bus *bus, const char *path, const char *interface, const char *property,
                             sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
        return sd_bus_message_append(reply, "aa{sv}", 0);
}

static int property_false(sd_bus *bus, const char *path, const char *interface, const char *property,
                          sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
        return sd_bus_message_append(reply, "b", 0);
}

/* Every hold, rtctl's own too (a DAW's audio hold is what the desktop should see): by the power profile
 * its profile stands for, else performance (a hold raises the tuning). */
static int property_holds(sd_bus *bus, const char *path, const char *interface, const char *property,
                          sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
        Manager *m = userdata;
        int r;

        r = sd_bus_message_open_container(reply, 'a', "a{sv}");
        for (size_t i = 0; r >= 0 && i < m->n_holds; i++) {
                const Hold *h = m->holds[i];
                int p = power_profile_of(m, h->profile);
                /* The slider's choice is ActiveProfile there, not an application's hold. */
                if (is_slider_hold(h))
                        continue;
                r = sd_bus_message_append(
                    reply, "a{sv}", 3, "ApplicationId", "s", h->application_id, "Profile", "s",
                    power_profile_name(p < 0 ? POWER_PROFILE_PERFORMANCE : p), "Reason", "s", h->reason);
        }
        return r < 0 ? r : sd_bus_message_close_container(reply);
}

static int property_version(sd_bus *bus, const char *path, const char *interface, const char *property,
                            sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
        return sd_bus_message_append(reply, "s", "rtctl " RTCTL_VERSION);
}

static int check_texts(sd_bus_error *error, const char *reason, const char *app)
{
        int r;

        if ((r = bus_check_text(error, "reason", reason)) < 0 ||
            (r = bus_check_text(error, "application_id", app)) < 0)
                return r;
        if (strlen(reason) > PPD_TEXT_MAX || strlen(app) > PPD_TEXT_MAX)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "The reason and the application id are kept up to %d bytes each",
                                         PPD_TEXT_MAX);
        return 0;
}

static int method_hold(sd_bus_message *msg, void *userdata, sd_bus_error *error)
{
        Manager *m = userdata;
        _cleanup_free_ char *err = NULL;
        const char *profile, *reason, *app;
        uint32_t cookie;
        uid_t uid;
        int r, want;

        r = sd_bus_message_read(msg, "sss", &profile, &reason, &app);
        if (r < 0)
                return r;
        if ((r = check_texts(error, reason, app)) < 0)
                return r;
        want = power_profile_from_name(profile);
        if (want != POWER_PROFILE_PERFORMANCE && want != POWER_PROFILE_SAVER)
                return sd_bus_error_set(
                    error, SD_BUS_ERROR_INVALID_ARGS,
                    "Only profiles 'performance' and 'power-saver' can be a hold profile");
        r = bus_authorize(msg, m, ACTION_PPD_HOLD, error);
        if (r != 0)
                return r;
        if (bus_caller_uid(msg, &uid) < 0)
                return sd_bus_error_set(error, SD_BUS_ERROR_ACCESS_DENIED, "Cannot tell who the caller is");
        r = manager_hold(m, m->conf.power_profiles[want], reason, isempty(app) ? "(unnamed)" : app,
                         sd_bus_message_get_sender(msg), uid, &cookie, &err);
        if (r < 0)
                return bus_hold_error(error, r, m->conf.power_profiles[want], err);
        ((Hold *)manager_find_hold(m, cookie))->ppd_path = xstrdup(sd_bus_message_get_path(msg));
        manager_wait_for_pass_cookie(m, msg, cookie);
        return 1;
}

static int method_release(sd_bus_message *msg, void *userdata, sd_bus_error *error)
{
        Manager *m = userdata;
        const Hold *h;
        uint32_t cookie;
        int r;

        r = sd_bus_message_read(msg, "u", &cookie);
        if (r < 0)
                return r;
        h = manager_find_hold(m, cookie);
        /* rtctl's own holds are released through rtctl's API. */
        if (!h || !h->ppd_path)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "No hold with cookie %u", cookie);
        if (!streq_ptr(h->bus_name, sd_bus_message_get_sender(msg))) {
                r = bus_authorize(msg, m, ACTION_RELEASE_OTHER_HOLD, error);
                if (r != 0)
                        return r;
        }
        (void)manager_release(m, cookie);
        return sd_bus_reply_method_return(msg, NULL);
}

static const sd_bus_vtable ppd_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_WRITABLE_PROPERTY("ActiveProfile", "s", property_active, property_set_active, 0,
                             SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE | SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_PROPERTY("PerformanceInhibited", "s", property_no_string, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("PerformanceDegraded", "s", property_no_string, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("Profiles", "aa{sv}", property_profiles, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_PROPERTY("Actions", "as", property_no_strings, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("ActionsInfo", "aa{sv}", property_no_dicts, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("ActiveProfileHolds", "aa{sv}", property_holds, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_PROPERTY("Version", "s", property_version, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("BatteryAware", "b", property_false, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_METHOD_WITH_ARGS("HoldProfile", SD_BUS_ARGS("s", profile, "s", reason, "s", application_id),
                            SD_BUS_RESULT("u", cookie), method_hold, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("ReleaseProfile", SD_BUS_ARGS("u", cookie), SD_BUS_NO_RESULT, method_release,
                            SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_SIGNAL_WITH_ARGS("ProfileReleased", SD_BUS_ARGS("u", cookie), 0),
    SD_BUS_VTABLE_END,
};

/* Over a base profile the slider does not show (realtime, audio: an admin's, org.rtctl.set-profile), the
 * session's choice is a hold, as powerprofilesctl launch would take: ranked as any hold, so it never
 * lowers that base; not remembered; ended by the next slider write or base profile chosen. No bus name
 * keeps it: powerprofilesctl leaves the bus as soon as it wrote. */
static int hold_over_base(Manager *m, sd_bus_message *msg, PowerProfile want, sd_bus_error *error)
{
        _cleanup_free_ char *err = NULL, *reason = NULL;
        const char *profile = m->conf.power_profiles[want];
        uint32_t cookie;
        uid_t uid;
        int r;

        if (bus_caller_uid(msg, &uid) < 0)
                return sd_bus_error_set(error, SD_BUS_ERROR_ACCESS_DENIED, "Cannot tell who the caller is");
        reason = xasprintf("power profile %s chosen over the base profile %s", power_profile_name(want),
                           strna(m->base_profile));
        r = manager_hold(m, profile, reason, "power slider", SLIDER_HOLDER, uid, &cookie, &err);
        if (r < 0)
                return bus_hold_error(error, r, profile, err);
        log_info("Power profile %s chosen through %s: held over base profile %s (hold %u).",
                 power_profile_name(want), iface_of(sd_bus_message_get_path(msg)), strna(m->base_profile),
                 cookie);
        return 0;
}

/* The slider switches the base profile only among the profiles it shows (remembered, as `rtctl profile`
 * is): the active session may switch the power profile, never away from an admin's choice. */
static int switch_base(Manager *m, sd_bus_message *msg, PowerProfile want, sd_bus_error *error)
{
        _cleanup_free_ char *err = NULL;
        const char *profile = m->conf.power_profiles[want];
        int r;

        r = manager_set_profile(m, profile, &err);
        if (r < 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_FAILED,
                                         "Cannot switch to %s (rtctl profile %s): %s",
                                         power_profile_name(want), profile,
                                         err
                                             ?: r == -ENOENT ? "no such profile"
                                                             : strerror(-r));
        log_info("Power profile %s chosen through %s: base profile %s.", power_profile_name(want),
                 iface_of(sd_bus_message_get_path(msg)), profile);
        return 0;
}

/* The slider's write. A different profile releases the holds taken through this API and the slider's
 * earlier choice, then switches the base profile or, over one the slider does not show, is held; the one
 * shown already changes nothing. */
static int set_active(Manager *m, sd_bus_message *msg, sd_bus_error *error)
{
        const char *value;
        int r, want;

        r = sd_bus_message_enter_container(msg, 'v', "s");
        if (r < 0)
                return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS, "ActiveProfile is a string");
        r = sd_bus_message_read(msg, "s", &value);
        if (r < 0)
                return r;
        r = bus_authorize(msg, m, ACTION_PPD_SWITCH, error);
        if (r != 0)
                return r;
        want = power_profile_from_name(value);
        if (want < 0) {
                _cleanup_free_ char *shown = echo_text(value);
                return sd_bus_error_setf(error, SD_BUS_ERROR_FAILED, "Invalid profile name '%s'", shown);
        }
        if ((PowerProfile)want != shown_profile(m)) {
                for (size_t i = m->n_holds; i > 0; i--)
                        if (i <= m->n_holds &&
                            (m->holds[i - 1]->ppd_path || is_slider_hold(m->holds[i - 1])))
                                (void)manager_release(m, m->holds[i - 1]->cookie);
                /* No base profile (none chosen yet, or `rtctl restore`): nobody's choice to keep. */
                if (!m->base_profile || power_profile_of(m, m->base_profile) >= 0)
                        r = switch_base(m, msg, want, error);
                else
                        r = hold_over_base(m, msg, want, error);
                if (r < 0)
                        return r;
        }
        r = sd_bus_reply_method_return(msg, NULL);
        return r < 0 ? r : 1;
}

/* The bus says which names rtctld gained and lost (NameAcquired, NameLost: sent by the bus itself, to
 * rtctld alone, unasked), the only account that follows power-profiles-daemon taking them back. */
static void follow_names(Manager *m, sd_bus_message *msg)
{
        bool acquired = sd_bus_message_is_signal(msg, "org.freedesktop.DBus", "NameAcquired") > 0;
        const char *name;

        if (!acquired && sd_bus_message_is_signal(msg, "org.freedesktop.DBus", "NameLost") <= 0)
                return;
        if (!streq_ptr(sd_bus_message_get_sender(msg), "org.freedesktop.DBus") ||
            sd_bus_message_read(msg, "s", &name) < 0)
                return;
        for (size_t i = 0; i < ELEMENTSOF(ppd_names); i++)
                if (streq(name, ppd_names[i][0]) && m->ppd_owned[i] != acquired) {
                        m->ppd_owned[i] = acquired;
                        log_debug("%s %s.", acquired ? "Own" : "No longer own", name);
                }
        (void)sd_bus_message_rewind(msg, true);
}

/* sd-bus answers a call at a registered path whichever name it was sent to. At power-profiles-daemon's
 * paths rtctld answers only as that daemon: while it owns the object's name, for a call sent to it or
 * to rtctld's unique name (where a client that resolved the owner sends, as GDBus does; never to
 * org.rtctl.Manager1), and only for the object's interface and the standard ones of any object. Else
 * there is no such object, as where power-profiles-daemon runs. */
static int check_call(Manager *m, sd_bus_message *msg, int i, sd_bus_error *error)
{
        static char *const standard[] = {"org.freedesktop.DBus.Properties",
                                         "org.freedesktop.DBus.Introspectable", "org.freedesktop.DBus.Peer",
                                         NULL};
        const char *dest = sd_bus_message_get_destination(msg), *iface = sd_bus_message_get_interface(msg);
        const char *unique = NULL;

        (void)sd_bus_get_unique_name(m->bus, &unique);
        if (!m->ppd_owned[i] || !dest || (!streq(dest, ppd_names[i][0]) && !streq_ptr(dest, unique)))
                return sd_bus_error_setf(error, SD_BUS_ERROR_UNKNOWN_OBJECT, "Unknown object '%s'.",
                                         ppd_names[i][1]);
        if (!iface || (!streq(iface, ppd_names[i][0]) && !strv_contains(standard, iface)))
                return sd_bus_error_setf(error, SD_BUS_ERROR_UNKNOWN_METHOD,
                                         "Unknown method %s or interface %s.",
                                         sd_bus_message_get_member(msg), strna(iface));
        return 0;
}

/* Every call at either object is checked here first. Properties.Set of ActiveProfile is then answered
 * here, before sd-bus's own property code, which answers as soon as a setter returns and so cannot wait
 * for polkit. Everything else goes on to sd-bus. */
static int on_message(sd_bus_message *msg, void *userdata, sd_bus_error *error)
{
        Manager *m = userdata;
        const char *iface, *property;
        int i, r;

        follow_names(m, msg);
        if (sd_bus_message_is_method_call(msg, NULL, NULL) <= 0)
                return 0;
        i = ppd_index(sd_bus_message_get_path(msg));
        if (i < 0)
                return 0;
        r = check_call(m, msg, i, error);
        if (r < 0)
                return r;
        if (!sd_bus_message_is_method_call(msg, "org.freedesktop.DBus.Properties", "Set"))
                return 0;
        if (sd_bus_message_read(msg, "ss", &iface, &property) < 0 || !streq(iface, ppd_names[i][0]) ||
            !streq(property, "ActiveProfile")) {
                (void)sd_bus_message_rewind(msg, true);
                return 0;
        }
        return set_active(m, msg, error);
}

static int on_name_requested(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error)
{
        const char *name = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        uint32_t result = 0;

        if (e)
                log_warning("Cannot ask for %s (the desktop's power slider stays with power-profiles-daemon "
                            "alone): %s",
                            name, e->message);
        else if (sd_bus_message_read(reply, "u", &result) >= 0 && result == 2 /* in the queue */)
                log_info(
                    "power-profiles-daemon owns %s: it answers the power slider, rtctld waits behind it.",
                    name);
        else
                log_info("Answering the power slider on %s.", name);
        return 0;
}

/* Asked for without taking them from power-profiles-daemon: queued behind it, and it may take them back. */
static void ask_for_names(Manager *m)
{
        if (m->ppd_names_asked)
                return;
        m->ppd_names_asked = true;
        m->ppd_watch = sd_bus_slot_unref(m->ppd_watch);
        m->ppd_timer = sd_event_source_disable_unref(m->ppd_timer);
        for (size_t i = 0; i < ELEMENTSOF(ppd_names); i++) {
                int r = sd_bus_request_name_async(m->bus, NULL, ppd_names[i][0],
                                                  SD_BUS_NAME_ALLOW_REPLACEMENT | SD_BUS_NAME_QUEUE,
                                                  on_name_requested, (void *)ppd_names[i][0]);
                if (r < 0)
                        log_warning_errno(r, "Failed to ask for %s: %m", ppd_names[i][0]);
        }
}

static void check_ppd_names(Manager *m);

/* power-profiles-daemon took a name: behind it once it has all it will own. */
static int on_ppd_owner(sd_bus_message *msg, void *userdata, sd_bus_error *ret_error)
{
        const char *name, *old_owner, *new_owner;

        if (sd_bus_message_read(msg, "sss", &name, &old_owner, &new_owner) >= 0 && !isempty(new_owner))
                check_ppd_names(userdata);
        return 0;
}

/* Where power-profiles-daemon is enabled, it starts after rtctld at boot (rtctld runs before
 * basic.target), and it exits when it cannot own its names: asked for at once, they would be rtctld's
 * and power-profiles-daemon would fail. So they are asked for once it has them (queued behind it), or
 * once its unit says it is not coming: failed with no job queued, or inactive with none for
 * PPD_IDLE_USEC. Its unit is read every PPD_POLL_USEC while that wait lasts; while a job is queued or
 * it is activating, no clock bounds the wait: on a slow machine (a loaded TCG guest) its start job can
 * wait longer than any bound that fits a fast one. */
#define PPD_POLL_USEC (1000000ULL)
/* Enabled, inactive and no job queued: not at boot (its start job is queued before rtctld starts), but
 * after `systemctl enable` and a restart of rtctld, with the admin's `systemctl start` to come. */
#define PPD_IDLE_USEC (90 * 1000000ULL)
#define PPD_UNIT      "power-profiles-daemon.service"

static void poll_ppd_unit(Manager *m);

static void poll_ppd_later(Manager *m)
{
        int r = sd_event_source_set_time_relative(m->ppd_timer, PPD_POLL_USEC);
        if (r >= 0)
                r = sd_event_source_set_enabled(m->ppd_timer, SD_EVENT_ONESHOT);
        if (r < 0) {
                log_warning_errno(r, "Failed to wait for power-profiles-daemon: %m");
                ask_for_names(m);
        }
}

/* Which of ppd_names a list of bus names holds, as bits in ppd_names' order. */
static int read_ppd_names(sd_bus_message *reply, unsigned *ret)
{
        _cleanup_strv_free_ char **names = NULL;
        int r;

        if (sd_bus_message_is_method_error(reply, NULL))
                return -sd_bus_message_get_errno(reply);
        r = sd_bus_message_read_strv(reply, &names);
        if (r < 0)
                return r;
        *ret = 0;
        for (size_t i = 0; i < ELEMENTSOF(ppd_names); i++)
                if (strv_contains(names, ppd_names[i][0]))
                        *ret |= 1u << i;
        return 0;
}

static int on_ppd_names_owned(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error)
{
        Manager *m = userdata;
        unsigned owned = 0;

        if (m->ppd_names_asked)
                return 0;
        if (read_ppd_names(reply, &owned) < 0 || (owned & m->ppd_names_wanted) == m->ppd_names_wanted)
                ask_for_names(m); /* queued behind it */
        else
                poll_ppd_later(m);
        return 0;
}

static int on_ppd_names_activatable(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error)
{
        Manager *m = userdata;
        unsigned wanted = 0;

        if (m->ppd_names_asked)
                return 0;
        /* Its D-Bus activation files name what it owns (0.12: the old name only); none: the old name. */
        if (read_ppd_names(reply, &wanted) < 0 || wanted == 0)
                wanted = 1u << 1; /* PPD_NAME_OLD */
        m->ppd_names_wanted = wanted;
        check_ppd_names(m);
        return 0;
}

/* It runs. Its unit is active once it owns its first name (BusName=), and asked for before it has the
 * others, a name would be rtctld's and it would exit: the names are asked for, queued behind it, once
 * every name it will own has an owner. Which it asks for first is glib's business (0.23 was seen
 * owning net.hadess.PowerProfiles, not yet org.freedesktop.UPower.PowerProfiles); what it will own is
 * read once from the bus's activatable names. */
static void check_ppd_names(Manager *m)
{
        bool known = m->ppd_names_wanted != 0;
        int r;

        if (m->ppd_names_asked)
                return;
        r = sd_bus_call_method_async(m->bus, NULL, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                     "org.freedesktop.DBus", known ? "ListNames" : "ListActivatableNames",
                                     known ? on_ppd_names_owned : on_ppd_names_activatable, m, "");
        if (r < 0) {
                log_warning_errno(r, "Failed to ask which of power-profiles-daemon's names are owned: %m");
                ask_for_names(m);
        }
}

static int on_ppd_unit_read(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error)
{
        Manager *m = userdata;
        const char *active = NULL, *job = NULL;
        int r;

        if (m->ppd_names_asked)
                return 0;
        if (sd_bus_message_is_method_error(reply, NULL)) {
                log_info("power-profiles-daemon's unit cannot be read (%s): answering the power slider.",
                         sd_bus_message_get_error(reply)->message);
                ask_for_names(m);
                return 0;
        }
        r = sd_bus_message_enter_container(reply, 'a', "{sv}");
        while (r > 0 && (r = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
                const char *key;
                uint32_t id;

                r = sd_bus_message_read(reply, "s", &key);
                if (r >= 0 && streq(key, "ActiveState"))
                        r = sd_bus_message_read(reply, "v", "s", &active);
                else if (r >= 0 && streq(key, "Job"))
                        r = sd_bus_message_read(reply, "v", "(uo)", &id, &job);
                else if (r >= 0)
                        r = sd_bus_message_skip(reply, "v");
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
        }
        if (r < 0 || !active) {
                log_info("power-profiles-daemon's unit gave no state: answering the power slider.");
                ask_for_names(m);
                return 0;
        }
        bool queued = job && !streq(job, "/");
        if (streq(active, "active") || streq(active, "reloading")) {
                check_ppd_names(m);
                return 0;
        }
        if (!queued && streq(active, "failed")) {
                log_info(
                    "power-profiles-daemon is enabled but failed with no job queued: answering the power "
                    "slider.");
                ask_for_names(m);
                return 0;
        }
        if (!queued && streq(active, "inactive") && now_usec(CLOCK_MONOTONIC) >= m->ppd_idle_until) {
                log_info(
                    "power-profiles-daemon is enabled but was not started (inactive, no job queued, for "
                    "%llu s): answering the power slider.",
                    (unsigned long long)(PPD_IDLE_USEC / 1000000ULL));
                ask_for_names(m);
                return 0;
        }
        /* activating, deactivating, or a start job queued: read again */
        poll_ppd_later(m);
        return 0;
}

static int on_ppd_poll(sd_event_source *s, uint64_t usec, void *userdata)
{
        poll_ppd_unit(userdata);
        return 0;
}

static void poll_ppd_unit(Manager *m)
{
        _cleanup_free_ char *path = NULL;
        int r;

        r = sd_bus_path_encode("/org/freedesktop/systemd1/unit", PPD_UNIT, &path);
        if (r >= 0)
                r = sd_bus_call_method_async(m->bus, NULL, "org.freedesktop.systemd1", path,
                                             "org.freedesktop.DBus.Properties", "GetAll", on_ppd_unit_read,
                                             m, "s", "org.freedesktop.systemd1.Unit");
        if (r < 0) {
                log_warning_errno(r, "Failed to read power-profiles-daemon's unit: %m");
                ask_for_names(m);
        }
}

static int on_ppd_unit_loaded(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error)
{
        Manager *m = userdata;

        if (m->ppd_names_asked)
                return 0;
        if (sd_bus_message_is_method_error(reply, NULL)) {
                log_info("power-profiles-daemon's unit cannot be loaded (%s): answering the power slider.",
                         sd_bus_message_get_error(reply)->message);
                ask_for_names(m);
                return 0;
        }
        poll_ppd_unit(m);
        return 0;
}

static int on_unit_file_state(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error)
{
        Manager *m = userdata;
        static char *const startable[] = {"enabled", "enabled-runtime", "static", "alias", "indirect", NULL};
        const char *state = NULL;
        int r;

        if (sd_bus_message_is_method_error(reply, NULL) || sd_bus_message_read(reply, "s", &state) < 0 ||
            !strv_contains(startable, state)) {
                ask_for_names(m);
                return 0;
        }
        log_info("power-profiles-daemon is %s: it answers the power slider; rtctld waits for it.", state);
        m->ppd_idle_until = now_usec(CLOCK_MONOTONIC) + PPD_IDLE_USEC;
        r = sd_bus_add_match_async(
            m->bus, &m->ppd_watch,
            "type='signal',sender='org.freedesktop.DBus',interface='org.freedesktop.DBus',"
            "member='NameOwnerChanged',arg0='" PPD_NAME_OLD "'",
            on_ppd_owner, NULL, m);
        if (r >= 0)
                r = sd_event_add_time_relative(m->event, &m->ppd_timer, CLOCK_MONOTONIC, PPD_POLL_USEC,
                                               100000ULL, on_ppd_poll, m);
        if (r >= 0)
                r = sd_event_source_set_enabled(m->ppd_timer, SD_EVENT_OFF);
        /* Loaded first: a unit nothing has loaded yet has no object to read. */
        if (r >= 0)
                r = sd_bus_call_method_async(m->bus, NULL, "org.freedesktop.systemd1",
                                             "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager",
                                             "LoadUnit", on_ppd_unit_loaded, m, "s", PPD_UNIT);
        if (r < 0) {
                log_warning_errno(r, "Failed to wait for power-profiles-daemon: %m");
                ask_for_names(m);
        }
        return 0;
}

int bus_ppd_setup(Manager *m)
{
        int r;

        assert(m);

        if (!m->conf.serve_power_profiles)
                return 0;
        r = sd_bus_add_filter(m->bus, NULL, on_message, m);
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(ppd_names); i++)
                r = sd_bus_add_object_vtable(m->bus, NULL, ppd_names[i][1], ppd_names[i][0], ppd_vtable, m);
        if (r < 0)
                return log_error_errno(r, "Failed to register power-profiles-daemon's objects: %m");
        m->ppd_serving = true;
        m->ppd_shown = -1; /* signalled with the first pass */
        /* Without systemd on the bus (no answer), nothing will start power-profiles-daemon. */
        r = sd_bus_call_method_async(m->bus, NULL, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                     "org.freedesktop.systemd1.Manager", "GetUnitFileState",
                                     on_unit_file_state, m, "s", PPD_UNIT);
        if (r < 0)
                ask_for_names(m);
        return 0;
}

void bus_ppd_emit_changed(Manager *m, bool holds_changed)
{
        char *names[3] = {};
        PowerProfile shown;
        size_t n = 0;

        assert(m);

        if (!m->bus || !m->ppd_serving)
                return;
        shown = shown_profile(m);
        if (m->ppd_shown != (int)shown)
                names[n++] = (char *)"ActiveProfile";
        m->ppd_shown = (int)shown;
        if (holds_changed)
                names[n++] = (char *)"ActiveProfileHolds";
        if (n == 0)
                return;
        /* Only under a name rtctld owns: the object is not there otherwise. */
        for (size_t i = 0; i < ELEMENTSOF(ppd_names); i++)
                if (m->ppd_owned[i])
                        (void)sd_bus_emit_properties_changed_strv(m->bus, ppd_names[i][1], ppd_names[i][0],
                                                                  names);
}

void bus_ppd_hold_ended(Manager *m, const Hold *h)
{
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *s = NULL;

        assert(m);
        assert(h);

        if (!m->bus || !h->ppd_path)
                return;
        if (sd_bus_message_new_signal(m->bus, &s, h->ppd_path, iface_of(h->ppd_path), "ProfileReleased") <
                0 ||
            sd_bus_message_append(s, "u", h->cookie) < 0 ||
            sd_bus_message_set_destination(s, h->bus_name) < 0)
                return;
        (void)sd_bus_send(m->bus, s, NULL);
}
