"""Storms and kills under an audio profile on the real kernel: cpu1 hotplugged 200 times, 500 loop
devices added and removed, 100 SIGKILLs each followed by a restart and `rtctl restore`, 2000 D-Bus calls
from several clients, three times. After each, the state is what the policy says (Verify, and the
cpusets, tasks, IRQs and devices read directly), the machine equals its snapshot once rtctl has put it
back, and the daemon's open files and memory have not grown.

The rule for open files and memory (Usage): every storm runs in rounds, the first a warm-up. sd-bus's
and GLib's buffers and malloc's heap grow to what the load needs and then stay (glibc keeps memory
freed below the top of its heap for the next allocations rather than giving it back), so the warm-up's
figures are the baseline. Every later round must end with exactly as many fds as the warm-up's, and with
VmRSS at most RSS_ALLOWANCE_KB above it: far less than one round's calls or devices would leave behind if
each kept even a few hundred bytes, far more than the few pages the heap's layout moves by. Under the
ASan build RSS says nothing (freed memory waits in ASan's quarantine), so there only the fd rule holds,
and LeakSanitizer's report at the daemon's exit is the memory check (the harness fails a test on it).
The figures go to stdout (pytest -s) and to usage.json in the test's tmp dir."""
import json
import os
import random
import signal
import subprocess
import time

import pytest

import harness
import machine
from conftest import wait_until
# The CI host's shape (2 CPUs, cgroup v1 cpusets) or a failure, and cpu1 online whatever happens.
from test_attach_rules import two_cpus_and_v1  # noqa: F401 (an autouse fixture)
from test_irq import movable_irqs
from test_isolation import AUDIO, CPUSET, on_cpu1

# The shipped audio profile's isolation, IRQs and power, plus block rules for the test's loop devices
# only and a sysctl: two of them, so that a profile switch changes something and the isolation stays.
STORM = AUDIO + """[Block test]
Match=name:loop2[0-9][0-9]
Scheduler=%s
[Sysctl]
kernel.sched_rt_runtime_us=%s
"""
PROFILES = {"storm": ("bfq", "950001"), "storm2": ("mq-deadline", "950002")}
RSS_ALLOWANCE_KB = 256


@pytest.fixture
def senv(env):
    for name, (scheduler, rt) in PROFILES.items():
        env.profile(name, STORM % (scheduler, rt))
    return env


def sanitized(pid):
    return "libasan" in (machine.read("/proc/%d/maps" % pid) or "")


def fd_targets(pid):
    """The daemon's open files, less its pidfds (see pidfds_of)."""
    out = []
    for fd in sorted(os.listdir("/proc/%d/fd" % pid), key=int):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if target != "anon_inode:[pidfd]":
            out.append(target)
    return out


def pidfds_of(pid):
    """The daemon's pidfds as (pidfs inode, PID) pairs (fdinfo's Pid: -1 or 0 once the process ended).
    rtctld holds one per process it has read (src/core/tasks.c's cache: kernel threads, and user processes
    as "not a kernel thread"): their number follows the machine's processes, not leaks, so they are counted
    apart and checked for what they hold. Since Linux 6.9 (pidfs) each process's pidfds share an inode
    number no other process ever has: an ended process's pidfd is known again at a later look."""
    out = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        path = "/proc/%d/fd/%s" % (pid, fd)
        try:
            if os.readlink(path) != "anon_inode:[pidfd]":
                continue
            ino = os.stat(path).st_ino
            with open("/proc/%d/fdinfo/%s" % (pid, fd)) as f:
                out.append((ino, next(int(line.split()[1]) for line in f if line.startswith("Pid:"))))
        except (OSError, StopIteration):
            pass
    return out


def usage_of(pid, fewest=None):
    """A daemon reading /proc or sysfs because of an event (a process started, a device) holds a file open
    for a moment; a leaked fd stays. So when the daemon has more than the fewest fds seen so far, the
    fewest of up to ten looks 0.1 s apart."""
    looks = [fd_targets(pid)]
    while fewest is not None and min(map(len, looks)) > fewest and len(looks) < 10:
        time.sleep(0.1)
        looks.append(fd_targets(pid))
    fds = min(looks, key=len)
    status = dict(line.split(":", 1) for line in open("/proc/%d/status" % pid) if ":" in line)
    held = pidfds_of(pid)
    live = [p for _, p in held if p > 0]
    # A process that ends between its fdinfo and the look at /proc is no stale pidfd: looked at again.
    gone = [p for p in live if not os.path.exists("/proc/%d" % p)]
    if gone:
        again = dict(pidfds_of(pid))
        gone = [p for ino, p in held if p in gone and again.get(ino, 0) > 0 and
                not os.path.exists("/proc/%d" % p)]
    return {"fds": len(fds), "transient_fds": [x for x in looks[0] if x not in fds], "rss_kb": int(status["VmRSS"].split()[0]),
            "anon_kb": int(status["RssAnon"].split()[0]), "fd_targets": fds, "pidfds": len(held),
            "pidfds_ended": sorted(ino for ino, p in held if p <= 0),
            # Before pidfs (Linux 6.9) every pidfd has the one anon inode: an ended one is not followed.
            "pidfds_followed": len({ino for ino, _ in held}) == len(held),
            "pidfds_twice": len(live) - len(set(live)), "pidfds_not_running": gone}


class Usage:
    """The daemon's fds and memory at the start and after each round; check() applies the module's rule
    (see the docstring above) to the rounds after the first. Each sample also holds the daemon to letting
    go of ended processes: the pidfds of processes that had ended when it was taken are gone after the
    next scan (a Verify makes one), however many processes the machine ends meanwhile."""

    def __init__(self, storm, tmp_path, env):
        self.storm = storm
        self.path = os.path.join(str(tmp_path), "usage.json")
        self.env = env
        self.samples = []
        self.asan = False

    def sample(self, label, pid):
        u = dict(usage_of(pid, min((s["fds"] for s in self.samples), default=None)), label=label)
        self.asan = self.asan or sanitized(pid)
        ended = set(u["pidfds_ended"]) if u["pidfds_followed"] else set()
        u["pidfds_ended_kept"] = []
        if ended:
            p = self.env.rtctl("--json", "verify")
            assert p.returncode == 0, p.stderr
            u["pidfds_ended_kept"] = sorted(ended & {ino for ino, _ in pidfds_of(pid)})
        self.samples.append(u)
        print("%s %s: %d fds (and %d pidfds, %d of ended processes), VmRSS %d kB, RssAnon %d kB" % (
            self.storm, label, u["fds"], u["pidfds"], len(ended), u["rss_kb"], u["anon_kb"]), flush=True)
        with open(self.path, "w") as f:
            json.dump({"storm": self.storm, "asan": self.asan, "samples": self.samples}, f, indent=1)

    def check(self, warmup_index=1):
        """samples[warmup_index] is the warm-up round's end; every sample after it is held to it."""
        base = self.samples[warmup_index]
        later = self.samples[warmup_index + 1:]
        assert later, "no round after the warm-up: nothing was compared"
        grew = [s for s in later if s["fds"] != base["fds"]]
        assert grew == [], "the daemon's fds changed after the warm-up (%d): %s" % (base["fds"], grew)
        # Its pidfds: each a running process's, none twice, an ended one's gone at the next scan.
        bad = [s for s in self.samples if s["pidfds_twice"] or s["pidfds_not_running"] or
               s["pidfds_ended_kept"]]
        assert bad == [], "the daemon holds pidfds it should not: %s" % bad
        if not self.asan:
            grew = [s for s in later if s["rss_kb"] > base["rss_kb"] + RSS_ALLOWANCE_KB]
            assert grew == [], "VmRSS grew more than %d kB after the warm-up (%d kB): %s" % (
                RSS_ALLOWANCE_KB, base["rss_kb"], grew)


def status(env):
    # Degraded exits 1: a state to wait through, not an error of the call.
    p = env.rtctl("--json", "status")
    return json.loads(p.stdout) if p.stdout.strip() else {}


def scheduler(name):
    return machine.active_choice(machine.read("/sys/block/%s/queue/scheduler" % name))


def not_applied(env):
    """What a user would read to learn why the state is not the profile's: the state, what failed, the
    last pass, and the running daemon's last words (pytest cuts a long status repr before its failures)."""
    s = status(env)
    log = env.daemons[-1].output()[-4000:] if env.daemons else ""
    return "state %r, failures %s, last pass %s\nrtctld's log, its end:\n%s" % (
        s.get("state"), json.dumps(s.get("failures"), indent=1), json.dumps(s.get("last_pass")), log)


def assert_as_policy(env, profile, loops):
    """What the profile says, once the daemon has caught up: applied, Verify has everything in place, and
    direct reads agree: cpu1 isolated, every movable task and IRQ on cpu0, the loop devices tuned."""
    if not wait_until(lambda: status(env).get("state") == "applied"):
        pytest.fail(not_applied(env))
    s = status(env)
    assert s["profile"] == profile and s["failures"] == [], not_applied(env)
    assert s["isolated_cpus"] == "1" and s["housekeeping_cpus"] == "0", s
    p = env.rtctl("--json", "verify")
    rows = json.loads(p.stdout)
    assert p.returncode == 0 and rows and all(r["in_place"] for r in rows), \
        [r for r in rows if not r["in_place"]] or p.stderr
    assert machine.read(CPUSET + "/rtctl-isolated/cpuset.cpus") == "1"
    assert machine.read(CPUSET + "/rtctl-housekeeping/cpuset.cpus") == "0"
    assert on_cpu1() == []
    assert machine.read("/sys/devices/virtual/workqueue/cpumask") == "1"
    assert {n: machine.read("/proc/irq/%d/smp_affinity_list" % n) for n in movable_irqs()
            if machine.read("/proc/irq/%d/smp_affinity_list" % n) != "0"} == {}
    want, rt = PROFILES[profile]
    assert {n: scheduler(n) for n in loops} == {n: want for n in loops}
    assert machine.read("/proc/sys/kernel/sched_rt_runtime_us") == rt


def switch(env, profile):
    """A profile switch under way (rtctl profile, not waited for)."""
    return subprocess.Popen([harness.RTCTL, "profile", profile], env=env.environ, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


HOTPLUG_ROUNDS = 4  # the first one the warm-up
HOTPLUG_CYCLES = 50  # per round: 200 in all


def test_hotplug_storm(senv, tmp_path):
    """200 offline/online cycles of cpu1 under the audio profile: a third back to back, a third while a
    profile switch's pass runs, a third with a pause between offline and online (the daemon's offline
    pass under way when cpu1 comes back). Then the state is the profile's and stop puts everything back."""
    usage = Usage("hotplug", tmp_path, senv)
    rng = random.Random(14)
    with machine.loop_devices(2) as loops:
        before = machine.snapshot()
        d = senv.start("--profile", "storm", "--verbose")
        usage.sample("start", d.proc.pid)
        cycles = 0
        for rnd in range(HOTPLUG_ROUNDS):
            for i in range(HOTPLUG_CYCLES):
                p = None
                if i % 3 == 1:
                    p = switch(senv, "storm2" if i % 2 else "storm")
                    time.sleep(rng.uniform(0, 0.05))
                machine.set_cpu1(False)
                if i % 3 == 2:
                    time.sleep(rng.uniform(0, 0.1))
                machine.set_cpu1(True)
                if p:
                    p.wait(harness.HANG_SECONDS)
                cycles += 1
            # The last switch may have been to storm2: the round ends on storm.
            senv.rtctl("profile", "storm")
            assert d.running(), d.output()
            assert_as_policy(senv, "storm", loops)
            usage.sample("round %d (%d cycles)" % (rnd, cycles), d.proc.pid)
        assert cycles == 200
        assert d.output().count("cpu offline cpu1") > 0
        usage.check()
        assert d.stop() == 0
        assert machine.diff(before, machine.snapshot()) == [], d.output()[-4000:]
        assert senv.journal is None


CHURN_ROUNDS = 5  # the first one the warm-up
CHURN_BURSTS = 4  # per round
CHURN_DEVICES = 25  # per burst: 500 in all


def test_device_churn(senv, tmp_path):
    """500 loop devices added and removed in bursts of 25 under the audio profile; every other burst is
    removed as soon as it is there, while the daemon tunes it. Each device that stays long enough gets the
    profile's scheduler; afterwards only the two devices that stayed throughout are tuned and in Verify,
    and stop puts everything back."""
    usage = Usage("churn", tmp_path, senv)
    with machine.loop_devices(2) as kept:
        before = machine.snapshot()
        d = senv.start("--profile", "storm")
        usage.sample("start", d.proc.pid)
        made = 0
        for rnd in range(CHURN_ROUNDS):
            for burst in range(CHURN_BURSTS):
                with machine.loop_devices(CHURN_DEVICES) as names:
                    made += len(names)
                    if burst % 2 == 0:
                        assert wait_until(lambda: all(scheduler(n) == "bfq" for n in names)), \
                            {n: scheduler(n) for n in names}
            assert d.running(), d.output()
            assert_as_policy(senv, "storm", kept)
            objects = [r["object"] for r in json.loads(senv.rtctl("--json", "verify").stdout)]
            assert [o for o in objects if "/block/loop" in o and not any("/%s/" % k in o for k in kept)] == []
            usage.sample("round %d (%d devices)" % (rnd, made), d.proc.pid)
        assert made == 500
        usage.check()
        assert d.stop() == 0
        assert machine.diff(before, machine.snapshot()) == [], d.output()[-4000:]
        assert senv.journal is None


KILLS = 100


def test_sigkill_at_random_points_then_restart_and_restore(senv, tmp_path):
    """100 SIGKILLs: half while the first pass after start runs, half while a switch to the other
    profile runs, each at a random point of that pass (uniform over 1.5 times its length, measured
    first). Each time a new daemon starts with the profile, `rtctl restore` puts everything back, and the
    machine equals the snapshot taken before the first start. The restarted daemons' fds and memory after
    the restore are held to those of the first ten (the warm-up: a restart reads the journal it is left)."""
    usage = Usage("kill", tmp_path, senv)
    seed = int.from_bytes(os.urandom(4), "little")
    print("kill storm: random seed %d" % seed)
    rng = random.Random(seed)
    with machine.loop_devices(2):
        before = machine.snapshot()
        # How long a start and a switch take here, to spread the kills over them.
        t0 = time.monotonic()
        d = senv.start("--profile", "storm")
        start_s = time.monotonic() - t0
        t0 = time.monotonic()
        senv.rtctl("profile", "storm2", check=True)
        switch_s = time.monotonic() - t0
        d.stop()
        assert machine.diff(before, machine.snapshot()) == [], d.output()[-4000:]
        print("kill storm: start %.3f s, switch %.3f s" % (start_s, switch_s))
        killed_with_journal = 0
        for i in range(KILLS):
            if i % 2 == 0:
                d = senv.start("--profile", "storm", wait_ready=False)
                time.sleep(rng.uniform(0, 1.5 * start_s))
            else:
                d = senv.start("--profile", "storm")
                p = switch(senv, "storm2")
                time.sleep(rng.uniform(0, 1.5 * switch_s))
            d.stop(signal.SIGKILL)
            if i % 2:
                p.wait(harness.HANG_SECONDS)
            killed_with_journal += senv.journal is not None
            d = senv.start("--profile", "storm")
            r = senv.rtctl_json("restore")
            assert r["failures"] == 0, (i, r)
            usage.sample("restart %d" % i, d.proc.pid)
            # The restore leaves no profile in force, so no scan would prune what the cache held.
            assert usage.samples[-1]["pidfds"] == 0, usage.samples[-1]
            assert machine.diff(before, machine.snapshot()) == [], "kill %d" % i
            assert d.stop() == 0
            assert senv.journal is None
        # Most kills hit a daemon that had written something: otherwise they tested nothing.
        assert killed_with_journal > KILLS // 2, killed_with_journal
        # Every restarted daemon is compared with the largest of the first ten.
        usage.samples.insert(0, max(usage.samples[:10], key=lambda s: (s["fds"], s["rss_kb"])))
        usage.check(warmup_index=0)


FLOODS = 3  # the first one the warm-up
READERS = 4  # clients of nobody, each READ_CALLS per flood
READ_CALLS = 450
READS = ["Plan:", "ListIrqs", "Verify", "GetAll", "Plan:storm2", "Check"]
WRITE_CALLS = 200  # from one client of root: 2000 calls per flood in all
WRITES = ["SetProfile:storm2", "GetAll", "SetProfile:storm", "Verify"]


def counted(env, n, inflight, methods, user):
    cmd = ["/usr/bin/python3", harness.FLOOD_CLIENT, env.bus.address, "count", str(n), str(inflight)] + methods
    return subprocess.Popen(harness.as_user(user, cmd), env=env.environ, stdout=subprocess.PIPE, text=True)


def test_flood_of_reads_and_changes(senv, tmp_path):
    """Three floods of 2000 calls: four clients of nobody keep 4 reads each under way (Plan, ListIrqs,
    Verify, GetAll, Check), one client of root switches profiles back and forth between them. Every call
    is answered without error, each flood ends on the audio profile in place, and stop puts everything
    back."""
    usage = Usage("flood", tmp_path, senv)
    with machine.loop_devices(2) as loops:
        before = machine.snapshot()
        d = senv.start("--profile", "storm")
        usage.sample("start", d.proc.pid)
        for n in range(FLOODS):
            procs = [counted(senv, READ_CALLS, 4, READS, harness.NOBODY) for _ in range(READERS)]
            procs.append(counted(senv, WRITE_CALLS, 1, WRITES, 0))
            results = []
            for p in procs:
                out = p.communicate(timeout=harness.HANG_SECONDS)[0]
                assert p.returncode == 0, out
                results.append(json.loads(out.splitlines()[-1]))
            assert [r["errors"] for r in results if r["errors"]] == []
            assert sum(r["ok"] for r in results) == READERS * READ_CALLS + WRITE_CALLS == 2000
            assert_as_policy(senv, "storm", loops)
            usage.sample("flood %d" % n, d.proc.pid)
        usage.check()
        assert d.stop() == 0
        assert machine.diff(before, machine.snapshot()) == [], d.output()[-4000:]
        assert senv.journal is None
