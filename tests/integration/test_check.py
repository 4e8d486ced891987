"""The audit (rtctl check, Check()) on the real kernel: a real-time thread named as PipeWire names its data
loop is found. This host has no sound card and boots without threadirqs, so it has no audio IRQ thread:
the inversion itself (server thread at or above the sound card's IRQ thread) is tested on a fixture's
/proc, here through the daemon and in tests/unit/test-audit.c."""
import json
import os
import shutil
import subprocess

import dbus

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
        return {c: (s, d) for c, s, d in obj.Check(dbus_interface=IFACE)}
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
