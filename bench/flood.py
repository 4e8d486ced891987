#!/usr/bin/python3
"""A root SetProfile while unprivileged clients flood rtctld with reads.

    flock /run/rtctl-kernel.lock /usr/bin/python3 bench/flood.py [--build DIR]... [--runs N] [--json FILE]

For each build (default $RTCTL_BUILD_DIR or build/; give --build twice to put an older tree beside this
one) and each machine (this host's kernel, and the 128-CPU server-2x32 fixture, where one Plan reads
3,000 IRQs), the wall time of a root SetProfile call, alternating between two profiles that differ in
one sysctl (both place every IRQ, so a Plan("") reads them all):
  quiet      no other client
  sync       40 connections of nobody, each calling Plan("") and ListIrqs() in turn, one call at a time
  pipelined  20 connections of nobody, each keeping 16 such calls under way (all a caller may queue)
A flood starts afresh for each call and lasts at most --flood-seconds; a daemon that answers reads
ahead of writes answers the SetProfile only when the flood ends, so such a run measures the cap.
Also the reads answered per second during the flood, and how many were refused (org.rtctl.Error.Busy).
Figures are reported, never asserted. Puts back what it changed and proves it with a snapshot.
"""
import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
sys.path.insert(0, HERE)

import dbus  # noqa: E402

import harness  # noqa: E402
import machine  # noqa: E402
import rivals  # noqa: E402

IFACE = "org.rtctl.Manager1"
PATH = "/org/rtctl/Manager1"
KNOB = "kernel.sched_rt_runtime_us"
FLOODS = {"quiet": None, "sync": (40, 1), "pipelined": (20, 16)}


def profiles(env):
    """Two profiles that differ in one sysctl; both place every IRQ, so that a Plan("") reads them all, as
    one of an audio profile does."""
    for i, v in enumerate(("950001", "950002")):
        env.profile("flood%d" % i, "[Profile]\nDescription=bench: flood\n[IRQ]\nBalance=all\n"
                    "[Sysctl]\n%s=%s\n" % (KNOB, v))


def summary(samples):
    s = sorted(samples)
    return {"median": statistics.median(s), "p95": s[min(len(s) - 1, int(len(s) * 0.95))], "max": s[-1],
            "n": len(s), "samples": samples}


def measure(env, obj, flood, runs, cap):
    took, rate, busy = [], [], 0
    for i in range(runs):
        f = None
        if flood:
            f = harness.Flood(env, flood[0], cap, ["Plan:", "ListIrqs"], inflight=flood[1])
            f.wait_started()
            time.sleep(0.5)
        t0 = time.monotonic()
        obj.SetProfile("flood%d" % (i % 2), dbus_interface=IFACE, timeout=600)
        took.append((time.monotonic() - t0) * 1000)
        if f:
            results = f.stop()
            done = [r for r in results if r]
            rate.append(sum(r["ok"] for r in done) / max(r["seconds"] for r in done))
            busy += sum(r["errors"].get("org.rtctl.Error.Busy", 0) for r in done)
        time.sleep(0.2)
    out = {"setprofile_ms": summary(took)}
    if flood:
        out["reads_per_second"] = statistics.median(rate)
        out["busy"] = busy
    return out


def fixture_root(tmp):
    src = os.path.join(harness.BUILD, "tests", "unit", "fixtures", "server-2x32")
    if not os.path.isdir(src):
        return None
    root = os.path.join(tmp, "server-2x32")
    shutil.copytree(src, root, symlinks=True)
    os.makedirs(os.path.join(root, "proc", "sys", "kernel"), exist_ok=True)
    with open(os.path.join(root, "proc", "sys", "kernel", KNOB.split(".")[1]), "w") as f:
        f.write("950000\n")
    return root


def run_build(build, tmp, bus, machines, runs, cap):
    harness.RTCTLD = os.path.join(build, "src", "rtctld")
    harness.RTCTL = os.path.join(build, "src", "rtctl")
    out = {}
    for name, root in machines.items():
        env = harness.Env(tmp, bus)
        if root:
            env.extra["RTCTL_SYSROOT"] = root
        profiles(env)
        try:
            env.start("--profile", "flood1")
            conn = dbus.bus.BusConnection(bus.address)
            obj = conn.get_object(IFACE, PATH)
            t0 = time.monotonic()
            obj.Plan("", dbus_interface=IFACE, timeout=600)
            plan_ms = (time.monotonic() - t0) * 1000
            out[name] = {"plan_ms": plan_ms}
            for flood, shape in FLOODS.items():
                out[name][flood] = measure(env, obj, shape, runs, cap)
            obj.Restore(dbus_interface=IFACE, timeout=600)
            conn.close()
        finally:
            env.cleanup()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", action="append", default=None)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--flood-seconds", type=float, default=20)
    ap.add_argument("--no-fixture", action="store_true")
    ap.add_argument("--no-lock", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("flood.py needs root: it switches profiles on the real kernel")
    builds = args.build or [harness.BUILD]
    results = {}
    with rivals.kernel_lock(not args.no_lock):
        tmp = tempfile.mkdtemp(prefix="rtctl-flood-")
        os.chmod(tmp, 0o755)
        bus = harness.Bus(tmp)
        before = machine.snapshot()
        try:
            machines = {"host": None}
            if not args.no_fixture:
                root = fixture_root(tmp)
                if root:
                    machines["server-2x32"] = root
                else:
                    print("no server-2x32 fixture under %s: host only" % harness.BUILD)
            for b in builds:
                results[b] = run_build(os.path.abspath(b), tmp, bus, machines, args.runs, args.flood_seconds)
        finally:
            bus.stop()
            left = machine.diff(before, machine.snapshot())
            shutil.rmtree(tmp, ignore_errors=True)

    print("%-28s %-12s %-10s %10s %10s %10s %12s %6s" % ("build", "machine", "flood", "median ms", "p95 ms",
                                                        "max ms", "reads/s", "busy"))
    for b, per in results.items():
        for name, r in per.items():
            for flood in FLOODS:
                s = r[flood]["setprofile_ms"]
                print("%-28s %-12s %-10s %10.1f %10.1f %10.1f %12s %6s" % (
                    b[-28:], name, flood, s["median"], s["p95"], s["max"],
                    "%.0f" % r[flood]["reads_per_second"] if flood != "quiet" else "-",
                    r[flood].get("busy", "-")))
            print("%-28s %-12s Plan(\"\") alone: %.1f ms" % (b[-28:], name, r["plan_ms"]))
    print("machine unchanged:", "yes" if not left else "NO\n  " + "\n  ".join(left))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results, "machine_unchanged": not left}, f, indent=1)


if __name__ == "__main__":
    machine.interruptible()
    main()
