/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "core/config.h"
#include "core/policy.h"
#include "core/daemon-conf.h"

static const char *const power_profile_names[_POWER_PROFILE_MAX] = {
    [POWER_PROFILE_SAVER] = "power-saver",
    [POWER_PROFILE_BALANCED] = "balanced",
    [POWER_PROFILE_PERFORMANCE] = "performance",
};

/* The rtctl.conf keys, and the shipped profiles they default to. */
static const char *const power_profile_keys[_POWER_PROFILE_MAX] = {
    [POWER_PROFILE_SAVER] = "PowerSaver",
    [POWER_PROFILE_BALANCED] = "Balanced",
    [POWER_PROFILE_PERFORMANCE] = "Performance",
};
static const char *const power_profile_defaults[_POWER_PROFILE_MAX] = {
    [POWER_PROFILE_SAVER] = "power-saver",
    [POWER_PROFILE_BALANCED] = "desktop",
    [POWER_PROFILE_PERFORMANCE] = "performance",
};

const char *power_profile_name(PowerProfile p)
{
        return p >= 0 && p < _POWER_PROFILE_MAX ? power_profile_names[p] : NULL;
}

int power_profile_from_name(const char *name)
{
        for (int i = 0; name && i < _POWER_PROFILE_MAX; i++)
                if (streq(name, power_profile_names[i]))
                        return i;
        return -1;
}

void daemon_conf_clear(DaemonConf *c)
{
        assert(c);

        free(c->default_profile);
        for (size_t i = 0; i < _POWER_PROFILE_MAX; i++)
                free(c->power_profiles[i]);
        *c = (DaemonConf){};
}

DaemonConf daemon_conf_defaults(void)
{
        DaemonConf d = {
            .default_profile = xstrdup("desktop"), .uevents = UEVENT_AUTO, .serve_power_profiles = true};

        for (size_t i = 0; i < _POWER_PROFILE_MAX; i++)
                d.power_profiles[i] = xstrdup(power_profile_defaults[i]);
        return d;
}

static void append(char **errors, char *e)
{
        char *n = xasprintf("%s%s%s", strempty(*errors), *errors ? "\n" : "", e);
        free(*errors);
        free(e);
        *errors = n;
}

int daemon_conf_load(char *const *search_path, DaemonConf *ret, char **ret_error)
{
        _cleanup_conf_ Conf *c = NULL;
        int r;

        assert(ret);

        r = conf_load_layered(search_path, "rtctl.conf", &c, ret_error);
        if (r == -ENOENT) {
                *ret = daemon_conf_defaults();
                return 0;
        }
        if (r < 0)
                return r;
        return daemon_conf_parse(c, ret, ret_error);
}

int daemon_conf_parse(Conf *c, DaemonConf *ret, char **ret_error)
{
        _cleanup_free_ char *errors = NULL;
        DaemonConf d = daemon_conf_defaults();
        ConfSection *s;
        ConfKey *k;

        assert(c);

        s = conf_section(c, "Daemon");
        if ((k = conf_key(s, "DefaultProfile"))) {
                if (!profile_name_valid(k->value))
                        append(&errors, conf_key_error(k, "not a profile name"));
                else {
                        free(d.default_profile);
                        d.default_profile = xstrdup(k->value);
                }
        }
        if ((k = conf_key(s, "OnStop"))) {
                if (streq(k->value, "restore") || streq(k->value, "keep"))
                        d.keep_on_stop = streq(k->value, "keep");
                else
                        append(&errors, conf_key_error(k, "expected restore or keep"));
        }
        if ((k = conf_key(s, "OnConflict"))) {
                if (streq(k->value, "warn") || streq(k->value, "stop"))
                        d.stop_conflicts = streq(k->value, "stop");
                else
                        append(&errors, conf_key_error(k, "expected warn or stop"));
        }
        if ((k = conf_key(s, "Uevents"))) {
                if (streq(k->value, "auto"))
                        d.uevents = UEVENT_AUTO;
                else if (streq(k->value, "kernel"))
                        d.uevents = UEVENT_KERNEL;
                else if (streq(k->value, "udev"))
                        d.uevents = UEVENT_UDEV;
                else
                        append(&errors, conf_key_error(k, "expected auto, kernel or udev"));
        }
        s = conf_section(c, "PowerProfiles");
        if ((k = conf_key(s, "Serve"))) {
                if (streq(k->value, "yes") || streq(k->value, "no"))
                        d.serve_power_profiles = streq(k->value, "yes");
                else
                        append(&errors, conf_key_error(k, "expected yes or no"));
        }
        for (size_t i = 0; i < _POWER_PROFILE_MAX; i++) {
                if (!(k = conf_key(s, power_profile_keys[i])))
                        continue;
                if (!profile_name_valid(k->value)) {
                        append(&errors, conf_key_error(k, "not a profile name"));
                        continue;
                }
                free(d.power_profiles[i]);
                d.power_profiles[i] = xstrdup(k->value);
        }
        /* The slider shows the profile in force by these names: one rtctl profile each. */
        for (size_t i = 0; i < _POWER_PROFILE_MAX; i++)
                for (size_t j = i + 1; j < _POWER_PROFILE_MAX; j++)
                        if (streq(d.power_profiles[i], d.power_profiles[j]) &&
                            (k = conf_key(s, power_profile_keys[j])))
                                append(&errors,
                                       conf_key_error(k, "the same profile as another power profile's"));
        for (size_t i = 0; i < c->n_sections; i++) {
                ConfSection *sec = &c->sections[i];
                if (!streq(sec->name, "Daemon") && !streq(sec->name, "PowerProfiles")) {
                        append(&errors, conf_section_error(sec, "unknown section"));
                        continue;
                }
                for (size_t j = 0; j < sec->n_keys; j++)
                        if (!sec->keys[j].used)
                                append(&errors,
                                       conf_key_error(&sec->keys[j], "unknown key in [%s]", sec->name));
        }
        if (errors) {
                daemon_conf_clear(&d);
                *ret_error = TAKE_PTR(errors);
                return -EINVAL;
        }
        *ret = d;
        return 0;
}

static char *dir_from_env(const char *variable, const char *fallback)
{
        const char *e = getenv(variable);

        /* systemd sets a colon-separated list when a unit names several directories: not ours. */
        return xstrdup(!isempty(e) && !strchr(e, ':') ? e : fallback);
}

char *rtctl_runtime_dir(void)
{
        return dir_from_env("RUNTIME_DIRECTORY", RTCTL_DEFAULT_RUNTIME_DIR);
}

char *rtctl_state_dir(void)
{
        return dir_from_env("STATE_DIRECTORY", "/var/lib/rtctl");
}

char *rtctl_initial_profile(const char *state_dir, const char *default_profile)
{
        _cleanup_free_ char *path = xasprintf("%s/active-profile", state_dir), *s = NULL;

        if (read_full_file(path, &s, NULL) >= 0 && profile_name_valid(strstrip(s)))
                return xstrdup(strstrip(s));
        return xstrdup(default_profile);
}
