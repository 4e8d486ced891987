#!/usr/bin/python3
"""Checks rtctl latency against cyclictest: the same CPU, the same stress-ng load, the tools alternated
in one run (A B C D, then rotated, --rounds times) so that drift of this noisy machine hits all alike.

    bench/latency-check.py [--cpu 1] [--duration 20] [--rounds 3] [--json FILE] [--no-lock]

Tools, all waking every 1000 µs at SCHED_FIFO 90 on --cpu:
  rtctl-timerlat    rtctl latency --method timerlat (the kernel's timerlat tracer; reported as missing
                    where the kernel lacks it)
  rtctl-timer       rtctl latency --method timer (rtctl's own clock_nanosleep process)
  cyclictest        cyclictest -m -p 90 -i 1000 -t 1 -a CPU -h 10000 (holds /dev/cpu_dma_latency at 0)
  cyclictest-laptop the same with --laptop (leaves C-states alone, as rtctl latency does)

Each line's avg is the tool's own; p50, p99, p99.9 are computed from the 1 µs histograms the same way for
every tool (upper edge of the bucket holding the quantile, never above the max), so the columns compare.
A benchmark: it reports, it never asserts. Needs root, rt-tests, stress-ng and a build tree
(RTCTL_BUILD_DIR, default ./build). Takes the kernel lock for the whole run."""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import latency  # noqa: E402
import machine  # noqa: E402
import rivals  # noqa: E402
from rivals import log  # noqa: E402
from harness import RTCTL  # noqa: E402

HIST_US = 10000


def quantile(bins, overflow, max_us, q):
    total = sum(bins) + overflow
    if not total:
        return 0.0
    want = max(1, math.ceil(q * total - 1e-9))
    acc = 0
    for i, c in enumerate(bins):
        acc += c
        if acc >= want:
            return min(float(i + 1), max_us)
    return max_us


class Tool:
    def __init__(self, name):
        self.name = name
        self.bins = [0] * HIST_US
        self.overflow = 0
        self.samples = 0
        self.sum_us = 0.0
        self.max_us = 0.0
        self.seconds = 0.0
        self.runs = 0
        self.missing = None
        self.per_run = []  # each run's own avg, p99, p99.9, max: the spread is the noise

    def add(self, bins, overflow, samples, avg_us, max_us, seconds):
        over = overflow + sum(bins[HIST_US:])
        self.per_run.append({"avg_us": round(avg_us, 2), "p99_us": quantile(bins[:HIST_US], over, max_us, 0.99),
                             "p99_9_us": quantile(bins[:HIST_US], over, max_us, 0.999), "max_us": max_us})
        for i, c in enumerate(bins[:HIST_US]):
            self.bins[i] += c
        self.overflow += overflow + sum(bins[HIST_US:])
        self.samples += samples
        self.sum_us += avg_us * samples
        self.max_us = max(self.max_us, max_us)
        self.seconds += seconds
        self.runs += 1

    def summary(self):
        if self.missing:
            return {"tool": self.name, "missing": self.missing}
        q = lambda x: quantile(self.bins, self.overflow, self.max_us, x)  # noqa: E731
        return {"tool": self.name, "runs": self.runs, "seconds": round(self.seconds, 1), "samples": self.samples,
                "avg_us": round(self.sum_us / max(self.samples, 1), 2), "p50_us": q(0.5), "p99_us": q(0.99),
                "p99_9_us": q(0.999), "max_us": round(self.max_us, 1),
                "over_1ms": sum(self.bins[1001:]) + self.overflow, "per_run": self.per_run}


def run_rtctl(tool, method, cpu, seconds):
    t0 = time.monotonic()
    p = subprocess.run([RTCTL, "--json", "latency", "--method", method, "--cpus", str(cpu),
                        "--duration", "%ds" % seconds], capture_output=True, text=True, timeout=seconds + 120)
    if p.returncode != 0:
        if method == "timerlat" and "timerlat" in p.stderr:
            tool.missing = p.stderr.strip()
            return
        raise RuntimeError("rtctl latency --method %s failed: %s" % (method, p.stderr))
    c = json.loads(p.stdout)["runs"][0]["cpus"][0]
    bins = [0] * HIST_US
    for us, n in c["histogram"]:
        bins[us] = n
    tool.add(bins, c["overflow"], c["samples"], c["avg_us"], c["max_us"], time.monotonic() - t0)


def run_cyclictest(tool, cpu, seconds, laptop, tmp):
    hist = os.path.join(tmp, "hist.txt")
    js = os.path.join(tmp, "ct.json")
    cmd = ["cyclictest", "-m", "-p", "90", "-i", "1000", "-t", "1", "-a", str(cpu), "-h", str(HIST_US),
           "-D", "%ds" % seconds, "-q", "--histfile=" + hist, "--json=" + js]
    if laptop:
        cmd.append("--laptop")
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 120)
    if p.returncode != 0:
        raise RuntimeError("cyclictest failed: %s%s" % (p.stdout, p.stderr))
    bins, summary = latency.parse_histfile(hist)
    with open(js) as f:
        th = json.load(f)["thread"]["0"]
    tool.add(bins, summary.get("Histogram Overflows", 0), th["cycles"], th["avg"], th["max"],
             time.monotonic() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cpu", type=int, default=1)
    ap.add_argument("--duration", type=int, default=20, help="seconds per tool and round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--stress", default="cpu,io,vm", help="stress-ng stressors, N = online CPUs each")
    ap.add_argument("--json", default=None)
    ap.add_argument("--no-lock", action="store_true")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("latency-check needs root: SCHED_FIFO measurements, tracefs")
    for t in ("cyclictest", "stress-ng"):
        if not any(os.access(os.path.join(d, t), os.X_OK) for d in ("/usr/bin", "/usr/sbin")):
            sys.exit("%s is missing: tools/deps.sh installs rt-tests and stress-ng" % t)
    if not os.access(RTCTL, os.X_OK):
        sys.exit("no rtctl at %s: build first, or set RTCTL_BUILD_DIR" % RTCTL)

    tools = [Tool(n) for n in ("rtctl-timerlat", "rtctl-timer", "cyclictest", "cyclictest-laptop")]
    runners = {
        "rtctl-timerlat": lambda t, tmp: run_rtctl(t, "timerlat", args.cpu, args.duration),
        "rtctl-timer": lambda t, tmp: run_rtctl(t, "timer", args.cpu, args.duration),
        "cyclictest": lambda t, tmp: run_cyclictest(t, args.cpu, args.duration, False, tmp),
        "cyclictest-laptop": lambda t, tmp: run_cyclictest(t, args.cpu, args.duration, True, tmp),
    }
    t_start = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="rtctl-latency-check-")
    stress = stress_cmd = None
    with rivals.kernel_lock(not args.no_lock):
        before = rivals.snapshot()
        try:
            planned = args.rounds * len(tools) * (args.duration + 5) + 60
            stress, stress_cmd = latency.start_stress(args, planned * 1.5)
            log("stress: %s" % " ".join(stress_cmd))
            for r in range(args.rounds):
                order = tools[r % len(tools):] + tools[:r % len(tools)]
                for t in order:
                    if t.missing:
                        continue
                    runners[t.name](t, tmp)
                    if t.missing:
                        log("%s: %s" % (t.name, t.missing))
                        continue
                    s = t.summary()
                    log("round %d %-18s so far: avg %.2f p99 %s max %s" % (r, t.name, s["avg_us"], s["p99_us"],
                                                                          s["max_us"]))
        finally:
            if stress:
                latency.stop_stress(stress)
            shutil.rmtree(tmp, ignore_errors=True)
        after = rivals.snapshot()
    left = rivals.diff(before, after)
    rows = [t.summary() for t in tools]
    print("\n%-18s %5s %8s %8s %7s %7s %7s %8s %6s" % ("tool", "runs", "samples", "avg us", "p50", "p99", "p99.9",
                                                      "max", ">1ms"))
    for s in rows:
        if "missing" in s:
            print("%-18s not available: %s" % (s["tool"], s["missing"]))
            continue
        print("%-18s %5d %8d %8.2f %7.1f %7.1f %7.1f %8.1f %6d" % (
            s["tool"], s["runs"], s["samples"], s["avg_us"], s["p50_us"], s["p99_us"], s["p99_9_us"], s["max_us"],
            s["over_1ms"]))
    print("\neach run's own avg / p99 / p99.9, in the order they ran:")
    for s in rows:
        if "per_run" in s:
            print("%-18s %s" % (s["tool"], "  ".join("%.1f/%g/%g" % (r["avg_us"], r["p99_us"], r["p99_9_us"])
                                                   for r in s["per_run"])))
    print("\n(cpu%d, %d s per tool and round, %d rounds, under %s; max is hypervisor noise on this VM)" % (
        args.cpu, args.duration, args.rounds, " ".join(stress_cmd or [])))
    results = {"cpu": args.cpu, "duration_s": args.duration, "rounds": args.rounds, "stress": stress_cmd,
               "table": rows, "machine_unchanged": not left, "machine_diff": left,
               "runtime_s": round(time.monotonic() - t_start, 1)}
    latency.print_end(results, left, args.json)
    return 0 if not left else 1


if __name__ == "__main__":
    machine.interruptible()
    sys.exit(main())
