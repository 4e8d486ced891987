"""Threads=realtime on the real kernel (cgroup v1 cpusets here, cpu1 isolated): a thread that turns
SCHED_FIFO long after it was created is seen through the sched_setscheduler tracepoint (rtctld's tracefs
instance) and placed alone; a thread it creates inherits the policy and goes too; back at SCHED_OTHER it
goes back. A JACK client matched by graph:jack gets its real-time thread placed. What rtctld makes in
tracefs goes with stop, `rtctl restore` after a SIGKILL, and the next start."""
import json
import os
import signal
import subprocess
import time

import pytest

import machine
from conftest import NOBODY, wait_until
from test_attach_rules import HOUSEKEEPING, ISOLATE, ISOLATED, Probe, placement, two_cpus_and_v1  # noqa: F401

INSTANCE = "rtctl-attach"
# A placement is rtctld's work of a few ms; on this loaded 2-CPU host with one CPU isolated the bound is
# generous, but far below the hang limit: a missed event would wait forever.
BOUND = 20

RULES = ISOLATE + """
[Attach rt]
Match=comm:rtctl-rt user:%d
Threads=realtime
""" % NOBODY


@pytest.fixture
def rt_probes():
    made = []

    def make(name="rtctl-rt", threads=2, user=NOBODY):
        # SCHED_FIFO as an unprivileged user needs RLIMIT_RTPRIO (limits.conf's grant) or CAP_SYS_NICE
        # (what rtkit has): this host's root may not raise the limit (no CAP_SYS_RESOURCE), so the probe
        # keeps CAP_SYS_NICE as user nobody.
        p = Probe(name, threads, wrapper=["setpriv", "--reuid=%d" % user, "--regid=%d" % user, "--clear-groups",
                                          "--inh-caps=+sys_nice", "--ambient-caps=+sys_nice"])
        made.append(p)
        return p
    yield make
    for p in made:
        p.stop()


def instances():
    return machine.tracefs_state()["tracefs instances"].split()


def attached(env):
    return {(a["pid"], a["tid"], a["rule"], a["why"]) for a in env.rtctl_json("status")["attached_by_rules"]}


def test_a_thread_turning_fifo_later_goes_alone_and_its_child_with_it(env, rt_probes):
    env.profile("rt", RULES)
    d = env.start("--profile", "rt")
    assert env.rtctl_json("status")["policy_events"] == "tracepoints"
    assert INSTANCE in instances()
    p = rt_probes()
    # Longer than every re-check after the threads' creation would wait: only the event can see this.
    time.sleep(1.5)
    assert all(placement(p.pid, t) == HOUSEKEEPING for t in p.threads())
    p.command("sched", 0, "fifo")
    assert wait_until(lambda: placement(p.pid, p.tids[0]) == ISOLATED, timeout=BOUND)
    assert placement(p.pid, p.pid) == HOUSEKEEPING
    assert placement(p.pid, p.tids[1]) == HOUSEKEEPING
    assert (p.pid, p.tids[0], "rt", "realtime") in attached(env)
    text = env.rtctl("status", check=True).stdout
    assert "Real-time threads: policy changes seen by tracepoints" in text, text
    assert any(line.split()[:2] == [str(p.pid), str(p.tids[0])] and line.split()[-1] == "realtime"
               for line in text.splitlines()), text
    # A thread the real-time one creates is born in its cpuset with its policy: it stays.
    child = int(p.command("spawn", 0, "rt-child")[0])
    assert wait_until(lambda: (p.pid, child, "rt", "realtime") in attached(env), timeout=BOUND)
    assert placement(p.pid, child) == ISOLATED
    # rtctl check says, per process, which threads are on the isolated CPUs and what tells them apart.
    found = {c["check"]: c for c in json.loads(env.rtctl("--json", "check").stdout)}
    assert found["policy-events"]["status"] == "ok", found["policy-events"]
    detail = found["isolated-threads"]["detail"]
    assert "(PID %d)" % p.pid in detail, detail
    for tid in (p.tids[0], child):
        assert "(TID %d, SCHED_FIFO)" % tid in detail, detail
    others = len(os.listdir("/proc/%d/task" % p.pid)) - 2
    assert "(TID %d," % p.tids[1] not in detail, detail
    assert "%d other thread%s on housekeeping" % (others, "" if others == 1 else "s") in detail, detail
    # Back at SCHED_OTHER: back to housekeeping; its child is still real-time and stays.
    p.command("sched", 0, "other")
    assert wait_until(lambda: placement(p.pid, p.tids[0]) == HOUSEKEEPING, timeout=BOUND)
    assert placement(p.pid, child) == ISOLATED
    assert env.rtctl_json("status")["failures"] == []
    # Stop removes the instance (and the tracefs mount rtctld made, which the snapshot checks).
    assert d.stop() == 0, d.output()
    assert INSTANCE not in instances()
    assert placement(p.pid, p.tids[0])[0] != "/rtctl-isolated"


def test_a_process_whose_last_rt_thread_leaves_is_no_longer_matched(env, rt_probes):
    env.profile("rt", RULES)
    env.start("--profile", "rt")
    p = rt_probes()
    p.command("sched", 1, "rr")
    assert wait_until(lambda: placement(p.pid, p.tids[1]) == ISOLATED, timeout=BOUND)
    p.command("sched", 1, "other")
    assert wait_until(lambda: placement(p.pid, p.tids[1])[1] == "0", timeout=BOUND)
    assert wait_until(lambda: attached(env) == set(), timeout=BOUND)


def graph_rule_daemon(env):
    """rtctld with a rule for nobody's rtctl-rt in PipeWire's graph, following policy changes."""
    env.profile("rtg", ISOLATE + """
[Attach rt-graph]
Match=comm:rtctl-rt user:%d graph:pipewire
Threads=realtime
""" % NOBODY)
    d = env.start("--profile", "rtg")
    assert env.rtctl_json("status")["policy_events"] == "tracepoints"
    return d


def test_a_thread_born_realtime_is_seen_once_its_process_matches(env, rt_probes):
    # A process already real-time that joins a graph later (a plugin host loading its audio library)
    # makes no event; the thread its real-time thread then creates is born SCHED_FIFO, with no policy
    # call for the tracepoints either. Its creation is the one event: rtctld looks at it then.
    d = graph_rule_daemon(env)
    p = rt_probes()
    p.command("sched", 0, "fifo")  # seen, but no graph yet: no match
    # rtctld reads the policy change from the trace pipe on its own time, and then looks at the process
    # again 10 ms, 100 ms and 1 s later (the next test): the graph comes well after that series.
    time.sleep(3.5)
    p.command("memfd", 1, "pipewire-memfd:flags=0x0,type=0,size=4096")
    time.sleep(1.5)
    assert placement(p.pid, p.tids[0]) == HOUSEKEEPING
    assert attached(env) == set()
    child = int(p.command("spawn", 0, "rt-child")[0])
    assert wait_until(lambda: placement(p.pid, child) == ISOLATED, timeout=BOUND), d.output()[-3000:]
    assert placement(p.pid, p.tids[0]) == ISOLATED
    assert placement(p.pid, p.tids[1]) == HOUSEKEEPING
    assert {(p.pid, child, "rt-graph", "realtime"), (p.pid, p.tids[0], "rt-graph", "realtime")} <= attached(env)


def test_a_thread_real_time_before_its_process_maps_the_graph_is_placed_when_it_does(env, rt_probes):
    """A native PipeWire client's data loop turns real-time when its node is made, before the client maps
    the server's memfd (PipeWire 1.4): on the policy change graph: does not match yet, and mapping memory
    makes no event. rtctld looks at the process again after a real-time change that matched nothing."""
    d = graph_rule_daemon(env)
    p = rt_probes()
    p.command("sched", 0, "fifo")
    time.sleep(0.3)
    p.command("memfd", 1, "pipewire-memfd:flags=0x0,type=0,size=4096")
    assert wait_until(lambda: placement(p.pid, p.tids[0]) == ISOLATED, timeout=BOUND), d.output()[-3000:]
    assert placement(p.pid, p.tids[1]) == HOUSEKEEPING
    assert (p.pid, p.tids[0], "rt-graph", "realtime") in attached(env)


def test_a_jack_client_gets_its_process_thread_isolated(env):
    env.profile("jack", ISOLATE + """
[Attach jack-clients]
Match=graph:jack user:0
Threads=realtime
""")
    d = env.start("--profile", "jack")
    shm_before = machine.jack_shm()
    environ = dict(os.environ, JACK_NO_AUDIO_RESERVATION="1", JACK_DEFAULT_SERVER="rtctl-rt-test")
    jackd = subprocess.Popen(["jackd", "-n", "rtctl-rt-test", "-R", "-P", "10", "-d", "dummy", "-r", "48000",
                              "-p", "256"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environ)
    client = None
    try:
        waited = subprocess.run(["jack_wait", "-w", "-t", "30"], env=environ, capture_output=True, text=True)
        assert waited.returncode == 0, waited.stdout + waited.stderr
        client = subprocess.Popen(["jack_simple_client"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  env=environ)

        def threads():
            return [int(t) for t in os.listdir("/proc/%d/task" % client.pid)]

        def policy(t):
            st = machine.read("/proc/%d/task/%d/stat" % (client.pid, t)) or ""
            return int(st.rsplit(")", 1)[1].split()[38]) if st else -1

        def split():
            rt = [t for t in threads() if policy(t) in (1, 2)]
            return rt and all(placement(client.pid, t) == (ISOLATED if t in rt else HOUSEKEEPING)
                              for t in threads())
        assert wait_until(split, timeout=BOUND), ([(t, policy(t), placement(client.pid, t)) for t in threads()],
                                                  d.output()[-3000:])
        assert len(threads()) > 1
        assert wait_until(lambda: any(a[0] == client.pid and a[3] == "realtime" for a in attached(env)),
                          timeout=BOUND), (attached(env), d.output()[-3000:])
    finally:
        if client:
            client.kill()
            client.wait()
        jackd.send_signal(signal.SIGTERM)
        jackd.wait(60)
        machine.remove_jack_shm_since(shm_before)


def test_a_killed_daemons_tracefs_goes_with_restore_and_with_the_next_start(env):
    mounted_before = os.path.ismount(machine.TRACEFS)
    env.profile("rt", RULES)
    env.profile("plain", ISOLATE)
    d = env.start("--profile", "rt")
    assert INSTANCE in instances()
    d.stop(signal.SIGKILL)
    assert INSTANCE in instances()
    assert os.path.exists(os.path.join(env.run, "tracefs.json"))
    r = env.rtctl("restore")
    assert r.returncode == 0, r.stdout + r.stderr
    assert INSTANCE not in instances()
    assert os.path.ismount(machine.TRACEFS) == mounted_before
    assert not os.path.exists(os.path.join(env.run, "tracefs.json"))
    # Killed again: a start under a profile without such rules takes the leftovers away.
    d = env.start("--profile", "rt")
    d.stop(signal.SIGKILL)
    assert INSTANCE in instances()
    d = env.start("--profile", "plain")
    assert INSTANCE not in instances()
    assert os.path.ismount(machine.TRACEFS) == mounted_before
    assert env.rtctl_json("status")["policy_events"] == ""
    assert d.stop() == 0


# Turning the syscall tracepoints on or off patches kernel text and flags every task (the Debian guests
# oopsed in trace_syscall_enter/exit right after it): rtctld does it when the rules chosen change, not
# when a hold of a profile without such rules comes and goes over them, nor on a switch between profiles
# with the same rules or a reload. Counted in its log, as an admin would read it.
TRACING_ON = "Following real-time threads through the sched_setscheduler/sched_setattr tracepoints"
TRACING_OFF = "No longer following policy changes through the tracepoints"


def test_the_tracepoints_are_switched_when_the_chosen_rules_change_only(env, rt_probes):
    env.profile("rt", RULES)
    env.profile("rt2", RULES.replace("Description=test: cpu1 isolated", "Description=test: the same rules"))
    env.profile("hi", ISOLATE.replace("[Profile]", "[Profile]\nRank=50"))
    d = env.start("--profile", "rt")
    assert d.output().count(TRACING_ON) == 1, d.output()
    for name in ("rt2", "rt", "rt2"):
        env.rtctl("profile", name, check=True)
    d.proc.send_signal(signal.SIGHUP)
    assert wait_until(lambda: "Configuration reloaded." in d.output(), timeout=BOUND)
    # A hold outranking the base profile, with no Threads=realtime rule, three times over: the base
    # profile's rules come back when it ends, and the tracing stays on beneath it.
    for _ in range(3):
        r = env.rtctl("run", "--profile", "hi", "--", "true")
        assert r.returncode == 0, r.stdout + r.stderr
        assert env.rtctl_json("status")["profile"] == "rt2"
    out = d.output()
    assert out.count(TRACING_ON) == 1 and TRACING_OFF not in out, out[-4000:]
    assert env.rtctl_json("status")["policy_events"] == "tracepoints"
    assert INSTANCE in instances()
    # And it still sees a thread turn real-time.
    p = rt_probes()
    time.sleep(1.5)
    p.command("sched", 0, "fifo")
    assert wait_until(lambda: placement(p.pid, p.tids[0]) == ISOLATED, timeout=BOUND)
    # A base profile without such rules is a change of the rules: off once, and on again once back.
    env.rtctl("profile", "hi", check=True)
    assert wait_until(lambda: TRACING_OFF in d.output(), timeout=BOUND)
    assert INSTANCE not in instances()
    env.rtctl("profile", "rt", check=True)
    out = d.output()
    assert out.count(TRACING_ON) == 2 and out.count(TRACING_OFF) == 1, out[-4000:]
    assert d.stop() == 0, d.output()


def test_holds_in_a_loop_do_not_switch_the_tracepoints_at_their_pace(env):
    """HoldProfile is the active session's without a password: a hold of a profile with a realtime rule
    over a base without one switches the tracing on, and its end would switch it off, as often as a user
    loops. The last hold's end lingers a minute instead: holds in a row switch it on once and never off,
    and it goes off once a minute has passed with none."""
    env.profile("rt", RULES)
    env.profile("plain", ISOLATE.replace("Description=test: cpu1 isolated", "Description=test: no rules"))
    d = env.start("--profile", "plain")
    assert TRACING_ON not in d.output()
    for _ in range(3):
        r = env.rtctl("run", "--profile", "rt", "--", "true")
        assert r.returncode == 0, r.stdout + r.stderr
    out = d.output()
    assert out.count(TRACING_ON) == 1 and TRACING_OFF not in out, out[-4000:]
    assert INSTANCE in instances()
    t0 = time.monotonic()
    assert wait_until(lambda: TRACING_OFF in d.output(), timeout=90), d.output()[-3000:]
    assert time.monotonic() - t0 >= 45, "off %.0f s after the last hold, not after its linger" % (time.monotonic() - t0)
    assert INSTANCE not in instances()
    assert d.output().count(TRACING_ON) == 1
    assert d.stop() == 0, d.output()


SYSCALL_LOOP = os.path.join(os.environ.get("RTCTL_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..",
                                                                           "build")), "bench", "bench-syscall-loop")
KERNEL_FAULT = ("Oops", "BUG:", "int3", "general protection", "WARNING:", "Call Trace")
SWITCHES = 25


def kernel_log(after=-1):
    """The kernel's messages after sequence number `after`, and the last one's number. By sequence, not by
    line count: a full ring buffer drops a line for each one it takes."""
    fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    out, last = [], after
    try:
        while True:
            try:
                rec = os.read(fd, 8192).decode("utf-8", "replace")
            except BlockingIOError:
                break
            except BrokenPipeError:  # overwritten while read: the next read goes on from the oldest kept
                continue
            head, _, msg = rec.partition(";")
            seq = int(head.split(",")[1])
            last = max(last, seq)
            if seq > after:
                out.append(msg.split("\n")[0])
    finally:
        os.close(fd)
    return out, last


# The loop on the isolated CPU: a rule of both profiles puts it there (the test's own processes stay on
# housekeeping, where the other loop runs).
STORM = """
[Attach storm]
Match=comm:bench-syscall-l user:%d
Threads=all
""" % NOBODY


@pytest.mark.skipif(not os.access(SYSCALL_LOOP, os.X_OK), reason="needs bench/bench-syscall-loop (built with rtctl)")
def test_switching_the_tracepoints_under_a_system_call_storm_leaves_the_kernel_quiet(env):
    """Turning the syscall tracepoints on or off patches kernel text on every CPU while each one runs
    system calls through the patched code. Under QEMU 7.2's TCG the Debian 13 guest oopsed with int3 in
    that path during such switches (the emulator's race, fixed in QEMU 8.1: tests/vm/README.md); here, on
    CPUs that execute what they are given, rtctld switches them SWITCHES times each way with a system call
    loop on each CPU, the housekeeping one and the isolated one, and the kernel says nothing: no oops, no
    warning, and every switch is seen in tracefs."""
    env.profile("rt", RULES + STORM)
    env.profile("plain", ISOLATE.replace("Description=test: cpu1 isolated", "Description=test: no rules") + STORM)
    d = env.start("--profile", "plain")
    _, mark = kernel_log()
    loops = [subprocess.Popen(["nice", "-n", "19", SYSCALL_LOOP, "--calls", str(10 ** 12)], stdout=subprocess.DEVNULL),
             subprocess.Popen(["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups",
                               SYSCALL_LOOP, "--calls", str(10 ** 12)], stdout=subprocess.DEVNULL)]
    try:
        assert wait_until(lambda: placement(loops[1].pid, loops[1].pid) == ISOLATED, timeout=BOUND), \
            placement(loops[1].pid, loops[1].pid)
        assert placement(loops[0].pid, loops[0].pid) == HOUSEKEEPING
        for i in range(SWITCHES):
            for name, on in (("rt", True), ("plain", False)):
                env.rtctl("profile", name, check=True)
                assert (INSTANCE in instances()) == on, "switch %d to %s: instances %s" % (i, name, instances())
        assert all(p.poll() is None for p in loops), "a system call loop ended during the switches"
        assert placement(loops[1].pid, loops[1].pid) == ISOLATED
    finally:
        for p in loops:
            p.kill()
            p.wait()
    out = d.output()
    assert out.count(TRACING_ON) == SWITCHES and out.count(TRACING_OFF) == SWITCHES, out[-3000:]
    said = [l for l in kernel_log(mark)[0] if any(w in l for w in KERNEL_FAULT)]
    assert not said, said[:8]
    assert d.stop() == 0, d.output()


# rtctld where the kernel offers no tracefs: in a mount namespace of its own where tmpfs covers both
# places tracefs is found, and without CAP_SYS_ADMIN, so it cannot mount tracefs itself.
NO_TRACEFS = ["unshare", "-m", "--propagation", "slave", "sh", "-c",
              "mount -t tmpfs none /sys/kernel/tracing && mount -t tmpfs none /sys/kernel/debug && "
              "exec setpriv --bounding-set=-sys_admin --inh-caps=-sys_admin \"$@\"", "sh"]


def test_without_tracepoints_a_thread_is_rechecked_after_creation_only(env, rt_probes):
    env.profile("rt", RULES)
    d = env.start("--profile", "rt", wrapper=NO_TRACEFS)
    method = env.rtctl_json("status")["policy_events"]
    assert method.startswith("re-check after thread creation: "), method
    assert INSTANCE not in instances()
    # rtctl check says what that misses, and what fixes it.
    found = {c["check"]: c for c in json.loads(env.rtctl("--json", "check").stdout)}["policy-events"]
    assert found["status"] == "warn", found
    assert "more than 1 s after it was created" in found["detail"], found
    assert "back to SCHED_OTHER" in found["detail"], found
    assert method[len("re-check after thread creation: "):] in found["detail"], found
    assert "CONFIG_FTRACE_SYSCALLS=y" in found["fix"], found
    # Set within the 1 s re-check of its threads' creation: seen.
    p = rt_probes()
    p.command("sched", 0, "fifo")
    assert wait_until(lambda: placement(p.pid, p.tids[0]) == ISOLATED, timeout=BOUND)
    assert placement(p.pid, p.tids[1]) == HOUSEKEEPING
    # Set later, with no thread created since: not seen (nothing polls)...
    time.sleep(1.5)
    p.command("sched", 1, "fifo")
    time.sleep(1.5)
    assert placement(p.pid, p.tids[1]) == HOUSEKEEPING
    # ...until the process creates a thread: then it and the new thread (real-time, as its creator) go.
    child = int(p.command("spawn", 1, "rt-child")[0])
    assert wait_until(lambda: placement(p.pid, p.tids[1]) == ISOLATED and placement(p.pid, child) == ISOLATED,
                      timeout=BOUND)
    assert d.stop() == 0, d.output()
