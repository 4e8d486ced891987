/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The audit of `rtctl check` and Check(), on a fixture workstation whose /proc and /sys get what each
 * outcome needs: the kernel's build and boot, memory and filesystems, shared IRQ lines, pam_limits
 * files, processes, IRQs and workqueues against isolated CPUs, and the threads of an audio server and of
 * IRQs. The real kernel's side (a real SCHED_FIFO attempt as root and as nobody, a task put on an
 * isolated CPU) is in tests/integration/test_check.py. */
#include <sched.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <zlib.h>

#include "core/check.h"
#include "core/reconcile.h"
#include "core/tasks.h"
#include "shared/sysfs.h"
#include "test.h"

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

static const AuditFinding *finding_in(Audit *a, const char *root, const AuditOptions *o, const char *check)
{
        audit_clear(a);
        sysroot_set(root);
        audit_run(o, a);
        for (size_t i = 0; i < a->n; i++)
                if (streq(a->items[i].check, check))
                        return &a->items[i];
        return NULL;
}

static const AuditFinding *finding(Audit *a, const char *root, const char *check)
{
        return finding_in(a, root, &(AuditOptions){}, check);
}

static const AuditFinding *inversion(Audit *a, const char *root)
{
        return finding(a, root, "inversion");
}

/* The finding has status st and its field (detail or fix) holds text; a macro, for the caller's line. */
#define CHECK_FINDING(found, st, field, text)                                                               \
        do {                                                                                                \
                const AuditFinding *f_ = (found);                                                           \
                CHECK(f_ &&streq(f_->status, st));                                                          \
                CHECK_CONTAINS(f_ ? f_->field : NULL, text);                                                \
        } while (0)

/* The status of one check, "" when the audit has no such finding. */
static const char *status_of(Audit *a, const char *root, const char *check)
{
        const AuditFinding *f = finding(a, root, check);
        return f ? f->status : "";
}

static void write_gz(const char *root, const char *rel, const char *text)
{
        _cleanup_free_ char *path = xasprintf("%s/%s", root, rel);
        gzFile f;

        test_write(root, rel, "");
        f = gzopen(path, "wb");
        CHECK(f != NULL);
        if (!f)
                return;
        CHECK_INTEQ(gzwrite(f, text, (unsigned)strlen(text)), strlen(text));
        gzclose(f);
}

static void rm(const char *root, const char *rel)
{
        _cleanup_free_ char *path = xasprintf("%s/%s", root, rel);
        (void)remove(path);
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
        _cleanup_free_ char *root = test_fixture_copy("amd-workstation");
        Audit a = {};
        const AuditFinding *f;

        CHECK_FINDING(inversion(&a, root), "info", detail, "neither");

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
        CHECK_FINDING(inversion(&a, root), "warn", detail, "irq/86-xhci_hcd (fifo 50)");
        thread(root, 201, 201, "irq/86-xhci_hcd", KTHREAD, 90, SCHED_FIFO);
        CHECK_FINDING(inversion(&a, root), "ok", detail,
                      "(fifo 90) is above the audio server's data-loop.0 of pipewire");

        /* Below the IRQ threads but at rtkit's ceiling (PipeWire without an rtprio limit): any desktop
         * client's real-time thread can equal it. */
        thread(root, 300, 301, "data-loop.0", 0x400040, 20, SCHED_FIFO);
        f = inversion(&a, root);
        CHECK(f && streq(f->status, "warn"));
        CHECK_CONTAINS(f ? f->detail : NULL, "at or below rtkit's ceiling (20)");
        CHECK_CONTAINS(f ? f->fix : NULL, "rtprio 95");
        thread(root, 300, 301, "data-loop.0", 0x400040, 21, SCHED_FIFO);
        f = inversion(&a, root);
        CHECK(f && streq(f->status, "ok"));
        thread(root, 300, 301, "data-loop.0", 0x400040, 88, SCHED_FIFO);

        /* jackd: every real-time thread of it counts, whatever its name. */
        thread(root, 400, 400, "jackd", 0x400100, 0, SCHED_OTHER);
        thread(root, 400, 402, "jackd", 0x400040, 95, SCHED_RR);
        CHECK_FINDING(inversion(&a, root), "warn", detail, "jackd of jackd (PID 400, rr 95)");

        /* A SCHED_OTHER thread named like PipeWire's is no real-time audio thread. */
        thread(root, 400, 402, "jackd", 0x400040, 0, SCHED_OTHER);
        thread(root, 300, 301, "data-loop.0", 0x400040, 0, SCHED_OTHER);
        CHECK_FINDING(inversion(&a, root), "info", detail, "no real-time audio server thread");
        audit_clear(&a);
}

/* The kernel's build, from /proc/config.gz or /boot/config-RELEASE, and the timer list without either. */
TEST(kernel_config)
{
        _cleanup_free_ char *root = test_fixture_copy("amd-workstation");
        Audit a = {};
        const AuditFinding *f;

        test_write(root, "proc/sys/kernel/osrelease", "6.12.0-test\n");
        test_write(root, "proc/timer_list", "Timer List Version: v0.9\n  .resolution: 4000000 nsecs\n");
        f = finding(&a, root, "kernel-config");
        CHECK(f && streq(f->status, "info") && *f->fix);
        CHECK_CONTAINS(f ? f->detail : NULL, "/boot/config-6.12.0-test");
        CHECK_STREQ(status_of(&a, root, "tickless"), "info");
        CHECK_FINDING(finding(&a, root, "high-res-timers"), "warn", detail, "resolution: 4000000 nsecs");
        test_write(root, "proc/timer_list", "Timer List Version: v0.9\n  .resolution: 1 nsecs\n");
        CHECK_STREQ(status_of(&a, root, "high-res-timers"), "ok");

        /* /boot's config, then /proc/config.gz, which wins. */
        test_write(root, "boot/config-6.12.0-test",
                   "CONFIG_HZ_PERIODIC=y\n# CONFIG_HIGH_RES_TIMERS is not set\n");
        CHECK_FINDING(finding(&a, root, "kernel-config"), "ok", detail, "/boot/config-6.12.0-test");
        CHECK_FINDING(finding(&a, root, "tickless"), "warn", fix, "CONFIG_NO_HZ_IDLE=y");
        /* The config is the kernel's word over timer_list. */
        CHECK_STREQ(status_of(&a, root, "high-res-timers"), "warn");

        write_gz(root, "proc/config.gz",
                 "CONFIG_HIGH_RES_TIMERS=y\nCONFIG_NO_HZ_IDLE=y\nCONFIG_NO_HZ_COMMON=y\n");
        f = finding(&a, root, "kernel-config");
        CHECK_CONTAINS(f ? f->detail : NULL, "/proc/config.gz");
        CHECK_STREQ(status_of(&a, root, "high-res-timers"), "ok");
        CHECK_STREQ(status_of(&a, root, "tickless"), "ok");
        write_gz(root, "proc/config.gz", "CONFIG_HIGH_RES_TIMERS=y\nCONFIG_NO_HZ_FULL=y\n");
        CHECK_STREQ(status_of(&a, root, "tickless"), "ok");
        audit_clear(&a);
}

/* Each preemption model, and threadirqs, which threads IRQs but makes no kernel real-time. */
TEST(preemption)
{
        _cleanup_free_ char *root = test_fixture_copy("amd-workstation");
        Audit a = {};
        const AuditFinding *f;

        /* A voluntary kernel with threadirqs: threaded IRQs, yet no preemption. */
        test_write(root, "proc/sys/kernel/version", "#1 SMP Debian 6.1.0\n");
        test_write(root, "proc/cmdline", "root=/dev/sda1 threadirqs quiet\n");
        CHECK_STREQ(status_of(&a, root, "irq-threads"), "ok");
        CHECK_FINDING(finding(&a, root, "preemption"), "warn", fix, "CONFIG_PREEMPT_DYNAMIC=y");

        /* Built fully preemptible. */
        test_write(root, "proc/sys/kernel/version", "#1 SMP PREEMPT Arch 6.1.0\n");
        CHECK_STREQ(status_of(&a, root, "preemption"), "ok");
        test_write(root, "proc/sys/kernel/version", "#1 SMP PREEMPT_LAZY Arch 6.13.0\n");
        CHECK_STREQ(status_of(&a, root, "preemption"), "ok");

        /* Dynamic: the boot argument decides, debugfs tells the current model. */
        test_write(root, "proc/sys/kernel/version", "#1 SMP PREEMPT_DYNAMIC Debian 6.12.0\n");
        f = finding(&a, root, "preemption");
        CHECK(f && streq(f->status, "warn"));
        CHECK_STREQ(f ? f->fix : NULL, "boot argument preempt=full (rtctl bootargs)");
        test_write(root, "proc/cmdline", "root=/dev/sda1 preempt=full\n");
        CHECK_STREQ(status_of(&a, root, "preemption"), "ok");
        CHECK_STREQ(status_of(&a, root, "irq-threads"), "warn");
        test_write(root, "proc/cmdline", "root=/dev/sda1 preempt=voluntary\n");
        CHECK_STREQ(status_of(&a, root, "preemption"), "warn");
        /* The last occurrence wins, and what follows "--" is init's. */
        test_write(root, "proc/cmdline", "root=/dev/sda1 preempt=full preempt=none\n");
        CHECK_STREQ(status_of(&a, root, "preemption"), "warn");
        test_write(root, "proc/cmdline", "root=/dev/sda1 -- preempt=full\n");
        CHECK_STREQ(status_of(&a, root, "preemption"), "warn");
        test_write(root, "proc/cmdline", "root=/dev/sda1 xpreempt=full\n");
        CHECK_STREQ(status_of(&a, root, "preemption"), "warn");
        test_write(root, "proc/cmdline", "root=/dev/sda1 preempt=lazy\n");
        CHECK_STREQ(status_of(&a, root, "preemption"), "ok");
        test_write(root, "proc/cmdline", "root=/dev/sda1 preempt=voluntary\n");
        test_write(root, "sys/kernel/debug/sched/preempt", "none voluntary (full) lazy\n");
        CHECK_FINDING(finding(&a, root, "preemption"), "ok", detail, "debugfs");
        test_write(root, "sys/kernel/debug/sched/preempt", "none (voluntary) full\n");
        CHECK_FINDING(finding(&a, root, "preemption"), "warn", detail, "running voluntary");

        /* PREEMPT_RT, by uname -v, then by /sys/kernel/realtime: threaded IRQs without threadirqs. */
        rm(root, "sys/kernel/debug/sched/preempt");
        test_write(root, "proc/sys/kernel/version", "#1 SMP PREEMPT_RT Debian 6.12.0\n");
        CHECK_STREQ(status_of(&a, root, "preemption"), "ok");
        CHECK_STREQ(status_of(&a, root, "irq-threads"), "ok");
        test_write(root, "proc/sys/kernel/version", "#1 SMP Debian 6.12.0\n");
        test_write(root, "sys/kernel/realtime", "1\n");
        f = finding(&a, root, "preemption");
        CHECK(f && streq(f->status, "ok"));
        CHECK_STREQ(f ? f->detail : NULL, "PREEMPT_RT");
        audit_clear(&a);
}

/* Mitigations are a trade-off, never a warning; SMT on is worth knowing. */
TEST(mitigations_smt)
{
        _cleanup_free_ char *root = test_fixture_copy("amd-workstation");
        Audit a = {};
        const AuditFinding *f;

        test_write(root, "sys/devices/system/cpu/vulnerabilities/spectre_v2", "Mitigation: Retpolines\n");
        test_write(root, "sys/devices/system/cpu/vulnerabilities/meltdown", "Not affected\n");
        test_write(root, "sys/devices/system/cpu/vulnerabilities/retbleed",
                   "Mitigation: untrained return thunk\n");
        f = finding(&a, root, "mitigations");
        CHECK(f && streq(f->status, "info"));
        CHECK_CONTAINS(f ? f->detail : NULL, "2 active");
        CHECK_CONTAINS(f ? f->detail : NULL, "no untrusted code");
        CHECK(f && !strstr(f->detail, "meltdown"));
        test_write(root, "proc/cmdline", "root=/dev/sda1 mitigations=off mitigations=auto\n");
        f = finding(&a, root, "mitigations");
        CHECK_CONTAINS(f ? f->detail : NULL, "2 active");
        test_write(root, "proc/cmdline", "root=/dev/sda1 mitigations=off\n");
        CHECK_FINDING(finding(&a, root, "mitigations"), "info", detail,
                      "mitigations=off: no mitigation cost, and no protection");

        test_write(root, "sys/devices/system/cpu/smt/active", "1\n");
        CHECK_FINDING(finding(&a, root, "smt"), "info", fix, "nosmt");
        test_write(root, "sys/devices/system/cpu/smt/active", "0\n");
        CHECK_STREQ(status_of(&a, root, "smt"), "ok");
        audit_clear(&a);
}

TEST(memory_filesystems)
{
        _cleanup_free_ char *root = test_fixture_copy("amd-workstation");
        Audit a = {};

        test_write(root, "proc/swaps", "Filename\tType\tSize\tUsed\tPriority\n");
        test_write(root, "proc/sys/vm/swappiness", "60\n");
        CHECK_STREQ(status_of(&a, root, "swappiness"), "ok"); /* no swap: no matter */
        test_write(root, "proc/swaps",
                   "Filename\tType\tSize\tUsed\tPriority\n/dev/sda2 partition\t8388604\t0\t-2\n");
        CHECK_FINDING(finding(&a, root, "swappiness"), "warn", fix, "vm.swappiness=10");
        test_write(root, "proc/sys/vm/swappiness", "10\n");
        CHECK_STREQ(status_of(&a, root, "swappiness"), "ok");

        test_write(root, "proc/mounts",
                   "/dev/nvme0n1p2 / ext4 rw 0 0\nportal /run/user/1000/doc fuse.portal rw 0 0\n");
        CHECK_STREQ(status_of(&a, root, "filesystems"), "ok");
        test_write(root, "proc/mounts",
                   "/dev/nvme0n1p2 / ext4 rw 0 0\n/dev/sdb1 /media/usb fuseblk rw 0 0\n");
        CHECK_FINDING(finding(&a, root, "filesystems"), "info", detail, "/media/usb (fuseblk)");
        test_write(root, "proc/mounts",
                   "/dev/nvme0n1p2 / ext4 rw 0 0\n/dev/sdc1 /samples reiserfs rw 0 0\n");
        CHECK_FINDING(finding(&a, root, "filesystems"), "warn", detail, "/samples (reiserfs)");
        audit_clear(&a);
}

/* amd-workstation's HDA card (IRQ 87) and xHCI controllers each have a line of their own; then the
 * card's line gets a second handler. */
TEST(shared_irq)
{
        _cleanup_free_ char *root = test_fixture_copy("amd-workstation");
        _cleanup_free_ char *cmd = xasprintf("sed -i 's/snd_hda_intel:card0$/snd_hda_intel:card0, enp5s0/' "
                                             "'%s/proc/interrupts'",
                                             root);
        Audit a = {};

        CHECK_FINDING(finding(&a, root, "shared-irq"), "ok", detail,
                      "none of the 3 sound and USB host IRQs");
        CHECK_INTEQ(system(cmd), 0);
        CHECK_FINDING(finding(&a, root, "shared-irq"), "warn", detail,
                      "IRQ 87 (snd_hda_intel:card0, enp5s0)");
        audit_clear(&a);
}

static void process(const char *root, unsigned pid, const char *comm, unsigned flags, const char *cpus,
                    const char *cgroup)
{
        _cleanup_free_ char *rel = xasprintf("proc/%u/status", pid), *text = NULL;

        thread(root, pid, pid, comm, flags, 0, SCHED_OTHER);
        text = xasprintf("Name:\t%s\nState:\tS (sleeping)\nCpus_allowed:\tffff\nCpus_allowed_list:\t%s\n",
                         comm, cpus);
        test_write(root, rel, text);
        free(rel);
        rel = xasprintf("proc/%u/cgroup", pid);
        free(text);
        text = strchr(cgroup, ':') ? xstrdup(cgroup) : xasprintf("0::%s\n", cgroup);
        test_write(root, rel, text);
}

/* Against isolated CPUs 14-15: movable processes, effective IRQ affinities and workqueue masks. */
TEST(isolation)
{
        _cleanup_free_ char *root = test_fixture_copy("amd-workstation");
        _cleanup_cpuset_ CpuSet *isolated = NULL;
        AuditOptions o = {.isolated_source = "profile test"};
        Audit a = {};
        const AuditFinding *f;

        CHECK_INTEQ(cpuset_parse_list("14-15", 16, &isolated, NULL), 0);
        CHECK_FINDING(finding(&a, root, "isolation"), "info", detail, "no isolated CPUs");
        CHECK(!finding(&a, root, "isolated-tasks"));
        o.isolated = isolated;

        /* The fixture delivers IRQ 87 to CPU 14 and its workqueues to every CPU. */
        process(root, 1, "systemd", 0x400100, "0-13", "/init.scope");
        process(root, 2, "kthreadd", KTHREAD, "0-13", "/");
        process(root, 15, "ksoftirqd/14", KTHREAD | PF_NO_SETAFFINITY, "14", "/");
        process(root, 700, "pipewire", 0x400100, "14", "/rtctl.slice/pipewire.scope"); /* placed by rtctl */
        process(root, 702, "jackd", 0x400100, "15",
                "12:cpuset:/rtctl-isolated\n1:name=systemd:/\n"); /* v1 */
        process(root, 701, "dying", 0x400100 | PF_EXITING, "0-15", "/user.slice");
        CHECK_FINDING(finding_in(&a, root, &o, "isolated-tasks"), "ok", detail,
                      "none of 4 movable processes");
        process(root, 800, "firefox", 0x400100, "0-15", "/user.slice/user-1000.slice");
        process(root, 801, "kworker/u32:1", KTHREAD, "12-15", "/");
        f = finding_in(&a, root, &o, "isolated-tasks");
        CHECK(f && streq(f->status, "warn"));
        CHECK_CONTAINS(f ? f->detail : NULL, "2 movable processes");
        CHECK_CONTAINS(f ? f->detail : NULL, "firefox (PID 800, CPUs 0-15)");
        CHECK_CONTAINS(f ? f->detail : NULL, "kworker/u32:1 (PID 801, CPUs 12-15)");
        CHECK(f && !strstr(f->detail, "pipewire") && !strstr(f->detail, "ksoftirqd") &&
              !strstr(f->detail, "dying"));

        CHECK_FINDING(finding_in(&a, root, &o, "isolated-irqs"), "warn", detail,
                      "IRQ 87 snd_hda_intel:card0 on CPU 14");
        CHECK_FINDING(finding_in(&a, root, &o, "workqueue"), "warn", detail,
                      "the global workqueue mask is CPUs 0-15");

        /* Where rtctl puts them: effective affinity on housekeeping, the global workqueue mask without
         * 14-15. A requested IRQ affinity that includes them does not count: the effective one is where
         * the IRQ goes. Nor does a workqueue's own mask wider than the global one: the kernel runs its
         * work within the global one. */
        for (unsigned irq = 0; irq < 256; irq++) {
                _cleanup_free_ char *rel = xasprintf("proc/irq/%u/effective_affinity_list", irq), *p = NULL;
                p = xasprintf("%s/%s", root, rel);
                if (access(p, F_OK) == 0)
                        test_write(root, rel, "3\n");
        }
        test_write(root, "proc/irq/87/smp_affinity_list", "0-15\n");
        test_write(root, "sys/devices/virtual/workqueue/cpumask", "3fff\n");
        test_write(root, "sys/devices/virtual/workqueue/writeback/cpumask", "ffff\n");
        f = finding_in(&a, root, &o, "isolated-irqs");
        CHECK(f && streq(f->status, "ok"));
        /* Set to housekeeping but not yet moved (x86 moves an MSI when it next fires): the move is
         * requested, nothing to fix, and the detail says which are still on their way. */
        test_write(root, "proc/irq/87/smp_affinity_list", "0-13\n");
        test_write(root, "proc/irq/87/effective_affinity_list", "14\n");
        CHECK_FINDING(finding_in(&a, root, &o, "isolated-irqs"), "ok", detail,
                      "until their next interrupt moves them: IRQ 87 snd_hda_intel:card0 on "
                      "CPU 14");
        test_write(root, "proc/irq/87/effective_affinity_list", "3\n");
        f = finding_in(&a, root, &o, "workqueue");
        CHECK(f && streq(f->status, "ok"));
        CHECK_CONTAINS(f ? f->detail : NULL, "the global workqueue mask (CPUs 0-13) excludes");
        CHECK_CONTAINS(f ? f->detail : NULL, "the 1 workqueue with masks of their own");
        test_write(root, "sys/devices/virtual/workqueue/cpumask", "ffff\n");
        test_write(root, "sys/devices/virtual/workqueue/writeback/cpumask", "c000\n");
        CHECK_FINDING(finding_in(&a, root, &o, "workqueue"), "warn", detail,
                      "workqueues: writeback (CPUs 14-15)");
        audit_clear(&a);
}

/* Services that undo a profile, found by process name. */
TEST(rivals)
{
        _cleanup_free_ char *root = test_fixture_copy("amd-workstation");
        Audit a = {};
        const AuditFinding *f;

        CHECK_STREQ(status_of(&a, root, "power-rivals"), "ok");
        CHECK_STREQ(status_of(&a, root, "irqbalance"), "ok");
        thread(root, 900, 900, "tuned", 0x400100, 0, SCHED_OTHER);
        thread(root, 901, 901, "gamemoded", 0x400100, 0, SCHED_OTHER);
        thread(root, 902, 902, "irqbalance", 0x400100, 0, SCHED_OTHER);
        f = finding(&a, root, "power-rivals");
        CHECK(f && streq(f->status, "warn"));
        CHECK_CONTAINS(f ? f->detail : NULL, "tuned (PID 900)");
        CHECK_CONTAINS(f ? f->detail : NULL, "gamemoded (PID 901)");
        CHECK_CONTAINS(f ? f->fix : NULL, "systemctl disable --now tuned");
        CHECK_FINDING(finding(&a, root, "irqbalance"), "warn", fix, "OnConflict=stop");
        audit_clear(&a);
}

/* A sched_ext BPF scheduler: `rtctl check` names it; a profile that isolates CPUs reports it, or with
 * OnConflict=stop masks its installed loaders (journalled like any rival service). */
TEST(sched_ext)
{
        _cleanup_free_ char *root = test_fixture_copy("amd-workstation");
        _cleanup_policy_ Policy *p = NULL;
        SettingContext kinds = {};
        PassResult res = {};
        Audit a = {};

        CHECK_FINDING(finding(&a, root, "sched-ext"), "ok", detail, "this kernel has no sched_ext");
        test_write(root, "sys/kernel/sched_ext/state", "disabled\n");
        test_write(root, "sys/kernel/sched_ext/switch_all", "0\n");
        thread(root, 903, 903, "scx_loader", 0x400100, 0, SCHED_OTHER);
        CHECK_FINDING(finding(&a, root, "sched-ext"), "ok", detail,
                      "no BPF scheduler in force (sched_ext disabled); scx_loader (PID 903) loads one");
        test_write(root, "sys/kernel/sched_ext/state", "enabled\n");
        test_write(root, "sys/kernel/sched_ext/switch_all", "1\n");
        test_write(root, "sys/kernel/sched_ext/root/ops", "lavd_1.0.12\n");
        CHECK_FINDING(finding(&a, root, "sched-ext"), "warn", detail,
                      "the BPF scheduler lavd_1.0.12 (sched_ext, for every task that is not real-time) is "
                      "in force");
        CHECK_FINDING(finding(&a, root, "sched-ext"), "warn", fix, "scxctl stop");
        audit_clear(&a);

        /* The conflict tuner, for a profile that isolates CPUs: reported without OnConflict=stop. */
        p = test_profile("[Profile]\nDescription=t\n[CPU]\nIsolate=2-3\n");
        CHECK(p != NULL);
        setting_context_init(&kinds, NULL);
        test_pass_policy(root, p, NULL, &(PassInput){.kinds = &kinds}, &res);
        CHECK(test_note(&res, "lavd_1.0.12 (sched_ext") != NULL);
        CHECK(test_note(&res, "set OnConflict=stop") != NULL);
        /* With it, and systemd: the installed loader masked, the other left alone. The scheduler was
         * loaded by hand (it is in no loader's unit): said all the same. */
        test_write(root, "run/systemd/system/.keep", "");
        test_write(root, "usr/lib/systemd/system/scx_loader.service",
                   "[Service]\nExecStart=/usr/bin/scx_loader\n");
        thread(root, 904, 904, "scx_lavd", 0x400100, 0, SCHED_OTHER);
        test_write(root, "proc/904/cgroup", "0::/user.slice/user-1000.slice/session-2.scope\n");
        pass_result_clear(&res);
        test_pass_policy(root, p, NULL, &(PassInput){.kinds = &kinds, .stop_conflicts = true}, &res);
        CHECK_STREQ(test_desired(&res, "systemd:scx_loader.service"), "masked");
        CHECK(test_desired(&res, "systemd:scx.service") == NULL);
        CHECK(test_note(&res, "loaded by no service rtctl stops") != NULL);
        /* Loaded by scx_loader: stopping it ends the scheduler, nothing to report. */
        test_write(root, "proc/904/cgroup", "0::/system.slice/scx_loader.service\n");
        pass_result_clear(&res);
        test_pass_policy(root, p, NULL, &(PassInput){.kinds = &kinds, .stop_conflicts = true}, &res);
        CHECK(test_note(&res, "sched_ext") == NULL);
        /* Loaded by hand, with no loader installed: what rtctl cannot stop is said. */
        rm(root, "usr/lib/systemd/system/scx_loader.service");
        pass_result_clear(&res);
        test_pass_policy(root, p, NULL, &(PassInput){.kinds = &kinds, .stop_conflicts = true}, &res);
        CHECK(test_desired(&res, "systemd:scx_loader.service") == NULL);
        CHECK(test_note(&res, "loaded by no service rtctl stops") != NULL);
        /* A profile that isolates nothing leaves sched_ext alone. */
        policy_free(TAKE_PTR(p));
        p = test_profile("[Profile]\nDescription=t\n[IRQ]\nBalance=housekeeping\n");
        pass_result_clear(&res);
        test_pass_policy(root, p, NULL, &(PassInput){.kinds = &kinds}, &res);
        CHECK(test_note(&res, "sched_ext") == NULL);
        pass_result_clear(&res);
        setting_context_clear(&kinds);
        sysroot_set(NULL);
}

/* The sound devices' power saving, as the fixtures have it before [AudioDevices]: HDA's power_save 1,
 * the Scarlett and its root hub on auto, the HDA link's ASPM on; each named, and none once off. */
TEST(audio_devices)
{
        _cleanup_free_ char *root = test_fixture_copy("amd-workstation");
        _cleanup_free_ char *vm = test_fixture_copy("vm2");
        Audit a = {};

        CHECK_FINDING(finding(&a, root, "audio-devices"), "warn", detail,
                      "USB device Scarlett 2i2 USB may autosuspend");
        CHECK_FINDING(finding(&a, root, "audio-devices"), "warn", detail,
                      "USB hub xHCI Host Controller may");
        CHECK_FINDING(
            finding(&a, root, "audio-devices"), "warn", detail,
            "ASPM on the sound controller's link (/sys/devices/pci0000:00/0000:00:08.1/0000:0b:00.4/"
            "link/l1_aspm: 1)");
        CHECK_FINDING(finding(&a, root, "audio-devices"), "warn", detail,
                      "the HDA codecs power down after 1 s idle");
        CHECK_FINDING(finding(&a, root, "audio-devices"), "warn", fix, "[AudioDevices] PowerSave=off");
        CHECK(!strstr(finding(&a, root, "audio-devices")->detail, "Ultra")); /* the USB stick */
        test_write(root, "sys/module/snd_hda_intel/parameters/power_save", "0\n");
        test_write(root, "sys/devices/pci0000:00/0000:00:08.1/0000:0b:00.4/link/l1_aspm", "0\n");
        test_write(root, "sys/devices/pci0000:00/0000:00:08.1/0000:0b:00.4/link/l0s_aspm", "0\n");
        test_write(root, "sys/devices/pci0000:00/0000:00:08.1/0000:0b:00.3/usb1/power/control", "on\n");
        test_write(root, "sys/devices/pci0000:00/0000:00:08.1/0000:0b:00.3/usb1/1-2/power/control", "on\n");
        CHECK_FINDING(finding(&a, root, "audio-devices"), "ok", detail, "do not power-save");
        CHECK_FINDING(finding(&a, vm, "audio-devices"), "ok", detail, "no sound devices");
        audit_clear(&a);
        sysroot_set(NULL);
}

/* What only a reboot applies: the profile's boot arguments the running kernel lacks. */
TEST(reboot_pending)
{
        _cleanup_free_ char *root = test_fixture_copy("amd-workstation");
        AuditOptions o = {.profile = "audio"};
        Audit a = {};
        const AuditFinding *f;

        CHECK(!finding_in(&a, root, &o, "reboot-pending")); /* no profile: nothing to compare */
        o.boot_known = true;
        o.boot_missing = "rcu_nocbs=14-15 threadirqs";
        f = finding_in(&a, root, &o, "reboot-pending");
        CHECK(f && streq(f->status, "warn"));
        CHECK_CONTAINS(f ? f->detail : NULL, "profile audio wants boot arguments the running kernel lacks: "
                                             "rcu_nocbs=14-15 threadirqs");
        CHECK_STREQ(f ? f->fix : NULL, "rtctl bootargs apply, then reboot");
        o.boot_missing = NULL;
        f = finding_in(&a, root, &o, "reboot-pending");
        CHECK(f && streq(f->status, "ok"));
        audit_clear(&a);
}

/* How a profile's Threads=realtime rules learn of a policy change: rtctld's word (PolicyEvents), or
 * without a daemon the kernel's configuration. Without the syscall tracepoints a thread that turns
 * real-time late, and a demotion, go unseen for a while: said, with the fix. */
TEST(policy_events)
{
        _cleanup_free_ char *root = test_fixture_copy("amd-workstation");
        AuditOptions o = {.profile = "audio"};
        Audit a = {};
        const AuditFinding *f;

        test_write(root, "proc/sys/kernel/osrelease", "6.12.0-test\n");
        CHECK(!finding_in(&a, root, &o, "policy-events")); /* no Threads=realtime rule: nothing to say */
        o.realtime_rules = true;
        o.policy_events = "tracepoints";
        CHECK_FINDING(finding_in(&a, root, &o, "policy-events"), "ok", detail, "syscall tracepoints");

        o.policy_events = "re-check after thread creation: this kernel has no tracefs (/sys/kernel/tracing "
                          "is missing)";
        f = finding_in(&a, root, &o, "policy-events");
        CHECK(f && streq(f->status, "warn"));
        CHECK_CONTAINS(f ? f->detail : NULL, "profile audio");
        CHECK_CONTAINS(f ? f->detail : NULL, "this kernel has no tracefs (/sys/kernel/tracing is missing)");
        CHECK_CONTAINS(f ? f->detail : NULL, "more than 1 s after it was created");
        CHECK_CONTAINS(f ? f->detail : NULL, "back to SCHED_OTHER");
        CHECK_CONTAINS(f ? f->fix : NULL, "CONFIG_FTRACE_SYSCALLS=y");

        /* No daemon: the kernel's configuration says whether rtctld would have the tracepoints. */
        o.policy_events = NULL;
        CHECK_FINDING(finding_in(&a, root, &o, "policy-events"), "info", detail, "no kernel configuration");
        write_gz(root, "proc/config.gz", "CONFIG_FTRACE=y\n# CONFIG_FTRACE_SYSCALLS is not set\n");
        CHECK_FINDING(finding_in(&a, root, &o, "policy-events"), "warn", detail,
                      "built without CONFIG_FTRACE_SYSCALLS");
        write_gz(root, "proc/config.gz", "CONFIG_FTRACE=y\nCONFIG_FTRACE_SYSCALLS=y\n");
        CHECK_FINDING(finding_in(&a, root, &o, "policy-events"), "ok", detail, "syscall tracepoints");
        audit_clear(&a);
}

/* pam_limits' precedence: the user's own line over a group's over "*" whatever their order (alice's file
 * comes before the audio group's), the later among equals. */
TEST(pam_limits)
{
        _cleanup_free_ char *root = test_fixture_copy("amd-workstation");
        char *audio[] = {(char *)"alice", (char *)"audio", NULL}, *none[] = {(char *)"bob", NULL};
        _cleanup_free_ char *where = NULL;
        unsigned long long v = 0;

        sysroot_set(root);
        CHECK_INTEQ(audit_pam_limit("alice", audio, "rtprio", &v, NULL), -ENOENT);
        test_write(root, "etc/security/limits.conf",
                   "# defaults\n*               soft    rtprio  0\n*  hard rtprio 0\n"
                   "@audio - memlock 4096 # KiB\n");
        test_write(root, "etc/security/limits.d/95-audio.conf",
                   "@audio   -  rtprio     95\n@audio - memlock unlimited\n");
        test_write(root, "etc/security/limits.d/05-alice.conf", "alice soft rtprio 70\n");
        test_write(root, "etc/security/limits.d/10-late.conf", "* soft rtprio 50\n");
        CHECK_INTEQ(audit_pam_limit("alice", audio, "rtprio", &v, &where), 0);
        CHECK_INTEQ(v, 70);
        CHECK_STREQ(where, "/etc/security/limits.d/05-alice.conf:1");
        CHECK_INTEQ(audit_pam_limit("carol", audio, "rtprio", &v, NULL), 0);
        CHECK_INTEQ(v, 95);
        /* 10-late.conf comes after limits.conf: its "*" wins over the earlier "*". */
        CHECK_INTEQ(audit_pam_limit("bob", none, "rtprio", &v, NULL), 0);
        CHECK_INTEQ(v, 50);
        CHECK_INTEQ(audit_pam_limit("carol", audio, "memlock", &v, NULL), 0);
        CHECK(v == RLIM_INFINITY);
        /* No group or wildcard line applies to root. */
        CHECK_INTEQ(audit_pam_limit("root", audio, "rtprio", &v, NULL), -ENOENT);
}

TEST_MAIN(T(parse), T(sched_ext), T(audio_devices), T(inversion), T(kernel_config), T(preemption),
          T(mitigations_smt), T(memory_filesystems), T(shared_irq), T(isolation), T(rivals),
          T(reboot_pending), T(policy_events), T(pam_limits))
