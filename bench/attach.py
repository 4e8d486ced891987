#!/usr/bin/python3
"""[Attach] rule latency: from a thread's rename (prctl(PR_SET_NAME)), or its turn to SCHED_FIFO, to its
affinity on the isolated CPU.

    flock /run/rtctl-kernel.lock /usr/bin/python3 bench/attach.py [--runs 200] [--rt-runs 200] [--json FILE]

A probe process (tests/integration/probe.py, named rtctl-probe) renames one worker thread to a name the
profile's rule wants; the worker takes CLOCK_MONOTONIC just before its prctl call. A poller process that
a second rule keeps on the isolated CPU (so its spinning takes no time from rtctld on the housekeeping
CPU) reads the thread's Cpus_allowed_list until it is the isolated CPU and takes the time again. The
difference is rename -> proc connector event -> rtctld's match and pass -> the kernel's cpuset move, as
an audio server's thread sees it. Beside it, the duration of the pass itself (LastPass, rtctld's own
clock) and the kernel's cost of that move (a thread written to the cpuset's tasks file by hand). After
each run the thread is renamed back and waited for on the housekeeping CPU. The same for a second probe
(rtctl-rtprobe) under a Threads=realtime rule: its worker calls sched_setscheduler(SCHED_FIFO) (time
taken just before), seen through the syscall tracepoint in rtctld's tracefs instance -> evaluation ->
pass -> move; then back to SCHED_OTHER, and waited for on the housekeeping CPU. Needs 2+ CPUs, cgroup v1
cpusets, root, a build tree (RTCTL_BUILD_DIR, default build/)."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

import machine  # noqa: E402
from harness import bench_env  # noqa: E402

PROBE = os.path.join(HERE, "..", "tests", "integration", "probe.py")
CPUSET = "/sys/fs/cgroup/cpuset"
PROFILE = """[Profile]
Description=bench: cpu1 isolated, a rule for one thread name
[CPU]
Isolate=auto:1
[Attach probe]
Match=comm:rtctl-probe user:0
Threads=rt-bench
[Attach rt]
Match=comm:rtctl-rtprobe user:0
Threads=%(rt_threads)s
[Attach poller]
Match=comm:rtctl-poller user:0
Threads=all
"""
# Spins on the isolated CPU: "watch PID TID CPUS" -> "T" (CLOCK_MONOTONIC ns when the thread's CPUs
# became CPUS). Named by prctl before it reads any command, so the rule has taken it by then.
POLLER = r"""
import ctypes, sys, time
ctypes.CDLL(None).prctl(15, b"rtctl-poller", 0, 0, 0)
print("ready", flush=True)
for line in sys.stdin:
    pid, tid, want = line.split()
    path = "/proc/%s/task/%s/status" % (pid, tid)
    deadline = time.monotonic() + 60
    while True:
        with open(path) as f:
            s = f.read()
        t = time.monotonic_ns()
        cpus = s.split("Cpus_allowed_list:", 1)[1].split()[0]
        if cpus == want or time.monotonic() > deadline:
            break
    print(t if cpus == want else -1, flush=True)
"""


def stats(values):
    v = sorted(values)
    p = lambda q: v[min(len(v) - 1, int(round(q * (len(v) - 1))))]  # noqa: E731
    return {"median": statistics.median(v), "p90": p(0.90), "p95": p(0.95), "p99": p(0.99), "min": v[0],
            "max": v[-1], "n": len(v)}


def last_pass_us(env, since_usec):
    """The duration of the first pass that ended after since_usec (CLOCK_REALTIME)."""
    deadline = time.monotonic() + 60
    while True:
        lp = json.loads(env.rtctl("--json", "status", check=False).stdout)["last_pass"]
        if lp["timestamp_usec"] >= since_usec:
            return lp["duration_usec"]
        assert time.monotonic() < deadline, "no pass after the rename"
        time.sleep(0.001)


def kernel_move_us(pid, tid, runs):
    """The kernel's own cost of moving one thread between the two cpusets (tasks file writes)."""
    out = []
    for _ in range(runs):
        for dest in ("rtctl-isolated", "rtctl-housekeeping"):
            fd = os.open("%s/%s/tasks" % (CPUSET, dest), os.O_WRONLY)
            t0 = time.monotonic_ns()
            os.write(fd, str(tid).encode())
            out.append((time.monotonic_ns() - t0) / 1000)
            os.close(fd)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--rt-runs", type=int, default=200)
    ap.add_argument("--rt-threads", default="realtime",
                    help="the rule's Threads= (\"realtime never-*\": the process stays matched between runs, so "
                    "its thread goes back by an attach pass, not by the whole replan of a process that left)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench needs root: it changes real kernel settings")
    if not os.path.exists(CPUSET + "/tasks"):
        sys.exit("this bench needs a cgroup v1 cpuset hierarchy (threads are placed one by one only there)")

    e2e, passes, procs = [], [], []
    rt_e2e, rt_passes = [], []
    kernel = []
    with bench_env("attach", PROFILE % {"rt_threads": args.rt_threads}) as (env, left):
        try:
            env.start("--profile", "attach")
            poller = subprocess.Popen([sys.executable, "-c", POLLER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      text=True)
            procs.append(poller)
            assert poller.stdout.readline().strip() == "ready"
            probe = subprocess.Popen([sys.executable, PROBE, "rtctl-probe", "1"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
            procs.append(probe)
            info = json.loads(probe.stdout.readline())
            pid, tid = info["pid"], info["tids"][0]

            def call(p, line):
                p.stdin.write(line + "\n")
                p.stdin.flush()
                return p.stdout.readline().split()

            # The poller is on the isolated CPU before the first run.
            deadline = time.monotonic() + 60
            while machine.task_cpus(poller.pid) != "1":
                assert time.monotonic() < deadline, "the poller never reached the isolated CPU"
                time.sleep(0.01)
            def runs(n, probe, pid, tid, there, back, e2e, passes):
                """n times: the command `there` (answered with its start time) -> the thread on the isolated
                CPU; then `back` -> on housekeeping again, and that pass over before the next run."""
                for i in range(n):
                    poller.stdin.write("%d %d 1\n" % (pid, tid))
                    poller.stdin.flush()
                    since = int(time.time() * 1e6)
                    t0 = int(call(probe, there)[1])
                    t1 = int(poller.stdout.readline())
                    assert t1 > 0, "%s, run %d: the thread never reached the isolated CPU" % (there, i)
                    e2e.append((t1 - t0) / 1e6)
                    passes.append(last_pass_us(env, since) / 1000)
                    poller.stdin.write("%d %d 0\n" % (pid, tid))
                    poller.stdin.flush()
                    ended = int(time.time() * 1e6)
                    call(probe, back)
                    assert int(poller.stdout.readline()) > 0, "%s, run %d: the thread never came back" % (back, i)
                    # The pass that moved it back ends before the next run, so LastPass is the attach pass's.
                    last_pass_us(env, ended)

            runs(args.runs, probe, pid, tid, "rename 0 rt-bench", "rename 0 idle-0", e2e, passes)
            kernel = kernel_move_us(pid, tid, 50)
            rt = subprocess.Popen([sys.executable, PROBE, "rtctl-rtprobe", "1"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
            procs.append(rt)
            info = json.loads(rt.stdout.readline())
            time.sleep(1.5)  # past every re-check of its threads' creation: only the event can see it
            runs(args.rt_runs, rt, info["pid"], info["tids"][0], "sched 0 fifo", "sched 0 other", rt_e2e, rt_passes)
        finally:
            for p in procs:
                p.kill()
                p.wait()
    results = {"rename_to_isolated_ms": stats(e2e), "attach_pass_ms": stats(passes),
               "fifo_to_isolated_ms": stats(rt_e2e), "fifo_attach_pass_ms": stats(rt_passes),
               "kernel_thread_move_us": stats(kernel), "samples": {"rename_to_isolated_ms": e2e,
                                                                    "attach_pass_ms": passes,
                                                                    "fifo_to_isolated_ms": rt_e2e,
                                                                    "fifo_attach_pass_ms": rt_passes},
               "machine_unchanged": not left}
    print("%-28s %9s %9s %9s %9s %9s %5s" % ("figure", "median", "p90", "p95", "p99", "max", "n"))
    for k in ("rename_to_isolated_ms", "attach_pass_ms", "fifo_to_isolated_ms", "fifo_attach_pass_ms",
              "kernel_thread_move_us"):
        v = results[k]
        print("%-28s %9.3f %9.3f %9.3f %9.3f %9.3f %5d" % (k, v["median"], v["p90"], v["p95"], v["p99"], v["max"],
                                                          v["n"]))
    print("machine unchanged: %s" % ("yes" if not left else "NO"))
    for line in left:
        print("  " + line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0 if not left else 1


if __name__ == "__main__":
    machine.interruptible()
    sys.exit(main())
