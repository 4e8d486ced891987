/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Puts back what a killed `rtctl xruns` left in tracefs (its instance, a tracefs mount), from its journal
 * (XRUNS_TRACE_JOURNAL in the runtime directory), unless a run in progress holds it: `rtctl restore`
 * calls it. 0: nothing was left; 1: put back (said on stderr); < 0 with a sentence. */
int xruns_put_back_leftovers(char **ret_error);

/* The user rtctl xruns works for (xruns-user.c). */
typedef struct XrunsUser {
        uid_t uid;
        gid_t gid;
        char *name, *home, *shell;
} XrunsUser;
/* 1 and the user who ran sudo (SUDO_UID, trusted only when the real user is root; or the real user of a
 * setuid rtctl), from their passwd entry; 0 when rtctl runs for whoever started it (root's own shell);
 * < 0 with a sentence. */
int xruns_user_find(XrunsUser *ret, char **ret_error);
void xruns_user_clear(XrunsUser *u);
/* In a child of root's: becomes u for good (privileges_drop()), with HOME, USER, LOGNAME and SHELL from
 * their passwd entry and XDG_RUNTIME_DIR their /run/user/UID. clean_env (for a command, to exec): the
 * environment `sudo -u` gives (a safe PATH, TERM, the locale, the audio server's name) and no descriptor
 * above stderr; else the rest of the environment kept (what names the server). -errno. */
int xruns_user_become(const XrunsUser *u, bool clean_env);

/* The audio server's side (xruns-server.c): a child process that connects to the server, as the user
 * under sudo, and passes back only fixed-size records, each checked here. */
typedef struct XrunsServer {
        pid_t pid;
        int fd;
        const char *kind; /* "pipewire", "jack2" or "pipewire-jack" */
        unsigned rate, frames;
        uint64_t last_ns;
} XrunsServer;
#define XRUNS_SERVER_NULL ((XrunsServer){.fd = -EBADF})
/* server: "auto" (PipeWire's profiler when a PipeWire answers, else JACK), "pipewire" or "jack"; user:
 * whom the child runs as (NULL: as rtctl). Once the child said it follows the server: 0, with kind, rate
 * and frames set. < 0: *ret_error says why, or is NULL when the child said it on stderr. */
int xruns_server_start(XrunsServer *s, const char *server, const XrunsUser *user, char **ret_error);
/* 1 and an xrun's time (ns of CLOCK_MONOTONIC), 0 when none is waiting, -EPIPE once the server (or the
 * child) is gone. */
int xruns_server_next(XrunsServer *s, uint64_t *ret_at);
void xruns_server_stop(XrunsServer *s);

/* The PipeWire source (xruns-pipewire.c): PipeWire's profiler, read in a thread of libpipewire's that
 * calls tell with each xrun's time (ns of CLOCK_MONOTONIC: the deadline the cycle missed). */
typedef struct PwSource PwSource;
int pw_source_open(void (*tell)(uint64_t at_ns), PwSource **ret, char **ret_error);
/* The graph's rate and quantum as the profiler last told them, 0 before it did. */
void pw_source_params(PwSource *s, unsigned *ret_rate, unsigned *ret_frames);
void pw_source_close(PwSource *s);
