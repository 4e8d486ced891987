/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include "core/config.h"
#include "shared/util.h"

typedef enum UeventBackend {
        UEVENT_AUTO,
        UEVENT_KERNEL, /* NETLINK_KOBJECT_UEVENT through libnl: where no udevd runs */
        UEVENT_UDEV,   /* sd-device-monitor: after udev's rules ran */
} UeventBackend;

/* power-profiles-daemon's three profiles, as the desktop's power slider names them. */
typedef enum PowerProfile {
        POWER_PROFILE_SAVER,
        POWER_PROFILE_BALANCED,
        POWER_PROFILE_PERFORMANCE,
        _POWER_PROFILE_MAX,
} PowerProfile;

/* "power-saver", "balanced", "performance" */
const char *power_profile_name(PowerProfile p);
/* -1 for any other name. */
int power_profile_from_name(const char *name);

/* The daemon's own settings: rtctl.conf in the configuration directories, rtctl.conf.d/ drop-ins. The
 * CLI reads them too (DefaultProfile=, when it restores or plans without the daemon). */
typedef struct DaemonConf {
        char *default_profile;
        bool keep_on_stop; /* OnStop=keep: leave the tuning in place when the daemon stops */
        UeventBackend uevents;
        /* OnConflict=stop: stop services that fight over the same knobs (irqbalance) while rtctl holds
         * them, start them again on restore. Default warn: report them only. */
        bool stop_conflicts;
        /* [PowerProfiles]: serve power-profiles-daemon's D-Bus API while it does not run (Serve=), and
         * the rtctl profile behind each of its profiles. */
        bool serve_power_profiles;
        char *power_profiles[_POWER_PROFILE_MAX];
} DaemonConf;

void daemon_conf_clear(DaemonConf *c);
/* What holds where rtctl.conf says nothing, or says something invalid. */
DaemonConf daemon_conf_defaults(void);
/* Defaults when no file exists; -EINVAL with one "file:line: Key=value: why" line per problem. */
int daemon_conf_load(char *const *search_path, DaemonConf *ret, char **ret_error);
/* The same from a parsed rtctl.conf (with its drop-ins merged). */
int daemon_conf_parse(Conf *c, DaemonConf *ret, char **ret_error);

/* Where rtctld keeps its journal ($RUNTIME_DIRECTORY, set by systemd's RuntimeDirectory=, else
 * /run/rtctl) and the profile it remembers ($STATE_DIRECTORY, else /var/lib/rtctl): both binaries find
 * them the same way. */
char *rtctl_runtime_dir(void);
char *rtctl_state_dir(void);
/* The profile rtctld starts with: the one it remembers in state_dir, else default_profile. */
char *rtctl_initial_profile(const char *state_dir, const char *default_profile);
