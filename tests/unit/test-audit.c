/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The audit of `rtctl check` and Check(), on a fixture workstation whose /proc gets the threads of an
 * audio server and of IRQs: the priority inversion between them. The real kernel's side (a real
 * SCHED_FIFO thread) is in tests/integration/test_check.py. */
#include <sched.h>
#include <stdlib.h>

#include "core/audit.h"
#include "core/tasks.h"
#include "shared/sysfs.h"
#include "test.h"

static char *fixture_copy(const char *shape)
{
        const char *dir = getenv("RTCTL_FIXTURES");
        _cleanup_free_ char *src = xasprintf("%s/%s", dir ? dir : "tests/unit/fixtures", shape);
        char *dst = xasprintf("%s/%s", test_tmpdir(), shape);
        _cleanup_free_ char *cmd = xasprintf("rm -rf '%s' && cp -a '%s' '%s'", dst, src, dst);

        CHECK_INTEQ(system(cmd), 0);
        return dst;
}

/* A /proc/PID/stat line as the kernel writes it, fields 1 to 52. */
static char *stat_line(unsigned tid, const char *comm, unsigned flags, unsigned rt_priority, unsigned policy)
{
        return xasprintf(
            "%u (%s) S 2 0 0 0 -1 %u 0 0 0 0 0 0 0 0 %d 0 1 0 100 0 0 18446744073709551615 0 0 0 0 "
            "0 0 0 2147483647 0 0 0 0 17 1 %u %u 0 0 0 0 0 0 0 0 0 0 0\n",
            tid, comm, flags, policy ? -1 - (int)rt_priority : 20, rt_priority, policy);
}

/* A thread of process pid (its first thread is the process itself). */
static void thread(const char *root, unsigned pid, unsigned tid, const char *comm, unsigned flags,
                   unsigned rt_priority, unsigned policy)
{
        _cleanup_free_ char *line = stat_line(tid, comm, flags, rt_priority, policy);
        _cleanup_free_ char *rel = xasprintf("proc/%u/task/%u/stat", pid, tid);

        test_write(root, rel, line);
        if (pid == tid) {
                free(rel);
                rel = xasprintf("proc/%u/stat", pid);
                test_write(root, rel, line);
        }
}

#define KTHREAD (PF_KTHREAD | 0x8040u)

static const AuditFinding *inversion(Audit *a, const char *root)
{
        audit_clear(a);
        sysroot_set(root);
        audit_run(a);
        for (size_t i = 0; i < a->n; i++)
                if (streq(a->items[i].check, "inversion"))
                        return &a->items[i];
        return NULL;
}

TEST(parse)
{
        _cleanup_free_ char *line = stat_line(4242, "data-loop.0", 0x40, 88, SCHED_FIFO);
        ThreadSched t = {};

        CHECK_INTEQ(thread_sched_parse(line, &t), 0);
        CHECK_STREQ(t.comm, "data-loop.0");
        CHECK_INTEQ(t.policy, SCHED_FIFO);
        CHECK_INTEQ(t.rt_priority, 88);
        CHECK_INTEQ(t.flags, 0x40);
        /* A name with spaces and parentheses, as a process may choose. */
        free(line);
        line = stat_line(7, "a) (b", 0, 0, SCHED_OTHER);
        CHECK_INTEQ(thread_sched_parse(line, &t), 0);
        CHECK_STREQ(t.comm, "a) (b");
        CHECK_INTEQ(t.policy, SCHED_OTHER);
        CHECK(thread_sched_parse("1 (x) S 2 3", &t) < 0);
}

/* amd-workstation: IRQ 87 is the HDA card's (snd_hda_intel), IRQ 86 the xHCI controller that carries the
 * USB sound card (class audio), IRQ 78 another xHCI (class usb). */
TEST(inversion)
{
        _cleanup_free_ char *root = fixture_copy("amd-workstation");
        Audit a = {};
        const AuditFinding *f;

        f = inversion(&a, root);
        CHECK(f && streq(f->status, "info"));
        CHECK_CONTAINS(f ? f->detail : NULL, "neither");

        /* PipeWire's data loop at module-rt's default (88) above the kernel's default IRQ threads (50). */
        thread(root, 300, 300, "pipewire", 0x400100, 0, SCHED_OTHER);
        thread(root, 300, 301, "data-loop.0", 0x400040, 88, SCHED_FIFO);
        f = inversion(&a, root);
        CHECK(f && streq(f->status, "info"));
        CHECK_CONTAINS(f ? f->detail : NULL, "no audio IRQ thread");
        CHECK_CONTAINS(f ? f->detail : NULL, "data-loop.0 of pipewire (PID 300, fifo 88)");

        thread(root, 200, 200, "irq/87-snd_hda_", KTHREAD, 50, SCHED_FIFO);
        thread(root, 201, 201, "irq/86-xhci_hcd", KTHREAD, 90, SCHED_FIFO);
        thread(root, 202, 202, "irq/78-xhci_hcd", KTHREAD, 10, SCHED_FIFO); /* not audio: not compared */
        f = inversion(&a, root);
        CHECK(f && streq(f->status, "warn"));
        CHECK_CONTAINS(f ? f->detail : NULL, "data-loop.0 of pipewire (PID 300, fifo 88) is not below");
        CHECK_CONTAINS(f ? f->detail : NULL, "irq/87-snd_hda_ (fifo 50)");
        CHECK(audit_warns(&a));

        /* Equal is an inversion too: FIFO threads of one priority take turns, so the IRQ may wait. */
        thread(root, 200, 200, "irq/87-snd_hda_", KTHREAD, 88, SCHED_FIFO);
        f = inversion(&a, root);
        CHECK(f && streq(f->status, "warn"));

        /* Both audio IRQ threads above (rtctl's ThreadPriority=90): in order. The USB card's controller
         * counts by class, not by name. */
        thread(root, 200, 200, "irq/87-snd_hda_", KTHREAD, 90, SCHED_FIFO);
        thread(root, 201, 201, "irq/86-xhci_hcd", KTHREAD, 50, SCHED_FIFO);
        f = inversion(&a, root);
        CHECK(f && streq(f->status, "warn"));
        CHECK_CONTAINS(f ? f->detail : NULL, "irq/86-xhci_hcd (fifo 50)");
        thread(root, 201, 201, "irq/86-xhci_hcd", KTHREAD, 90, SCHED_FIFO);
        f = inversion(&a, root);
        CHECK(f && streq(f->status, "ok"));
        CHECK_CONTAINS(f ? f->detail : NULL,
                       "(fifo 90) is above the audio server's data-loop.0 of pipewire");

        /* jackd: every real-time thread of it counts, whatever its name. */
        thread(root, 400, 400, "jackd", 0x400100, 0, SCHED_OTHER);
        thread(root, 400, 402, "jackd", 0x400040, 95, SCHED_RR);
        f = inversion(&a, root);
        CHECK(f && streq(f->status, "warn"));
        CHECK_CONTAINS(f ? f->detail : NULL, "jackd of jackd (PID 400, rr 95)");

        /* A SCHED_OTHER thread named like PipeWire's is no real-time audio thread. */
        thread(root, 400, 402, "jackd", 0x400040, 0, SCHED_OTHER);
        thread(root, 300, 301, "data-loop.0", 0x400040, 0, SCHED_OTHER);
        f = inversion(&a, root);
        CHECK(f && streq(f->status, "info"));
        CHECK_CONTAINS(f ? f->detail : NULL, "no real-time audio server thread");
        audit_clear(&a);
}

TEST_MAIN(T(parse), T(inversion))
