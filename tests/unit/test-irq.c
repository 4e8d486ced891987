/* SPDX-License-Identifier: GPL-2.0-or-later */
/* IRQ discovery and placement on the generated machine shapes: what each IRQ is, which ones only the
 * kernel may move, and where the irq and irqthread tuners put them. The real kernel's side (writes,
 * refusals, hotplug) is tested in tests/integration/test_irq.py and in the VM tier. */
#include <glib.h>
#include <stdlib.h>

#include "core/irqs.h"
#include "core/reconcile.h"
#include "shared/sysfs.h"
#include "test.h"
#include "tuners/irq.h"
#include "tuners/registry.h"

static PassResult res;

static const Irq *by_action(const IrqTable *t, const char *actions)
{
        for (size_t i = 0; t && i < t->n; i++)
                if (streq(t->irqs[i].actions, actions))
                        return &t->irqs[i];
        return NULL;
}

static void pass(const char *root, const char *profile_text, bool dry_run, IrqState *state)
{
        char *search[] = {(char *)test_tmpdir(), NULL};
        _cleanup_topology_ Topology *t = NULL;
        _cleanup_policy_ Policy *p = NULL;
        _cleanup_free_ char *err = NULL;
        void *states[TUNERS_MAX] = {[TUNER_IRQ] = state};
        Dirty all = {};

        test_write(test_tmpdir(), "profiles/irqt.conf", profile_text);
        sysroot_set(root);
        pass_result_clear(&res);
        CHECK_INTEQ(topology_load(NULL, &t), 0);
        CHECK_INTEQ(policy_load(search, "irqt", &p, &err), 0);
        if (err)
                printf("# %s\n", err);
        if (!t || !p)
                return;
        dirty_mark_all(&all);
        /* Applying needs a journal for the originals. */
        _cleanup_free_ char *jpath = xasprintf("%s/journal.json", test_tmpdir());
        Journal *j = NULL;
        if (!dry_run)
                CHECK_INTEQ(journal_open(jpath, JOURNAL_RUNTIME, &j, &err), 0);
        reconcile_pass_with(p, t, j, &all, dry_run, &(PassInput){.states = state ? states : NULL}, &res);
        journal_free(j);
        dirty_clear(&all);
}

static const Setting *find(const char *object)
{
        return test_plan_find(&res.plan, object);
}

static const char *desired_of_irq(unsigned irq)
{
        _cleanup_free_ char *o = xasprintf("/proc/irq/%u/smp_affinity_list", irq);
        return test_plan_desired(&res.plan, o);
}

static bool notes_contain(const char *text)
{
        for (size_t i = 0; i < res.notes.n; i++)
                if (strstr(res.notes.items[i].reason, text))
                        return true;
        return false;
}

TEST(workstation_classification)
{
        _cleanup_free_ char *root = test_fixture("amd-workstation");
        _cleanup_irq_table_ IrqTable *t = NULL;
        const Irq *i;

        sysroot_set(root);
        CHECK_INTEQ(irq_table_load(0, CPUSET_MAX_CPUS, &t), 0);
        if (!t)
                return;
        CHECK_INTEQ(t->n, 35);
        /* HDA: PCI class 0x040300. */
        i = by_action(t, "snd_hda_intel:card0");
        CHECK(i && i->class == IRQ_CLASS_AUDIO);
        CHECK_STREQ(i ? i->device : NULL, "0000:0b:00.4");
        CHECK_STREQ(i ? i->driver : NULL, "snd_hda_intel");
        CHECK_STREQ(i ? i->sound_card : NULL, "card0");
        /* The USB audio interface card1 sits behind the xHCI at 0b:00.3: that controller's vector is audio,
         * the other xHCI (02:00.0) stays usb. */
        CHECK(t->n > 0);
        unsigned audio_xhci = 0, usb_xhci = 0;
        for (size_t k = 0; k < t->n; k++) {
                const Irq *q = &t->irqs[k];
                if (!streq(q->actions, "xhci_hcd"))
                        continue;
                if (streq_ptr(q->device, "0000:0b:00.3")) {
                        audio_xhci++;
                        CHECK(q->class == IRQ_CLASS_AUDIO);
                        CHECK_STREQ(q->sound_card, "card1");
                } else if (streq_ptr(q->device, "0000:02:00.0")) {
                        usb_xhci++;
                        CHECK(q->class == IRQ_CLASS_USB);
                }
        }
        CHECK_INTEQ(audio_xhci, 1);
        CHECK_INTEQ(usb_xhci, 1);
        i = by_action(t, "enp5s0-TxRx-2");
        CHECK(i && i->class == IRQ_CLASS_NETWORK && streq_ptr(i->driver, "igc"));
        i = by_action(t, "ahci[0000:02:00.1]");
        CHECK(i && i->class == IRQ_CLASS_STORAGE);
        /* NVMe queues are kernel-managed: read-only affinity. */
        unsigned managed = 0;
        for (size_t k = 0; k < t->n; k++)
                if (t->irqs[k].unmovable && streq(t->irqs[k].unmovable, IRQ_UNMOVABLE_MANAGED)) {
                        managed++;
                        CHECK_STREQ(t->irqs[k].driver, "nvme");
                }
        CHECK_INTEQ(managed, 16);
        /* The IO-APIC's i8042 and the like have no PCI device: class other, movable. */
        i = by_action(t, "i8042");
        CHECK(!i || (i->class == IRQ_CLASS_OTHER && !i->device && !i->unmovable));
}

TEST(arm64_layout_parsed)
{
        /* A Raspberry Pi 4 style /proc/interrupts: GICv3 prints the trigger as a word of its own. */
        _cleanup_free_ char *root = xasprintf("%s/arm64", test_tmpdir());
        _cleanup_irq_table_ IrqTable *t = NULL;

        test_write(
            root, "proc/interrupts",
            "           CPU0       CPU1       CPU2       CPU3       \n"
            " 11:      40713      38022      37518      38164     GICv3  30 Level     arch_timer\n"
            " 28:          0          0          0          0     GICv3 175 Level     PCIe PME, aerdrv\n"
            "IPI0:       100        200        300        400       Rescheduling interrupts\n"
            "Err:          0\n");
        sysroot_set(root);
        CHECK_INTEQ(irq_table_load(0, 4, &t), 0);
        CHECK_INTEQ(t ? t->n : 0, 2);
        CHECK_STREQ(irq_table_find(t, 11) ? irq_table_find(t, 11)->actions : NULL, "arch_timer");
        CHECK_INTEQ(irq_table_find(t, 11) ? irq_table_find(t, 11)->count : 0, 40713 + 38022 + 37518 + 38164);
        CHECK_STREQ(irq_table_find(t, 28) ? irq_table_find(t, 28)->actions : NULL, "PCIe PME, aerdrv");
        /* No /proc/irq/11 in this tree: nothing to move. */
        CHECK_STREQ(irq_table_find(t, 11) ? irq_table_find(t, 11)->unmovable : NULL, IRQ_UNMOVABLE_NOFILE);
}

TEST(server_classification_and_managed)
{
        _cleanup_free_ char *root = test_fixture("server-2x32");
        _cleanup_irq_table_ IrqTable *t = NULL;
        unsigned managed = 0, network = 0, storage = 0, unclassified_msi = 0;

        sysroot_set(root);
        CHECK_INTEQ(irq_table_load(0, CPUSET_MAX_CPUS, &t), 0);
        if (!t)
                return;
        CHECK_INTEQ(t->n, 3000);
        for (size_t k = 0; k < t->n; k++) {
                const Irq *q = &t->irqs[k];
                managed += q->unmovable && streq(q->unmovable, IRQ_UNMOVABLE_MANAGED);
                network += q->class == IRQ_CLASS_NETWORK;
                storage += q->class == IRQ_CLASS_STORAGE;
                unclassified_msi += strstr(q->chip, "PCI-MSI") && !q->device;
        }
        CHECK_INTEQ(managed, 1644);
        CHECK(network > 1000);
        CHECK(storage > 1600);
        CHECK_INTEQ(unclassified_msi, 0);
}

TEST(vm2_every_irq_covered)
{
        _cleanup_free_ char *root = test_fixture("vm2");

        pass(root, "[Profile]\nDescription=t\n[CPU]\nIsolate=1\n[IRQ]\nBalance=housekeeping\n", true, NULL);
        /* 19 lines in /proc/interrupts: 17 movable ones go to housekeeping cpu0, the managed
         * virtio1-req.0 (36) is reported, IRQ 27 (no action) is not in /proc/interrupts at all. */
        unsigned planned = 0;
        for (size_t i = 0; i < res.plan.n; i++)
                if (startswith(res.plan.settings[i].object, "/proc/irq/") &&
                    endswith(res.plan.settings[i].object, "/smp_affinity_list")) {
                        planned++;
                        CHECK_STREQ(res.plan.settings[i].desired, "0");
                }
        CHECK_INTEQ(planned, 18);
        CHECK(desired_of_irq(36) == NULL);
        CHECK_STREQ(find("/proc/irq/default_smp_affinity") ? find("/proc/irq/default_smp_affinity")->desired
                                                           : NULL,
                    "0");
        CHECK(notes_contain("IRQ 36: kernel-managed"));
        CHECK(notes_contain("isolcpus=managed_irq,1"));
}

/* An isolated CPU that still takes device interrupts is not isolated: Isolate= alone keeps every movable
 * IRQ off it, as Balance=housekeeping does; Balance=off leaves them, and no isolation places nothing. */
TEST(isolating_implies_housekeeping_irqs)
{
        _cleanup_free_ char *root = test_fixture("vm2");

        pass(root, "[Profile]\nDescription=t\n[CPU]\nIsolate=1\n", true, NULL);
        CHECK_STREQ(desired_of_irq(38), "0");
        CHECK_STREQ(find("/proc/irq/default_smp_affinity") ? find("/proc/irq/default_smp_affinity")->desired
                                                           : NULL,
                    "0");
        pass(root,
             "[Profile]\nDescription=t\n[CPU]\nIsolate=1\n[IRQ "
             "audio]\nMatch=class:audio\nThreadPriority=90\n",
             true, NULL);
        CHECK_STREQ(desired_of_irq(38), "0");
        pass(root, "[Profile]\nDescription=t\n[CPU]\nIsolate=1\n[IRQ]\nBalance=off\n", true, NULL);
        CHECK(desired_of_irq(38) == NULL);
        pass(root, "[Profile]\nDescription=t\n[Sysctl]\nkernel.timer_migration=0\n", true, NULL);
        CHECK(desired_of_irq(38) == NULL);
}

TEST(spread_is_numa_local_and_per_queue)
{
        _cleanup_free_ char *root = test_fixture("smp2x8");
        _cleanup_irq_table_ IrqTable *t = NULL;
        _cleanup_cpuset_ CpuSet *node0 = NULL;

        sysroot_set(root);
        CHECK_INTEQ(irq_table_load(0, CPUSET_MAX_CPUS, &t), 0);
        CHECK_INTEQ(cpuset_parse_list("0-7,16-23", 32, &node0, NULL), 0);
        pass(root, "[Profile]\nDescription=t\n[IRQ]\nBalance=all\n", true, NULL);
        if (!t)
                return;
        /* The igb ports sit on node 0: all their queues land there, and one port's 9 vectors on 9
         * different CPUs. */
        unsigned seen = 0;
        for (unsigned port = 1; port <= 4; port++) {
                _cleanup_cpuset_ CpuSet *used = cpuset_new(32);
                unsigned n = 0;
                for (size_t k = 0; k < t->n; k++) {
                        const Irq *q = &t->irqs[k];
                        _cleanup_free_ char *prefix = xasprintf("eno%u", port);
                        const char *d;
                        unsigned cpu;
                        if (!startswith(q->actions, prefix) || !streq_ptr(q->driver, "igb"))
                                continue;
                        d = desired_of_irq(q->num);
                        CHECK(d != NULL);
                        if (!d || safe_atou(d, &cpu) < 0)
                                continue;
                        CHECK(cpuset_has(node0, cpu));
                        CHECK(!cpuset_has(used, cpu));
                        cpuset_add(used, cpu);
                        n++;
                }
                CHECK_INTEQ(n, 9);
                seen += n;
        }
        CHECK_INTEQ(seen, 36);
}

/* Where the vectors of the igc NIC enp2s0 were placed, checking that no two share a CPU. */
static CpuSet *nic_cpus(const IrqTable *t)
{
        CpuSet *used = cpuset_new(CPUSET_MAX_CPUS);
        unsigned n = 0;

        for (size_t k = 0; t && k < t->n; k++) {
                const char *d;
                unsigned cpu;

                if (!startswith(t->irqs[k].actions, "enp2s0"))
                        continue;
                d = desired_of_irq(t->irqs[k].num);
                CHECK(d != NULL);
                if (!d || safe_atou(d, &cpu) < 0 || cpu >= CPUSET_MAX_CPUS)
                        continue;
                CHECK(!cpuset_has(used, cpu));
                cpuset_add(used, cpu);
                n++;
        }
        CHECK_INTEQ(n, 5);
        return used;
}

static void check_nic_within(const char *shape, const char *profile, const char *within)
{
        _cleanup_free_ char *root = test_fixture(shape);
        _cleanup_irq_table_ IrqTable *t = NULL;
        _cleanup_cpuset_ CpuSet *used = NULL, *want = NULL;

        sysroot_set(root);
        CHECK_INTEQ(irq_table_load(0, CPUSET_MAX_CPUS, &t), 0);
        pass(root, profile, true, NULL);
        used = nic_cpus(t);
        CHECK_INTEQ(cpuset_parse_list(within, CPUSET_MAX_CPUS, &want, NULL), 0);
        _cleanup_free_ char *got = cpuset_format_list(used);
        if (!cpuset_subset(used, want))
                printf("# %s: enp2s0 on CPUs %s, not within %s\n", shape, got, within);
        CHECK(cpuset_subset(used, want));
}

/* One device's vectors stay close together (intel-lpmd #25): the NIC's five vectors on five CPUs of one
 * CCD, or of one core type, where the balancing CPUs allow it; the lowest-loaded CPUs alone would take
 * 4-8 and 14-18, across CCDs and across P- and E-cores. */
TEST(device_vectors_stay_close)
{
        /* 4-7 on CCD0, 8-13 on CCD1: only CCD1 has a CPU for each vector. */
        check_nic_within("ryzen-2ccd", "[Profile]\nDescription=t\n[IRQ]\nBalance=all\nCPUs=4-13\n", "8-13");
        /* 14-15 a P-core, 16-19 and 20-21 E-core clusters: the E-cores have room for all five. */
        check_nic_within("intel-hybrid", "[Profile]\nDescription=t\n[IRQ]\nBalance=all\nCPUs=14-21\n",
                         "16-21");
        /* With isolated cores, housekeeping's part of the other CCD is used the same way. */
        check_nic_within("ryzen-2ccd",
                         "[Profile]\nDescription=t\n[CPU]\nIsolate=auto:2\n[IRQ]\nBalance=housekeeping\n",
                         "0-7,16-23");
}

TEST(placement_deterministic_and_stable)
{
        _cleanup_free_ char *root = test_fixture_copy("amd-workstation");
        const char *profile = "[Profile]\nDescription=t\n[CPU]\nIsolate=7,15\n[IRQ]\nBalance=housekeeping\n";
        IrqState state = {};
        _cleanup_strv_free_ char **first = NULL;

        /* Two dry runs agree setting by setting. */
        pass(root, profile, true, NULL);
        for (size_t i = 0; i < res.plan.n; i++)
                strv_push(&first,
                          xasprintf("%s=%s", res.plan.settings[i].object, res.plan.settings[i].desired));
        pass(root, profile, true, NULL);
        CHECK_INTEQ(res.plan.n, strv_length(first));
        for (size_t i = 0; i < res.plan.n && first && first[i]; i++) {
                _cleanup_free_ char *s =
                    xasprintf("%s=%s", res.plan.settings[i].object, res.plan.settings[i].desired);
                CHECK_STREQ(s, first[i]);
        }
        /* Applied, then replanned with the rates the counters give: nothing moves. */
        pass(root, profile, false, &state);
        CHECK(res.stats.changed > 10);
        CHECK_INTEQ(res.stats.failed, 0);
        pass(root, profile, false, &state);
        CHECK_INTEQ(res.stats.changed, 0);
        /* Nothing on the isolated CPUs. */
        for (size_t i = 0; i < res.plan.n; i++)
                if (startswith(res.plan.settings[i].object, "/proc/irq/"))
                        CHECK(!strstr(res.plan.settings[i].desired, "7") &&
                              !strstr(res.plan.settings[i].desired, "15"));
        irq_state_clear(&state);
}

/* A pass whose IRQ plan fails (/proc/interrupts cannot be read) must not be taken for a profile that
 * wants nothing: nothing the tuner set is restored, the failure is reported, and the next pass with the
 * file back is clean. */
TEST(unreadable_interrupts_keep_the_placement)
{
        _cleanup_free_ char *root = test_fixture_copy("amd-workstation");
        _cleanup_free_ char *jpath = xasprintf("%s/journal.json", test_tmpdir());
        _cleanup_free_ char *interrupts = xasprintf("%s/proc/interrupts", root);
        _cleanup_free_ char *aside = xasprintf("%s.aside", interrupts);
        const char *profile = "[Profile]\nDescription=t\n[CPU]\nIsolate=7,15\n[IRQ]\nBalance=housekeeping\n";
        _cleanup_strv_free_ char **applied = NULL, **values = NULL;
        IrqState state = {};
        const Unsupported *failure = NULL;
        size_t restores = 0;
        int irq = TUNER_IRQ;

        (void)unlink(jpath);
        pass(root, profile, false, &state);
        CHECK(res.stats.changed > 10);
        for (size_t i = 0; i < res.plan.n; i++)
                if (res.plan.settings[i].result == SETTING_CHANGED &&
                    endswith(res.plan.settings[i].object, "/smp_affinity_list")) {
                        strv_push(&applied, xasprintf("%s%s", root, res.plan.settings[i].object));
                        strv_push(&values, xstrdup(res.plan.settings[i].desired));
                }

        CHECK_INTEQ(rename(interrupts, aside), 0);
        pass(root, profile, false, &state);
        CHECK(res.plan_failed[irq]);
        for (size_t i = 0; i < res.plan.n; i++)
                restores += res.plan.settings[i].restore && streq(res.plan.settings[i].tuner, "irq");
        CHECK_INTEQ(restores, 0);
        for (size_t i = 0; i < res.notes.n; i++)
                if (res.notes.items[i].error && streq(res.notes.items[i].object, "/proc/interrupts"))
                        failure = &res.notes.items[i];
        CHECK(failure != NULL);
        CHECK_INTEQ(failure ? failure->error : 0, ENOENT);
        /* What the first pass wrote is still there, and the journal still has its originals. */
        for (size_t i = 0; applied && applied[i]; i++) {
                _cleanup_free_ char *v = NULL;
                CHECK_INTEQ(read_full_file(applied[i], &v, NULL), 0);
                CHECK_STREQ(v ? strstrip(v) : NULL, values[i]);
        }
        Journal *j = NULL;
        _cleanup_free_ char *err = NULL;
        CHECK_INTEQ(journal_open(jpath, JOURNAL_RUNTIME, &j, &err), 0);
        for (char **f = applied; j && f && *f; f++)
                CHECK(journal_find(j, *f + strlen(root)) != NULL);
        journal_free(j);

        CHECK_INTEQ(rename(aside, interrupts), 0);
        pass(root, profile, false, &state);
        CHECK(!res.plan_failed[irq]);
        CHECK_INTEQ(res.stats.changed, 0);
        CHECK_INTEQ(res.stats.failed, 0);
        for (size_t i = 0; i < res.notes.n; i++)
                CHECK_INTEQ(res.notes.items[i].error, 0);
        irq_state_clear(&state);
}

/* Adds n interrupts on CPU 0 to one line of the tree's /proc/interrupts. */
static void bump(const char *root, unsigned irq, unsigned long long n)
{
        _cleanup_free_ char *path = xasprintf("%s/proc/interrupts", root), *text = NULL;
        GString *out = g_string_new(NULL);
        _cleanup_strv_free_ char **lines = NULL;

        CHECK_INTEQ(read_full_file(path, &text, NULL), 0);
        lines = strv_split(strempty(text), "\n");
        for (char **l = lines; *l; l++) {
                char *colon = strchr(*l, ':'), *end;
                unsigned long long v;
                if (colon && strtoul(*l, NULL, 10) == irq && (*l)[strspn(*l, " ")] != ':') {
                        v = strtoull(colon + 1, &end, 10);
                        g_string_append_printf(out, "%.*s %10llu%s\n", (int)(colon - *l + 1), *l, v + n,
                                               end);
                } else
                        g_string_append_printf(out, "%s\n", *l);
        }
        CHECK_INTEQ(write_file_atomic(path, out->str, false), 0);
        g_string_free(out, true);
}

TEST(swinging_rates_move_only_what_matters)
{
        _cleanup_free_ char *root = test_fixture_copy("vm2");
        const char *profile = "[Profile]\nDescription=t\n[IRQ]\nBalance=all\n";
        IrqState state = {};

        pass(root, profile, false, &state);
        /* Two busy IRQs trade places in rate from pass to pass; the quiet ones must not follow. */
        for (int round = 0; round < 4; round++) {
                bump(root, 41, round % 2 ? 100 : 100000);
                bump(root, 42, round % 2 ? 100000 : 100);
                pass(root, profile, false, &state);
                if (round > 0)
                        CHECK(res.stats.changed <= 2);
        }
        irq_state_clear(&state);
}

TEST(rules_and_pins)
{
        _cleanup_free_ char *root = test_fixture("amd-workstation");
        _cleanup_irq_table_ IrqTable *t = NULL;
        IrqState state = {};
        const Irq *hda, *nic;
        CpuSet *pin = NULL;

        sysroot_set(root);
        CHECK_INTEQ(irq_table_load(0, CPUSET_MAX_CPUS, &t), 0);
        hda = by_action(t, "snd_hda_intel:card0");
        nic = by_action(t, "enp5s0-TxRx-0");
        if (!hda || !nic)
                return;
        CHECK_INTEQ(cpuset_parse_list("3", 16, &pin, NULL), 0);
        irq_state_set_pin(&state, nic->num, pin);
        pass(root,
             "[Profile]\nDescription=t\n[CPU]\nIsolate=7,15\n[IRQ]\nBalance=housekeeping\n"
             "[IRQ audio]\nMatch=class:audio\nCPUs=isolated\n",
             true, &state);
        /* The rule puts both audio IRQs (HDA and the xHCI carrying card1) with the audio work. */
        CHECK_STREQ(desired_of_irq(hda->num), "7,15");
        CHECK_STREQ(desired_of_irq(nic->num), "3");
        irq_state_clear(&state);
}

TEST(bad_rules_name_file_line_key)
{
        char *search[] = {(char *)test_tmpdir(), NULL};
        _cleanup_policy_ Policy *p = NULL;
        _cleanup_free_ char *err = NULL;

        test_write(test_tmpdir(), "profiles/bad.conf",
                   "[Profile]\nDescription=t\n[IRQ]\nBalance=sometimes\nRebalanceSec=-1\n[IRQ x]\n"
                   "Match=class:video\nThreadPriority=100\n[IRQ y]\nMatch=irq:abc\nThreadPolicy=idle\n"
                   "CPUs=auto:2\n");
        CHECK_INTEQ(policy_load(search, "bad", &p, &err), -EINVAL);
        CHECK_CONTAINS(err, "bad.conf:4: Balance=sometimes: expected off, housekeeping or all");
        CHECK_CONTAINS(err, "bad.conf:5: RebalanceSec=-1");
        CHECK_CONTAINS(err, "bad.conf:7: Match=class:video: unknown class 'video'");
        CHECK_CONTAINS(err, "bad.conf:8: ThreadPriority=100");
        CHECK_CONTAINS(err, "bad.conf:10: Match=irq:abc");
        CHECK_CONTAINS(err, "bad.conf:11: ThreadPolicy=idle");
        CHECK_CONTAINS(err, "bad.conf:12: CPUs=auto:2");
        /* Each problem once, although two tuners read these sections. */
        unsigned n = 0;
        for (const char *s = err; s && (s = strstr(s, "ThreadPriority=100")); s++)
                n++;
        CHECK_INTEQ(n, 1);
}

TEST(thread_priorities_planned)
{
        _cleanup_free_ char *root = test_fixture_copy("amd-workstation");
        _cleanup_irq_table_ IrqTable *t = NULL;
        const Irq *hda, *usb, *nic;

        sysroot_set(root);
        CHECK_INTEQ(irq_table_load(0, CPUSET_MAX_CPUS, &t), 0);
        hda = by_action(t, "snd_hda_intel:card0");
        nic = by_action(t, "enp5s0-TxRx-1");
        usb = NULL;
        for (size_t k = 0; t && k < t->n; k++)
                if (streq_ptr(t->irqs[k].device, "0000:02:00.0"))
                        usb = &t->irqs[k];
        if (!hda || !usb || !nic)
                return;
        /* Threads as threadirqs makes them: kernel threads (PF_KTHREAD) named irq/N-name. */
        _cleanup_free_ char *s1 =
            xasprintf("901 (irq/%u-snd_hda_i) S 2 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 -51 0 1 0 7\n", hda->num);
        _cleanup_free_ char *s2 =
            xasprintf("902 (irq/%u-xhci_hcd) S 2 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 -51 0 1 0 7\n", usb->num);
        _cleanup_free_ char *s3 =
            xasprintf("903 (irq/%u-enp5s0-T) S 2 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 -51 0 1 0 7\n", nic->num);
        test_write(root, "proc/901/stat", s1);
        test_write(root, "proc/902/stat", s2);
        test_write(root, "proc/903/stat", s3);
        test_write(root, "proc/cmdline", "root=/dev/nvme0n1p2 threadirqs\n");
        pass(root,
             "[Profile]\nDescription=t\n[IRQ audio]\nMatch=class:audio\nThreadPriority=90\n"
             "[IRQ usb]\nMatch=class:usb\nThreadPriority=85\n[IRQ nic]\nMatch=driver:igc\n"
             "ThreadPolicy=other\n",
             true, NULL);
        CHECK_STREQ(find("/proc/901/sched") ? find("/proc/901/sched")->desired : NULL, "fifo:90");
        CHECK_STREQ(find("/proc/902/sched") ? find("/proc/902/sched")->desired : NULL, "fifo:85");
        CHECK_STREQ(find("/proc/903/sched") ? find("/proc/903/sched")->desired : NULL, "other:0");
        /* Rules only for threads: no IRQ is moved. */
        CHECK(desired_of_irq(hda->num) == NULL);
        /* The audio xHCI (card1) has no thread in this tree: said so. */
        CHECK(notes_contain("have no thread"));
}

TEST(shared_line_threads_matched_by_handler)
{
        /* One legacy line shared by two handlers: each has its own thread, and name:GLOB picks one. */
        _cleanup_free_ char *root = xasprintf("%s/shared", test_tmpdir());

        test_write(root, "sys/devices/system/cpu/possible", "0-1\n");
        test_write(root, "sys/devices/system/cpu/online", "0-1\n");
        test_write(root, "proc/cmdline", "threadirqs\n");
        test_write(
            root, "proc/interrupts",
            "           CPU0       CPU1       \n"
            " 16:        500        100   IO-APIC  16-fasteoi   ehci_hcd:usb1, snd_hda_intel:card0\n");
        test_write(root, "proc/irq/16/smp_affinity_list", "0-1\n");
        test_write(root, "proc/301/stat",
                   "301 (irq/16-ehci_hc) S 2 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 -51 0 1 0 7\n");
        test_write(root, "proc/302/stat",
                   "302 (irq/16-snd_hda) S 2 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 -51 0 1 0 7\n");
        pass(root, "[Profile]\nDescription=t\n[IRQ snd]\nMatch=name:snd*\nThreadPriority=90\n", true, NULL);
        CHECK_STREQ(find("/proc/302/sched") ? find("/proc/302/sched")->desired : NULL, "fifo:90");
        CHECK(find("/proc/301/sched") == NULL);
}

TEST(not_threaded_reported)
{
        _cleanup_free_ char *root = test_fixture("laptop-intel");

        pass(root, "[Profile]\nDescription=t\n[IRQ audio]\nMatch=class:audio\nThreadPriority=90\n", true,
             NULL);
        CHECK(notes_contain("IRQs are not threaded"));
        CHECK(notes_contain("threadirqs"));
}

/* A machine (or a container) whose /proc/interrupts lists no IRQ: an empty table, not a crash. */
TEST(empty_interrupts_empty_table)
{
        _cleanup_free_ char *root = test_fixture_copy("vm2");
        IrqTable *t = NULL;

        test_write(root, "proc/interrupts", "");
        sysroot_set(root);
        CHECK_INTEQ(irq_table_load(0, 2, &t), 0);
        CHECK(t && t->n == 0);
        CHECK(irq_table_find(t, 0) == NULL);
        irq_table_free(t);
        test_write(root, "proc/interrupts", "           CPU0       CPU1       \n");
        CHECK_INTEQ(irq_table_load(0, 2, &t), 0);
        CHECK(t && t->n == 0);
        irq_table_free(t);
}

/* A machine of 4096 CPUs writes lines of 45 kB: each is read whole, however the reads cut the file,
 * and the counts add up over every column. */
TEST(wide_lines_read_whole)
{
        const unsigned n_cpus = 4096, n_irqs = 40;
        _cleanup_free_ char *root = xasprintf("%s/wide", test_tmpdir());
        g_autoptr(GString) text = g_string_new("");
        _cleanup_irq_table_ IrqTable *t = NULL;

        for (unsigned c = 0; c < n_cpus; c++)
                g_string_append_printf(text, "%sCPU%u", c ? "  " : "           ", c);
        g_string_append_c(text, '\n');
        for (unsigned irq = 0; irq < n_irqs; irq++) {
                g_string_append_printf(text, "%3u:", irq);
                for (unsigned c = 0; c < n_cpus; c++)
                        g_string_append_printf(text, " %10u", c == n_cpus - 1 ? irq + 1 : 1);
                g_string_append_printf(text, "  PCI-MSIX-0000:00:%02x.0 0-edge queue%u\n", irq, irq);
        }
        test_write(root, "proc/interrupts", text->str);
        sysroot_set(root);
        CHECK_INTEQ(irq_table_load(0, n_cpus, &t), 0);
        CHECK_INTEQ(t ? t->n : 0, n_irqs);
        for (unsigned irq = 0; t && irq < n_irqs; irq++) {
                const Irq *i = irq_table_find(t, irq);
                _cleanup_free_ char *name = xasprintf("queue%u", irq);

                CHECK_STREQ(i ? i->actions : NULL, name);
                CHECK_INTEQ(i ? i->count : 0, n_cpus - 1 + irq + 1);
        }
}

TEST_MAIN(T(workstation_classification), T(empty_interrupts_empty_table), T(arm64_layout_parsed),
          T(server_classification_and_managed), T(device_vectors_stay_close), T(vm2_every_irq_covered),
          T(isolating_implies_housekeeping_irqs), T(spread_is_numa_local_and_per_queue),
          T(placement_deterministic_and_stable), T(unreadable_interrupts_keep_the_placement),
          T(swinging_rates_move_only_what_matters), T(rules_and_pins), T(bad_rules_name_file_line_key),
          T(thread_priorities_planned), T(shared_line_threads_matched_by_handler), T(not_threaded_reported),
          T(wide_lines_read_whole))
