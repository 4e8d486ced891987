#!/usr/bin/python3
"""rtctl benchmarks on this machine's real kernel. Prints a table and writes JSON.

    bench/bench.py [--runs 20] [--idle 60] [--json FILE] [--ordinary-priority] [--processes N] [SECTION...]

Sections: uevent (loop device add uevent -> scheduler in place, beside the kernel's own elevator switch
time), start (cold start -> READY=1), memory (RSS, PSS, private), storms (the same after start and after
each storm: --runs cpu1 hotplug cycles, 10 x --runs loop devices, 100 x --runs matched processes),
idle (wakeups of all rtctld threads over --idle seconds); not by default: hotplugquiet (hotplug, each
cycle after 11.5 s of quiet, so after rtctld released its code again: what that release costs). Needs root and a build tree (RTCTL_BUILD_DIR, default build/). Leaves the
machine as it found it (test loop devices only, removed afterwards)."""
import argparse
import contextlib
import glob
import socket
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

import machine  # noqa: E402
from harness import bench_env, wait_until  # noqa: E402

# rtctld as its unit starts it (units/rtctld.service: SCHED_FIFO 1, above every ordinary task), unless
# --ordinary-priority asks for the earlier tables' ordinary task.
DAEMON_ARGS = ["--realtime-priority=1"]

PROFILE = """[Profile]
Description=bench: test loop devices only
[Block test]
Match=name:loop2[0-4][0-9]
Scheduler=bfq
"""


def stats(values):
    values = sorted(values)
    p95 = values[min(len(values) - 1, int(round(0.95 * (len(values) - 1))))]
    return {"median": statistics.median(values), "p95": p95, "min": values[0], "max": values[-1],
            "n": len(values)}


def sched(name):
    return machine.active_choice(machine.read("/sys/block/%s/queue/scheduler" % name))


def kernel_elevator_write(n):
    """The kernel's own cost: one write of 'bfq' to a fresh queue's scheduler file (loop 250-299: no
    rule of the bench profile matches them)."""
    name = machine.add_loop(n)
    try:
        fd = os.open("/sys/block/%s/queue/scheduler" % name, os.O_WRONLY)
        t0 = time.monotonic()
        os.write(fd, b"bfq")
        elapsed = (time.monotonic() - t0) * 1000
        os.close(fd)
        return elapsed
    finally:
        machine.remove_loop(name)


def uevent_to_scheduler(listener, n):
    """From the add uevent reaching a listener to the scheduler file showing the rule's choice."""
    name = machine.add_loop(n)
    try:
        t_event = listener.wait_for("add", "/" + name)
        while sched(name) != "bfq":
            if time.monotonic() - t_event > 5:
                raise RuntimeError("scheduler not in place after 5 s")
            time.sleep(0.0002)
        return (time.monotonic() - t_event) * 1000
    finally:
        machine.remove_loop(name)


def bench_uevent(env, runs):
    """Alternates the two, run by run, so machine noise hits both alike; rtctl's share is the median
    of the paired differences."""
    env.start(*DAEMON_ARGS, "--profile", "bench")
    listener = machine.UeventListener()
    kernel, daemon, share = [], [], []
    try:
        for i in range(runs):
            k = kernel_elevator_write(250 + i % 50)
            d = uevent_to_scheduler(listener, 200 + i % 50)
            kernel.append(k)
            daemon.append(d)
            share.append(d - k)
            time.sleep(0.02)
    finally:
        listener.close()
        for dm in env.daemons:
            dm.stop_if_running()
    return stats(kernel), stats(daemon), stats(share)


def bench_start(env, runs):
    """Spawn -> READY=1, with one test loop device to switch (a real first pass)."""
    times = []
    with machine.loop_devices(1):
        for _ in range(runs):
            t0 = time.monotonic()
            d = env.start(*DAEMON_ARGS, "--profile", "bench")
            times.append((time.monotonic() - t0) * 1000)
            d.stop()
    return stats(times)


def read_status(pid, tid=None):
    out = {}
    for line in open("/proc/%d/status" % pid if tid is None else "/proc/%d/task/%s/status" % (pid, tid)):
        k, _, v = line.partition(":")
        out[k] = v.strip()
    return out


def bench_memory(env):
    d = env.start(*DAEMON_ARGS, "--profile", "bench")
    time.sleep(0.5)
    out = memory_of(d.proc.pid)
    d.stop()
    return out


# cpu1 isolated, kernel threads and IRQs off it: the heart of the shipped audio profile.
ISOLATED_QUIET = """[CPU]
Isolate=auto:1
KernelThreads=housekeeping
[IRQ]
Balance=housekeeping
RebalanceSec=0
"""

STORM_PROFILE = """[Profile]
Description=bench: storms (cpu1 isolated, IRQs and kernel threads off it, test loop devices)
""" + ISOLATED_QUIET + """[Block test]
Match=name:loop2[0-4][0-9]
Scheduler=bfq
[Attach storm]
Match=comm:rtctl-storm user:0
Threads=all
"""


def memory_of(pid):
    """private = Private_Clean + Private_Dirty; dirty = Private_Dirty alone: heap, stacks and written
    data. The clean part is mostly code pages of libraries no other process on this host maps (glib,
    libsystemd), which a desktop shares with every process that uses them."""
    st = read_status(pid)
    pss = private = dirty = 0
    for line in open("/proc/%d/smaps_rollup" % pid):
        if line.startswith("Pss:"):
            pss = int(line.split()[1])
        elif line.startswith(("Private_Clean:", "Private_Dirty:")):
            private += int(line.split()[1])
            if line.startswith("Private_Dirty:"):
                dirty = int(line.split()[1])
    return {"rss_kb": int(st["VmRSS"].split()[0]), "rss_anon_kb": int(st["RssAnon"].split()[0]),
            "rss_file_kb": int(st["RssFile"].split()[0]), "pss_kb": pss, "private_kb": private,
            "private_dirty_kb": dirty, "by_mapping": memory_by_mapping(pid)}


def memory_by_mapping(pid):
    """PSS, private and private dirty kB per mapped file (its code, data and relro together), heap,
    stack and other anonymous memory: where the totals above come from."""
    out = {}
    name = None
    for line in open("/proc/%d/smaps" % pid):
        head = line.split(None, 5)
        if not head:
            continue
        if not head[0].endswith(":"):  # a mapping's header line: range perms offset dev inode [path]
            path = head[5].rstrip("\n").removesuffix(" (deleted)") if len(head) > 5 else "[anon]"
            name = os.path.basename(path) if path.startswith("/") else path
            out.setdefault(name, {"pss_kb": 0, "private_kb": 0, "private_dirty_kb": 0})
        elif head[0] == "Pss:":
            out[name]["pss_kb"] += int(head[1])
        elif head[0] in ("Private_Clean:", "Private_Dirty:"):
            out[name]["private_kb"] += int(head[1])
            if head[0] == "Private_Dirty:":
                out[name]["private_dirty_kb"] += int(head[1])
    return out


def bench_storms(env, runs):
    """rtctld's memory (RSS, PSS, private) after start, then after each storm of what a long-running
    daemon sees: cpu1 offline/online `runs` times (each a full isolation and IRQ pass), 10 x `runs` loop
    devices added and removed (uevents), 100 x `runs` short processes of a name an [Attach] rule
    matches (proc connector events, attach and forget). Flat means no growth per event."""
    env.profile("storm", STORM_PROFILE)
    d = env.start(*DAEMON_ARGS, "--profile", "storm")
    pid = d.proc.pid
    time.sleep(0.5)
    out = [dict(memory_of(pid), after="start, alone")]
    with polkitd(env) as peer:
        if peer:
            out.append(dict(memory_of(pid), after="start, polkitd beside"))
        out += storms(env, d, runs)
    d.stop()
    return out


POLKITD = "/usr/lib/polkit-1/polkitd"
POLKIT_POLICY = "/usr/share/dbus-1/system.d/org.freedesktop.PolicyKit1.conf"


@contextlib.contextmanager
def polkitd(env):
    """The real polkitd on the bench's bus, as on every machine rtctld serves desktop users from: it
    maps glib and libsystemd, whose code pages then count once per process that maps them (PSS) and
    no longer as rtctld's private memory. Yields False where polkitd is not installed."""
    if not os.access(POLKITD, os.X_OK):
        print("memory: no %s (tools/deps.sh installs polkitd): rtctld measured alone only" % POLKITD,
              file=sys.stderr)
        yield False
        return
    p = subprocess.Popen([POLKITD, "--no-debug"], env=dict(env.environ), stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        owner = ["busctl", "--address=" + env.bus.address, "status", "org.freedesktop.PolicyKit1"]
        if not wait_until(lambda: subprocess.run(owner, capture_output=True).returncode == 0, 30):
            raise RuntimeError("polkitd did not take its bus name in 30 s")
        yield True
    finally:
        p.terminate()
        p.wait()


# rtctld releases the code a burst brought in once no pass ran for 10 s (QUIET_RELEASE_USEC in
# manager-memory.c): each storm is measured twice, at its peak (0.5 s after) and once that quiet spell is over.
QUIET_S = 11.5


def storms(env, d, runs):
    pid = d.proc.pid
    out = []

    def measured(after):
        time.sleep(0.5)
        out.append(dict(memory_of(pid), after=after))
        time.sleep(QUIET_S - 0.5)
        out.append(dict(memory_of(pid), after="%s, %g s quiet" % (after, QUIET_S)))

    with machine.cpu1_hotplug_guard():
        for _ in range(runs):
            machine.set_cpu1(False)
            time.sleep(0.2)
            machine.set_cpu1(True)
            if not wait_until(lambda: machine.read("/sys/fs/cgroup/cpuset/rtctl-isolated/cpuset.cpus") == "1", 10):
                raise RuntimeError("isolation not back after cpu1 came online:\n" + d.output()[-3000:])
    measured("%d hotplug cycles" % runs)
    for i in range(10 * runs):
        name = machine.add_loop(200 + i % 50)
        machine.remove_loop(name)
    measured("%d loop devices added and removed" % (10 * runs))
    storm = os.path.join(env.dir, "rtctl-storm")  # comm is the executable's name
    shutil.copy("/bin/sleep", storm)
    # twice: flat means the second storm leaves what the first one did, not more
    for again in ("", ", again"):
        for _ in range(100 * runs // 20):
            procs = [subprocess.Popen([storm, "0.01"]) for _ in range(20)]
            for p in procs:
                p.wait()
        measured("%d matched processes came and went%s" % (100 * runs, again))
    return out


def ctxt_switches(pid):
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        st = read_status(pid, tid)
        total += int(st["voluntary_ctxt_switches"]) + int(st["nonvoluntary_ctxt_switches"])
    return total


def bench_idle(env, seconds):
    d = env.start(*DAEMON_ARGS, "--profile", "bench")
    time.sleep(QUIET_S)  # past the one wake-up 10 s after the last pass (the quiet release)
    before = ctxt_switches(d.proc.pid)
    time.sleep(seconds)
    after = ctxt_switches(d.proc.pid)
    threads = len(os.listdir("/proc/%d/task" % d.proc.pid))
    d.stop()
    return {"seconds": seconds, "wakeups": after - before,
            "per_minute": (after - before) * 60.0 / seconds, "threads": threads}


ISOLATE = """[Profile]
Description=bench: cpu1 isolated
[CPU]
Isolate=auto:1
"""


def bench_hotplug(env, runs, processes=0):
    """cpu1 offline, then online: until isolation is re-established (the isolated cpuset has cpu1 again,
    the attached process runs there, kthreadd is back on housekeeping), from the `online` uevent and from
    the start of the write. The online write itself takes the kernel 20-45 ms here; it is reported
    beside. processes: that many more idle user processes for the whole run, as a desktop has hundreds
    (this VM has about twenty)."""
    import subprocess
    idle = []
    try:
        for _ in range(processes):
            idle.append(subprocess.Popen(["sleep", "3600"]))
        return hotplug_isolation(env, runs)
    finally:
        for q in idle:
            q.kill()
            q.wait()


def hotplug_isolation(env, runs, pause=0.0):
    import subprocess
    p = subprocess.Popen(["/bin/sh", "-c", "while :; do sleep 1; done"])

    def isolated():
        return (machine.read("/sys/fs/cgroup/cpuset/rtctl-isolated/cpuset.cpus") == "1" and
                machine.task_cpus(p.pid) == "1" and machine.task_cpus(2) == "0")
    try:
        return time_online(env, "iso", ISOLATE, isolated, runs,
                           setup=lambda: env.rtctl("attach", str(p.pid), check=True), pause=pause)
    finally:
        p.kill()
        p.wait()


IRQ_HOTPLUG = """[Profile]
Description=bench: IRQs balanced, one pinned to cpu1
[IRQ]
Balance=all
[IRQ pinned]
Match=name:virtio0-config
CPUs=1
"""


def irq_placed(pinned, net):
    if machine.read("/proc/irq/%d/smp_affinity_list" % pinned) != "1":
        return False
    return all(len(machine.read("/proc/irq/%d/smp_affinity_list" % n) or "") == 1 for n in net)


class UeventTimes:
    """Kernel uevents stamped by a thread the moment they arrive, while the main thread polls files."""

    def __init__(self):
        import threading
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, 15)  # NETLINK_KOBJECT_UEVENT
        self.sock.bind((0, 1))
        self.sock.settimeout(0.05)
        self.events = []
        self.stop = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop:
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            self.events.append((time.monotonic(), data.split(b"\0")[0].decode(errors="replace")))

    def first(self, action, suffix, after):
        for t, head in list(self.events):
            if t >= after and head.startswith(action + "@") and head.endswith(suffix):
                return t
        return None

    def close(self):
        self.stop = True
        self.thread.join()
        self.sock.close()


def minflt(pid):
    """The process's minor page faults so far (the 10th field of /proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])


def time_online(env, name, text, in_place, runs, setup=None, pause=0.0):
    """cpu1 offline, then online: from the cpu1 `online` uevent (and from the start of the write) until
    in_place() says the profile's CPU-dependent settings are back. pause: seconds of quiet before each
    cycle (QUIET_S: every cycle then starts after rtctld released its code again)."""
    env.profile(name, text)
    d = env.start(*DAEMON_ARGS, "--profile", name)
    if setup:
        setup()
    from_write, from_uevent = [], []
    passes = {"pass_ms": [], "writes_ms": [], "own_ms": [], "share_ms": [], "cycle_cpu_ms": [],
              "cycle_minflt": []}
    listener = UeventTimes()
    try:
        with machine.cpu1_hotplug_guard():
            for _ in range(runs):
                # rtctld's CPU time over the whole offline+online cycle (every pass and event of it), from
                # the scheduler's own count: steadier than any wall time on this VM.
                time.sleep(pause)
                cpu0, flt0 = run_ns(d.proc.pid), minflt(d.proc.pid)
                machine.set_cpu1(False)
                time.sleep(0.3)
                logged = len(d.output())
                t0 = time.monotonic()
                machine.set_cpu1(True)
                while not in_place():
                    if time.monotonic() - t0 > 5:
                        raise RuntimeError("%s: not in place 5 s after online" % name)
                    time.sleep(0.0002)
                t1 = time.monotonic()
                time.sleep(0.3)
                passes["cycle_cpu_ms"].append((run_ns(d.proc.pid) - cpu0) / 1e6)
                passes["cycle_minflt"].append(minflt(d.proc.pid) - flt0)
                t_ev = listener.first("online", "/cpu1", t0)
                from_write.append((t1 - t0) * 1000)
                if t_ev is not None:
                    from_uevent.append((t1 - t_ev) * 1000)
                # rtctld's passes after the online: their time, and the part of it inside the kernel's
                # writes (rtctld's own log), so that rtctld's share shows apart from the kernel's.
                total = writes = 0
                for m in PASS_LINE.finditer(d.output()[logged:]):
                    total += int(m.group(1))
                    writes += int(m.group(2))
                passes["pass_ms"].append(total / 1000)
                passes["writes_ms"].append(writes / 1000)
                passes["own_ms"].append((total - writes) / 1000)
                if t_ev is not None:  # uevent to in place, less the kernel's writes: rtctl's share
                    passes["share_ms"].append((t1 - t_ev) * 1000 - writes / 1000)
    finally:
        listener.close()
        d.stop()
    return stats(from_write), stats(from_uevent), {k: stats(v) for k, v in passes.items()}


def run_ns(pid):
    """Nanoseconds the task has run on a CPU (the first field of /proc/PID/schedstat)."""
    with open("/proc/%d/schedstat" % pid) as f:
        return int(f.read().split()[0])


PASS_LINE = re.compile(r"^Pass \([^)]*\): .*, (\d+) µs \((\d+) µs of it in the kernel's writes\)$", re.M)


def bench_irq_hotplug(env, runs):
    """The kernel resets an IRQ pinned to cpu1 at offline and virtio-net resets its own IRQs during the
    online write: until the pinned one is on cpu1 and virtio-net's on one CPU each."""
    irqs = {}
    for line in open("/proc/interrupts").read().splitlines()[1:]:
        head, _, rest = line.partition(":")
        if head.strip().isdigit():
            irqs[int(head)] = rest.split()[-1]
    pinned = [n for n, name in irqs.items() if name == "virtio0-config"][0]
    net = [n for n, name in irqs.items() if name.startswith("virtio2-")]
    return time_online(env, "irqhp", IRQ_HOTPLUG, lambda: irq_placed(pinned, net), runs)


POWER_HOTPLUG = """[Profile]
Description=bench: cpu1 polls
[Power]
CPUs=1
MaxExitLatencyUs=0
"""


def power_in_place():
    base = "/sys/devices/system/cpu/cpu1/"
    if machine.read(base + "power/pm_qos_resume_latency_us") != "n/a":
        return False
    states = glob.glob(base + "cpuidle/state[1-9]*/disable")
    return bool(states) and all(machine.read(s) == "1" for s in states)


def bench_power_hotplug(env, runs):
    """The kernel brings cpu1's cpuidle/ back with every state enabled: until they are disabled again."""
    return time_online(env, "powerhp", POWER_HOTPLUG, power_in_place, runs)


IRQ_IDLE = """[Profile]
Description=bench: IRQs on housekeeping, RebalanceSec=%d
[CPU]
Isolate=1
KernelThreads=leave
[IRQ]
Balance=housekeeping
RebalanceSec=%d
"""


def bench_irq_idle(env, seconds):
    """Wakeups of rtctld with the IRQ tuner active: RebalanceSec=0 (events only: target 0) and 10."""
    out = {}
    for sec in (0, 10):
        env.profile("irqidle%d" % sec, IRQ_IDLE % (sec, sec))
        d = env.start(*DAEMON_ARGS, "--profile", "irqidle%d" % sec)
        time.sleep(QUIET_S)  # as bench_idle
        before = ctxt_switches(d.proc.pid)
        time.sleep(seconds)
        w = ctxt_switches(d.proc.pid) - before
        d.stop()
        out["rebalance_%ds" % sec] = {"seconds": seconds, "wakeups": w, "per_minute": w * 60.0 / seconds}
    return out


SHAPES = ["vm2", "laptop-intel", "amd-workstation", "smp2x8", "server-2x32", "synthetic-1024"]


def bench_fixtures(runs):
    """plan+apply passes on each machine shape (bench-pass, C), on fresh trees in /dev/shm: how a pass
    grows with CPUs, IRQs and disks. Only tuners that exist are exercised (block, sysctl, the CPU split
    where the tree has what it needs)."""
    import shutil
    import subprocess
    root = tempfile.mkdtemp(prefix="rtctl-fixtures-", dir="/dev/shm")
    build = os.environ.get("RTCTL_BUILD_DIR", os.path.join(HERE, "..", "build"))
    out = {}
    try:
        subprocess.run(["/usr/bin/python3", os.path.join(HERE, "..", "tests", "fixtures", "gen-machine.py"),
                        "--out", root] + SHAPES, check=True, stdout=subprocess.DEVNULL)
        for shape in SHAPES:
            p = subprocess.run([os.path.join(build, "bench", "bench-pass"), "--fixture", os.path.join(root, shape),
                                "--conf", HERE, "--profile", "bench-fixture", "--runs", str(runs)],
                               capture_output=True, text=True, check=True)
            r = json.loads(p.stdout)
            counts = dict(line.split("=", 1) for line in open(os.path.join(root, shape, ".rtctl-fixture"))
                          .read().split() if "=" in line)
            r["shape_counts"] = counts
            out[shape] = r
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


HOLD_AUDIO = """[Profile]
Description=bench: the shipped audio profile without its block rules, held
Rank=20
""" + ISOLATED_QUIET + """[Power]
CPUs=isolated
MaxExitLatencyUs=0
"""


def bench_hold(env, runs):
    """HoldProfile of an audio profile (cpu1 isolated, kernel threads and IRQs off it, idle states pinned)
    over the base profile `off`, from the call to its reply, which comes when the profile is in place
    (checked after each reply); then ReleaseProfile, back to `off`."""
    import dbus
    env.profile("hold-audio", HOLD_AUDIO)
    env.write("rtctl.conf", "[Daemon]\nDefaultProfile=off\nUevents=kernel\n")
    d = env.start(*DAEMON_ARGS)
    conn = dbus.bus.BusConnection(env.bus.address)
    api = dbus.Interface(conn.get_object("org.rtctl.Manager1", "/org/rtctl/Manager1"), "org.rtctl.Manager1")
    hold, release = [], []
    try:
        for _ in range(runs):
            t0 = time.monotonic()
            cookie = api.HoldProfile("hold-audio", "bench", "rtctl.bench", timeout=300)
            hold.append((time.monotonic() - t0) * 1000)
            assert machine.read("/sys/fs/cgroup/cpuset/rtctl-isolated/cpuset.cpus") == "1", "not in place"
            assert machine.task_cpus(2) == "0", "kthreadd still on the isolated CPU"
            t0 = time.monotonic()
            api.ReleaseProfile(cookie, timeout=300)
            release.append((time.monotonic() - t0) * 1000)
            assert not os.path.exists("/sys/fs/cgroup/cpuset/rtctl-isolated"), "isolation left behind"
    finally:
        conn.close()
        d.stop()
    return stats(hold), stats(release)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--idle", type=int, default=60)
    ap.add_argument("--json", default=None)
    ap.add_argument("--processes", type=int, default=0,
                    help="hotplug: this many more idle user processes during the run (a desktop's)")
    ap.add_argument("--ordinary-priority", action="store_true",
                    help="run rtctld as an ordinary task, not at SCHED_FIFO 1 as its unit does")
    ap.add_argument("sections", nargs="*", default=["uevent", "start", "memory", "storms", "idle", "hotplug", "irqhotplug", "powerhotplug", "irqidle",
                                                "fixtures", "hold"])
    args = ap.parse_args()
    if args.ordinary_priority:
        DAEMON_ARGS.clear()
    if os.geteuid() != 0:
        sys.exit("bench needs root: it changes real kernel settings (test loop devices only)")

    results = {}
    with bench_env("bench", PROFILE, policies=[POLKIT_POLICY]) as (env, left):
        if "uevent" in args.sections:
            (results["kernel_elevator_write_ms"], results["uevent_to_scheduler_ms"],
             results["rtctl_share_ms"]) = bench_uevent(env, args.runs)
        if "start" in args.sections:
            results["start_to_ready_ms"] = bench_start(env, args.runs)
        if "memory" in args.sections:
            results["memory"] = bench_memory(env)
        if "storms" in args.sections:
            results["memory_across_storms"] = bench_storms(env, args.runs)
        if "idle" in args.sections:
            results["idle"] = bench_idle(env, args.idle)
        if "hotplug" in args.sections:
            (results["cpu1_online_write_to_isolation_ms"], results["cpu1_online_uevent_to_isolation_ms"],
             p) = bench_hotplug(env, args.runs, args.processes)
            results.update({"cpu1_online_isolation_" + k: v for k, v in p.items()})
        if "hotplugquiet" in args.sections:  # not by default: QUIET_S per run
            (results["quiet_cpu1_online_write_to_isolation_ms"], results["quiet_cpu1_online_uevent_to_isolation_ms"],
             p) = hotplug_isolation(env, args.runs, pause=QUIET_S)
            results.update({"quiet_cpu1_online_isolation_" + k: v for k, v in p.items()})
        if "irqhotplug" in args.sections:
            (results["cpu1_online_write_to_irqs_ms"], results["cpu1_online_uevent_to_irqs_ms"],
             p) = bench_irq_hotplug(env, args.runs)
            results.update({"cpu1_online_irqs_" + k: v for k, v in p.items()})
        if "powerhotplug" in args.sections:
            (results["cpu1_online_write_to_power_ms"], results["cpu1_online_uevent_to_power_ms"],
             p) = bench_power_hotplug(env, args.runs)
            results.update({"cpu1_online_power_" + k: v for k, v in p.items()})
        if "irqidle" in args.sections:
            results["irq_idle"] = bench_irq_idle(env, args.idle)
        if "fixtures" in args.sections:
            results["fixtures"] = bench_fixtures(args.runs)
        if "hold" in args.sections:
            results["hold_profile_to_in_place_ms"], results["release_profile_to_base_ms"] = \
                bench_hold(env, args.runs)
    if left:
        print("WARNING: the machine changed:", *left, sep="\n  ")

    print("%-32s %10s %10s %10s" % ("figure", "median", "p95", "n"))
    for k, v in results.items():
        if isinstance(v, dict) and "median" in v:
            print("%-32s %10.2f %10.2f %10d" % (k, v["median"], v["p95"], v["n"]))
    if "memory" in results:
        m = results["memory"]
        print("memory: RSS %(rss_kb)d kB (anon %(rss_anon_kb)d, file %(rss_file_kb)d), PSS %(pss_kb)d kB, "
              "private %(private_kb)d kB" % m)
    for m in results.get("memory_across_storms", []):
        print("memory after %-52s RSS %6d kB, PSS %6d kB, private %6d kB (dirty %d kB)" % (
            m["after"] + ":", m["rss_kb"], m["pss_kb"], m["private_kb"], m["private_dirty_kb"]))
        top = sorted(m["by_mapping"].items(), key=lambda kv: -kv[1]["pss_kb"])[:8]
        print("    PSS by mapping: " + ", ".join("%s %d" % (k, v["pss_kb"]) for k, v in top))
    if "idle" in results:
        print("idle: %(wakeups)d wakeups in %(seconds)d s (%(per_minute).1f/min), %(threads)d thread(s)"
              % results["idle"])
    for k, v in results.get("irq_idle", {}).items():
        print("idle with IRQs, %s: %d wakeups in %d s (%.1f/min)" % (k, v["wakeups"], v["seconds"], v["per_minute"]))
    for shape, r in results.get("fixtures", {}).items():
        print("fixture %-15s %4s CPUs %5s IRQs %4s disks: %4d settings, apply %6.2f ms, no-op %6.2f ms, restore %6.2f ms; "
              "topology load %6.2f ms"
              % (shape, r["shape_counts"].get("cpus_possible", "?"), r["shape_counts"].get("irqs", "?"),
                 r["shape_counts"].get("disks", "?"),
                 r["settings"], r["apply"]["median_us"] / 1000, r["noop"]["median_us"] / 1000,
                 r["restore"]["median_us"] / 1000, r["topology_load"]["median_us"] / 1000))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    print("machine unchanged: %s" % ("NO" if left else "yes"))
    return 1 if left else 0


if __name__ == "__main__":
    machine.interruptible()
    sys.exit(main())
