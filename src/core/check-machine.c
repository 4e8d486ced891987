/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Memory, filesystems and interrupt lines: swappiness with swap on, filesystems to keep audio off, and
 * sound or USB host IRQs sharing a line with another device. */
#include "core/check-internal.h"
#include "core/irqs.h"
#include "core/topology.h"
#include "shared/sysfs.h"

/* Above this the kernel swaps out pages of a sleeping audio process under memory pressure rather than
 * dropping cache (the linuxaudio.org guidance rtcqs follows). */
#define SWAPPINESS_MAX 10

static void check_swappiness(Audit *a)
{
        _cleanup_free_ char *swaps = NULL, *value = NULL;
        unsigned swappiness;

        if (sys_read("/proc/swaps", &swaps) < 0)
                return;
        /* A header line, then one line per active swap area. */
        if (!strchr(swaps, '\n')) {
                audit_add(a, "swappiness", "ok", xstrdup("no swap"), NULL);
                return;
        }
        if (sys_read("/proc/sys/vm/swappiness", &value) < 0 || safe_atou(strstrip(value), &swappiness) < 0)
                return;
        if (swappiness > SWAPPINESS_MAX)
                audit_add(
                    a, "swappiness", "warn",
                    xasprintf("vm.swappiness is %u with swap on: under memory pressure pages of an idle "
                              "audio process are swapped out and fault back in mid-cycle",
                              swappiness),
                    xasprintf("vm.swappiness=%d in /etc/sysctl.d/ (sysctl --system)", SWAPPINESS_MAX));
        else
                audit_add(a, "swappiness", "ok", xasprintf("vm.swappiness is %u", swappiness), NULL);
}

/* Filesystems not to stream audio from or record to: reiserfs (unmaintained, gone from Linux 6.13), and
 * user-space or network ones (fuse, fuseblk, nfs, cifs) whose latency is a daemon's or a network's. */
static const char *slow_fs(const char *type)
{
        static const char *const bad[] = {"reiserfs", "fuse", "fuseblk", "nfs", "nfs4", "cifs", "smb3"};

        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                if (streq(type, bad[i]) || (startswith(type, bad[i]) && type[strlen(bad[i])] == '.'))
                        return bad[i];
        return NULL;
}

static void check_filesystems(Audit *a)
{
        _cleanup_free_ char *mounts = NULL, *list = NULL;
        _cleanup_strv_free_ char **lines = NULL;
        unsigned n = 0;
        bool reiser = false;

        if (sys_read("/proc/mounts", &mounts) < 0)
                return;
        lines = strv_split(mounts, "\n");
        for (size_t i = 0; lines && lines[i]; i++) {
                _cleanup_strv_free_ char **f = strv_split(lines[i], " ");
                const char *kind;
                if (strv_length(f) < 3 || !(kind = slow_fs(f[2])))
                        continue;
                /* The portal's and gvfs's fuse mounts under /run are every desktop's, and nobody records
                 * there. */
                if (startswith(f[1], "/run/") || startswith(f[1], "/proc/") || startswith(f[1], "/sys/"))
                        continue;
                reiser = reiser || streq(kind, "reiserfs");
                n++;
                char *more = xasprintf("%s%s%s (%s)", list ? list : "", list ? ", " : "", f[1], f[2]);
                free(list);
                list = more;
        }
        if (n == 0)
                audit_add(a, "filesystems", "ok", xstrdup("no reiserfs, FUSE or network filesystem mounted"),
                          NULL);
        else
                audit_add(
                    a, "filesystems", reiser ? "warn" : "info",
                    xasprintf("keep audio sessions off %s: their latency is a daemon's or a network's%s",
                              list, reiser ? "; reiserfs is unmaintained and gone from Linux 6.13" : ""),
                    xstrdup("keep sessions and samples on a local ext4, xfs or btrfs filesystem"));
}

/* rtcqs's reading of /proc/interrupts: a line whose handlers include a sound driver (snd_*, audiodsp)
 * or a USB host controller ([eux]hci_hcd) and any other handler is shared. */
static bool audio_or_usb_action(const char *action)
{
        return startswith(action, "snd_") || startswith(action, "audiodsp") || streq(action, "xhci_hcd") ||
               streq(action, "ehci_hcd") || streq(action, "uhci_hcd") || startswith(action, "xhci_hcd:") ||
               startswith(action, "ehci_hcd:");
}

static void check_shared_irqs(Audit *a)
{
        _cleanup_topology_ Topology *topo = NULL;
        _cleanup_irq_table_ IrqTable *t = NULL;
        _cleanup_free_ char *shared = NULL;
        unsigned n_checked = 0, n_shared = 0;

        if (topology_load(NULL, &topo) < 0 || irq_table_load(0, topo->n_cpus, &t) < 0)
                return;
        for (size_t i = 0; i < t->n; i++) {
                _cleanup_strv_free_ char **actions = NULL;
                bool audio = false;
                size_t n;

                if (!t->irqs[i].actions)
                        continue;
                actions = strv_split(t->irqs[i].actions, ",");
                for (size_t j = 0; actions && actions[j]; j++) {
                        strstrip(actions[j]);
                        audio = audio || audio_or_usb_action(actions[j]);
                }
                n = strv_length(actions);
                if (!audio)
                        continue;
                n_checked++;
                if (n < 2)
                        continue;
                n_shared++;
                char *more = xasprintf("%s%sIRQ %u (%s)", shared ? shared : "", shared ? "; " : "",
                                       t->irqs[i].num, t->irqs[i].actions);
                free(shared);
                shared = more;
        }
        if (n_checked == 0)
                audit_add(a, "shared-irq", "info", xstrdup("no sound card or USB host controller IRQ"),
                          NULL);
        else if (n_shared)
                audit_add(a, "shared-irq", "warn",
                          xasprintf("%s: every interrupt on the line runs every handler, so the sound path "
                                    "waits for the other device's",
                                    shared),
                          xstrdup("give the device a line of its own: MSI (the driver's msi option), "
                                  "another slot or USB port, or unbind the other device"));
        else
                audit_add(a, "shared-irq", "ok",
                          xasprintf("none of the %u sound and USB host IRQs is shared", n_checked), NULL);
}

void audit_machine(Audit *a)
{
        assert(a);

        check_swappiness(a);
        check_filesystems(a);
        check_shared_irqs(a);
}
