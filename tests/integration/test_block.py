"""Block I/O tuner on the real kernel, with loop devices the tests make (loop2NN) and a zram device."""
import os
import re
import signal

import pytest

import machine
from conftest import wait_until

RULES = """
[Profile]
Description=test: loop devices made by the tests
[Block test]
Match=name:loop2[0-9][0-9]
Scheduler=bfq
Tunables=low_latency=0 slice_idle=0
NrRequests=32
ReadAheadKB=512
"""


def sched(name):
    return machine.active_choice(machine.read("/sys/block/%s/queue/scheduler" % name))


def iosched(name, key):
    return machine.read("/sys/block/%s/queue/iosched/%s" % (name, key))


def test_existing_loop_devices_get_the_rule(env):
    env.profile("t", RULES)
    with machine.loop_devices(2) as loops:
        before = {n: sched(n) for n in loops}
        assert all(s != "bfq" for s in before.values())
        d = env.start("--profile", "t")
        for n in loops:
            assert sched(n) == "bfq"
            assert iosched(n, "low_latency") == "0"
            assert iosched(n, "slice_idle") == "0"
            assert machine.read("/sys/block/%s/queue/nr_requests" % n) == "32"
            assert machine.read("/sys/block/%s/queue/read_ahead_kb" % n) == "512"
        status = env.rtctl_json("status")
        assert status["profile"] == "t"
        assert status["state"] == "applied"
        assert status["failures"] == []
        d.stop()
        for n in loops:
            assert sched(n) == before[n]


def test_vda_is_never_touched_by_a_test_profile(env):
    env.profile("t", RULES)
    vda = machine.read("/sys/block/vda/queue/scheduler")
    with machine.loop_devices(1):
        d = env.start("--profile", "t")
        plan = env.rtctl_json("plan", "--profile", "t")
        assert plan == []
        assert machine.read("/sys/block/vda/queue/scheduler") == vda
        d.stop()


def test_hot_added_loop_device_is_tuned_from_its_uevent(env):
    env.profile("t", RULES)
    env.start("--profile", "t")
    listener = machine.UeventListener()
    try:
        name = machine.add_loop()
        try:
            listener.wait_for("add", "/" + name)
            # No call: the daemon's own uevent handling puts the scheduler in place.
            assert wait_until(lambda: sched(name) == "bfq" and iosched(name, "low_latency") == "0" and
                              machine.read("/sys/block/%s/queue/nr_requests" % name) == "32", 5)
            journal = env.journal
            assert any(e["object"] == "/sys/block/%s/queue/scheduler" % name for e in journal["entries"])
        finally:
            machine.remove_loop(name)
    finally:
        listener.close()
    # The device is gone: its journal entries go with it and nothing is left to restore.
    assert wait_until(lambda: not any(name in e["object"] for e in (env.journal or {"entries": []})["entries"]))


def test_burst_of_new_devices_coalesces(env):
    env.profile("t", RULES)
    d = env.start("--profile", "t", "--verbose")
    # Five add uevents arrive while rtctld is busy (here: stopped, so that how fast this test makes the
    # devices against how fast rtctld switches elevators decides nothing): one pass handles them all.
    d.proc.send_signal(signal.SIGSTOP)
    try:
        with machine.loop_devices(5) as loops:
            d.proc.send_signal(signal.SIGCONT)
            assert wait_until(lambda: all(sched(n) == "bfq" for n in loops))
    finally:
        d.proc.send_signal(signal.SIGCONT)
    passes = [l for l in d.output().splitlines() if l.startswith("Pass (block add")]
    assert len(passes) == 1, passes
    assert passes[0].count("block add") == 5, passes
    # The pass says how much of its time the kernel's writes took (five elevator switches: most of it).
    m = re.search(r": \d+ changed, .*, (\d+) µs \((\d+) µs of it in the kernel's writes\)$", passes[0])
    assert m and 0 < int(m.group(2)) <= int(m.group(1)), passes


def test_a_device_whose_uevent_was_lost_is_tuned_all_the_same(env):
    """While rtctld is busy (here: stopped) the kernel's uevent socket fills and the kernel drops what
    comes after: here the add of a new disk. rtctld is told (ENOBUFS), so it rescans every device and
    the disk gets its rule all the same."""
    env.profile("t", RULES)
    with machine.loop_devices(1) as (flooder,):
        d = env.start("--profile", "t")
        assert sched(flooder) == "bfq"
        d.proc.send_signal(signal.SIGSTOP)
        try:
            # Far more than the socket holds (2 MiB at most with this kernel's rmem_max of 4 MiB).
            fd = os.open("/sys/block/%s/uevent" % flooder, os.O_WRONLY)
            try:
                for _ in range(20000):
                    os.write(fd, b"change")
            finally:
                os.close(fd)
            late = machine.add_loop()
        finally:
            d.proc.send_signal(signal.SIGCONT)
        try:
            assert wait_until(lambda: sched(late) == "bfq", 10), d.output()[-2000:]
            assert "Kernel uevents were lost" in d.output()
        finally:
            machine.remove_loop(late)


def test_zram_is_skipped_not_failed(env):
    if not machine.zram_available():
        pytest.fail("zram-control is not available on this machine (expected on the CI host)")
    env.profile("z", "[Profile]\nDescription=z\n[Block all]\nScheduler=bfq\nMatch=name:zram*\n")
    with machine.zram_device() as z:
        assert not os.path.exists("/sys/block/%s/queue/scheduler" % z)
        env.start("--profile", "z")
        status = env.rtctl_json("status")
        assert status["failures"] == []
        assert status["state"] == "applied"
        assert not any(z in p["object"] for p in env.rtctl_json("plan"))


def test_plan_shows_pending_change_before_and_nothing_after(env):
    env.profile("t", RULES)
    env.profile("idle", "[Profile]\nDescription=nothing\n")
    with machine.loop_devices(1) as (name,):
        env.start("--profile", "idle")
        plan = env.rtctl_json("plan", "--profile", "t")
        objs = {p["object"]: p for p in plan}
        s = objs["/sys/block/%s/queue/scheduler" % name]
        assert s["current"] == sched(name) and s["desired"] == "bfq"
        env.rtctl("profile", "t", check=True)
        assert env.rtctl_json("plan") == []
        assert sched(name) == "bfq"
        env.rtctl("profile", "idle", check=True)


def test_preference_list_takes_first_offered(env):
    env.profile("p", "[Profile]\nDescription=p\n[Block t]\nMatch=name:loop2[0-9][0-9]\n"
                "Scheduler=kyber mq-deadline\n")
    with machine.loop_devices(1) as (name,):
        env.start("--profile", "p")
        assert sched(name) == "kyber"


def test_profile_switch_goes_straight_to_the_new_values(env):
    env.profile("a", "[Profile]\nDescription=a\n[Block t]\nMatch=name:loop2[0-9][0-9]\n"
                "Scheduler=bfq\nTunables=low_latency=0\n")
    env.profile("b", "[Profile]\nDescription=b\n[Block t]\nMatch=name:loop2[0-9][0-9]\n"
                "Scheduler=bfq\nTunables=low_latency=1 slice_idle=0\n")
    with machine.loop_devices(1) as (name,):
        original = sched(name)
        env.start("--profile", "a")
        p = env.rtctl_json("profile", "b")
        # Only the tunables change; the scheduler never went back to its original and forth again,
        # which would have counted as two more changes (and reset every bfq tunable).
        assert p == {"changes": 2, "failures": 0}
        assert sched(name) == "bfq" and iosched(name, "low_latency") == "1"
        journal = {e["object"]: e["original"] for e in env.journal["entries"]}
        assert journal["/sys/block/%s/queue/scheduler" % name] == original
        p = env.rtctl_json("profile", "off")
        assert sched(name) == original
