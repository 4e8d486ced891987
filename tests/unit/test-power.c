/* SPDX-License-Identifier: GPL-2.0-or-later */
/* cpufreq and cpuidle plans on the generated shapes: intel_pstate active with EPP (laptop-intel),
 * intel_cpufreq passive (smp2x8), amd-pstate-epp with per-policy boost (amd-workstation), acpi-cpufreq
 * with policies spanning SMT siblings (server-2x32), no cpufreq at all (vm2). This host has no cpufreq:
 * the real kernel's side is cpuidle and PM QoS, tested in tests/integration/test_power.py. */
#include <stdlib.h>

#include "core/reconcile.h"
#include "shared/sysfs.h"
#include "test.h"

static PassResult res;

/* What the setting kinds keep between passes, as the daemon's Manager holds it (the PM QoS descriptor). */
static SettingContext kinds;

static void pass_with(const char *root, const char *profile_text, Journal *j, bool restore)
{
        char *search[] = {(char *)test_tmpdir(), NULL};
        _cleanup_policy_ Policy *p = NULL;
        _cleanup_free_ char *err = NULL;

        if (profile_text)
                test_write(test_tmpdir(), "profiles/pw.conf", profile_text);
        sysroot_set(root);
        pass_result_clear(&res);
        if (!restore) {
                CHECK_INTEQ(policy_load(search, "pw", &p, &err), 0);
                if (err)
                        printf("# %s\n", err);
                if (!p)
                        return;
        }
        if (!kinds.refused)
                setting_context_init(&kinds, NULL);
        test_pass_policy(root, p, j, &(PassInput){.kinds = &kinds}, &res);
}

static void plan(const char *shape, const char *profile_text)
{
        _cleanup_free_ char *root = test_fixture(shape);
        pass_with(root, profile_text, NULL, false);
}

static const char *desired(const char *object)
{
        return test_plan_desired(&res.plan, object);
}

static const Unsupported *note(const char *text)
{
        return test_note(&res, text);
}

static size_t planned_under(const char *prefix)
{
        size_t n = 0;
        for (size_t i = 0; i < res.plan.n; i++)
                n += startswith(res.plan.settings[i].object, prefix) != NULL;
        return n;
}

#define CPUFREQ "/sys/devices/system/cpu/cpufreq/"

TEST(intel_pstate_active_per_set)
{
        plan("laptop-intel", "[Profile]\nDescription=t\n[Power]\nCPUs=3,7\nGovernor=performance\n"
                             "EnergyPerformancePreference=performance\nMinFreq=max\n"
                             "[Power rest]\nGovernor=powersave\nEnergyPerformancePreference=balance_power\n"
                             "Boost=no\n");
        CHECK_STREQ(desired(CPUFREQ "policy3/scaling_governor"), "performance");
        CHECK_STREQ(desired(CPUFREQ "policy7/energy_performance_preference"), "performance");
        CHECK_STREQ(desired(CPUFREQ "policy3/scaling_min_freq"), "4700000");
        /* The rest keep powersave; nothing to write where it is already so. */
        CHECK_STREQ(desired(CPUFREQ "policy0/scaling_governor"), "powersave");
        CHECK_STREQ(desired(CPUFREQ "policy0/energy_performance_preference"), "balance_power");
        /* intel_pstate's boost switch is machine-wide and inverted. */
        CHECK_STREQ(desired("/sys/devices/system/cpu/intel_pstate/no_turbo"), "1");
        CHECK(desired(CPUFREQ "policy0/scaling_min_freq") == NULL);
}

TEST(unoffered_values_name_the_choices)
{
        const Unsupported *u;

        plan("laptop-intel", "[Profile]\nDescription=t\n[Power]\nGovernor=ondemand\n");
        u = note("Governor=ondemand");
        CHECK(u && u->error == EINVAL);
        CHECK_CONTAINS(u ? u->reason : NULL,
                       "is not offered by intel_pstate (it offers: performance powersave)");
        CHECK(desired(CPUFREQ "policy0/scaling_governor") == NULL);
        /* EPP other than performance under the performance governor: the driver answers EBUSY. */
        plan("laptop-intel", "[Profile]\nDescription=t\n[Power]\nGovernor=performance\n"
                             "EnergyPerformancePreference=power\n");
        u = note("keeps EPP at performance");
        CHECK(u && u->error == EBUSY);
        plan("laptop-intel", "[Profile]\nDescription=t\n[Power]\nMinFreq=100\n");
        u = note("MinFreq=100");
        CHECK(u && u->error == ERANGE);
        CHECK_CONTAINS(u ? u->reason : NULL, "400000-4700000 kHz");
}

TEST(intel_cpufreq_passive_has_no_epp)
{
        plan("smp2x8", "[Profile]\nDescription=t\n[Power]\nCPUs=8-15\nGovernor=schedutil\n"
                       "EnergyPerformancePreference=performance\n");
        CHECK_STREQ(desired(CPUFREQ "policy8/scaling_governor"), "schedutil");
        CHECK(desired(CPUFREQ "policy0/scaling_governor") == NULL);
        CHECK(note("has no energy/performance preference") != NULL);
        CHECK(note("has no energy/performance preference")->error == 0);
}

TEST(amd_pstate_per_policy_boost_and_epp)
{
        plan("amd-workstation",
             "[Profile]\nDescription=t\n[Power iso]\nCPUs=7,15\nBoost=no\n"
             "EnergyPerformancePreference=performance\n[Power]\nEnergyPerformancePreference=power\n");
        CHECK_STREQ(desired(CPUFREQ "policy7/boost"), "0");
        CHECK_STREQ(desired(CPUFREQ "policy15/boost"), "0");
        CHECK(desired(CPUFREQ "policy0/boost") == NULL);
        CHECK_STREQ(desired(CPUFREQ "policy15/energy_performance_preference"), "performance");
        CHECK_STREQ(desired(CPUFREQ "policy0/energy_performance_preference"), "power");
        CHECK(desired(CPUFREQ "boost") == NULL);
}

TEST(acpi_cpufreq_shared_policy_not_widened)
{
        /* Each server-2x32 policy governs a core's two threads, N and N+64. */
        plan("server-2x32",
             "[Profile]\nDescription=t\n[Power]\nCPUs=0-3\nGovernor=performance\nMinFreq=50%\n");
        CHECK(planned_under(CPUFREQ) == 0);
        CHECK_CONTAINS(note("governs CPUs") ? note("governs CPUs")->reason : NULL,
                       "policy0 governs CPUs 0,64 together");
        plan("server-2x32", "[Profile]\nDescription=t\n[Power]\nCPUs=0-3,64-67\nGovernor=performance\n"
                            "MinFreq=50%\nEnergyPerformancePreference=performance\nBoost=no\n");
        CHECK_STREQ(desired(CPUFREQ "policy0/scaling_governor"), "performance");
        CHECK_STREQ(desired(CPUFREQ "policy3/scaling_governor"), "performance");
        CHECK(desired(CPUFREQ "policy4/scaling_governor") == NULL);
        CHECK(desired(CPUFREQ "policy0/scaling_min_freq") != NULL);
        CHECK(note("acpi-cpufreq has no energy/performance preference") != NULL);
        /* acpi-cpufreq's boost is machine-wide: not from a set of 8 CPUs. */
        CHECK(note("boosts all CPUs or none") != NULL);
        CHECK(desired(CPUFREQ "boost") == NULL);
}

TEST(no_cpufreq_is_not_supported)
{
        plan("vm2", "[Profile]\nDescription=t\n[Power]\nGovernor=performance\n");
        CHECK(note("no cpufreq driver") != NULL);
        CHECK(note("no cpufreq driver")->error == 0);
        CHECK(planned_under(CPUFREQ) == 0);
}

TEST(idle_states_above_the_cap)
{
        /* laptop-intel: POLL C1 C1E C6 C8 C10 = 0/1/2/170/200/230 µs. */
        plan("laptop-intel", "[Profile]\nDescription=t\n[Power]\nCPUs=3\nMaxExitLatencyUs=2\n");
        CHECK_STREQ(desired("/sys/devices/system/cpu/cpu3/power/pm_qos_resume_latency_us"), "2");
        CHECK(desired("/sys/devices/system/cpu/cpu3/cpuidle/state2/disable") == NULL);
        CHECK_STREQ(desired("/sys/devices/system/cpu/cpu3/cpuidle/state3/disable"), "1");
        CHECK_STREQ(desired("/sys/devices/system/cpu/cpu3/cpuidle/state5/disable"), "1");
        CHECK(planned_under("/sys/devices/system/cpu/cpu2/") == 0);
        /* 0 µs: the kernel's spelling is n/a (writing 0 would mean no constraint). */
        plan("laptop-intel", "[Profile]\nDescription=t\n[Power]\nCPUs=3\nMaxExitLatencyUs=0\n");
        CHECK_STREQ(desired("/sys/devices/system/cpu/cpu3/power/pm_qos_resume_latency_us"), "n/a");
        CHECK_STREQ(desired("/sys/devices/system/cpu/cpu3/cpuidle/state1/disable"), "1");
        CHECK(desired("/sys/devices/system/cpu/cpu3/cpuidle/state0/disable") == NULL);
}

/* shallowest: the first state that does not poll stays, every deeper one goes (tuned's
 * cstate.id_no_zero:1). On a VM that is haltpoll's halt, which hands the vCPU back to the host. */
TEST(shallowest_keeps_the_first_state_that_does_not_poll)
{
        plan("laptop-intel", "[Profile]\nDescription=t\n[Power]\nCPUs=3\nMaxExitLatencyUs=shallowest\n");
        CHECK_STREQ(desired("/sys/devices/system/cpu/cpu3/power/pm_qos_resume_latency_us"), "1");
        CHECK(desired("/sys/devices/system/cpu/cpu3/cpuidle/state1/disable") == NULL);
        CHECK_STREQ(desired("/sys/devices/system/cpu/cpu3/cpuidle/state2/disable"), "1");
        CHECK_STREQ(desired("/sys/devices/system/cpu/cpu3/cpuidle/state5/disable"), "1");
        CHECK(planned_under("/sys/devices/system/cpu/cpu2/") == 0);

        plan("vm2", "[Profile]\nDescription=t\n[Power]\nCPUs=1\nMaxExitLatencyUs=shallowest\n");
        CHECK_STREQ(desired("/sys/devices/system/cpu/cpu1/power/pm_qos_resume_latency_us"), "1");
        CHECK(planned_under("/sys/devices/system/cpu/cpu1/cpuidle/") == 0);

        /* holes: cpu4 is offline, no states to read: the PM QoS value the online CPUs got. */
        plan("holes", "[Profile]\nDescription=t\n[Power]\nMaxExitLatencyUs=shallowest\n");
        CHECK_STREQ(desired("/sys/devices/system/cpu/cpu4/power/pm_qos_resume_latency_us"), "1");
        CHECK_STREQ(desired("/sys/devices/system/cpu/cpu3/power/pm_qos_resume_latency_us"), "1");
        CHECK(planned_under("/sys/devices/system/cpu/cpu4/cpuidle/") == 0);
        /* A set of offline CPUs only: the value any online CPU gives, so going offline changes nothing. */
        plan("holes", "[Profile]\nDescription=t\n[Power]\nCPUs=4\nMaxExitLatencyUs=shallowest\n");
        CHECK_STREQ(desired("/sys/devices/system/cpu/cpu4/power/pm_qos_resume_latency_us"), "1");
        CHECK(planned_under("/sys/devices/system/cpu/cpu3/") == 0);
}

TEST(offline_cpus_are_not_planned)
{
        /* holes: cpu4 and cpu5 are offline, their cpuidle/ is gone; the PM QoS value, which survives
         * hotplug, is kept for them; absent CPUs (6, 7) have nothing. */
        plan("holes", "[Profile]\nDescription=t\n[Power]\nMaxExitLatencyUs=0\n");
        CHECK_STREQ(desired("/sys/devices/system/cpu/cpu4/power/pm_qos_resume_latency_us"), "n/a");
        CHECK(planned_under("/sys/devices/system/cpu/cpu4/cpuidle/") == 0);
        CHECK(planned_under("/sys/devices/system/cpu/cpu6/") == 0);
        CHECK(planned_under("/sys/devices/system/cpu/cpu3/") > 0);
}

TEST(global_request_held_and_released)
{
        _cleanup_free_ char *src = test_fixture("laptop-intel");
        _cleanup_free_ char *root = xasprintf("%s/laptop-copy", test_tmpdir());
        _cleanup_free_ char *cmd = xasprintf("rm -rf '%s' && cp -a '%s' '%s'", root, src, root);
        _cleanup_free_ char *jpath = xasprintf("%s/journal-power.json", test_tmpdir()), *err = NULL;
        Journal *j = NULL;

        CHECK_INTEQ(system(cmd), 0);
        CHECK_INTEQ(journal_open(jpath, JOURNAL_RUNTIME, &j, &err), 0);
        if (!j)
                return;
        pass_with(root, "[Profile]\nDescription=t\n[Power]\nGlobalMaxExitLatencyUs=0\n", j, false);
        CHECK_STREQ(desired("/dev/cpu_dma_latency"), "0");
        CHECK_INTEQ(res.stats.failed, 0);
        CHECK(kinds.pmqos_fd >= 0);
        CHECK_STREQ(journal_find(j, "/dev/cpu_dma_latency")
                        ? journal_find(j, "/dev/cpu_dma_latency")->original
                        : NULL,
                    "none");
        /* Restore: the descriptor closes, which is what ends the request. */
        pass_with(root, NULL, j, true);
        CHECK(kinds.pmqos_fd < 0);
        CHECK(journal_find(j, "/dev/cpu_dma_latency") == NULL);
        journal_free(j);
}

/* [AudioDevices]: the sound devices found by class (the cards of /sys/class/sound), nothing else. On
 * amd-workstation an HDA function behind a PCIe link (card0) and a Scarlett 2i2 on usb1 (card1), beside
 * a USB stick on usb2: the codec's power saving off, the interface and its root hub awake (not the
 * stick, not its hub), the HDA link's ASPM states off; journalled, and put back by a restore. */
#define AMD_USB    "/sys/devices/pci0000:00/0000:00:08.1/0000:0b:00.3/"
#define AMD_HDA    "/sys/devices/pci0000:00/0000:00:08.1/0000:0b:00.4/"
#define HDA_PARAMS "/sys/module/snd_hda_intel/parameters/"

static char *fixture_file(const char *root, const char *path)
{
        _cleanup_free_ char *full = xasprintf("%s%s", root, path);
        char *s = NULL;

        if (read_full_file(full, &s, NULL) < 0)
                return xstrdup("(missing)");
        return strstrip(s);
}

#define CHECK_FIXTURE(root, path, value)                                                                    \
        do {                                                                                                \
                _cleanup_free_ char *v_ = fixture_file(root, path);                                         \
                CHECK_STREQ(v_, value);                                                                     \
        } while (0)

TEST(audio_devices_stay_awake)
{
        _cleanup_free_ char *src = test_fixture("amd-workstation");
        _cleanup_free_ char *root = xasprintf("%s/amd-audio", test_tmpdir());
        _cleanup_free_ char *cmd = xasprintf("rm -rf '%s' && cp -a '%s' '%s'", root, src, root);
        _cleanup_free_ char *jpath = xasprintf("%s/journal-audiodev.json", test_tmpdir()), *err = NULL;
        const char *profile = "[Profile]\nDescription=t\n[AudioDevices]\nPowerSave=off\nUSBAutosuspend=off\n"
                              "ASPM=off\n";
        Journal *j = NULL;

        CHECK_INTEQ(system(cmd), 0);
        CHECK_INTEQ(journal_open(jpath, JOURNAL_RUNTIME, &j, &err), 0);
        if (!j)
                return;
        pass_with(root, profile, j, false);
        CHECK_STREQ(desired(AMD_USB "usb1/1-2/power/control"), "on");
        CHECK_STREQ(desired(AMD_USB "usb1/power/control"), "on");
        CHECK(desired(AMD_USB "usb2/2-1/power/control") == NULL);
        CHECK(desired(AMD_USB "usb2/power/control") == NULL);
        CHECK_STREQ(desired(HDA_PARAMS "power_save"), "0");
        CHECK_STREQ(desired(HDA_PARAMS "power_save_controller"), "N");
        CHECK_STREQ(desired(AMD_HDA "link/l1_aspm"), "0");
        CHECK_STREQ(desired(AMD_HDA "link/l0s_aspm"), "0");
        CHECK(desired(AMD_HDA "link/l1_2_aspm") == NULL); /* a state the link does not have */
        CHECK_INTEQ(res.stats.failed, 0);
        CHECK_FIXTURE(root, AMD_USB "usb1/1-2/power/control", "on");
        CHECK_FIXTURE(root, HDA_PARAMS "power_save", "0");
        CHECK_FIXTURE(root, AMD_HDA "link/l1_aspm", "0");
        CHECK_STREQ(journal_find(j, AMD_USB "usb1/1-2/power/control")
                        ? journal_find(j, AMD_USB "usb1/1-2/power/control")->original
                        : NULL,
                    "auto");
        /* Restore: every value as it was. */
        pass_with(root, NULL, j, true);
        CHECK_FIXTURE(root, AMD_USB "usb1/1-2/power/control", "auto");
        CHECK_FIXTURE(root, AMD_USB "usb1/power/control", "auto");
        CHECK_FIXTURE(root, HDA_PARAMS "power_save", "1");
        CHECK_FIXTURE(root, HDA_PARAMS "power_save_controller", "Y");
        CHECK_FIXTURE(root, AMD_HDA "link/l1_aspm", "1");
        CHECK_FIXTURE(root, AMD_HDA "link/l0s_aspm", "1");
        journal_free(j);

        /* A graphics card's HDMI audio (function 1 beside a display controller) shares the GPU's link:
         * its ASPM is left alone, and said. A second interface on usb1: the root hub planned once. */
        test_write(root, "sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/class", "0x030000\n");
        test_write(root, "sys/devices/pci0000:00/0000:00:01.1/0000:01:00.1/class", "0x040300\n");
        test_write(root, "sys/devices/pci0000:00/0000:00:01.1/0000:01:00.1/link/l1_aspm", "1\n");
        test_write(root, "sys/devices/pci0000:00/0000:00:08.1/0000:0b:00.3/usb1/1-3/idVendor", "1235\n");
        test_write(root, "sys/devices/pci0000:00/0000:00:08.1/0000:0b:00.3/usb1/1-3/power/control",
                   "auto\n");
        test_write(root, "sys/devices/pci0000:00/0000:00:08.1/0000:0b:00.3/usb1/1-3/1-3:1.0/bInterfaceClass",
                   "01\n");
        static const char *const card_devs[] = {"/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.1",
                                                AMD_USB "usb1/1-3/1-3:1.0"};
        for (unsigned k = 0; k < ELEMENTSOF(card_devs); k++) {
                _cleanup_free_ char *target = xasprintf("%s%s", root, card_devs[k]);
                _cleanup_free_ char *card = xasprintf("%s/sys/class/sound/card%u", root, 7 + k);
                _cleanup_free_ char *dir =
                    xasprintf("%s/sys/devices/virtual/sound-test/card%u", root, 7 + k);
                _cleanup_free_ char *link = xasprintf("%s/device", dir),
                                    *mk = xasprintf("mkdir -p '%s'", dir);
                CHECK_INTEQ(system(mk), 0);
                CHECK(symlink(target, link) == 0);
                CHECK(symlink(dir, card) == 0);
        }
        pass_with(root, profile, NULL, false);
        CHECK(desired("/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.1/link/l1_aspm") == NULL);
        CHECK(note("the audio of a graphics card") != NULL);
        CHECK_STREQ(desired(AMD_USB "usb1/1-3/power/control"), "on");
        size_t hub = 0;
        for (size_t i = 0; i < res.plan.n; i++)
                hub += streq(res.plan.settings[i].object, AMD_USB "usb1/power/control");
        CHECK_INTEQ(hub, 1);

        /* A laptop's HDA is a root-complex integrated function: no link of its own, the codec's saving
         * only; keep leaves a knob alone. */
        plan("laptop-intel", "[Profile]\nDescription=t\n[AudioDevices]\nPowerSave=off\nASPM=keep\n");
        CHECK_STREQ(desired(HDA_PARAMS "power_save"), "0");
        CHECK(planned_under("/sys/devices/") == 0);
        /* No sound device and no snd_hda_intel (vm2): nothing to do. */
        plan("vm2", profile);
        CHECK(planned_under("/sys/") == 0);
}

TEST(bad_audio_devices_section)
{
        char *search[] = {(char *)test_tmpdir(), NULL};
        _cleanup_policy_ Policy *p = NULL;
        _cleanup_free_ char *err = NULL;

        test_write(test_tmpdir(), "profiles/badad.conf",
                   "[Profile]\nDescription=t\n[AudioDevices]\nPowerSave=no\nASPM=0\nColour=red\n");
        CHECK_INTEQ(policy_load(search, "badad", &p, &err), -EINVAL);
        CHECK_CONTAINS(err, "badad.conf:4: PowerSave=no: PowerSave is off or keep");
        CHECK_CONTAINS(err, "badad.conf:5: ASPM=0: ASPM is off or keep");
        CHECK_CONTAINS(err, "badad.conf:6: Colour");
}

TEST(bad_power_sections)
{
        char *search[] = {(char *)test_tmpdir(), NULL};
        _cleanup_policy_ Policy *p = NULL;
        _cleanup_free_ char *err = NULL;

        test_write(
            test_tmpdir(), "profiles/bad.conf",
            "[Profile]\nDescription=t\n[Power]\nGovernor=turbo\nMinFreq=150%\nBoost=maybe\n[Power x]\n"
            "GlobalMaxExitLatencyUs=0\nMaxExitLatencyUs=-5\nCPUs=auto:1\nEnergyPerformancePreference="
            "fast\n[Power y]\nMaxExitLatencyUs=deepest\n");
        CHECK_INTEQ(policy_load(search, "bad", &p, &err), -EINVAL);
        CHECK_CONTAINS(err, "bad.conf:4: Governor=turbo: unknown governor");
        CHECK_CONTAINS(err, "bad.conf:5: MinFreq=150%");
        CHECK_CONTAINS(err, "bad.conf:6: Boost=maybe");
        CHECK_CONTAINS(err,
                       "bad.conf:8: GlobalMaxExitLatencyUs=0: the system-wide request belongs in [Power]");
        CHECK_CONTAINS(err, "bad.conf:9: MaxExitLatencyUs=-5");
        CHECK_CONTAINS(err, "bad.conf:10: CPUs=auto:1");
        CHECK_CONTAINS(err, "bad.conf:11: EnergyPerformancePreference=fast");
        CHECK_CONTAINS(err,
                       "bad.conf:13: MaxExitLatencyUs=deepest: expected microseconds, 0 or more (0: poll "
                       "only), or shallowest");
        unsigned n = 0;
        for (const char *s = err; s && (s = strstr(s, "Governor=turbo")); s++)
                n++;
        CHECK_INTEQ(n, 1);
}

TEST_MAIN(T(intel_pstate_active_per_set), T(unoffered_values_name_the_choices),
          T(intel_cpufreq_passive_has_no_epp), T(amd_pstate_per_policy_boost_and_epp),
          T(acpi_cpufreq_shared_policy_not_widened), T(no_cpufreq_is_not_supported),
          T(idle_states_above_the_cap), T(shallowest_keeps_the_first_state_that_does_not_poll),
          T(offline_cpus_are_not_planned), T(global_request_held_and_released), T(audio_devices_stay_awake),
          T(bad_audio_devices_section), T(bad_power_sections))
