#!/usr/bin/python3
"""Latency driver: cyclictest on one CPU under stress-ng load, for several tuning configurations
alternated in rounds (A B C, C B A, ...) so that drift of this noisy machine hits all of them alike; each
configuration's p99 per cell is ranked (median, quartiles, range; a rank only where ranges are apart).

    bench/latency.py [--duration 60] [--rounds 8] [--cpu 1] [--modes normal,laptop]
                     [--configs none,rtctl:audio,tuned:latency-performance,tuned:realtime,hand]
                     [--quick] [--json FILE] [--no-lock] [--keep-hist DIR]

Configurations:
  none             no tuning
  rtctl:PROFILE    rtctld from the build tree (on a private bus) with PROFILE: a profile name from
                   conf.d/ or a path to a profile file; when it isolates CPUs, cyclictest is let in
                   with `rtctl attach` (as an audio server would be) before it starts
  tuned:PROFILE    Debian's tuned 2.20 with PROFILE (latency-performance, realtime, ...), in a private
                   /etc/tuned (realtime: isolated_cores = the measured CPU); plugins that would reach
                   outside this machine's kernel state -- bootloader (grub), net (NIC channels),
                   irqbalance (/etc/default/irqbalance), systemd (CPUAffinity= in
                   /etc/systemd/system.conf, for the next boot) -- are switched off in a wrapper profile
  hand             a hand-tuned ideal: every movable task and IRQ off the measured CPU, the unbound
                   workqueue cpumask likewise, /dev/cpu_dma_latency held open at 0 and the measured
                   CPU's pm_qos_resume_latency_us at "n/a" (0 µs: polling idle only); all put back

Modes: normal (cyclictest holds /dev/cpu_dma_latency at 0 itself, hiding C-state settings) and laptop
(cyclictest --laptop leaves it alone, so the configuration's own C-state policy shows).

Per configuration and mode: samples, avg, p99, p99.9 (from cyclictest's histogram, not its summary),
how many latencies were above 1 ms, max (hypervisor noise on this VM: never rank by it), and the
rescheduling IPIs (RES in /proc/interrupts) and device interrupts the measured CPU took per second.

stress-ng (--cpu N --io N --vm N, N = online CPUs) runs for the whole run, started before the first
configuration, so every configuration finds the same load and can move it away from the measured CPU.
Needs root, rt-tests, stress-ng (and tuned, dbus for tuned:*; a build tree for rtctl:*). Takes the
kernel lock /run/rtctl-kernel.lock for the whole run and proves with a before/after snapshot that the
machine is as it was."""
import argparse
import contextlib
import glob
import json
import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import ranking  # noqa: E402
import rivals  # noqa: E402
from rivals import log  # noqa: E402
import machine  # noqa: E402
from harness import Env  # noqa: E402

CYCLICTEST = "cyclictest"
STRESS_NG = "stress-ng"


# ----------------------------------------------------------------------------------------- helpers

parse_cpulist = rivals.parse_cpulist
write = rivals.write


def cpulist(cpus):
    return ",".join(str(c) for c in sorted(cpus))


def cpumask_hex(cpus):
    return "%x" % sum(1 << c for c in cpus)


def online_cpus():
    return parse_cpulist(machine.read("/sys/devices/system/cpu/online"))


def interrupts_on(cpu):
    """(IPI counters by name, sum of device IRQs) for one CPU from /proc/interrupts."""
    ipis, devices = {}, 0
    with open("/proc/interrupts") as f:
        cpus = f.readline().split()
        col = cpus.index("CPU%d" % cpu)
        for line in f:
            head, _, rest = line.partition(":")
            fields = rest.split()
            if len(fields) <= col or not fields[col].isdigit():
                continue
            if head.strip().isdigit():
                devices += int(fields[col])
            else:
                ipis[head.strip()] = int(fields[col])
    return ipis, devices


def describe(cpu):
    """What the configuration left in force for the measured CPU, as evidence in the JSON."""
    irqs_on = irqs = 0
    for d in glob.glob("/proc/irq/[0-9]*"):
        irqs += 1
        if cpu in parse_cpulist(machine.read(d + "/smp_affinity_list")):
            irqs_on += 1
    tasks_on = tasks = 0
    for st in glob.glob("/proc/[0-9]*/task/[0-9]*/status"):
        try:
            with open(st) as f:
                m = re.search(r"^Cpus_allowed_list:\s*(\S+)", f.read(), re.M)
        except OSError:
            continue
        if m:
            tasks += 1
            if cpu in parse_cpulist(m.group(1)):
                tasks_on += 1
    disabled = [os.path.basename(os.path.dirname(f)) for f in
                sorted(glob.glob("/sys/devices/system/cpu/cpu%d/cpuidle/state*/disable" % cpu))
                if machine.read(f) == "1"]
    return {"cpu_dma_latency_us": rivals.cpu_dma_latency(),
            "pm_qos_resume_latency_us": machine.read("/sys/devices/system/cpu/cpu%d/power/pm_qos_resume_latency_us" % cpu),
            "cpuidle_disabled": disabled,
            "irqs_allowed_on_cpu": "%d/%d" % (irqs_on, irqs),
            "tasks_allowed_on_cpu": "%d/%d" % (tasks_on, tasks),
            "workqueue_cpumask": machine.read("/sys/devices/virtual/workqueue/cpumask"),
            "default_smp_affinity": machine.read("/proc/irq/default_smp_affinity")}


# ----------------------------------------------------------------------------------------- configurations

class Config:
    name = "none"

    def setup(self, ctx):
        pass

    def apply(self):
        pass

    def revert(self):
        pass

    def attach(self, pid):
        """Called with cyclictest's PID (stopped before exec) so the configuration can let it onto
        the CPUs it isolated; affinity-based ones need nothing."""
        pass

    def teardown(self):
        pass


class Rtctl(Config):
    """One rtctld for every rtctl:* configuration, switched with `rtctl profile X` (returns when the
    profile is in place) and back with `rtctl profile off` (puts every value back)."""
    shared = None

    def __init__(self, profile):
        self.name = "rtctl:" + profile
        if os.path.isfile(profile):
            self.profile = os.path.splitext(os.path.basename(profile))[0]
            self.path = profile
        else:
            self.profile = profile
            self.path = None

    def setup(self, ctx):
        self.cpu = ctx.cpu
        self.isolated = set()
        if Rtctl.shared is None:
            env = Env(ctx.tmp, ctx.bus())
            Rtctl.shared = {"env": env, "daemon": None}
            ctx.cleanups.append(self._cleanup)
        env = Rtctl.shared["env"]
        if self.path:
            with open(self.path) as f:
                env.profile(self.profile, f.read())
        if Rtctl.shared["daemon"] is None:
            Rtctl.shared["daemon"] = rivals.start_rtctld(env, "--profile", "off")

    @staticmethod
    def _cleanup():
        s = Rtctl.shared
        if s["daemon"]:
            s["daemon"].stop_if_running()
        s["env"].cleanup()
        Rtctl.shared = None

    def apply(self):
        env = Rtctl.shared["env"]
        env.rtctl("profile", self.profile, check=True)
        self.isolated = rivals.parse_cpulist(env.rtctl_json("status").get("isolated_cpus") or "")
        if self.isolated and self.cpu not in self.isolated:
            log("warning: %s isolates CPUs %s, not the measured cpu%d" % (self.name, cpulist(self.isolated), self.cpu))

    def attach(self, pid):
        # With cpuset isolation cyclictest could not even pin itself to an isolated CPU: let it in
        # the way an audio server is let in.
        if self.isolated:
            Rtctl.shared["env"].rtctl("attach", str(pid), check=True)

    def revert(self):
        Rtctl.shared["env"].rtctl("profile", "off", check=True)


TUNED_WRAPPER = """[main]
summary=rtctl bench: %(p)s without plugins that reach outside this machine's kernel state
include=%(p)s
[bootloader]
enabled=false
[net]
enabled=false
[irqbalance]
enabled=false
[systemd]
enabled=false
"""


class Tuned(Config):
    """One tuned for every tuned:* configuration; between configurations it sits on an empty profile
    (a profile switch rolls everything back)."""
    shared = None

    def __init__(self, profile):
        self.name = "tuned:" + profile
        self.profile = profile
        self.wrapper = "rtctl-bench-" + profile

    def setup(self, ctx):
        if Tuned.shared is None:
            profiles = {"rtctl-bench-" + c.profile: TUNED_WRAPPER % {"p": c.profile}
                        for c in ctx.configs if isinstance(c, Tuned)}
            variables = "isolated_cores=%d\nisolate_managed_irq=Y\n" % ctx.cpu
            files = {"realtime-variables.conf": variables,
                     "realtime-virtual-guest-variables.conf": variables,
                     "cpu-partitioning-variables.conf": "isolated_cores=%d\n" % ctx.cpu}
            Tuned.shared = rivals.Tuned(ctx.tmp, ctx.bus(), profiles, files=files)
            ctx.cleanups.append(self._cleanup)

    @staticmethod
    def _cleanup():
        Tuned.shared.cleanup()
        Tuned.shared = None

    def _applied(self, profile):
        return Tuned.shared.output().count("static tuning from profile '%s' applied" % profile)

    def _switch(self, profile):
        n = self._applied(profile)
        Tuned.shared.adm("profile", profile)
        deadline = time.monotonic() + 60
        while self._applied(profile) <= n:
            if time.monotonic() > deadline:
                raise RuntimeError("tuned did not apply %s:\n%s" % (profile, Tuned.shared.output()[-3000:]))
            time.sleep(0.05)

    def apply(self):
        self._switch(self.wrapper)

    def revert(self):
        self._switch("rtctl-bench-empty")


class Hand(Config):
    """The hand-tuned ideal for one CPU; everything it writes it puts back."""
    name = "hand"

    def setup(self, ctx):
        self.cpu = ctx.cpu
        self.dma_fd = None

    def apply(self):
        hk = online_cpus() - {self.cpu}
        if not hk:
            raise RuntimeError("hand: no housekeeping CPU left")
        self.log = {"irq_failures": {}, "tasks_moved": 0, "tasks_refused": 0}
        self.irqs_off(hk)
        self.tasks_off(hk)
        self.cstates_off()

    def irqs_off(self, hk):
        """IRQs, the default IRQ affinity and unbound workqueues on the housekeeping CPUs."""
        cpu = self.cpu
        self.irqs = rivals.irq_affinities()
        self.default_affinity = machine.read("/proc/irq/default_smp_affinity")
        for irq, cpus in self.irqs.items():
            if cpu in parse_cpulist(cpus):
                err = rivals.write_irq_affinity(irq, cpulist(parse_cpulist(cpus) - {cpu}))
                if err:
                    self.log["irq_failures"][irq] = os.strerror(err)
        write("/proc/irq/default_smp_affinity", cpumask_hex(hk))
        # Unbound workqueues.
        self.wq = machine.read("/sys/devices/virtual/workqueue/cpumask")
        write("/sys/devices/virtual/workqueue/cpumask", cpumask_hex(hk))

    def tasks_off(self, hk):
        """Every task that may run elsewhere too."""
        cpu = self.cpu
        self.tasks = {}
        for key, cpus in rivals.task_affinities().items():
            allowed = parse_cpulist(cpus)
            if cpu in allowed and len(allowed) > 1:
                try:
                    os.sched_setaffinity(key[0], allowed - {cpu})
                    self.tasks[key] = allowed
                    self.log["tasks_moved"] += 1
                except OSError:
                    self.log["tasks_refused"] += 1

    def cstates_off(self):
        """The global PM QoS request held open at 0, and the CPU's own resume latency at n/a (0 µs)."""
        self.dma_fd = os.open("/dev/cpu_dma_latency", os.O_WRONLY)
        os.write(self.dma_fd, struct.pack("i", 0))
        self.qos_path = "/sys/devices/system/cpu/cpu%d/power/pm_qos_resume_latency_us" % self.cpu
        self.qos = machine.read(self.qos_path)
        write(self.qos_path, "n/a")

    def revert(self):
        self.cstates_back()
        self.tasks_back()
        self.irqs_back()

    def cstates_back(self):
        write(self.qos_path, self.qos)
        if self.dma_fd is not None:
            os.close(self.dma_fd)
            self.dma_fd = None

    def tasks_back(self):
        now = rivals.task_affinities()
        moved_tids = {k[0]: v for k, v in self.tasks.items()}
        for key, allowed in self.tasks.items():
            if key in now:
                try:
                    os.sched_setaffinity(key[0], allowed)
                except OSError:
                    pass
        # Tasks born while it was in force inherited the narrowed mask from a task it had moved:
        # give them their parent's (or their process's) original mask.
        for key in set(now) - set(self.tasks):
            tid = key[0]
            try:
                with open("/proc/%d/status" % tid) as f:
                    st = f.read()
            except OSError:
                continue
            tgid = int(re.search(r"^Tgid:\s*(\d+)", st, re.M).group(1))
            ppid = int(re.search(r"^PPid:\s*(\d+)", st, re.M).group(1))
            origin = moved_tids.get(tgid) if tgid != tid else None
            if origin is None:
                origin = moved_tids.get(ppid)
            if origin is not None and parse_cpulist(now[key]) == origin - {self.cpu}:
                try:
                    os.sched_setaffinity(tid, origin)
                except OSError:
                    pass

    def irqs_back(self):
        write("/sys/devices/virtual/workqueue/cpumask", self.wq)
        for irq, cpus in self.irqs.items():
            if rivals.irq_affinities().get(irq) != cpus:
                rivals.write_irq_affinity(irq, cpus)
        write("/proc/irq/default_smp_affinity", self.default_affinity)

    def teardown(self):
        if self.dma_fd is not None:
            os.close(self.dma_fd)


def make_config(spec, kinds=None):
    """A configuration from its name; kinds maps none, hand, rtctl and tuned to other classes."""
    kinds = dict({"none": Config, "hand": Hand, "rtctl": Rtctl, "tuned": Tuned}, **(kinds or {}))
    if spec in ("none", "hand"):
        return kinds[spec]()
    kind, _, arg = spec.partition(":")
    if kind in ("rtctl", "tuned") and arg:
        return kinds[kind](arg)
    raise SystemExit("unknown configuration %r (none, hand, rtctl:PROFILE, tuned:PROFILE)" % spec)


@contextlib.contextmanager
def applied(cfg, on_left):
    """cfg in force inside the block; afterwards reverted, and what its revert left behind (workqueue
    cpumasks, IRQ and IRQ-thread affinities) put back and handed to on_left as evidence."""
    saved = rivals.guarded_state()
    cfg.apply()
    try:
        yield
    finally:
        cfg.revert()
        time.sleep(0.2)
        left = rivals.repair(saved)
        if left:
            log("%s left behind (now repaired): %s" % (cfg.name, "; ".join(left)))
            on_left(left)


class Context:
    def __init__(self, tmp, cpu, configs):
        self.tmp = tmp
        self.cpu = cpu
        self.configs = configs
        self.cleanups = []
        self._bus = None

    def bus(self):
        if self._bus is None:
            self._bus = rivals.SystemBus(self.tmp)
            self.cleanups.insert(0, self._bus.stop)  # stopped last
        return self._bus

    def cleanup(self):
        for fn in reversed(self.cleanups):
            try:
                fn()
            except Exception as e:
                log("cleanup failed: %r" % e)


# ----------------------------------------------------------------------------------------- cyclictest

def parse_histfile(path):
    bins, summary = [], {}
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                m = re.match(r"# (Total|Min Latencies|Avg Latencies|Max Latencies|Histogram Overflows):\s*(\d+)", line)
                if m:
                    summary[m.group(1)] = int(m.group(2))
                continue
            parts = line.split()
            if len(parts) >= 2 and parts[0].isdigit():
                i, c = int(parts[0]), int(parts[1])
                if i >= len(bins):
                    bins.extend([0] * (i + 1 - len(bins)))
                bins[i] = c
    return bins, summary


def start_stopped(cmd, **popen_args):
    """cmd behind a shell that stops itself, so that the configuration can place it (rtctl attach,
    a cpuset) before it execs cmd, which then inherits the placement. SIGCONT lets it go."""
    p = subprocess.Popen(["/bin/sh", "-c", 'kill -STOP $$; exec "$@"', "sh"] + cmd, **popen_args)
    deadline = time.monotonic() + 10
    while (machine.read("/proc/%d/stat" % p.pid) or "").rsplit(")", 1)[-1].split()[:1] != ["T"]:
        if p.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the stopped shell before %s did not stop" % cmd[0])
        time.sleep(0.005)
    return p


def run_cyclictest(cfg, cpu, seconds, laptop, args, workdir, tag):
    hist = os.path.join(workdir, "hist-%s.txt" % tag)
    js = os.path.join(workdir, "ct-%s.json" % tag)
    cmd = [CYCLICTEST, "-m", "-p", str(args.prio), "-i", str(args.interval), "-t", "1", "-a", str(cpu),
           "-D", "%ds" % seconds, "-q", "-h", str(args.hist_us), "--histfile=" + hist, "--json=" + js]
    if laptop:
        cmd.append("--laptop")
    p = start_stopped(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        cfg.attach(p.pid)
    except Exception:
        p.kill()
        p.wait()
        raise
    ipi0, dev0 = interrupts_on(cpu)
    t0 = time.monotonic()
    os.kill(p.pid, signal.SIGCONT)
    out, err = p.communicate(timeout=seconds + 60)
    elapsed = time.monotonic() - t0
    ipi1, dev1 = interrupts_on(cpu)
    if p.returncode != 0:
        raise RuntimeError("cyclictest failed (%d): %s%s" % (p.returncode, out, err))
    bins, summary = parse_histfile(hist)
    with open(js) as f:
        j = json.load(f)
    th = j["thread"]["0"]
    return {"bins": bins, "overflows": summary.get("Histogram Overflows", 0), "cycles": th["cycles"],
            "avg": th["avg"], "min": th["min"], "max": th["max"], "seconds": elapsed,
            "res": ipi1.get("RES", 0) - ipi0.get("RES", 0),
            "ipis": {k: ipi1[k] - ipi0.get(k, 0) for k in ipi1 if ipi1[k] != ipi0.get(k, 0)},
            "device_irqs": dev1 - dev0, "cmd": " ".join(cmd)}


def summarize(runs, hist_us):
    """One line of the table from one or more cyclictest runs: their histograms added up."""
    n = max(len(r["bins"]) for r in runs)
    bins = [0] * n
    for r in runs:
        for i, c in enumerate(r["bins"]):
            bins[i] += c
    overflows = sum(r["overflows"] for r in runs)
    total = sum(bins) + overflows

    def percentile(q):
        want = q / 100.0 * total
        acc = 0
        for i, c in enumerate(bins):
            acc += c
            if acc >= want:
                return i
        return ">=%d" % hist_us

    cycles = sum(r["cycles"] for r in runs)
    seconds = sum(r["seconds"] for r in runs)
    return {"samples": total, "avg_us": round(sum(r["avg"] * r["cycles"] for r in runs) / max(cycles, 1), 2),
            "p50_us": percentile(50), "p99_us": percentile(99), "p99_9_us": percentile(99.9),
            "p99_99_us": percentile(99.99),
            "over_1ms": sum(bins[1001:]) + overflows, "max_us": max(r["max"] for r in runs),
            "res_ipis": sum(r["res"] for r in runs), "res_per_s": round(sum(r["res"] for r in runs) / seconds, 1),
            "device_irqs_per_s": round(sum(r["device_irqs"] for r in runs) / seconds, 1),
            "seconds": round(seconds, 1), "runs": len(runs)}


# ----------------------------------------------------------------------------------------- main

def start_stress(args, total_seconds):
    n = len(online_cpus())
    cmd = [STRESS_NG, "--timeout", "%ds" % int(total_seconds), "--quiet"]
    for s in args.stress.split(","):
        cmd += ["--" + s, str(n)]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    time.sleep(2)
    if p.poll() is not None:
        raise RuntimeError("stress-ng exited at once: " + " ".join(cmd))
    return p, cmd


def stop_stress(p):
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if p.poll() is None:
        p.wait(10)


def print_table(table, states):
    print("%-28s %-6s %9s %8s %6s %7s %7s %6s %7s %7s %7s" % (
        "configuration", "mode", "samples", "avg us", "p99", "p99.9", "p99.99", ">1ms", "max", "RES/s", "IRQ/s"))
    for row in table:
        s = row["summary"]
        print("%-28s %-6s %9d %8.2f %6s %7s %7s %6d %7d %7.1f %7.1f" % (
            row["config"], row["mode"], s["samples"], s["avg_us"], s["p99_us"], s["p99_9_us"], s["p99_99_us"],
            s["over_1ms"], s["max_us"], s["res_per_s"], s["device_irqs_per_s"]))
    print("\n(max is hypervisor noise on this VM: rank by p99 / p99.9 / >1ms, never by max)")
    print("\nstate in force during each configuration (first round):")
    for name, st in states.items():
        print("  %-26s dma_latency=%s pm_qos=%s idle_off=%s irqs_on_cpu=%s tasks_on_cpu=%s wq=%s" % (
            name, st["cpu_dma_latency_us"], st["pm_qos_resume_latency_us"], ",".join(st["cpuidle_disabled"]) or "-",
            st["irqs_allowed_on_cpu"], st["tasks_allowed_on_cpu"], st["workqueue_cpumask"]))


def print_end(results, left, json_path):
    """The closing lines: runtime, whether the machine is as it was (and what changed), the JSON."""
    print("\nruntime %.0f s; machine unchanged: %s" % (results["runtime_s"], "yes" if not left else "NO"))
    if left:
        print("WARNING: the machine changed:", *left, sep="\n  ")
    if json_path:
        with open(json_path, "w") as f:
            json.dump(results, f, indent=2)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=int, default=60, help="seconds of cyclictest per configuration, mode and round")
    ap.add_argument("--rounds", type=int, default=8,
                    help="times the whole alternation repeats: cells per configuration and mode (default 8)")
    ap.add_argument("--cpu", type=int, default=1, help="measured CPU (default 1)")
    ap.add_argument("--modes", default="normal,laptop", help="normal, laptop or both (default both)")
    ap.add_argument("--configs", default="none,rtctl:audio,tuned:latency-performance,tuned:realtime,hand")
    ap.add_argument("--quick", action="store_true", help="smoke test: 3 s per configuration and mode, 1 round")
    ap.add_argument("--interval", type=int, default=200, help="cyclictest -i (µs)")
    ap.add_argument("--prio", type=int, default=90, help="cyclictest -p")
    ap.add_argument("--hist-us", type=int, default=10000, help="histogram range in µs (cyclictest -h)")
    ap.add_argument("--stress", default="cpu,io,vm", help="stress-ng stressors, N = online CPUs each")
    ap.add_argument("--settle", type=float, default=1.0, help="seconds between applying and measuring")
    ap.add_argument("--json", default=None)
    ap.add_argument("--keep-hist", default=None, help="copy cyclictest's histogram files to this directory")
    ap.add_argument("--no-lock", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.duration, args.rounds = 3, 1
    if os.geteuid() != 0:
        sys.exit("latency needs root: it runs SCHED_FIFO cyclictest and changes kernel settings")
    for tool in (CYCLICTEST, STRESS_NG):
        if not any(os.access(os.path.join(d, tool), os.X_OK) for d in ("/usr/bin", "/usr/sbin")):
            sys.exit("%s is missing: apt-get install rt-tests stress-ng" % tool)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not set(modes) <= {"normal", "laptop"}:
        sys.exit("--modes: normal, laptop")
    if args.cpu not in online_cpus():
        sys.exit("cpu%d is not online" % args.cpu)
    configs = [make_config(c.strip()) for c in args.configs.split(",") if c.strip()]

    t_start = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="rtctl-latency-")
    os.chmod(tmp, 0o755)
    per = {}
    rounds_detail = []
    states = {}
    leftovers = {}
    stress_cmd = None
    planned = len(configs) * len(modes) * args.rounds * (args.duration + 4) + 120
    with rivals.kernel_lock(not args.no_lock):
        before = rivals.snapshot()
        ctx = Context(tmp, args.cpu, configs)
        stress = None
        try:
            with rivals.irqs_restored():
                for c in configs:
                    c.setup(ctx)
                stress, stress_cmd = start_stress(args, planned * 1.5)
                log("stress: %s" % " ".join(stress_cmd))
                for r in range(args.rounds):
                    # A B C, C B A, ...: the machine's drift over the run hits every configuration alike.
                    order = modes if r % 2 == 0 else list(reversed(modes))
                    for c in (configs if r % 2 == 0 else configs[::-1]):
                        with applied(c, lambda left: leftovers.setdefault(c.name, []).append(left)):
                            time.sleep(args.settle)
                            if c.name not in states:
                                states[c.name] = describe(args.cpu)
                            for mode in order:
                                tag = "%d-%s-%s" % (r, re.sub(r"[^\w.-]", "_", c.name), mode)
                                res = run_cyclictest(c, args.cpu, args.duration, mode == "laptop", args, tmp, tag)
                                per.setdefault((c.name, mode), []).append(res)
                                s = summarize([res], args.hist_us)
                                rounds_detail.append({"round": r, "config": c.name, "mode": mode,
                                                      "summary": s, "ipis": res["ipis"]})
                                log("round %d %-28s %-6s avg %6.2f p99 %5s p99.9 %5s >1ms %4d max %5d RES/s %.1f" % (
                                    r, c.name, mode, s["avg_us"], s["p99_us"], s["p99_9_us"], s["over_1ms"],
                                    s["max_us"], s["res_per_s"]))
        finally:
            if stress:
                stop_stress(stress)
            for c in configs:
                c.teardown()
            ctx.cleanup()
        after = rivals.snapshot()
    left = rivals.diff(before, after)
    table = []
    for c in configs:
        for mode in modes:
            if (c.name, mode) in per:
                table.append({"config": c.name, "mode": mode, "summary": summarize(per[(c.name, mode)], args.hist_us)})
    results = {"cpu": args.cpu, "duration_s": args.duration, "rounds": args.rounds, "modes": modes,
               "configs": [c.name for c in configs], "interval_us": args.interval, "prio": args.prio,
               "hist_us": args.hist_us, "stress": stress_cmd, "table": table, "rounds_detail": rounds_detail,
               "state": states, "left_behind_by_config": leftovers, "machine_unchanged": not left, "machine_diff": left,
               "runtime_s": round(time.monotonic() - t_start, 1)}
    print_table(table, states)
    results["ranking"] = {}
    for mode in modes:
        # A p99 beyond the histogram (">=N") counts as N: worse than anything inside it.
        groups = {c.name: [d["summary"]["p99_us"] if isinstance(d["summary"]["p99_us"], int) else args.hist_us
                           for d in rounds_detail if d["config"] == c.name and d["mode"] == mode]
                  for c in configs}
        results["ranking"][mode] = ranking.rank(groups)
        print()
        ranking.print_ranking("%s mode: p99 latency per %d s cell, %d cell%s per configuration" % (
            mode, args.duration, args.rounds, "" if args.rounds == 1 else "s"), "µs", results["ranking"][mode],
            width=28)
    for name, lst in leftovers.items():
        print("%s left behind after its revert (repaired by the bench): %s" % (name, "; ".join(lst[0])))
    print_end(results, left, args.json)
    if args.keep_hist:
        os.makedirs(args.keep_hist, exist_ok=True)
        for f in glob.glob(os.path.join(tmp, "hist-*.txt")) + glob.glob(os.path.join(tmp, "ct-*.json")):
            os.replace(f, os.path.join(args.keep_hist, os.path.basename(f)))
    import shutil
    shutil.rmtree(tmp, ignore_errors=True)
    return 0 if not left else 1


if __name__ == "__main__":
    machine.interruptible()
    sys.exit(main())
