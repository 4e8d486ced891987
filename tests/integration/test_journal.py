"""What a journal may make `rtctl restore` do as root: only what the daemon itself journals."""
import fcntl
import json
import os
import subprocess

import machine
from harness import HANG_SECONDS, RTCTL, wait_until


def test_restore_refuses_a_planted_boot_file_entry(env, tmp_path):
    # issue 20: one boot-file entry in the runtime journal made `rtctl restore` create any file.
    target = str(tmp_path / "planted")
    entries = [{"kind": "boot-file", "tuner": "bootargs", "object": target,
                "original": "content:planted by hand"}]
    os.makedirs(env.run)
    with open(os.path.join(env.run, "journal.json"), "w") as f:
        json.dump({"version": 1, "entries": entries}, f)
    p = env.rtctl("restore")
    assert p.returncode != 0, (p.returncode, p.stdout, p.stderr)
    assert "%s: original lost: kind 'boot-file' does not belong in the runtime journal" % target in p.stderr
    assert not os.path.exists(target)


SYSCTL = "/proc/sys/kernel/sched_rt_runtime_us"
TUNED = "[Profile]\nDescription=test\n[Sysctl]\nkernel.sched_rt_runtime_us=950001\n"


def restore_without_bus(env):
    """`rtctl restore` as run while no rtctld is on the bus yet: a daemon starting at that moment."""
    e = env.environ
    e["DBUS_SYSTEM_BUS_ADDRESS"] = "unix:path=%s/no-bus" % env.dir
    return subprocess.run([RTCTL, "restore"], env=e, capture_output=True, text=True, timeout=HANG_SECONDS)


def test_restore_refuses_while_a_daemon_holds_the_journal(env):
    env.profile("t", TUNED)
    before = machine.read(SYSCTL)
    d = env.start("--profile", "t")
    assert machine.read(SYSCTL) == "950001"
    p = restore_without_bus(env)
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    assert "rtctld (PID %d) holds the journal" % d.proc.pid in p.stderr, p.stderr
    # Nothing was replayed behind the daemon's back: its value and its journal are as it left them.
    assert machine.read(SYSCTL) == "950001"
    assert env.journal and env.journal["entries"][0]["original"] == before
    assert d.stop() == 0
    assert machine.read(SYSCTL) == before


def test_daemon_starting_during_a_restore_waits_for_it(env):
    env.profile("t", TUNED)
    os.makedirs(env.run)
    with open(os.path.join(env.run, "journal.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        lock.write("rtctl restore (PID 4242)\n")
        lock.flush()
        d = env.start("--profile", "t", wait_ready=False)
        assert wait_until(lambda: "Waiting for rtctl restore (PID 4242) to finish with the journal" in d.output())
        assert d.running() and not any("READY=1" in m for m in d.messages)
    d.wait_ready()
    assert machine.read(SYSCTL) == "950001"
    d.stop()
