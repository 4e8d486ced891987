"""C-state pinning on the real kernel: this host's haltpoll cpuidle states (POLL 0 µs, haltpoll 1 µs),
per-CPU PM QoS and /dev/cpu_dma_latency. It has no cpufreq driver; that side is planned on fixtures
(tests/unit/test-power.c)."""
import json
import os
import shutil
import signal
import time

import pytest

import machine
from conftest import wait_until
import harness
from harness import Env, LogindBus

CPU = "/sys/devices/system/cpu/cpu%d/"


@pytest.fixture(autouse=True)
def cpu1_back_online():
    with machine.cpu1_hotplug_guard():
        yield


def state(cpu, name, attr):
    for d in sorted(os.listdir(CPU % cpu + "cpuidle")):
        if machine.read(CPU % cpu + "cpuidle/%s/name" % d) == name:
            return machine.read(CPU % cpu + "cpuidle/%s/%s" % (d, attr))
    raise AssertionError("cpu%d has no idle state %s" % (cpu, name))


def usage(cpu, name):
    return int(state(cpu, name, "usage"))


def idle_periods(cpu):
    return usage(cpu, "POLL") + usage(cpu, "haltpoll idle")


def qos(cpu):
    return machine.read(CPU % cpu + "power/pm_qos_resume_latency_us")


PIN_CPU1 = """[Profile]
Description=test: cpu1 polls, never halts
[Power]
CPUs=1
MaxExitLatencyUs=0
"""


# Isolated, cpu1 idles however busy the machine is (the rest runs on cpu0).
ISOLATE_CPU1 = """[Profile]
Description=test: cpu1 isolated, so that it idles
[CPU]
Isolate=1
KernelThreads=leave
"""


def haltpoll_share(cpu, periods=100):
    """How many of cpu's next idle periods (at least periods of them, counted once the one it is in has
    ended) were haltpoll. Counted in idle periods, not seconds: a busy machine only makes it longer."""
    idled = idle_periods(cpu)
    assert wait_until(lambda: idle_periods(cpu) > idled), "cpu%d never idled" % cpu
    halts, idled = usage(cpu, "haltpoll idle"), idle_periods(cpu)
    assert wait_until(lambda: idle_periods(cpu) >= idled + periods)
    return usage(cpu, "haltpoll idle") - halts


def test_cpu1_stops_entering_haltpoll_while_cpu0_keeps_it(env):
    env.profile("iso", ISOLATE_CPU1)
    env.profile("pin", ISOLATE_CPU1 + PIN_CPU1[PIN_CPU1.index("[Power]"):])
    d = env.start("--profile", "iso")
    # Left alone, the governor puts an idle cpu1 in haltpoll.
    halts = usage(1, "haltpoll idle")
    assert wait_until(lambda: usage(1, "haltpoll idle") > halts)
    env.rtctl("profile", "pin", check=True)
    assert qos(1) == "n/a" and qos(0) == "0"
    assert state(1, "haltpoll idle", "disable") == "1"
    assert state(0, "haltpoll idle", "disable") == "0"
    assert haltpoll_share(1) == 0, "cpu1 still entered haltpoll"
    # No cpufreq on this machine: said, not failed.
    status = env.rtctl_json("status")
    assert status["failures"] == []
    cpus = {c["cpu"]: c for c in status["cpus"]}
    assert cpus[1]["idle_disabled"] == "haltpoll idle" and cpus[1]["pm_qos_resume_latency_us"] == "n/a"
    assert cpus[0]["idle_disabled"] == "" and cpus[0]["governor"] == ""
    d.stop()
    assert qos(1) == "0" and state(1, "haltpoll idle", "disable") == "0"


SHALLOW_CPU1 = """[Power]
CPUs=1
MaxExitLatencyUs=shallowest
"""


def test_shallowest_keeps_cpu1_halting_and_survives_hotplug(env):
    """The audio profile's cap: cpu1 still halts in haltpoll (its first state that does not poll), capped
    at that state's exit latency; an offline cpu1 keeps the value, the online pass leaves haltpoll on."""
    env.profile("shallow", ISOLATE_CPU1 + SHALLOW_CPU1)
    d = env.start("--profile", "shallow")
    latency = state(1, "haltpoll idle", "latency")
    assert qos(1) == latency and qos(0) == "0"
    assert state(1, "haltpoll idle", "disable") == "0"
    assert haltpoll_share(1) > 0, "cpu1 never entered haltpoll"
    with machine.cpu1_hotplug_guard():
        machine.set_cpu1(False)
        time.sleep(0.5)  # the offline pass
        assert qos(1) == latency
        machine.set_cpu1(True)
        assert wait_until(lambda: os.path.exists(CPU % 1 + "cpuidle"))
        time.sleep(0.5)  # the online pass
        assert qos(1) == latency and state(1, "haltpoll idle", "disable") == "0"
    assert env.rtctl_json("status")["failures"] == []
    d.stop()
    assert qos(1) == "0"


def test_missing_cpufreq_reported_as_not_supported(env):
    env.profile("gov", "[Profile]\nDescription=test: governor\n[Power]\nGovernor=performance\n")
    d = env.start("--profile", "gov")
    status = env.rtctl_json("status")
    assert status["state"] == "applied" and status["failures"] == []
    assert any("no cpufreq driver" in u["message"] for u in status["unsupported"])
    d.stop()


def holds_dma_latency(pid):
    fd_dir = "/proc/%d/fd" % pid
    return any(os.readlink(os.path.join(fd_dir, f)) == "/dev/cpu_dma_latency" for f in os.listdir(fd_dir))


def test_global_request_held_open_and_closed_on_restore(env):
    env.profile("glob", "[Profile]\nDescription=test: dma latency\n[Power]\nGlobalMaxExitLatencyUs=0\n")
    d = env.start("--profile", "glob")
    assert holds_dma_latency(d.proc.pid)
    assert env.rtctl_json("status")["dma_latency_request_us"] == 0
    env.rtctl("restore", check=True)
    assert not holds_dma_latency(d.proc.pid)
    assert env.rtctl_json("status")["dma_latency_request_us"] == -1
    env.rtctl("profile", "glob", check=True)
    assert holds_dma_latency(d.proc.pid)
    d.stop()


def test_cpu1_offline_online_reapplies(env):
    env.profile("pin", PIN_CPU1)
    d = env.start("--profile", "pin")
    assert state(1, "haltpoll idle", "disable") == "1"
    machine.set_cpu1(False)
    assert not os.path.exists(CPU % 1 + "cpuidle")
    machine.set_cpu1(True)
    # The kernel brings cpuidle/ back with every state enabled; the online pass disables it again.
    assert wait_until(lambda: state(1, "haltpoll idle", "disable") == "1")
    assert qos(1) == "n/a"
    assert env.rtctl_json("status")["failures"] == []
    d.stop()
    assert state(1, "haltpoll idle", "disable") == "0" and qos(1) == "0"


def test_resume_from_suspend_reapplies_idle_states(tmp_root):
    bus = LogindBus(tmp_root)
    env = Env(tmp_root, bus)
    try:
        env.profile("pin", PIN_CPU1)
        d = env.start("--profile", "pin")
        for f in os.listdir(CPU % 1 + "cpuidle"):
            if machine.read(CPU % 1 + "cpuidle/%s/name" % f) == "haltpoll idle":
                with open(CPU % 1 + "cpuidle/%s/disable" % f, "w") as fh:
                    fh.write("0")  # what firmware may leave after a suspend
        bus.resume()
        assert wait_until(lambda: state(1, "haltpoll idle", "disable") == "1")
        d.stop()
    finally:
        env.cleanup()
        bus.stop()


def test_unoffered_governor_is_a_named_failure_and_the_daemon_stays_up(env, tmp_path):
    """On a fixture of an intel_pstate laptop (RTCTL_SYSROOT; this host has no cpufreq): a governor the
    driver does not offer fails naming what it offers, the rest of the profile applies, the daemon
    stays up, and restore puts the fixture's files back."""
    src = os.path.join(harness.BUILD, "tests", "unit", "fixtures", "laptop-intel")
    assert os.path.isdir(src), "fixtures are built with the tree (ninja -C %s)" % harness.BUILD
    root = str(tmp_path / "laptop")
    shutil.copytree(src, root, symlinks=True)
    gov = root + "/sys/devices/system/cpu/cpufreq/policy%d/scaling_governor"
    before = [machine.read(gov % i) for i in range(8)]
    env.extra["RTCTL_SYSROOT"] = root
    env.profile("od", "[Profile]\nDescription=test: unoffered governor\n[Power]\nCPUs=3\nGovernor=performance\n"
                      "[Power rest]\nGovernor=ondemand\n")
    d = env.start("--profile", "od")
    p = env.rtctl("--json", "status")
    assert p.returncode == 1, "status exits 1 when degraded"
    status = json.loads(p.stdout)
    assert status["state"] == "degraded"
    msgs = [f["message"] for f in status["failures"]]
    assert len(msgs) == 7, msgs
    assert all("Governor=ondemand of [Power rest] is not offered by intel_pstate (it offers: performance powersave)"
               in m for m in msgs), msgs
    assert machine.read(gov % 3) == "performance"
    cpus = {c["cpu"]: c for c in status["cpus"]}
    assert cpus[3]["governor"] == "performance" and cpus[0]["governor"] == "powersave"
    assert cpus[3]["driver"] == "intel_pstate" and cpus[3]["epp"] == "balance_performance"
    assert d.running()
    d.stop()
    assert [machine.read(gov % i) for i in range(8)] == before


def test_power_rivals_reported(env, tmp_path):
    with machine.process_named("tuned", tmp_path) as proc:
        env.profile("pin", PIN_CPU1)
        d = env.start("--profile", "pin")
        notes = " ".join(u["message"] for u in env.rtctl_json("status")["unsupported"])
        assert "tuned runs (PID %d) and sets governors, EPP and /dev/cpu_dma_latency" % proc.pid in notes
        assert "OnConflict=stop" in notes
        d.stop()


AMD_USB = "/sys/devices/pci0000:00/0000:00:08.1/0000:0b:00.3"
AMD_HDA = "/sys/devices/pci0000:00/0000:00:08.1/0000:0b:00.4"


def test_audio_devices_stay_awake_on_a_fixture_workstation(tmp_root, tmp_path):
    """rtctld on the amd-workstation fixture (RTCTL_SYSROOT; this host has no sound device): the audio
    profile's [AudioDevices] turns the HDA codec's power saving, the Scarlett's autosuspend (and its root
    hub's) and the HDA link's ASPM off; what a driver resets across suspend comes back after logind's
    PrepareForSleep(false); an interface plugged in later is kept awake at the next replan; every file
    is as it was after rtctld stops."""
    src = os.path.join(harness.BUILD, "tests", "unit", "fixtures", "amd-workstation")
    assert os.path.isdir(src), "fixtures are built with the tree (ninja -C %s)" % harness.BUILD
    root = str(tmp_path / "ws")
    shutil.copytree(src, root, symlinks=True)
    files = [AMD_USB + "/usb1/1-2/power/control", AMD_USB + "/usb1/power/control",
             AMD_USB + "/usb2/2-1/power/control", "/sys/module/snd_hda_intel/parameters/power_save",
             "/sys/module/snd_hda_intel/parameters/power_save_controller", AMD_HDA + "/link/l1_aspm"]
    val = lambda f: machine.read(root + f)
    before = {f: val(f) for f in files}
    bus = LogindBus(tmp_root)
    env = Env(tmp_root, bus)
    try:
        env.extra["RTCTL_SYSROOT"] = root
        env.profile("ad", "[Profile]\nDescription=test: audio devices\n[AudioDevices]\nPowerSave=off\n"
                    "USBAutosuspend=off\nASPM=off\n")
        d = env.start("--profile", "ad")
        want = {files[0]: "on", files[1]: "on", files[2]: "auto", files[3]: "0", files[4]: "N", files[5]: "0"}
        assert wait_until(lambda: {f: val(f) for f in files} == want), {f: val(f) for f in files}
        # Across a suspend the USB core put the interface back on autosuspend.
        with open(root + files[0], "w") as f:
            f.write("auto")
        bus.resume()
        assert wait_until(lambda: val(files[0]) == "on"), val(files[0])
        # A second interface (a Scarlett on usb2, a new card) plugged in later: awake with the next replan.
        new = AMD_USB + "/usb2/2-2"
        os.makedirs(root + new + "/2-2:1.0")
        os.makedirs(root + new + "/power")
        for rel, text in (("/idVendor", "1235"), ("/product", "Scarlett Solo USB"), ("/power/control", "auto"),
                          ("/2-2:1.0/bInterfaceClass", "01")):
            with open(root + new + rel, "w") as f:
                f.write(text + "\n")
        os.makedirs(root + "/sys/devices/virtual/fake-card2")
        os.symlink(root + new + "/2-2:1.0", root + "/sys/devices/virtual/fake-card2/device")
        os.symlink(root + "/sys/devices/virtual/fake-card2", root + "/sys/class/sound/card2")
        d.proc.send_signal(signal.SIGHUP)  # stands for the sound uevent this tree cannot get
        assert wait_until(lambda: val(new + "/power/control") == "on" and val(AMD_USB + "/usb2/power/control") == "on")
        assert val(files[2]) == "auto"  # the USB stick beside it
        d.stop()
        assert {f: val(f) for f in files} == before
        assert val(new + "/power/control") == "auto"
    finally:
        env.cleanup()
        bus.stop()
