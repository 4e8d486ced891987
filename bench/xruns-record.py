#!/usr/bin/python3
"""What rtctl xruns costs while it records: the xrun rate and the audio CPU's busy time with and without it.

    bench/xruns-record.py [--server jack|pipewire] [--cells 8] [--seconds 60] [--period 128] [--load 0.5]
                          [--cpu 1] [--quick] [--json FILE]

One jackd (-d dummy, 48 kHz, PERIOD frames, -P 10) and bench/xrun-client burning --load of the period in
every cycle run for the whole benchmark; their real-time threads on --cpu (the audio CPU), every other
thread on the others, as rtctl's audio profile splits them. Cells alternate (A B B A ...): `off` nothing
more, `recording` rtctl xruns --cpus CPU running (its tracefs instance recording the audio CPU, its own
threads kept on the others). Per cell: jackd's own xrun messages (the primary number), the audio CPU's
busy time from /proc/stat (everything but idle and iowait, in % of the cell), and rtctl xruns' own CPU
time (utime + stime of its process, in % of one CPU). Ranked as bench/xruns.py ranks (ranking.rank: a
rank only where the ranges do not overlap). --quick: 2 cells of 3 s (bench/smoke). The machine is
compared with a snapshot taken before (rivals.snapshot: tracefs instances included).

--server pipewire: the same with PipeWire as bench/xruns.py runs it for its `pipewire` server (its
pipewire.conf from bench/pipewire-dummy.conf: the dummy driver at 48 kHz, the quantum fixed at PERIOD;
a headless pipewire of the benchmark's own, its socket in a private runtime directory; the client under
pw-jack), for the whole benchmark. The xruns of every cell, `off` and `recording` alike, are PipeWire's
own judgement: the cycles pw-profiler, run over the cell, saw a follower not finished when the driver
began the next one (bench/xruns.py's profiler_counts), per minute of the profiler's cycles. The
recording cell runs rtctl xruns --server pipewire --cpus CPU against that pipewire (PIPEWIRE_RUNTIME_DIR
in its environment). No socket, no real-time thread in the server or the client, or no cycle with the
client in it: the benchmark fails rather than measure an idle graph.

Needs root, jackd2 (pipewire, pipewire-bin and pipewire-jack for --server pipewire) and a build tree
(RTCTL_BUILD_DIR, default build/). Takes the kernel lock."""
import argparse
import json
import os
import shutil
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
import xruns  # noqa: E402  (bench/xruns.py: its PipeWire, configuration and profiler log)

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


class Jack:
    """One jackd (-d dummy) for the whole benchmark; a cell's xruns are its xrun messages."""
    name = "jack"

    def __init__(self, args, work, hk):
        self.args = args
        self.hk = hk
        self.env = dict(os.environ, JACK_NO_AUDIO_RESERVATION="1", JACK_DEFAULT_SERVER=SERVER)
        self.client_env = self.env
        self.wrap = []
        self.log_path = os.path.join(work, "jackd.log")
        self.log = None
        self.proc = None

    def start(self):
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.hk + ["jackd", "-n", SERVER, "-R", "-P", "10", "-d", "dummy", "-r",
                                                str(RATE), "-p", str(self.args.period)],
                                     stdout=self.log, stderr=subprocess.STDOUT, env=self.env)
        subprocess.run(["jack_wait", "-w", "-t", "30"], env=self.env, check=True, capture_output=True)

    def count_start(self, cell):
        self.x0 = xrun_lines(self.log_path)

    def count_stop(self, seconds):
        """xruns per minute of the cell, and its line's note."""
        return 60.0 * (xrun_lines(self.log_path) - self.x0) / seconds, ""

    def stop(self):
        stop(self.proc, signal.SIGTERM)
        if self.log:
            self.log.close()

    def log_tail(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()[-1500:]


class PipeWire(Jack):
    """A headless pipewire of the benchmark's own, as bench/xruns.py's PW_CELL runs one for a cell (its
    pipewire.conf, its environment, the client under pw-jack), for the whole benchmark; a cell's xruns
    are the cycles pw-profiler, run over the cell, saw the graph unfinished (xruns.profiler_counts)."""
    name = "pipewire"

    def __init__(self, args, work, hk):
        super().__init__(args, work, hk)
        self.work = work
        self.run = os.path.join(work, "run")
        os.makedirs(self.run, mode=0o700)
        self.conf = os.path.join(work, "pipewire.conf")
        with open(self.conf, "w") as f:
            f.write(xruns.PW_CONF % {"rate": RATE, "period": args.period})
        self.env = dict(os.environ, PIPEWIRE_RUNTIME_DIR=self.run, XDG_RUNTIME_DIR=self.run,
                        PIPEWIRE_REMOTE="pipewire-0", PIPEWIRE_DEBUG="2")
        q = "%d/%d" % (args.period, RATE)
        self.client_env = dict(self.env, PIPEWIRE_LATENCY=q, PIPEWIRE_QUANTUM=q)
        self.wrap = ["pw-jack"]
        self.log_path = os.path.join(work, "pipewire.log")
        self.profiler = None
        self.cells = []  # per cell: xruns.profiler_counts and client_cycles

    def start(self):
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.hk + ["pipewire", "-c", self.conf], stdout=self.log,
                                     stderr=subprocess.STDOUT, env=self.env)
        sock = os.path.join(self.run, "pipewire-0")
        deadline = time.monotonic() + 10  # PW_CELL's wait: 200 x 0.05 s
        while not os.path.exists(sock) and self.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if not os.path.exists(sock):
            raise RuntimeError("pipewire made no socket %s in 10 s (%s): %s" % (
                sock, "exited %s" % self.proc.returncode if self.proc.poll() is not None else "running",
                self.log_tail()))

    def count_start(self, cell):
        self.prof_log = os.path.join(self.work, "profiler-%d-%s.log" % (len(self.cells), cell))
        self.prof_out = open(self.prof_log + ".out", "w")
        self.profiler = subprocess.Popen(self.hk + ["pw-profiler", "-o", self.prof_log], cwd=self.work,
                                         stdout=self.prof_out, stderr=subprocess.STDOUT, env=self.env)

    def count_stop(self, seconds):
        p, self.profiler = self.profiler, None
        stop(p, signal.SIGINT)
        self.prof_out.close()
        if p.returncode not in (0, -signal.SIGINT):
            with open(self.prof_log + ".out", errors="replace") as f:
                raise RuntimeError("pw-profiler failed (%s): %s" % (p.returncode, f.read()[-1500:]))
        counts = xruns.profiler_counts(self.prof_log)
        counts["client_cycles"] = client_cycles(self.prof_log)
        if counts["client_cycles"] == 0:
            raise RuntimeError("%s: the client was in none of PipeWire's %d cycles: an idle graph"
                               % (self.prof_log, counts["profiler_cycles"]))
        self.cells.append(counts)
        window = counts["profiler_cycles"] * self.args.period / RATE
        return 60.0 * counts["profiler_xruns"] / window, "   (pw-profiler: %d cycles, %d unfinished)" % (
            counts["profiler_cycles"], counts["profiler_xruns"])

    def stop(self):
        stop(self.profiler, signal.SIGINT)
        super().stop()


SERVERS = {"jack": Jack, "pipewire": PipeWire}


def client_cycles(path):
    """The cycles of pw-profiler's log (see xruns.profiler_counts) with a follower in them: the client."""
    n = 0
    with open(path) as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            ids = cols[xruns.PROFILER_DRIVER_COLUMNS::xruns.PROFILER_FOLLOWER_COLUMNS]
            n += any(i.strip() for i in ids)
    return n


def stop(p, sig):
    """p (a Popen, or None) ended: sig, SIGKILL 30 s later."""
    if p and p.poll() is None:
        p.send_signal(sig)
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", choices=sorted(SERVERS), default="jack",
                    help="jack (jackd2) or pipewire (a headless one, the client under pw-jack)")
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
    if args.server == "pipewire":
        for tool in ("pipewire", "pw-jack", "pw-profiler"):
            if not shutil.which(tool):
                sys.exit("%s is missing: apt-get install pipewire pipewire-bin pipewire-jack (tools/deps.sh)" % tool)
    with open("/sys/devices/system/cpu/online") as f:
        online = rivals.parse_cpulist(f.read())
    if args.cpu not in online or len(online) < 2:
        sys.exit("needs --cpu online and another CPU for everything else")
    housekeeping = ",".join(str(c) for c in sorted(online - {args.cpu}))

    with rivals.kernel_lock():
        if args.server == "pipewire" and subprocess.run(["pgrep", "-x", "pipewire"],
                                                        capture_output=True).returncode == 0:
            sys.exit("a pipewire is running already: stop it first")
        before = rivals.snapshot()
        summary = measure(args, housekeeping)
        after = rivals.snapshot()
    left = rivals.diff(before, after)
    summary["machine_diff"] = left
    for key, unit in (("xruns_per_min", "xruns per minute"), ("audio_cpu_busy_pct", "cpu%d busy, %%" % args.cpu),
                      ("rtctl_xruns_cpu_pct", "rtctl xruns' own CPU, % of one")):
        ranking.print_ranking("%s%s, %d cells of %g s per configuration" % (
            "" if args.server == "jack" else args.server + ": ", unit, args.cells, args.seconds), unit, summary[key])
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
    hk = ["taskset", "-c", housekeeping]
    shm_before = set(os.listdir("/dev/shm"))
    server = SERVERS[args.server](args, work, hk)
    client = recorder = rec_err = None
    results = {"off": [], "recording": []}
    busy = {"off": [], "recording": []}
    own = {"recording": []}
    try:
        server.start()
        cal = json.loads(subprocess.run([CLIENT, "--calibrate", "--cpu", str(args.cpu)], capture_output=True,
                                        text=True, check=True).stdout)
        units = max(1, int(args.load * args.period * 1e9 / RATE / cal["ns_per_unit_median"]))
        client = subprocess.Popen(hk + server.wrap + [CLIENT, "--units", str(units), "--warmup", "0",
                                                      "--seconds", "100000"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=server.client_env)
        deadline = time.monotonic() + 30
        while not (rt_threads(client.pid) and rt_threads(server.proc.pid)) and time.monotonic() < deadline:
            time.sleep(0.05)
        # Without them the graph would not run as an audio graph does: no measurement of that.
        for what, p in (("the server", server.proc), ("the client", client)):
            if not rt_threads(p.pid):
                raise RuntimeError("%s (%s) has no real-time thread after 30 s%s; %s: %s" % (
                    what, " ".join(p.args), "" if p.poll() is None else " (exited %s)" % p.returncode,
                    server.name, server.log_tail()))
        for pid in (server.proc.pid, client.pid):
            for t in rt_threads(pid):
                subprocess.run(["taskset", "-p", "-c", str(args.cpu), str(t)], check=True, capture_output=True)
        time.sleep(2)
        order = []
        for i in range(args.cells):
            order += ["off", "recording"] if i % 2 == 0 else ["recording", "off"]
        if args.server != "jack":
            print("server: %s (bench/pipewire-dummy.conf, %d frames at %d Hz, the client under pw-jack); xruns: "
                  "the cycles pw-profiler saw unfinished" % (args.server, args.period, RATE))
        print("cells: %s (%g s each), %d units per cycle (%.0f %% of %d frames)"
              % (" ".join(order), args.seconds, units, args.load * 100, args.period))
        for cell in order:
            if cell == "recording":
                rec_err = open(os.path.join(work, "rtctl-xruns.err"), "w+")
                recorder = subprocess.Popen([RTCTL, "xruns", "--server", args.server, "--cpus", str(args.cpu)],
                                            stdout=subprocess.DEVNULL, stderr=rec_err, env=server.env)
                time.sleep(2)  # the instance set up and the first second (not counted by it) over
                started = time.monotonic() + 30
                while recorder.poll() is None and time.monotonic() < started and not recording(rec_err):
                    time.sleep(0.1)
                if recorder.poll() is not None:
                    raise RuntimeError("rtctl xruns ended: " + read(rec_err))
                if not recording(rec_err):
                    raise RuntimeError("rtctl xruns did not start recording in 30 s: " + read(rec_err))
                own0 = proc_cpu(recorder.pid)
            server.count_start(cell)
            b0, t0 = cpu_times(args.cpu)
            time.sleep(args.seconds)
            b1, t1 = cpu_times(args.cpu)
            xpm, note = server.count_stop(args.seconds)
            if cell == "recording":
                own1 = proc_cpu(recorder.pid)
                recorder.send_signal(signal.SIGINT)
                recorder.communicate(timeout=60)
                if recorder.returncode != 0:
                    raise RuntimeError("rtctl xruns failed: %s: %s" % (recorder.returncode, read(rec_err)))
                recorder = None
                rec_err.close()
                own["recording"].append(100.0 * (own1 - own0) / os.sysconf("SC_CLK_TCK") / args.seconds)
                time.sleep(1)
            results[cell].append(xpm)
            busy[cell].append(100.0 * (b1 - b0) / max(1, t1 - t0))
            print("  %-9s xruns/min %6.1f   cpu%d busy %5.1f %%%s%s" % (cell, results[cell][-1], args.cpu,
                  busy[cell][-1], "   rtctl xruns %.2f %% of a CPU" % own["recording"][-1]
                  if cell == "recording" else "", note))
    finally:
        stop(recorder, signal.SIGINT)
        stop(client, signal.SIGTERM)
        server.stop()
        if rec_err:
            rec_err.close()
        for f in set(os.listdir("/dev/shm")) - shm_before:
            if f.startswith("jack"):
                subprocess.run(["rm", "-rf", os.path.join("/dev/shm", f)])
        subprocess.run(["rm", "-rf", work])
    summary = {"server": args.server, "xruns_per_min": ranking.rank(results), "audio_cpu_busy_pct": ranking.rank(busy),
               "rtctl_xruns_cpu_pct": ranking.rank(own)}
    if args.server == "pipewire":
        summary["xruns"] = "the cycles pw-profiler saw a follower unfinished when the driver began the next"
        summary["profiler_cells"] = [dict(c, cell=cell) for c, cell in zip(server.cells, order)]
    return summary


def recording(f):
    """Whether rtctl xruns said it records ("Following ...'s xruns")."""
    return "Following " in read(f, None)


def read(f, tail=1500):
    """What rtctl xruns wrote to f (its stderr) so far, its last tail characters."""
    f.seek(0)
    return f.read()[-tail:] if tail else f.read()


if __name__ == "__main__":
    main()
