/* SPDX-License-Identifier: GPL-2.0-or-later */
/* rtctld's memory between passes: the heap handed back after each pass, the code pages a pass did not
 * run dropped after the first one, and again after a quiet spell that followed a burst. */
#include <inttypes.h>
#include <malloc.h>
#include <sys/mman.h>

#include "daemon/manager.h"
#include "shared/log.h"

/* A burst (CPUs coming and going, disks, a storm of processes, a resume) runs paths the first pass did
 * not: the hotplug path alone brought 88 kB of rtctld's code and 170 kB of glib's back (bench.py
 * storms), each fault with its 64 kB of neighbours, and they stayed for the daemon's life. So once no
 * pass has run for QUIET_RELEASE_USEC, the code is released again if what is resident of files grew by
 * QUIET_RELEASE_GROWTH or more since the last release. The cost: the next pass maps back what it
 * runs from the page cache, some tens of minor faults (microseconds each), once per quiet spell, and
 * one wake-up per burst; an idle daemon is not woken. */
#define QUIET_RELEASE_USEC   ((uint64_t)10 * 1000000)
#define QUIET_RELEASE_GROWTH 64 /* kB */

static uint64_t resident_file_pages(void)
{
        _cleanup_fclose_ FILE *f = fopen("/proc/self/statm", "re");
        uint64_t size, resident, shared;

        /* statm's third field: resident pages backed by a file (RssFile + RssShmem) */
        if (!f || fscanf(f, "%" SCNu64 " %" SCNu64 " %" SCNu64, &size, &resident, &shared) != 3)
                return 0;
        return shared;
}

static int on_quiet(sd_event_source *s, uint64_t usec, void *userdata)
{
        Manager *m = userdata;
        uint64_t now = resident_file_pages(), page_kb = (uint64_t)sysconf(_SC_PAGESIZE) / 1024;

        if (now > m->file_pages_released &&
            (now - m->file_pages_released) * page_kb >= QUIET_RELEASE_GROWTH) {
                release_code_pages();
                malloc_trim(0);
                m->file_pages_released = resident_file_pages();
                log_debug("Quiet for %" PRIu64 " s: code released again, resident file pages %" PRIu64
                          " -> %" PRIu64,
                          QUIET_RELEASE_USEC / 1000000, now, m->file_pages_released);
        }
        return 0;
}

/* Pushed back by every pass: it fires only after a pass that none followed for QUIET_RELEASE_USEC. */
static void arm_quiet_release(Manager *m)
{
        if (!m->quiet_source) {
                int r = sd_event_add_time_relative(m->event, &m->quiet_source, CLOCK_MONOTONIC,
                                                   QUIET_RELEASE_USEC, 1000000, on_quiet, m);
                if (r < 0) {
                        log_debug_errno(r, "Failed to arm the quiet release timer: %m, ignoring");
                        return;
                }
        } else
                (void)sd_event_source_set_time_relative(m->quiet_source, QUIET_RELEASE_USEC);
        (void)sd_event_source_set_enabled(m->quiet_source, SD_EVENT_ONESHOT);
}

/* The kernel maps a file's cached pages around each one a process faults in (fault-around, 64 kB), so
 * every library function rtctld called once brought 16 pages of code with it, nearly all never run: glib
 * alone was 764 kB of rtctld's PSS on a machine where nothing else maps it. After the first pass each
 * executable mapping's pages are dropped (MADV_DONTNEED: a clean page of a file's code is only unmapped,
 * and mapped again from the page cache at its next use), so what comes back is the code rtctld runs, each
 * fault with its cached neighbours: MADV_RANDOM does not stop fault-around (should_fault_around() in
 * mm/memory.c looks only at the mapping's map_pages and userfaultfd; 64 kB per touch on 6.18, measured);
 * it stops readahead, so a page read from disk comes alone. Only r-x mappings of files with no page of
 * their own (Anonymous: 0 in smaps): a mapping with one was written (text relocations, a debugger's
 * breakpoint, a uprobe), and dropping it would lose that; a library's read-only data may hold
 * relocations, so it is left too. */
static void release_mapping(unsigned long start, unsigned long end)
{
        (void)madvise((void *)start, end - start, MADV_RANDOM);
        (void)madvise((void *)start, end - start, MADV_DONTNEED);
}

void release_code_pages(void)
{
        _cleanup_fclose_ FILE *f = fopen("/proc/self/smaps", "re");
        unsigned long start = 0, end = 0, anon;
        bool code = false;
        char line[4096];

        while (f && fgets(line, sizeof line, f)) {
                unsigned long s, e;
                char perms[8];
                int path = 0;

                if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &s, &e, perms, &path) == 3) {
                        code = path > 0 && line[path] == '/' && streq(perms, "r-xp");
                        start = s;
                        end = e;
                } else if (code && sscanf(line, "Anonymous: %lu", &anon) == 1) {
                        if (anon == 0)
                                release_mapping(start, end);
                        code = false;
                }
        }
}

void manager_release_memory_after_pass(Manager *m)
{
        /* A pass reads every task, IRQ and CPU into short-lived memory; freed, glibc keeps its pages in
         * the heap's holes. Handing them back keeps a daemon that runs for months at the size it has
         * between passes, not at the peak of its largest one. */
        malloc_trim(0);
        if (!m->code_pages_released) {
                /* Once the first pass ran every path a pass takes, the code it did not run leaves. */
                release_code_pages();
                m->code_pages_released = true;
                m->file_pages_released = resident_file_pages();
        }
        arm_quiet_release(m);
}
