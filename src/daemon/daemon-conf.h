/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include "daemon/events.h"

/* The daemon's own settings: rtctl.conf in the configuration directories, rtctl.conf.d/ drop-ins. */
typedef struct DaemonConf {
        char *default_profile;
        bool keep_on_stop; /* OnStop=keep: leave the tuning in place when the daemon stops */
        UeventBackend uevents;
        /* OnConflict=stop: stop services that fight over the same knobs (irqbalance) while rtctl holds
         * them, start them again on restore. Default warn: report them only. */
        bool stop_conflicts;
} DaemonConf;

void daemon_conf_clear(DaemonConf *c);
/* Defaults when no file exists; -EINVAL with one "file:line: Key=value: why" line per problem. */
int daemon_conf_load(char *const *search_path, DaemonConf *ret, char **ret_error);
