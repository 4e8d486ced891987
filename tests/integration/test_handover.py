"""The package upgrade's handover (rtctld(8), SIGNALS): a SIGTERM with RUNTIME_DIR/handover naming the
daemon leaves the tuning and the journal to the next daemon, which adopts the originals; any other stop
restores."""
import os
import signal
import time

import pytest

import machine

RULES = """
[Profile]
Description=test: loop devices made by the tests
[Block test]
Match=name:loop2[0-9][0-9]
Scheduler=bfq
NrRequests=32
"""


def tuned(name):
    return {"scheduler": machine.active_choice(machine.read("/sys/block/%s/queue/scheduler" % name)),
            "nr_requests": machine.read("/sys/block/%s/queue/nr_requests" % name)}


def originals(env):
    return {e["object"]: e["original"] for e in env.journal["entries"]}


HANDED_OVER = "Stopping for a handover to the next rtctld"


def mark(env, pid):
    path = os.path.join(env.run, "handover")
    with open(path, "w") as f:
        f.write("%d\n" % pid)
    return path


def test_handover_keeps_the_tuning_and_the_next_daemon_restores_the_originals(env):
    env.profile("t", RULES)
    with machine.loop_devices(1) as (name,):
        before = tuned(name)
        assert before != {"scheduler": "bfq", "nr_requests": "32"}
        d = env.start("--profile", "t")
        assert tuned(name) == {"scheduler": "bfq", "nr_requests": "32"}
        journalled = originals(env)
        assert len(journalled) == 2
        assert env.rtctl_json("status")["last_pass"]["changes"] == 2

        marker = mark(env, d.proc.pid)
        assert d.stop(signal.SIGTERM) == 0
        # The handover's own line: a refused marker's warning says "handover" too.
        assert HANDED_OVER in d.output()
        # Still tuned, the journal still holds the true originals, the marker is used up.
        assert tuned(name) == {"scheduler": "bfq", "nr_requests": "32"}
        assert originals(env) == journalled
        assert not os.path.exists(marker)

        d2 = env.start("--profile", "t")
        assert "Found 2 original values" in d2.output()
        assert tuned(name) == {"scheduler": "bfq", "nr_requests": "32"}
        # It kept the originals from before the first daemon, not the tuned values it found.
        assert originals(env) == journalled
        # It found everything in place: nothing to write, so the machine was never untuned.
        status = env.rtctl_json("status")
        assert status["failures"] == []
        assert status["last_pass"]["changes"] == 0

        assert d2.stop(signal.SIGTERM) == 0
        assert tuned(name) == before
        assert env.journal is None


def test_marker_for_another_daemon_is_ignored_and_the_stop_restores(env):
    env.profile("t", RULES)
    with machine.loop_devices(1) as (name,):
        before = tuned(name)
        d = env.start("--profile", "t")
        marker = mark(env, d.proc.pid + 1)
        assert d.stop(signal.SIGTERM) == 0
        assert "not this daemon's" in d.output()
        assert tuned(name) == before
        assert env.journal is None
        assert not os.path.exists(marker)


def test_marker_stamped_just_ahead_of_the_clock_still_hands_over(env):
    """Since 6.13 tmpfs stamps files with a fine-grained time, so a marker written a moment before the
    SIGTERM can carry a stamp ahead of the coarse clock; that marker is this stop's all the same."""
    env.profile("t", RULES)
    with machine.loop_devices(1) as (name,):
        before = tuned(name)
        d = env.start("--profile", "t")
        marker = mark(env, d.proc.pid)
        ahead = time.time() + 2
        os.utime(marker, (ahead, ahead))
        assert d.stop(signal.SIGTERM) == 0
        assert HANDED_OVER in d.output()
        assert tuned(name) == {"scheduler": "bfq", "nr_requests": "32"}
        assert env.journal is not None
        d2 = env.start("--profile", "t")
        assert d2.stop(signal.SIGTERM) == 0
        assert tuned(name) == before
        assert env.journal is None


@pytest.mark.parametrize("shift,said", [(-3600, "3600s ago"), (3600, "3600s in the future")])
def test_marker_far_from_the_clock_is_ignored_and_the_stop_restores(env, shift, said):
    env.profile("t", RULES)
    with machine.loop_devices(1) as (name,):
        before = tuned(name)
        d = env.start("--profile", "t")
        marker = mark(env, d.proc.pid)
        stamp = time.time() + shift
        os.utime(marker, (stamp, stamp))
        assert d.stop(signal.SIGTERM) == 0
        out = d.output()
        assert "not just before this stop" in out
        assert said in out
        assert HANDED_OVER not in out
        assert tuned(name) == before
        assert env.journal is None


def test_marker_left_before_start_is_removed_so_the_stop_restores(env):
    env.profile("t", RULES)
    os.makedirs(env.run, exist_ok=True)
    with machine.loop_devices(1) as (name,):
        before = tuned(name)
        marker = mark(env, 0)
        d = env.start("--profile", "t")
        assert not os.path.exists(marker)
        assert tuned(name) != before
        assert d.stop(signal.SIGTERM) == 0
        assert tuned(name) == before
        assert env.journal is None
