#!/usr/bin/python3
"""What rtctl xruns costs while it records: the xrun rate and the audio CPU's busy time with and without it.

    bench/xruns-record.py [--cells 8] [--seconds 60] [--period 128] [--load 0.5] [--cpu 1] [--quick]

One jackd (-d dummy, 48 kHz, PERIOD frames, -P 10) and bench/xrun-client burning --load of the period in
every cycle run for the whole benchmark; their real-time threads on --cpu (the audio CPU), every other
thread on the others, as rtctl's audio profile splits them. Cells alternate (A B B A ...): `off` nothing
more, `recording` rtctl xruns --cpus CPU running (its tracefs instance recording the audio CPU, its own
threads kept on the others). Per cell: jackd's own xrun messages (the primary number), the audio CPU's
busy time from /proc/stat (everything but idle and iowait, in % of the cell), and rtctl xruns' own CPU
time (utime + stime of its process, in % of one CPU). Ranked as bench/xruns.py ranks (ranking.rank: a
rank only where the ranges do not overlap). --quick: 2 cells of 3 s (bench/smoke). The machine is
compared with a snapshot taken before (rivals.snapshot: tracefs instances included).

Needs root, jackd2 and a build tree (RTCTL_BUILD_DIR, default build/). Takes the kernel lock."""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import ranking  # noqa: E402
import rivals  # noqa: E402

BUILD = os.environ.get("RTCTL_BUILD_DIR", os.path.join(ROOT, "build"))
RTCTL = os.path.join(BUILD, "src", "rtctl")
CLIENT = os.path.join(BUILD, "bench", "xrun-client")
RATE = 48000
SERVER = "rtctl-bench-xruns"


def rt_threads(pid):
    out = []
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, t)) as f:
                if int(f.read().rsplit(")", 1)[1].split()[38]) in (1, 2):
                    out.append(int(t))
        except (OSError, ValueError, IndexError):
            pass
    return out


def cpu_times(cpu):
    """(busy, total) jiffies of one CPU."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu%d " % cpu):
                v = [int(x) for x in line.split()[1:]]
                idle = v[3] + v[4]
                return sum(v[:8]) - idle, sum(v[:8])
    raise RuntimeError("cpu%d not in /proc/stat" % cpu)


def proc_cpu(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            v = f.read().rsplit(")", 1)[1].split()
        return int(v[11]) + int(v[12])
    except OSError:
        return 0


def xrun_lines(path):
    with open(path, errors="replace") as f:
        return sum(1 for line in f if "XRun" in line)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, default=8, help="cells per configuration")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--period", type=int, default=128)
    ap.add_argument("--load", type=float, default=0.5)
    ap.add_argument("--cpu", type=int, default=1)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    if args.quick:
        args.cells, args.seconds = 1, 3
    if os.geteuid() != 0:
        sys.exit("bench/xruns-record.py needs root (tracefs, real-time priorities)")
    for exe in (RTCTL, CLIENT):
        if not os.access(exe, os.X_OK):
            sys.exit("%s is not built (ninja -C %s)" % (exe, BUILD))
    with open("/sys/devices/system/cpu/online") as f:
        online = rivals.parse_cpulist(f.read())
    if args.cpu not in online or len(online) < 2:
        sys.exit("needs --cpu online and another CPU for everything else")
    housekeeping = ",".join(str(c) for c in sorted(online - {args.cpu}))

    with rivals.kernel_lock():
        before = rivals.snapshot()
        summary = measure(args, housekeeping)
        after = rivals.snapshot()
    left = rivals.diff(before, after)
    summary["machine_diff"] = left
    for key, unit in (("xruns_per_min", "xruns per minute"), ("audio_cpu_busy_pct", "cpu%d busy, %%" % args.cpu),
                      ("rtctl_xruns_cpu_pct", "rtctl xruns' own CPU, % of one")):
        ranking.print_ranking("%s, %d cells of %g s per configuration" % (unit, args.cells, args.seconds), unit,
                              summary[key])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    print("machine unchanged: %s" % ("NO" if left else "yes"))
    for line in left:
        print("  " + line)
    sys.exit(1 if left else 0)


def measure(args, housekeeping):
    """The cells, one after another; each measure's cells ranked per configuration."""
    work = tempfile.mkdtemp(prefix="rtctl-bench-xruns-")
    env = dict(os.environ, JACK_NO_AUDIO_RESERVATION="1", JACK_DEFAULT_SERVER=SERVER)
    hk = ["taskset", "-c", housekeeping]
    shm_before = set(os.listdir("/dev/shm"))
    log_path = os.path.join(work, "jackd.log")
    log = open(log_path, "w")
    jackd = subprocess.Popen(hk + ["jackd", "-n", SERVER, "-R", "-P", "10", "-d", "dummy", "-r", str(RATE),
                                   "-p", str(args.period)], stdout=log, stderr=subprocess.STDOUT, env=env)
    client = recorder = None
    results = {"off": [], "recording": []}
    busy = {"off": [], "recording": []}
    own = {"recording": []}
    try:
        subprocess.run(["jack_wait", "-w", "-t", "30"], env=env, check=True, capture_output=True)
        cal = json.loads(subprocess.run([CLIENT, "--calibrate", "--cpu", str(args.cpu)], capture_output=True,
                                        text=True, check=True).stdout)
        units = max(1, int(args.load * args.period * 1e9 / RATE / cal["ns_per_unit_median"]))
        client = subprocess.Popen(hk + [CLIENT, "--units", str(units), "--warmup", "0", "--seconds", "100000"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + 30
        while not rt_threads(client.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in (jackd.pid, client.pid):
            for t in rt_threads(pid):
                subprocess.run(["taskset", "-p", "-c", str(args.cpu), str(t)], check=True, capture_output=True)
        time.sleep(2)
        order = []
        for i in range(args.cells):
            order += ["off", "recording"] if i % 2 == 0 else ["recording", "off"]
        print("cells: %s (%g s each), %d units per cycle (%.0f %% of %d frames)"
              % (" ".join(order), args.seconds, units, args.load * 100, args.period))
        for cell in order:
            if cell == "recording":
                recorder = subprocess.Popen([RTCTL, "xruns", "--server", "jack", "--cpus", str(args.cpu)],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True)
                time.sleep(2)  # the instance set up and the first second (not counted by it) over
                if recorder.poll() is not None:
                    raise RuntimeError("rtctl xruns ended: " + recorder.stderr.read())
                own0 = proc_cpu(recorder.pid)
            x0, (b0, t0) = xrun_lines(log_path), cpu_times(args.cpu)
            time.sleep(args.seconds)
            x1, (b1, t1) = xrun_lines(log_path), cpu_times(args.cpu)
            if cell == "recording":
                own1 = proc_cpu(recorder.pid)
                recorder.send_signal(signal.SIGINT)
                recorder.communicate(timeout=60)
                if recorder.returncode != 0:
                    raise RuntimeError("rtctl xruns failed: %s" % recorder.returncode)
                recorder = None
                own["recording"].append(100.0 * (own1 - own0) / os.sysconf("SC_CLK_TCK") / args.seconds)
                time.sleep(1)
            results[cell].append(60.0 * (x1 - x0) / args.seconds)
            busy[cell].append(100.0 * (b1 - b0) / max(1, t1 - t0))
            print("  %-9s xruns/min %6.1f   cpu%d busy %5.1f %%%s" % (cell, results[cell][-1], args.cpu,
                  busy[cell][-1], "   rtctl xruns %.2f %% of a CPU" % own["recording"][-1]
                  if cell == "recording" else ""))
    finally:
        for p in (recorder, client, jackd):
            if p and p.poll() is None:
                p.send_signal(signal.SIGINT if p is recorder else signal.SIGTERM)
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        log.close()
        for f in set(os.listdir("/dev/shm")) - shm_before:
            if f.startswith("jack"):
                subprocess.run(["rm", "-rf", os.path.join("/dev/shm", f)])
        subprocess.run(["rm", "-rf", work])
    return {"xruns_per_min": ranking.rank(results), "audio_cpu_busy_pct": ranking.rank(busy),
            "rtctl_xruns_cpu_pct": ranking.rank(own)}


if __name__ == "__main__":
    main()
