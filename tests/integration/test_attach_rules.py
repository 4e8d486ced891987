"""[Attach] rules on the real kernel: processes and threads placed on the isolated CPU (cgroup v1 cpusets
here, cpu1 isolated) as the proc connector reports them, found by the /proc scan when they ran first,
and put back as they were on restore."""
import configparser
import json
import os
import signal
import subprocess
import sys
import tempfile

import pytest

import machine
from conftest import NOBODY, ROOT, wait_until

CPUSET = "/sys/fs/cgroup/cpuset"
PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "probe.py")
ISOLATE = """[Profile]
Description=test: cpu1 isolated
[CPU]
Isolate=auto:1
"""
RULES = ISOLATE + """
[Attach probe]
Match=comm:rtctl-probe user:0
Threads=rt-worker*

[Attach whole]
Match=comm:rtctl-whole user:0
Threads=all
"""


@pytest.fixture(autouse=True)
def two_cpus_and_v1():
    if machine.read("/sys/devices/system/cpu/possible") != "0-1" or not os.path.exists(CPUSET + "/tasks"):
        pytest.fail("this module expects the CI host's shape: 2 CPUs and a cgroup v1 cpuset hierarchy")
    with machine.cpu1_hotplug_guard():
        yield


def thread_cpus(pid, tid):
    for line in (machine.read("/proc/%d/task/%d/status" % (pid, tid)) or "").splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    return None


def placement(pid, tid):
    """(cpuset, CPUs) of one thread."""
    return machine.read("/proc/%d/task/%d/cpuset" % (pid, tid)), thread_cpus(pid, tid)


ISOLATED = ("/rtctl-isolated", "1")
HOUSEKEEPING = ("/rtctl-housekeeping", "0")


class Probe:
    """probe.py: a process named name with worker threads that rename themselves on request."""

    def __init__(self, name, threads=2, user=None, wrapper=()):
        # As another user, the probe's source goes on the command line: the checkout may be closed to it.
        with open(PROBE) as f:
            argv = [sys.executable, "-c", f.read()] if user is not None or wrapper else [sys.executable, PROBE]
        self.proc = subprocess.Popen(list(wrapper) + argv + [name, str(threads)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, user=user, cwd="/")
        info = json.loads(self.proc.stdout.readline())
        self.pid, self.tids = info["pid"], info["tids"]

    def command(self, *words):
        self.proc.stdin.write(" ".join(str(w) for w in words) + "\n")
        self.proc.stdin.flush()
        reply = self.proc.stdout.readline().split()
        assert reply[:1] == ["ok"], reply
        return reply[1:]

    def rename(self, n, name):
        """Worker n renames itself; returns CLOCK_MONOTONIC ns just before its prctl call."""
        return int(self.command("rename", n, name)[0])

    def threads(self):
        return [self.pid] + self.tids

    def stop(self):
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def probes():
    made = []

    def make(name="rtctl-probe", threads=2, user=None):
        p = Probe(name, threads, user)
        made.append(p)
        return p
    yield make
    for p in made:
        p.stop()


def attached_by_rules(env):
    return {(a["pid"], a["tid"], a["comm"], a["rule"]) for a in env.rtctl_json("status")["attached_by_rules"]}


def test_a_thread_renamed_after_apply_moves_alone(env, probes):
    env.profile("rules", RULES)
    d = env.start("--profile", "rules")
    p = probes()
    # The process matches (its name), none of its threads yet: all stay on housekeeping.
    assert wait_until(lambda: "Process %d (rtctl-probe) matches rule probe: by thread." % p.pid in d.output())
    assert all(placement(p.pid, t) == HOUSEKEEPING for t in p.threads())
    p.rename(0, "rt-worker")
    assert wait_until(lambda: placement(p.pid, p.tids[0]) == ISOLATED)
    assert placement(p.pid, p.pid) == HOUSEKEEPING
    assert placement(p.pid, p.tids[1]) == HOUSEKEEPING
    assert (p.pid, p.tids[0], "rt-worker", "probe") in attached_by_rules(env)
    assert env.rtctl_json("status")["failures"] == []
    # The log says what the match moved, not only that it matched.
    assert "Process %d (rtctl-probe), rule probe: 1 of its threads go to the isolated CPUs." % p.pid in d.output()
    assert "none of its threads" not in d.output()
    # Renamed away, it goes back to where its siblings are.
    p.rename(0, "idle-again")
    assert wait_until(lambda: placement(p.pid, p.tids[0]) == HOUSEKEEPING)
    assert wait_until(lambda: attached_by_rules(env) == set())
    assert wait_until(lambda: "Process %d (rtctl-probe), rule probe: none of its threads goes to the isolated "
                      "CPUs any more (none is named as Threads= says)." % p.pid in d.output()), d.output()[-2000:]


def test_a_thread_running_before_apply_is_found_by_the_scan(env, probes):
    env.profile("rules", RULES)
    env.profile("plain", ISOLATE)
    p = probes()
    p.rename(1, "rt-worker-b")
    env.start("--profile", "rules")
    # No event came for this thread after the daemon started: the scan found it.
    assert placement(p.pid, p.tids[1]) == ISOLATED
    assert placement(p.pid, p.tids[0]) == HOUSEKEEPING
    assert placement(p.pid, p.pid) == HOUSEKEEPING
    # Also when the profile with the rule is applied to a running daemon.
    env.rtctl("profile", "plain", check=True)
    assert placement(p.pid, p.tids[1]) == HOUSEKEEPING
    env.rtctl("profile", "rules", check=True)
    assert placement(p.pid, p.tids[1]) == ISOLATED


def test_exec_into_a_matching_name_attaches_the_whole_process(env):
    env.profile("rules", RULES)
    env.start("--profile", "rules")
    d = tempfile.mkdtemp(prefix="rtctl-exec-", dir=env.dir)
    exe = os.path.join(d, "rtctl-whole")
    os.symlink("/bin/sleep", exe)
    # A shell (no rule for it) that execs a program named rtctl-whole when told to.
    sh = subprocess.Popen(["/bin/sh", "-c", "read go; exec %s 1000" % exe], stdin=subprocess.PIPE, text=True)
    try:
        assert machine.read("/proc/%d/cpuset" % sh.pid) == "/rtctl-housekeeping"
        assert machine.task_cpus(sh.pid) == "0"
        sh.stdin.write("go\n")
        sh.stdin.flush()
        assert wait_until(lambda: machine.read("/proc/%d/comm" % sh.pid) == "rtctl-whole")
        assert wait_until(lambda: machine.read("/proc/%d/cpuset" % sh.pid) == "/rtctl-isolated")
        assert machine.task_cpus(sh.pid) == "1"
        assert (sh.pid, 0, "rtctl-whole", "whole") in attached_by_rules(env)
    finally:
        sh.kill()
        sh.wait()


def test_restore_gives_threads_their_cpuset_and_affinity_back(env, probes):
    env.profile("rules", RULES)
    env.profile("plain", ISOLATE)
    p = probes(threads=3)
    p.command("pin", 1, "0")  # a thread that chose its CPUs itself
    before = {t: placement(p.pid, t) for t in p.threads()}
    assert before[p.tids[1]] == ("/", "0") and before[p.tids[0]] == ("/", "0-1")
    d = env.start("--profile", "rules")
    for n in (0, 1):
        p.rename(n, "rt-worker-%d" % n)
    assert wait_until(lambda: all(placement(p.pid, p.tids[n]) == ISOLATED for n in (0, 1)))
    # A profile without the rule: the threads go back to where rtctl found them under isolation.
    env.rtctl("profile", "plain", check=True)
    assert placement(p.pid, p.tids[0]) == HOUSEKEEPING
    assert placement(p.pid, p.tids[1]) == HOUSEKEEPING
    env.rtctl("profile", "rules", check=True)
    assert all(placement(p.pid, p.tids[n]) == ISOLATED for n in (0, 1))
    # Stop: every thread has the cpuset and the CPUs it had before rtctld started.
    assert d.stop() == 0, d.output()
    assert {t: placement(p.pid, t) for t in p.threads()} == before
    assert env.journal is None


def shipped_attach_rules():
    """The [Attach] sections of the shipped audio profile, as text."""
    cp = configparser.ConfigParser(interpolation=None, delimiters=("=",))
    cp.optionxform = str
    cp.read(os.path.join(ROOT, "conf.d", "profiles", "audio.conf"))
    text = ""
    for s in cp.sections():
        if s.startswith("Attach "):
            text += "\n[%s]\n" % s + "".join("%s=%s\n" % kv for kv in cp.items(s))
    assert "[Attach jackd]" in text, "the shipped audio profile has a rule for jackd"
    return text


def shipped_rules_for_root():
    """The shipped rules, with root standing for the active session's user: this host has no logind,
    so user:active matches nobody here (the VM tier tests them with alice at the seat)."""
    text = shipped_attach_rules()
    assert text.count("user:active") >= 2, "every shipped rule names its users: %s" % text
    return text.replace("user:active", "user:0")


def test_jackd_is_attached_by_the_shipped_rule(env):
    env.profile("audio-rules", ISOLATE + shipped_rules_for_root())
    env.start("--profile", "audio-rules")
    shm_before = machine.jack_shm()
    jackd = subprocess.Popen(["jackd", "-n", "rtctl-test", "-d", "dummy", "-r", "48000",
                              "-p", "64"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env=dict(os.environ, JACK_NO_AUDIO_RESERVATION="1"))
    try:
        def threads():
            return [int(t) for t in os.listdir("/proc/%d/task" % jackd.pid)]

        def realtime(t):
            try:
                return os.sched_getscheduler(t) & ~0x40000000 in (os.SCHED_FIFO, os.SCHED_RR)
            except OSError:
                return False

        def split():
            th = threads()
            rt = [t for t in th if realtime(t)]
            return rt and all(placement(jackd.pid, t) == (ISOLATED if t in rt else HOUSEKEEPING) for t in th)
        # jackd's threads are all named jackd: the shipped rule finds its real-time ones by policy, and
        # leaves the others on housekeeping.
        assert wait_until(lambda: len(threads()) >= 3 and split()), \
            {t: (realtime(t), placement(jackd.pid, t)) for t in threads()}
        rt = [t for t in threads() if realtime(t)]
        assert {(jackd.pid, t, "jackd", "jackd") for t in rt} <= attached_by_rules(env), attached_by_rules(env)
    finally:
        jackd.send_signal(signal.SIGTERM)
        jackd.wait(60)
        machine.remove_jack_shm_since(shm_before)


def test_a_process_another_user_names_jackd_stays_off_the_isolated_cpus(env, probes):
    """Any local user can name a process jackd or pipewire. The shipped rules let in only the user they
    name (root stands for the active user here), so nobody's "jackd" stays on housekeeping: root's probe,
    started after it and matched by a rule after the shipped ones, is attached, so rtctld has seen both."""
    env.profile("audio-rules", ISOLATE + shipped_rules_for_root() +
                "\n[Attach whole]\nMatch=comm:rtctl-whole user:0\nThreads=all\n")
    env.start("--profile", "audio-rules")
    jackd = probes("jackd", threads=1, user=NOBODY)
    pipewire = probes("pipewire", threads=1, user=NOBODY)
    pipewire.rename(0, "data-loop.0")
    mine = probes("rtctl-whole", threads=1)
    assert wait_until(lambda: all(placement(mine.pid, t) == ISOLATED for t in mine.threads()))
    for impostor in (jackd, pipewire):
        assert all(placement(impostor.pid, t) == HOUSEKEEPING for t in impostor.threads()), \
            [placement(impostor.pid, t) for t in impostor.threads()]
    assert {a[0] for a in attached_by_rules(env)} == {mine.pid}


FORK_LOOPS = ["while :; do /bin/true; done"] * 3


def test_a_thread_is_placed_during_a_fork_storm(env, probes):
    env.profile("rules", RULES)
    d = env.start("--profile", "rules")
    forkers = [subprocess.Popen(["/bin/sh", "-c", loop]) for loop in FORK_LOOPS]
    try:
        p = probes()
        p.rename(1, "rt-worker")
        assert wait_until(lambda: placement(p.pid, p.tids[1]) == ISOLATED)
        assert placement(p.pid, p.tids[0]) == HOUSEKEEPING
        # The daemon answers on the bus while the storm goes on.
        for _ in range(5):
            status = env.rtctl_json("status")
            assert status["state"] == "applied", status["failures"]
        assert d.running()
    finally:
        for f in forkers:
            f.kill()
            f.wait()
