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
        time_t age;

        if (lstat(path, &st) < 0)
                return false;
        /* Whatever it says, a marker serves one stop at most. */
        if (!S_ISREG(st.st_mode) || read_full_file(path, &text, NULL) < 0) {
                manager_handover_clear(m);
                log_warning("%s is not a readable file; restoring as on any stop.", path);
                return false;
        }
        manager_handover_clear(m);
        age = time(NULL) - st.st_mtime;
        if (safe_atou(strstrip(text), &pid) < 0 || pid != (unsigned)getpid()) {
                log_warning("Ignoring %s: it names PID \"%s\", not this daemon's (%u); restoring.", path,
                            strstrip(text), (unsigned)getpid());
                return false;
        }
        if (age < 0 || age > HANDOVER_MAX_AGE_SEC) {
                log_warning("Ignoring %s: written %llds ago, not just before this stop; restoring.", path,
                            (long long)age);
                return false;
        }
        log_info("Stopping for a handover to the next rtctld: the tuning stays, the journal keeps the "
                 "originals for it.");
        return true;
}
