#!/usr/bin/python3
"""What every system call of every task pays while rtctld follows policy changes (Threads=realtime).

    flock /run/rtctl-kernel.lock /usr/bin/python3 bench/syscalls.py [--rounds 9] [--calls 5000000]
        [--call getppid|read] [--cpu N] [--json FILE]

bench-syscall-loop makes --calls system calls (getppid(), or a 1-byte read of /dev/zero) on one CPU and
reports its own CPU time, in rounds that take the modes in turn (rotated each round, so that drift of
this shared machine hits all alike):

  off         no tracing of ours (checked: no syscall event enabled anywhere in tracefs, else the
              figures would mean nothing and the run stops)
  tracepoints a tracefs instance with sys_enter_/sys_exit_ of sched_setscheduler and sched_setattr
              enabled, as rtctld's (core/tracefs.c: buffer 64 kB, buffer_percent 0). The kernel sets
              TIF_SYSCALL_TRACEPOINT on every task while any syscall event is on: every system call
              takes the slow path, traced or not
  kprobe      the narrower signal: a kprobe event on __sched_setscheduler (the kernel function both
              system calls end in) enabled in the same kind of instance. Patches that one function's
              entry and flags no task. Reported as not available where the kernel has no kprobe events
              (CONFIG_KPROBE_EVENTS) or no such symbol

A benchmark: it reports, it never asserts. tracefs is mounted in a private mount namespace of this
process only; the instance and the kprobe event it makes are global in the kernel, and are removed
after each round (checked with a before/after snapshot). Needs root and a build tree (RTCTL_BUILD_DIR,
default build/). Takes the kernel lock for the whole run."""
import argparse
import ctypes
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

import latency  # noqa: E402
import machine  # noqa: E402
import rivals  # noqa: E402
from rivals import log  # noqa: E402
from harness import BUILD  # noqa: E402

INSTANCE = "rtctl-bench-syscalls"
EVENTS = ["sys_enter_sched_setscheduler", "sys_exit_sched_setscheduler", "sys_enter_sched_setattr",
          "sys_exit_sched_setattr"]
KPROBE_GROUP, KPROBE_EVENT, KPROBE_FUNC = "rtctl_bench", "setsched", "__sched_setscheduler"
MODES = ["off", "tracepoints", "kprobe"]
CLONE_NEWNS, MS_REC, MS_PRIVATE = 0x00020000, 16384, 1 << 18


def private_tracefs():
    """tracefs mounted on a fresh directory in a mount namespace of this process alone: nothing outside
    sees the mount, and it goes with the process."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) < 0 or libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) < 0:
        sys.exit("cannot make a private mount namespace: %s" % os.strerror(ctypes.get_errno()))
    d = tempfile.mkdtemp(prefix="rtctl-bench-tracefs-")
    if libc.mount(b"nodev", d.encode(), b"tracefs", 0, None) < 0:
        sys.exit("cannot mount tracefs: %s" % os.strerror(ctypes.get_errno()))
    return d


def write(path, value, append=False):
    """Not open(path, "a") to append: Python seeks to the end of a file opened for appending, and tracefs
    refuses the seek with EINVAL (kprobe_events could never be written)."""
    fd = os.open(path, os.O_WRONLY | (os.O_APPEND if append else os.O_TRUNC))
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def syscall_events_on(tracefs):
    """Every syscall event enabled anywhere (top level or an instance): while one is, 'off' is not off."""
    on = []
    for d in [tracefs] + glob.glob(tracefs + "/instances/*"):
        for f in glob.glob(d + "/events/syscalls/*/enable"):
            if (machine.read(f) or "0").strip() != "0":
                on.append(f[len(tracefs):])
    return on


def kprobe_missing(tracefs):
    if not os.path.exists(tracefs + "/kprobe_events"):
        return "this kernel has no kprobe events (CONFIG_KPROBE_EVENTS)"
    with open("/proc/kallsyms") as f:
        if not any(line.split()[2:3] == [KPROBE_FUNC] for line in f):
            return "this kernel has no %s symbol (inlined or renamed)" % KPROBE_FUNC
    return None


class Mode:
    """Sets a mode up in tracefs, and takes it away again exactly (the instance, the kprobe event)."""

    def __init__(self, tracefs, name):
        self.tracefs, self.name = tracefs, name
        self.inst = os.path.join(tracefs, "instances", INSTANCE)
        self.made_inst = self.made_kprobe = False

    def __enter__(self):
        if self.name == "off":
            return self
        if self.name == "kprobe":
            write(self.tracefs + "/kprobe_events", "p:%s/%s %s\n" % (KPROBE_GROUP, KPROBE_EVENT, KPROBE_FUNC),
                  append=True)
            self.made_kprobe = True
        os.mkdir(self.inst)
        self.made_inst = True
        write(self.inst + "/buffer_size_kb", "64")
        if os.path.exists(self.inst + "/buffer_percent"):
            write(self.inst + "/buffer_percent", "0")
        if self.name == "tracepoints":
            for e in EVENTS:
                write("%s/events/syscalls/%s/enable" % (self.inst, e), "1")
        else:
            write("%s/events/%s/%s/enable" % (self.inst, KPROBE_GROUP, KPROBE_EVENT), "1")
        return self

    def __exit__(self, *exc):
        if self.made_inst:
            for f in glob.glob(self.inst + "/events/*/*/enable"):
                if (machine.read(f) or "0").strip() != "0":
                    write(f, "0")
            os.rmdir(self.inst)
        if self.made_kprobe:
            write(self.tracefs + "/kprobe_events", "-:%s/%s\n" % (KPROBE_GROUP, KPROBE_EVENT), append=True)
        return False


def run_loop(loop, cpu, calls, call):
    p = subprocess.run([loop, "--cpu", str(cpu), "--calls", str(calls), "--call", call], capture_output=True,
                       text=True, check=True)
    r = json.loads(p.stdout)
    return {"ns_per_call": r["cpu_ns"] / r["calls"], "wall_ns_per_call": r["wall_ns"] / r["calls"]}


def summary(values):
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--calls", type=int, default=5000000)
    ap.add_argument("--call", choices=["getppid", "read"], default="getppid")
    ap.add_argument("--cpu", type=int, default=os.cpu_count() - 1)
    ap.add_argument("--json")
    ap.add_argument("--no-lock", action="store_true")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("syscalls.py needs root: it enables events in tracefs")
    loop = os.path.join(BUILD, "bench", "bench-syscall-loop")
    if not os.access(loop, os.X_OK):
        sys.exit("no bench-syscall-loop at %s: build first, or set RTCTL_BUILD_DIR" % loop)

    t_start = time.monotonic()
    samples = {m: [] for m in MODES}
    missing = {}
    with rivals.kernel_lock(not args.no_lock):
        before = rivals.snapshot()
        tracefs = private_tracefs()
        try:
            on = syscall_events_on(tracefs)
            if on:
                sys.exit("syscall events are on already (%s): 'off' would not be off" % ", ".join(on))
            why = kprobe_missing(tracefs)
            if why:
                missing["kprobe"] = why
                log("kprobe: not available: %s" % why)
            modes = [m for m in MODES if m not in missing]
            for r in range(args.rounds):
                for m in modes[r % len(modes):] + modes[:r % len(modes)]:
                    with Mode(tracefs, m):
                        s = run_loop(loop, args.cpu, args.calls, args.call)
                    samples[m].append(s)
                    log("round %d %-12s %.1f ns per call" % (r, m, s["ns_per_call"]))
        finally:
            subprocess.run(["umount", tracefs])
            os.rmdir(tracefs)
        after = rivals.snapshot()
    left = rivals.diff(before, after)

    table = {}
    base = summary([s["ns_per_call"] for s in samples["off"]])
    print("\n%-12s %10s %16s %14s %10s" % ("mode", "ns/call", "min-max", "M calls/s", "vs off"))
    for m in MODES:
        if m in missing:
            print("%-12s not available: %s" % (m, missing[m]))
            table[m] = {"missing": missing[m]}
            continue
        st = summary([s["ns_per_call"] for s in samples[m]])
        table[m] = dict(st, samples=samples[m])
        print("%-12s %10.1f %16s %14.2f %+9.1f%%" % (m, st["median"], "%.1f-%.1f" % (st["min"], st["max"]),
                                                     1000.0 / st["median"], 100.0 * (st["median"] / base["median"] - 1)))
    print("\n(%s x %d per round on cpu%d, %d rounds; the loop's own CPU time per call; kernel %s)" % (
        args.call, args.calls, args.cpu, args.rounds, os.uname().release))
    results = {"call": args.call, "calls": args.calls, "cpu": args.cpu, "rounds": args.rounds,
               "kernel": os.uname().release, "table": table, "machine_unchanged": not left,
               "machine_diff": left, "runtime_s": round(time.monotonic() - t_start, 1)}
    latency.print_end(results, left, args.json)
    return 0 if not left else 1


if __name__ == "__main__":
    machine.interruptible()
    sys.exit(main())
