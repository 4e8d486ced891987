/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <errno.h>
#include <glib.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "core/irqs.h"
#include "core/journal.h"
#include "core/xruns.h"
#include "shared/cpuset.h"
#include "shared/util.h"

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

/* The clock the trace has (trace_clock mono), in ns. */
static inline uint64_t xruns_now_ns(void)
{
        return now_usec(CLOCK_MONOTONIC) * 1000ULL;
}

/* ---- the recording (xruns-record.c) --------------------------------------------------------------- */

typedef struct XrunsRecording {
        Journal *journal;
        char *inst;
        int fd;
        int lock;
} XrunsRecording;

/* Makes the instance for cpus (putting back what a killed run left first), opens its trace_pipe in
 * rec->fd. < 0 with a sentence. */
int xruns_recording_start(XrunsRecording *rec, const CpuSet *cpus, char **ret_error);
/* Puts tracefs back as it was and drops the lock; says so on stderr when it cannot. */
void xruns_recording_stop(XrunsRecording *rec);

/* ---- one xrun (xruns-analyse.c) -------------------------------------------------------------------- */

typedef struct XrunsContext {
        CpuSet *isolated; /* rtctld's isolated CPUs, NULL when unknown */
        IrqTable *irqs;
        unsigned period_us;
        long long rt_runtime_us; /* kernel.sched_rt_runtime_us at the start (-1: no throttling) */
        /* How far past an xrun's time its late cycle reaches: PipeWire's profiler dates an xrun by the
         * deadline the cycle missed, and what held the driver past it runs after that (one period);
         * jack2 tells an xrun once it happened (0). */
        uint64_t late_ns;
} XrunsContext;

/* SMIs a CPU took since the reading before: no time the kernel could see, so a note after the timed
 * causes, never a cause itself (a machine with periodic SMIs would else have every xrun "explained"). */
typedef struct XrunsSmiNote {
        unsigned cpu;
        uint32_t count;
        uint64_t since_us;
} XrunsSmiNote;

typedef struct XrunsFinding {
        uint64_t mono_ns;
        time_t wall;
        XrunCause *causes;
        size_t n_causes;
        XrunsSmiNote *notes;
        size_t n_notes;
        unsigned audio_work_us; /* the audio threads' longest stretch */
        unsigned window_us;     /* how far back from the xrun was looked */
        double audio_share;     /* of their CPUs the audio threads took in the last 10 periods */
        int audio_prio;
        size_t same_stall_as; /* 1-based: the xrun whose causes these are (xruns_same_stall()), 0 for none */
        uint64_t stall_ns;    /* when that xrun was */
} XrunsFinding;

typedef struct XrunsSmiCounter {
        unsigned cpu;
        bool read;     /* has a reading */
        uint32_t last; /* the latest reading, and when */
        uint64_t last_ns;
        uint64_t total; /* since the start */
} XrunsSmiCounter;

typedef struct XrunsSmis {
        XrunsSmiCounter *cpus;
        size_t n;
        int error; /* < 0: not counted, smi_missing_reason() says why */
} XrunsSmis;

/* What ran on cpus in the window_ns before the xrun at (and its late cycle after it), as f's causes,
 * costliest first. */
void xruns_analyse(XrunTrace *trace, const CpuSet *cpus, const XrunsContext *ctx, uint64_t window_ns,
                   uint64_t at, XrunsFinding *f);
/* f with no cause of its own, told soon after one that had some, takes that stall's causes. */
void xruns_same_stall(const GArray *findings, const XrunsContext *ctx, XrunsFinding *f);
/* The SMI counts at the start; read again after each xrun (with f: a note for each CPU that took any). */
void xruns_smis_start(XrunsSmis *s, const CpuSet *cpus);
void xruns_smis_read(XrunsSmis *s, XrunsFinding *f);
/* The exit latency idle state `state` of cpu declares, and its name. */
unsigned xruns_idle_latency_us(unsigned cpu, unsigned long long state, char **ret_name);

/* ---- what is told (xruns-report.c) ----------------------------------------------------------------- */

json_object *xruns_finding_json(const XrunsContext *ctx, const XrunsServer *s, const XrunsFinding *f,
                                size_t index);
void xruns_finding_print(const XrunsContext *ctx, const XrunsServer *s, const XrunsFinding *f, size_t index,
                         const char *cpus_list);
/* The end: xruns by their first cause, the SMIs and the events lost; as JSON (the findings with it) or
 * as a sentence. */
void xruns_summary(bool json, const XrunsContext *ctx, const XrunsServer *s, const GArray *findings,
                   const XrunsSmis *smis, const XrunTrace *trace, const char *cpus_list, unsigned window_ms,
                   uint64_t started);
