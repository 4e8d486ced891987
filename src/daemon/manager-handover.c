/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The package upgrade's handover (rtctld(8), SIGNALS): just before it restarts the unit, the maintainer
 * script writes the running daemon's PID to RUNTIME_DIR/handover. That one SIGTERM then exits without
 * restoring and leaves the journal to the new daemon, which adopts it as after a crash and finds nothing
 * to change: the machine is never untuned in between. */
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "daemon/manager.h"
#include "shared/log.h"

/* The restart follows the marker within a second; an older marker is not that restart's (the script
 * failed in between), so a real stop restores as usual. */
#define HANDOVER_MAX_AGE_SEC 60
/* How far ahead of the clock a fresh marker's stamp may be. Since 6.13 tmpfs stamps a file with a
 * fine-grained time while time(2) reads the coarse one of the last tick, so a marker written a moment
 * ago can carry the next second; a clock stepped back in between is the other way to get here. */
#define HANDOVER_MAX_SKEW_SEC 5

static char *handover_path(const Manager *m)
{
        return xasprintf("%s/handover", m->runtime_dir);
}

void manager_handover_clear(Manager *m)
{
        assert(m);

        _cleanup_free_ char *path = handover_path(m);

        if (unlink(path) < 0 && errno != ENOENT)
                log_warning_errno(-errno, "Failed to remove %s: %m, ignoring", path);
}

bool manager_handover_requested(Manager *m)
{
        assert(m);

        _cleanup_free_ char *path = handover_path(m), *text = NULL;
        struct stat st;
        unsigned pid;
        struct timespec now;
        long long age;

        if (lstat(path, &st) < 0)
                return false;
        /* Whatever it says, a marker serves one stop at most. */
        if (!S_ISREG(st.st_mode) || read_full_file(path, &text, NULL) < 0) {
                manager_handover_clear(m);
                log_warning("%s is not a readable file; restoring as on any stop.", path);
                return false;
        }
        manager_handover_clear(m);
        /* CLOCK_REALTIME, not time(2): the same fine-grained clock the file system stamps with. */
        clock_gettime(CLOCK_REALTIME, &now);
        age = (long long)now.tv_sec - (long long)st.st_mtim.tv_sec;
        if (safe_atou(strstrip(text), &pid) < 0 || pid != (unsigned)getpid()) {
                log_warning("Ignoring %s: it names PID \"%s\", not this daemon's (%u); restoring.", path,
                            strstrip(text), (unsigned)getpid());
                return false;
        }
        if (age < -HANDOVER_MAX_SKEW_SEC || age > HANDOVER_MAX_AGE_SEC) {
                log_warning("Ignoring %s: written %llds %s, not just before this stop; restoring.", path,
                            age < 0 ? -age : age, age < 0 ? "in the future" : "ago");
                return false;
        }
        log_info("Stopping for a handover to the next rtctld: the tuning stays, the journal keeps the "
                 "originals for it.");
        return true;
}
