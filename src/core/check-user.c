/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The judged user's session: real-time priority and locked memory as pam_limits hands them out at
 * login (and as this process has them, when it is that user's), the audio group, /dev/cpu_dma_latency,
 * and a real SCHED_FIFO attempt as that user. Run in rtctl, not rtctld: only a process of the user (or
 * root, which can become them) can try. */
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <systemd/sd-login.h>

#include "core/check-internal.h"
#include "shared/privileges.h"
#include "shared/sysfs.h"

/* rtcqs tries priority 80; JACK's and PipeWire's real-time threads ask for 70 to 95. */
#define RTPRIO_WANTED 80
/* JACK and PipeWire lock their buffers; below this a large session fails to lock them. */
#define MEMLOCK_WANTED (256ULL << 20)

static uid_t active_session_uid(void)
{
        uid_t uid = 0;
        uid_t *uids = NULL;
        int n;

        if (sd_seat_get_active("seat0", NULL, &uid) >= 0 && uid != 0)
                return uid;
        n = sd_get_uids(&uids);
        uid = 0;
        for (int i = 0; i < n && !uid; i++) {
                _cleanup_free_ char *state = NULL;
                if (uids[i] != 0 && sd_uid_get_state(uids[i], &state) >= 0 && streq(state, "active"))
                        uid = uids[i];
        }
        free(uids);
        return uid;
}

int audit_user_pick(const char *name, AuditUser *ret)
{
        struct passwd *pw;
        const char *why;

        if (name) {
                pw = getpwnam(name);
                why = "--user";
        } else if (getuid() != 0) {
                pw = getpwuid(getuid());
                why = "the caller";
        } else {
                uid_t uid = active_session_uid();
                pw = uid ? getpwuid(uid) : NULL;
                why = "the active session's user";
                if (!pw) { /* none, or a session user without a passwd entry */
                        pw = getpwuid(0);
                        why = "the caller: no other user has an active session";
                }
        }
        if (!pw)
                return -ESRCH;
        *ret = (AuditUser){.uid = pw->pw_uid,
                           .gid = pw->pw_gid,
                           .name = xstrdup(pw->pw_name),
                           .why = why,
                           .self = pw->pw_uid == geteuid()};
        return 0;
}

void audit_user_clear(AuditUser *u)
{
        assert(u);

        free(u->name);
        *u = (AuditUser){};
}

static char **user_groups(const AuditUser *u)
{
        gid_t gids[256];
        int n = ELEMENTSOF(gids);
        char **names = NULL;

        if (getgrouplist(u->name, u->gid, gids, &n) < 0)
                n = 0;
        for (int i = 0; i < n; i++) {
                struct group *g = getgrgid(gids[i]);
                if (g)
                        strv_push(&names, xstrdup(g->gr_name));
        }
        return names;
}

static int parse_limit(const char *s, unsigned long long *ret)
{
        char *end;

        if (streq(s, "unlimited") || streq(s, "infinity") || streq(s, "-1")) {
                *ret = RLIM_INFINITY;
                return 0;
        }
        errno = 0;
        *ret = strtoull(s, &end, 10);
        return errno || end == s || *end ? -EINVAL : 0;
}

/* 3 for the user's own line, 2 for a group's, 1 for "*", 0 when it does not apply. */
static int domain_rank(const char *domain, const char *user, char *const *groups)
{
        if (streq(domain, user))
                return 3;
        if (streq(user, "root")) /* pam_limits applies no group or wildcard line to root */
                return 0;
        if (domain[0] == '@' && strv_contains(groups, domain + 1))
                return 2;
        if (streq(domain, "*"))
                return 1;
        return 0;
}

static int sort_names(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static char **limits_files(void)
{
        _cleanup_closedir_ DIR *d = sys_opendir("/etc/security/limits.d");
        char **files = NULL;
        struct dirent *de;
        size_t n;

        strv_push(&files, xstrdup("/etc/security/limits.conf"));
        while (d && (de = readdir(d)))
                if (de->d_name[0] != '.' && endswith(de->d_name, ".conf"))
                        strv_push(&files, xasprintf("/etc/security/limits.d/%s", de->d_name));
        n = strv_length(files);
        if (n > 2)
                qsort(files + 1, n - 1, sizeof(char *), sort_names);
        return files;
}

int audit_pam_limit(const char *user, char *const *groups, const char *item, unsigned long long *ret_soft,
                    char **ret_where)
{
        _cleanup_strv_free_ char **files = limits_files();
        int best = 0;

        for (size_t i = 0; files[i]; i++) {
                _cleanup_free_ char *text = NULL;
                _cleanup_strv_free_ char **lines = NULL;

                if (sys_read(files[i], &text) < 0)
                        continue;
                lines = strv_split(text, "\n");
                for (size_t l = 0; lines && lines[l]; l++) {
                        _cleanup_strv_free_ char **f = NULL;
                        unsigned long long v;
                        int rank;
                        char *hash = strchr(lines[l], '#');

                        if (hash)
                                *hash = 0;
                        f = strv_split(lines[l], " \t");
                        if (strv_length(f) < 4 || !streq(f[2], item) || streq(f[1], "hard"))
                                continue;
                        rank = domain_rank(f[0], user, groups);
                        if (rank == 0 || rank < best || parse_limit(f[3], &v) < 0)
                                continue;
                        best = rank;
                        *ret_soft = v;
                        if (ret_where) {
                                free(*ret_where);
                                *ret_where = xasprintf("%s:%zu", files[i], l + 1);
                        }
                }
        }
        return best ? 0 : -ENOENT;
}

static char *format_limit(unsigned long long v, bool bytes)
{
        if (v == RLIM_INFINITY)
                return xstrdup("unlimited");
        if (bytes)
                return xasprintf("%llu KiB", v >> 10);
        return xasprintf("%llu", v);
}

/* The limit's value the user's session gets: this process's own when it is theirs, else what pam_limits
 * gives at login. Returns its source. */
static const char *user_limit(const AuditUser *u, char *const *groups, const char *item, int resource,
                              bool kib, unsigned long long *ret, char **ret_where)
{
        struct rlimit rl;

        if (u->self && getrlimit(resource, &rl) >= 0) {
                *ret = rl.rlim_cur;
                return "this session";
        }
        if (audit_pam_limit(u->name, groups, item, ret, ret_where) >= 0) {
                if (kib && *ret != RLIM_INFINITY)
                        *ret <<= 10;
                return "pam_limits";
        }
        /* Nothing in limits.conf: the kernel's default, which systemd sets to 0 and 8 MiB. */
        *ret = kib ? 8ULL << 20 : 0;
        return "the default (no pam_limits line)";
}

static void check_limits(const AuditUser *u, char *const *groups, Audit *a, unsigned long long *ret_rtprio)
{
        _cleanup_free_ char *where = NULL, *where_mem = NULL, *mem_s = NULL;
        unsigned long long rtprio, memlock;
        const char *src, *src_mem;

        src = user_limit(u, groups, "rtprio", RLIMIT_RTPRIO, false, &rtprio, &where);
        *ret_rtprio = rtprio;
        if (rtprio != RLIM_INFINITY && rtprio < RTPRIO_WANTED)
                audit_add(a, "rtprio-limit", "warn",
                          xasprintf("%s may use real-time priorities up to %llu (%s%s%s): an audio server "
                                    "asks for %d and more, or falls back to rtkit's %d",
                                    u->name, rtprio, src, where ? ", " : "", where ? where : "",
                                    RTPRIO_WANTED, RTKIT_CEILING),
                          xstrdup("@audio - rtprio 95 in /etc/security/limits.d/95-audio.conf, the user in "
                                  "the audio group, then log in again"));
        else
                audit_add(a, "rtprio-limit", "ok",
                          xasprintf("%s may use real-time priorities up to %llu (%s%s%s)", u->name, rtprio,
                                    src, where ? ", " : "", where ? where : ""),
                          NULL);

        src_mem = user_limit(u, groups, "memlock", RLIMIT_MEMLOCK, true, &memlock, &where_mem);
        mem_s = format_limit(memlock, true);
        if (memlock != RLIM_INFINITY && memlock < MEMLOCK_WANTED)
                audit_add(a, "memlock-limit", "warn",
                          xasprintf("%s may lock %s of memory (%s%s%s): an audio server cannot keep a large "
                                    "session's buffers from being paged out",
                                    u->name, mem_s, src_mem, where_mem ? ", " : "",
                                    where_mem ? where_mem : ""),
                          xstrdup("@audio - memlock unlimited in /etc/security/limits.d/95-audio.conf, then "
                                  "log in again"));
        else
                audit_add(a, "memlock-limit", "ok",
                          xasprintf("%s may lock %s of memory (%s%s%s)", u->name, mem_s, src_mem,
                                    where_mem ? ", " : "", where_mem ? where_mem : ""),
                          NULL);
}

static void check_group(const AuditUser *u, char *const *groups, Audit *a)
{
        const char *group = getgrnam("audio") ? "audio" : getgrnam("realtime") ? "realtime" : NULL;

        if (!group)
                audit_add(a, "audio-group", "info", xstrdup("this system has no audio or realtime group"),
                          NULL);
        else if (strv_contains(groups, "audio") || strv_contains(groups, "realtime"))
                audit_add(a, "audio-group", "ok", xasprintf("%s is in the %s group", u->name, group), NULL);
        else
                audit_add(a, "audio-group", "warn",
                          xasprintf("%s is not in the %s group, which is where limits.d usually grants "
                                    "real-time priority and locked memory",
                                    u->name, group),
                          xasprintf("usermod -aG %s %s, then log in again", group, u->name));
}

/* try_fifo()'s answers when the child never got to try. */
enum {
        TRY_NO_LIMIT = 200, /* raising RLIMIT_RTPRIO to the login's needs CAP_SYS_RESOURCE */
        TRY_NO_USER,
};

/* A child becomes the user (with the rtprio limit their login gets, when we are root judging someone
 * else) and asks for SCHED_FIFO: whatever stands in the way (limits, a cgroup without real-time budget,
 * a security module) answers with the errno. SCHED_RESET_ON_FORK: nothing it starts inherits it. */
static int try_fifo(const AuditUser *u, unsigned long long rtprio)
{
        int status;
        pid_t pid = fork();

        if (pid < 0)
                return -errno;
        if (pid == 0) {
                struct sched_param p = {.sched_priority = RTPRIO_WANTED};
                if (!u->self) {
                        struct rlimit rl = {.rlim_cur = rtprio, .rlim_max = rtprio};
                        if (setrlimit(RLIMIT_RTPRIO, &rl) < 0)
                                _exit(TRY_NO_LIMIT);
                        if (privileges_drop(u->name, u->uid, u->gid) < 0)
                                _exit(TRY_NO_USER);
                }
                _exit(sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &p) < 0 ? errno & 0x7f : 0);
        }
        if (waitpid(pid, &status, 0) < 0)
                return -errno;
        if (!WIFEXITED(status))
                return -ECHILD;
        if (WEXITSTATUS(status) >= TRY_NO_LIMIT)
                return WEXITSTATUS(status);
        return -WEXITSTATUS(status);
}

static void check_fifo(const AuditUser *u, unsigned long long rtprio, Audit *a)
{
        int r;

        if (!u->self && geteuid() != 0) {
                audit_add(a, "sched-fifo", "info", xasprintf("not tried: only root can try as %s", u->name),
                          xasprintf("run rtctl check as %s, or as root with --user %s", u->name, u->name));
                return;
        }
        r = try_fifo(u, rtprio);
        if (r == 0)
                audit_add(a, "sched-fifo", "ok",
                          xasprintf("%s got SCHED_FIFO priority %d%s", u->name, RTPRIO_WANTED,
                                    u->self ? "" : " (with the rtprio limit of their login)"),
                          NULL);
        else if (r == TRY_NO_LIMIT)
                audit_add(
                    a, "sched-fifo", "info",
                    xasprintf("not tried: could not give the child %s's rtprio limit (%llu) to try with "
                              "(no CAP_SYS_RESOURCE here)",
                              u->name, rtprio),
                    xasprintf("run rtctl check as %s", u->name));
        else if (r == TRY_NO_USER || r == -ECHILD)
                audit_add(a, "sched-fifo", "info", xasprintf("not tried: could not become %s", u->name),
                          NULL);
        else
                audit_add(a, "sched-fifo", "warn",
                          xasprintf("%s could not get SCHED_FIFO priority %d: %s%s", u->name, RTPRIO_WANTED,
                                    strerror(-r),
                                    r == -EPERM ? " (the rtprio limit, or a cgroup without real-time budget)"
                                                : ""),
                          xstrdup("@audio - rtprio 95 in /etc/security/limits.d/95-audio.conf, the user in "
                                  "the audio group, then log in again"));
}

static bool may_write(const AuditUser *u, const char *path)
{
        _cleanup_free_ char *full = sys_path(path);
        gid_t gids[256];
        int n = ELEMENTSOF(gids);
        struct stat st;

        if (u->self)
                return sys_access(path, W_OK) >= 0;
        if (stat(full, &st) < 0)
                return false;
        if (u->uid == 0 || (st.st_uid == u->uid && (st.st_mode & S_IWUSR)) || (st.st_mode & S_IWOTH))
                return true;
        if (!(st.st_mode & S_IWGRP) || getgrouplist(u->name, u->gid, gids, &n) < 0)
                return false;
        for (int i = 0; i < n; i++)
                if (gids[i] == st.st_gid)
                        return true;
        return false;
}

static void check_dma_latency(const AuditUser *u, Audit *a)
{
        if (!sys_exists("/dev/cpu_dma_latency"))
                audit_add(a, "cpu-dma-latency", "info", xstrdup("no /dev/cpu_dma_latency"), NULL);
        else if (may_write(u, "/dev/cpu_dma_latency"))
                audit_add(a, "cpu-dma-latency", "ok",
                          xasprintf("%s may write /dev/cpu_dma_latency (a DAW can keep CPUs out of deep "
                                    "C-states while it plays)",
                                    u->name),
                          NULL);
        else
                audit_add(a, "cpu-dma-latency", "info",
                          xasprintf("%s may not write /dev/cpu_dma_latency; a DAW that asks for it gets no "
                                    "C-state limit, but rtctld holds one itself for a profile with "
                                    "[Power] GlobalMaxExitLatencyUs=",
                                    u->name),
                          xstrdup("GlobalMaxExitLatencyUs= in the profile's [Power] section (rtctld holds "
                                  "the request), "
                                  "or a udev rule giving the audio group write access"));
}

void audit_user_checks(const AuditUser *u, Audit *a)
{
        assert(u);

        _cleanup_strv_free_ char **groups = user_groups(u);
        unsigned long long rtprio;

        /* Root by default says nothing about the desktop user; root asked for by name is a choice. */
        if (u->uid == 0 && !streq(u->why, "--user"))
                audit_add(a, "user", "warn",
                          xasprintf("judged root (%s): root's limits say nothing about the desktop user's",
                                    u->why),
                          xstrdup("run rtctl check as the desktop user, or with --user NAME"));
        else
                audit_add(a, "user", "info", xasprintf("judged %s (uid %u, %s)", u->name, u->uid, u->why),
                          NULL);
        /* Root's real-time priority comes from CAP_SYS_NICE, not from limits or groups. */
        rtprio = RLIM_INFINITY;
        if (u->uid != 0) {
                check_group(u, groups, a);
                check_limits(u, groups, a, &rtprio);
        }
        check_fifo(u, rtprio, a);
        check_dma_latency(u, a);
}
