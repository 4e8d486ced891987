"""[Scheduler] on the real kernel's /sys/kernel/debug/sched. debugfs is mounted for the module when
the host has it unmounted, and unmounted again (the snapshot holds its mount state). Where the kernel's
lockdown refuses debugfs (this project's CI host: every read is EPERM), rtctl reports the knobs as not
supported and writes nothing; where it does not, the knobs are applied and restored exactly. Which of the
two is asserted depends on the kernel, in one test: a skip would count as a failure, and the other
branch runs in the VM tier (scheduler-knobs, Debian's 6.1 kernel without lockdown)."""
import contextlib
import errno
import os
import subprocess

import pytest

import machine

SCHED = machine.DEBUGFS + "/sched/"


@contextlib.contextmanager
def debugfs_mounted():
    mounted_here = not os.path.ismount(machine.DEBUGFS)
    if mounted_here:
        subprocess.run(["mount", "-t", "debugfs", "none", machine.DEBUGFS], check=True)
    try:
        yield
    finally:
        if mounted_here:
            subprocess.run(["umount", machine.DEBUGFS], check=True)


def locked_down():
    """True when the kernel refuses debugfs reads (lockdown); debugfs must be mounted."""
    try:
        with open(SCHED + "features") as f:
            f.read()
        return False
    except OSError as e:
        if e.errno == errno.EPERM:
            return True
        raise


def features():
    """name -> True (on) / False (off), as the kernel lists them now."""
    out = {}
    for w in machine.read(SCHED + "features").split():
        out[w[3:] if w.startswith("NO_") else w] = not w.startswith("NO_")
    return out


def unsupported(env):
    return {u["object"]: u["message"] for u in env.rtctl_json("status")["unsupported"]}


PROFILE = """[Profile]
Description=test: the scheduler's knobs
[Scheduler]
%s
"""


def test_scheduler_section_on_this_kernel(env):
    """What a user of this kernel sees: knobs not supported under lockdown, else applied and restored."""
    with debugfs_mounted():
        if locked_down():
            lockdown_is_not_supported_and_nothing_is_written(env)
        else:
            knobs_and_features_applied_then_restored_exactly(env)


def lockdown_is_not_supported_and_nothing_is_written(env):
    env.profile("t", PROFILE % "base_slice_ns=3000000\nnr_migrate=8\nfeatures=NO_TTWU_QUEUE")
    d = env.start("--profile", "t")
    status = env.rtctl_json("status")
    assert status["state"] == "applied"
    assert status["failures"] == []
    why = unsupported(env)
    for obj in (SCHED + "base_slice_ns", SCHED + "nr_migrate", SCHED + "features/TTWU_QUEUE"):
        assert why.get(obj) == ("not supported: the kernel's lockdown forbids debugfs access "
                                "(see kernel_lockdown(7))"), why
    # Nothing would be written; each knob is named as left alone, and why.
    plan = env.rtctl_json("plan", "--profile", "t")
    assert [r for r in plan if "left_alone" not in r] == []
    assert {r["object"]: r["left_alone"] for r in plan} == why
    assert not any(e["object"].startswith(SCHED) for e in (env.journal or {}).get("entries", []))
    d.stop()


def test_debugfs_not_mounted_names_the_mount_command(env):
    if os.path.ismount(machine.DEBUGFS):
        pytest.skip("debugfs is mounted on this host, and a test does not unmount what it did not mount")
    env.profile("t", PROFILE % "base_slice_ns=3000000")
    d = env.start("--profile", "t")
    assert unsupported(env)[SCHED + "base_slice_ns"] == (
        "not supported: debugfs is not mounted (mount -t debugfs none /sys/kernel/debug)")
    assert env.rtctl_json("status")["failures"] == []
    d.stop()


def knobs_and_features_applied_then_restored_exactly(env):
    eevdf = os.path.exists(SCHED + "base_slice_ns")
    slice_knob = "base_slice_ns" if eevdf else "min_granularity_ns"
    knobs = {k: machine.read(SCHED + k) for k in (slice_knob, "migration_cost_ns", "nr_migrate")}
    before = features()
    want = {k: str(int(v) * 2 + 1000) for k, v in knobs.items()}
    # One feature that is on goes off and one that is off goes on: each is written on its own.
    turn_off = next(n for n in ("CACHE_HOT_BUDDY", "WA_BIAS", "NONTASK_CAPACITY") if before.get(n))
    turn_on = next(n for n in ("LATENCY_WARN", "LB_MIN", "NEXT_BUDDY") if before.get(n) is False)
    env.profile("t", PROFILE % ("\n".join("%s=%s" % kv for kv in want.items())
                                + "\nfeatures=NO_%s %s" % (turn_off, turn_on)))
    d = env.start("--profile", "t")
    for k, v in want.items():
        assert machine.read(SCHED + k) == v
    now = features()
    assert now[turn_off] is False and now[turn_on] is True
    # Nothing else of the list moved.
    assert {n: v for n, v in now.items() if n not in (turn_off, turn_on)} == \
        {n: v for n, v in before.items() if n not in (turn_off, turn_on)}
    status = env.rtctl_json("status")
    assert status["failures"] == [] and status["state"] == "applied"
    d.stop()
    for k, v in knobs.items():
        assert machine.read(SCHED + k) == v
    assert features() == before
