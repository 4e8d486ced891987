/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Whom `rtctl xruns` works for. It runs as root for tracefs, usually under sudo; what it runs for the
 * user (the COMMAND after "--", and the connection to their audio server, xruns-server.c) runs as that
 * user, as `sudo -u` would run it, so that root neither runs what a user names nor parses what a user's
 * server sends. */
#include <pwd.h>
#include <unistd.h>

#include "cli/xruns.h"
#include "shared/privileges.h"
#include "shared/util.h"

/* What the COMMAND keeps of rtctl's environment (and the LC_ ones): the terminal, the locale, and which
 * audio server the user meant, as rtctl follows it. */
static const char *const kept_env[] = {
    "TERM", "LANG", "LANGUAGE", "TZ", "JACK_DEFAULT_SERVER", "PIPEWIRE_REMOTE", "PIPEWIRE_RUNTIME_DIR",
};

#define SAFE_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

int xruns_user_find(XrunsUser *ret, char **ret_error)
{
        const char *e, *name = getenv("SUDO_USER");
        struct passwd *pw;
        unsigned uid, gid;

        assert(ret);
        assert(ret_error);

        *ret = (XrunsUser){};
        /* SUDO_UID counts only where sudo could have set it, in a process whose real user is root; a setuid
         * rtctl works for its real user, whatever the environment says. */
        if (getuid() != 0)
                uid = getuid();
        else if ((e = getenv("SUDO_UID")) && !streq(e, "0")) {
                if (safe_atou(e, &uid) < 0 || uid == (unsigned)-1) {
                        *ret_error = xasprintf("SUDO_UID=%s is not a user ID", e);
                        return -EINVAL;
                }
        } else
                return 0;
        /* The name sudo gave, when it is this uid's (one uid can have several names), else the first. */
        pw = name ? getpwnam(name) : NULL;
        if (!pw || pw->pw_uid != uid)
                pw = getpwuid(uid);
        if (!pw) {
                *ret_error = xasprintf("user %u, who ran sudo, has no passwd entry: rtctl xruns runs the "
                                       "command and the server's connection as them, with their groups",
                                       uid);
                return -ESRCH;
        }
        gid = pw->pw_gid;
        if (getuid() != 0)
                gid = getgid();
        else if ((e = getenv("SUDO_GID")) && safe_atou(e, &gid) < 0) {
                *ret_error = xasprintf("SUDO_GID=%s is not a group ID", e);
                return -EINVAL;
        }
        *ret = (XrunsUser){.uid = uid,
                           .gid = gid,
                           .name = xstrdup(pw->pw_name),
                           .home = xstrdup(pw->pw_dir),
                           .shell = xstrdup(pw->pw_shell)};
        return 1;
}

void xruns_user_clear(XrunsUser *u)
{
        assert(u);

        free(u->name);
        free(u->home);
        free(u->shell);
        *u = (XrunsUser){};
}

static bool env_kept(const char *entry)
{
        if (startswith(entry, "LC_"))
                return true;
        for (size_t i = 0; i < ELEMENTSOF(kept_env); i++) {
                size_t n = strlen(kept_env[i]);
                if (strneq(entry, kept_env[i], n) && entry[n] == '=')
                        return true;
        }
        return false;
}

/* Only what kept_env names stays; the copies are the child's until it execs. */
static void env_clean(void)
{
        char **keep = NULL;

        for (char **e = environ; e && *e; e++)
                if (env_kept(*e))
                        strv_push(&keep, xstrdup(*e));
        clearenv();
        for (char **e = keep; e && *e; e++)
                (void)putenv(*e);
        free(keep);
        (void)setenv("PATH", SAFE_PATH, 1);
}

int xruns_user_become(const XrunsUser *u, bool clean_env)
{
        _cleanup_free_ char *runtime = NULL;
        int r;

        assert(u);
        assert(u->name);

        r = privileges_drop(u->name, u->uid, u->gid);
        if (r < 0)
                return r;
        runtime = xasprintf("/run/user/%u", (unsigned)u->uid);
        if (clean_env) {
                env_clean();
                (void)setenv("XDG_RUNTIME_DIR", runtime, 1);
                /* What rtctl has open stays rtctl's (sudo passes nothing above stderr either). */
                (void)close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
        } else if (!getenv("PIPEWIRE_RUNTIME_DIR") && !getenv("XDG_RUNTIME_DIR"))
                /* sudo does not pass the user's runtime directory: their server is there. */
                (void)setenv("XDG_RUNTIME_DIR", runtime, 1);
        (void)setenv("HOME", u->home, 1);
        (void)setenv("USER", u->name, 1);
        (void)setenv("LOGNAME", u->name, 1);
        (void)setenv("SHELL", u->shell, 1);
        return 0;
}
