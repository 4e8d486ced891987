"""The audit (rtctl check, Check()) on the real kernel: a real-time thread named as PipeWire names its data
loop is found. This host has no sound card and boots without threadirqs, so it has no audio IRQ thread:
the inversion itself (server thread at or above the sound card's IRQ thread) is tested on a fixture's
/proc, here through the daemon and in tests/unit/test-check.c."""
import json
import os
import shutil
import subprocess

import dbus
import pytest

import machine

import harness

IFACE = "org.rtctl.Manager1"
PATH = "/org/rtctl/Manager1"

# A thread named data-loop.0 at SCHED_FIFO 88 (PipeWire's shipped rt.prio) that sleeps until stdin closes.
AUDIO_SERVER = r"""
import ctypes, os, sys, threading
def loop(ready):
    ctypes.CDLL(None).prctl(15, b"data-loop.0", 0, 0, 0)  # PR_SET_NAME
    os.sched_setscheduler(threading.get_native_id(), os.SCHED_FIFO, os.sched_param(88))
    ready.set()
    sys.stdin.read()
ready = threading.Event()
t = threading.Thread(target=loop, args=(ready,))
t.start()
ready.wait()
print("ready", flush=True)
t.join()
"""


def check(env):
    conn = dbus.bus.BusConnection(env.bus.address)
    try:
        obj = conn.get_object(IFACE, PATH)
        return {c: (s, d) for c, s, d, f in obj.Check(dbus_interface=IFACE)}
    finally:
        conn.close()


def test_a_real_time_audio_thread_is_found(env):
    env.start("--profile", "off")
    p = subprocess.Popen(["/usr/bin/python3", "-c", AUDIO_SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout.readline() == "ready\n"
        status, detail = check(env)["inversion"]
        assert status == "info", detail
        assert "no audio IRQ thread" in detail
        assert "data-loop.0 of python3 (PID %d, fifo 88)" % p.pid in detail, detail
        local = {c["check"]: c for c in json.loads(env.rtctl("--json", "check", "--local").stdout)}
        assert local["inversion"]["detail"] == detail
    finally:
        p.stdin.close()
        p.wait(harness.HANG_SECONDS)
    status, detail = check(env)["inversion"]
    assert "data-loop.0" not in detail, detail


def test_inversion_on_a_fixture_through_the_daemon(env, tmp_path):
    """The amd-workstation fixture with PipeWire's data loop at 88 and the HDA card's IRQ thread at the
    kernel's default 50: Check() warns and rtctl check, asking the daemon, exits 1."""
    src = os.path.join(harness.BUILD, "tests", "unit", "fixtures", "amd-workstation")
    assert os.path.isdir(src), "fixtures are built with the tree (ninja -C %s)" % harness.BUILD
    root = str(tmp_path / "ws")
    shutil.copytree(src, root, symlinks=True)

    def thread(pid, tid, comm, flags, prio, policy):
        line = "%d (%s) S 2 0 0 0 -1 %d %s %d %d\n" % (tid, comm, flags, " ".join(["0"] * 30), prio, policy)
        os.makedirs("%s/proc/%d/task/%d" % (root, pid, tid), exist_ok=True)
        for path in ["%s/proc/%d/task/%d/stat" % (root, pid, tid)] + (["%s/proc/%d/stat" % (root, pid)]
                                                                       if pid == tid else []):
            with open(path, "w") as f:
                f.write(line)

    thread(300, 300, "pipewire", 0x400100, 0, 0)
    thread(300, 301, "data-loop.0", 0x400040, 88, 1)
    thread(200, 200, "irq/87-snd_hda_", 0x208040, 50, 1)
    env.extra["RTCTL_SYSROOT"] = root
    env.start("--profile", "off")
    status, detail = check(env)["inversion"]
    assert status == "warn", detail
    assert "data-loop.0 of pipewire (PID 300, fifo 88) is not below the sound card's interrupt thread " \
           "irq/87-snd_hda_ (fifo 50)" in detail
    # The CLI without RTCTL_SYSROOT of its own: the answer is the daemon's.
    e = dict(env.environ)
    e.pop("RTCTL_SYSROOT")
    p = subprocess.run([harness.RTCTL, "--json", "check"], env=e, capture_output=True, text=True,
                       timeout=harness.HANG_SECONDS)
    assert p.returncode == 1, p.stdout + p.stderr
    assert {c["check"]: c["status"] for c in json.loads(p.stdout)}["inversion"] == "warn"


ISOLATE = """[Profile]
Description=test: cpu1 isolated
[CPU]
Isolate=auto:1
"""
CPUSET = "/sys/fs/cgroup/cpuset"


def findings_of(p):
    return {c["check"]: c for c in json.loads(p.stdout)}


def test_isolation_as_the_user_gets_it(env):
    """cpu1 isolated by a profile. Not applied (no rtctld, --profile): every process may still run on
    cpu1, and check says so. Applied: nothing movable is left there, until a process is put back on cpu1
    on purpose (into the root cpuset, allowed on both CPUs); then Check() names it, and rtctl check asking
    the daemon exits 1. The snapshot check in conftest proves everything is put back."""
    if machine.read("/sys/devices/system/cpu/possible") != "0-1" or not os.path.exists(CPUSET + "/tasks"):
        pytest.fail("this test expects the CI host's shape: 2 CPUs and a cgroup v1 cpuset hierarchy")
    env.profile("iso", ISOLATE)
    p = env.rtctl("--json", "check", "--local", "--profile", "iso")
    assert p.returncode == 1, p.stdout + p.stderr
    local = findings_of(p)
    assert local["isolation"]["detail"] == "isolated CPUs 1 (profile iso, as rtctld would apply it)"
    assert local["isolated-tasks"]["status"] == "warn"
    assert "CPUs 0-1" in local["isolated-tasks"]["detail"]
    assert local["isolated-tasks"]["fix"]
    # This host boots without the profile's arguments: a reboot is pending, with and without rtctld.
    assert local["reboot-pending"]["status"] == "warn"
    assert "rcu_nocbs=1" in local["reboot-pending"]["detail"]
    assert env.rtctl("check", "--local", "--profile", "nosuch").returncode == 4

    with machine.cpu1_hotplug_guard():
        env.start("--profile", "iso")
        found = check(env)
        assert found["isolation"][0] == "info" and "isolated CPUs 1 (rtctld, profile iso)" in found["isolation"][1]
        for c in ("isolated-tasks", "isolated-irqs", "workqueue"):
            assert found[c][0] == "ok", (c, found[c])
        assert found["reboot-pending"] == (local["reboot-pending"]["status"], local["reboot-pending"]["detail"])
        sleeper = subprocess.Popen(["/bin/sleep", "600"])
        try:
            with open(CPUSET + "/tasks", "w") as f:
                f.write(str(sleeper.pid))
            os.sched_setaffinity(sleeper.pid, {0, 1})
            status, detail = check(env)["isolated-tasks"]
            assert status == "warn", detail
            assert "sleep (PID %d, CPUs 0-1)" % sleeper.pid in detail
            e = dict(env.environ)
            p = subprocess.run([harness.RTCTL, "--json", "check"], env=e, capture_output=True, text=True,
                               timeout=harness.HANG_SECONDS)
            assert p.returncode == 1, p.stdout + p.stderr
            assert findings_of(p)["isolated-tasks"]["status"] == "warn"
        finally:
            sleeper.kill()
            sleeper.wait()
        assert harness.wait_until(lambda: check(env)["isolated-tasks"][0] == "ok")


def test_sched_fifo_as_root_and_as_nobody(env, tmp_path):
    """The real attempt, in a child as the judged user: root gets SCHED_FIFO 80; nobody, with no rtprio
    limit, gets EPERM, whether rtctl runs as nobody or as root judging nobody. Given a pam_limits line
    (in a fixture root), root judging nobody tries with the limit nobody's login would get, and the real
    kernel grants it."""
    f = findings_of(env.rtctl("--json", "check", "--local", "--user", "root"))
    assert f["sched-fifo"]["status"] == "ok", f["sched-fifo"]
    assert f["user"]["detail"] == "judged root (uid 0, --user)"
    # Root by default (no session on this host) warns: its limits say nothing about a desktop user's.
    f = findings_of(env.rtctl("--json", "check", "--local"))
    assert f["user"]["status"] == "warn" and "judged root" in f["user"]["detail"], f["user"]

    p = env.rtctl("--json", "check", "--local", "--user", "nobody")
    assert p.returncode == 1
    f = findings_of(p)
    assert f["user"]["detail"] == "judged nobody (uid 65534, --user)"
    assert f["sched-fifo"]["status"] == "warn"
    assert "Operation not permitted" in f["sched-fifo"]["detail"]
    assert "rtprio 95" in f["sched-fifo"]["fix"]
    assert f["rtprio-limit"]["status"] == "warn"
    assert f["cpu-dma-latency"]["status"] == "info"  # root's 0600 node, judged from its mode for nobody

    p = env.rtctl("--json", "check", "--local", user=65534)
    f = findings_of(p)
    assert f["user"]["detail"] == "judged nobody (uid 65534, the caller)"
    assert f["sched-fifo"]["status"] == "warn"
    assert f["cpu-dma-latency"]["status"] == "info"  # /dev/cpu_dma_latency is root's only

    src = os.path.join(harness.BUILD, "tests", "unit", "fixtures", "vm2")
    root = str(tmp_path / "vm2")
    shutil.copytree(src, root, symlinks=True)
    os.makedirs(root + "/etc/security/limits.d")
    with open(root + "/etc/security/limits.d/95-nobody.conf", "w") as fd:
        fd.write("nobody - rtprio 95\n")
    # A node the judged user may write by its mode (a udev rule's 0666).
    os.makedirs(root + "/dev", exist_ok=True)
    open(root + "/dev/cpu_dma_latency", "w").close()
    os.chmod(root + "/dev/cpu_dma_latency", 0o666)
    e = dict(env.environ, RTCTL_SYSROOT=root)
    p = subprocess.run([harness.RTCTL, "--json", "check", "--local", "--user", "nobody"], env=e,
                       capture_output=True, text=True, timeout=harness.HANG_SECONDS)
    f = findings_of(p)
    assert f["rtprio-limit"]["status"] == "ok", f["rtprio-limit"]
    assert "/etc/security/limits.d/95-nobody.conf:1" in f["rtprio-limit"]["detail"]
    assert f["cpu-dma-latency"]["status"] == "ok", f["cpu-dma-latency"]
    with open("/proc/self/status") as fd:
        caps = int([l.split()[1] for l in fd if l.startswith("CapEff:")][0], 16)
    if caps & (1 << 24):  # CAP_SYS_RESOURCE: root may raise the child's limit to the login's
        assert f["sched-fifo"]["status"] == "ok", f["sched-fifo"]
        assert "with the rtprio limit of their login" in f["sched-fifo"]["detail"]
    else:  # a container without it: said, not guessed
        assert f["sched-fifo"]["status"] == "info", f["sched-fifo"]
        assert "could not give the child nobody's rtprio limit (95)" in f["sched-fifo"]["detail"]


def test_usage(env):
    assert env.rtctl("check", "--bogus").returncode == 2
    assert env.rtctl("check", "--user", "no-such-user-here").returncode == 2


def test_a_rival_power_service_is_named(env):
    """A process named tuned (as its daemon names itself) undoes [Power]: Check() says so with the fix."""
    env.start("--profile", "off")
    p = subprocess.Popen(["/usr/bin/python3", "-c", "import ctypes, sys\n"
                          "ctypes.CDLL(None).prctl(15, b'tuned', 0, 0, 0)\n"
                          "print('ready', flush=True)\nsys.stdin.read()"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "ready\n"
        status, detail = check(env)["power-rivals"]
        assert status == "warn" and "tuned (PID %d)" % p.pid in detail, detail
    finally:
        p.stdin.close()
        p.wait(harness.HANG_SECONDS)
    assert check(env)["power-rivals"][0] == "ok"
