#!/usr/bin/python3
"""xruns per minute: a JACK client doing a fixed amount of work per cycle under stress-ng, served by
jackd2 or by PipeWire (through its JACK library), for several tuning configurations and period sizes,
in one run.

    bench/xruns.py [--duration 60] [--rounds 8] [--periods 64,128] [--servers jack,pipewire]
                   [--load 0.45] [--cpu 1] [--configs none,rtctl:audio,tuned:realtime,hand]
                   [--stress cpu,io,vm] [--quick] [--json FILE] [--no-lock]

Each cell starts its own server and bench/xrun-client, which burns --load of the period (calibrated on
the idle machine before the load starts: the same number of work units in every configuration) in every
process() cycle:
  jack      jackd -R -P 70 -d dummy -r 48000 -p PERIOD
  pipewire  a headless pipewire of the cell's own (no session manager, no desktop): Debian's
            pipewire.conf cut to the dummy driver (a timer) at 48 kHz with the quantum fixed at PERIOD,
            module-rt as shipped; the client under pw-jack
Counted during --duration seconds, after a warm-up:

  xruns          the server's own count, the primary number: jackd's xrun messages (a client not
                 finished when the next cycle began, or the dummy driver's own timer late by more
                 than a period); for PipeWire the cycles its profiler (pw-profiler) saw a follower not
                 finished when the driver began the next one
  client xruns   xrun notifications the client received (jack_set_xrun_callback); under PipeWire
                 0.3.65 always 0 with the dummy driver: pipewire-jack signals only the driver's xrun
                 counter, which only a device's xrun moves
  late           cycles whose process() ended after the next cycle was due by jack_get_cycle_times;
                 after an xrun jackd resets its frame timer, and until it re-locks (~1 s here) these
                 times are off by milliseconds, so one xrun can make hundreds of cycles look late:
                 a secondary number
  busy           how long process() ran (its own clock, no frame timer), in % of the period: the work
                 plus whatever preempted it

Every configuration gets --rounds cells per server and period, in rounds of alternating order (A B C,
C B A, ...); the summary gives each one's median, quartiles and range over its cells, and ranks two
configurations only where their ranges do not overlap.

Before any of it, the counter check, per server: a client doing 150 % of a period must be seen to xrun.

Configurations:
  none           no tuning: the server and the client where the scheduler puts them
  rtctl:PROFILE  rtctld from the build tree (private bus) with PROFILE in force, nothing started by
                 hand: what the profile's [Attach] rules place is what is measured (this host has no
                 logind: in a shipped profile, user:active becomes user:0, root standing for the
                 session's user)
  rtctl-run:PROFILE  the same rtctld; each cell runs under `rtctl run --profile PROFILE --`, which
                 holds PROFILE while the cell runs and puts the whole cell on the isolated CPUs
  tuned:PROFILE  tuned 2.20 in the foreground with PROFILE (realtime: isolated_cores=CPU), in a private
                 /etc/tuned (see latency.py); the server and the client pinned to CPU, as tuned's
                 documentation tells a user to do (taskset)
  hand           the hand-tuned ideal: a v1 cpuset with CPU alone for the server and the client, every
                 other task in a housekeeping cpuset, load balancing off for CPU, IRQs, the default IRQ
                 affinity, unbound workqueues and the watchdog off CPU, /dev/cpu_dma_latency held at 0,
                 CPU's pm_qos_resume_latency_us at n/a; all put back

Needs root, jackd2, stress-ng, a build tree with bench/xrun-client (libjack-jackd2-dev at meson setup
time), pipewire, pipewire-bin and pipewire-jack for the pipewire server, tuned for tuned:*. Takes the
kernel lock /run/rtctl-kernel.lock for the whole run and proves with a before/after snapshot that the
machine is as it was."""
import argparse
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import latency  # noqa: E402
import ranking  # noqa: E402
import rivals  # noqa: E402
from rivals import log, parse_cpulist, write  # noqa: E402
import machine  # noqa: E402
import harness  # noqa: E402

JACKD = "jackd"
STRESS_NG = "stress-ng"
CLIENT = os.path.join(harness.BUILD, "bench", "xrun-client")
SERVER = "rtctl-bench-xruns"
RATE = 48000
JACKD_PRIO = 70
OVERLOAD = 1.5
CPUSET = "/sys/fs/cgroup/cpuset"


# One cell: jackd and the client, started together so that whatever placement the configuration gave
# the (stopped) shell, both inherit it.
CELL = r"""
srv=$1 period=$2 dir=$3 prio=$4; shift 6
jackd -n "$srv" -R -P "$prio" -d dummy -r %d -p "$period" -C 2 -P 2 >"$dir/server.out" 2>"$dir/server.err" &
jack=$!
echo $jack >"$dir/server.pid"
JACK_DEFAULT_SERVER=$srv "$@" --server-log "$dir/server.err" >"$dir/client.json" 2>"$dir/client.err"
rc=$?
kill -TERM $jack
wait $jack
exit $rc
""" % RATE


# PipeWire's cell: a headless pipewire of its own (its config below, its socket in the cell's directory,
# no session manager, no desktop), and the client through PipeWire's JACK library (pw-jack). PipeWire's
# own judgement of each cycle comes from its profiler (module-profiler): pw-profiler runs over the
# counting window and logs one line per cycle, with each follower's state when the driver's next cycle
# began (profiler_xruns). 0.3.65 counts a graph that did not finish in time nowhere else: its nodes'
# xrun counters (pw-top's ERR, pipewire-jack's xrun callback) move only when a device driver reports an
# xrun, which the dummy driver never does; 1.x counts these cycles there too.
PW_CELL = r"""
srv=$1 period=$2 dir=$3 prio=$4 warmup=$5 seconds=$6; shift 6
mkdir -p "$dir/run"
export PIPEWIRE_RUNTIME_DIR="$dir/run" XDG_RUNTIME_DIR="$dir/run" PIPEWIRE_REMOTE=pipewire-0
export PIPEWIRE_DEBUG=2
pipewire -c "$dir/pipewire.conf" >"$dir/server.out" 2>"$dir/server.err" &
pw=$!
echo $pw >"$dir/server.pid"
i=0
while [ ! -S "$dir/run/pipewire-0" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
( sleep "$warmup"; cd "$dir" && exec timeout -s INT "$seconds" pw-profiler -o profiler.log ) \
  >"$dir/profiler.out" 2>&1 &
prof=$!
PIPEWIRE_LATENCY="$period/%d" PIPEWIRE_QUANTUM="$period/%d" pw-jack "$@" --server-log "$dir/server.err" \
  >"$dir/client.json" 2>"$dir/client.err"
rc=$?
wait $prof
kill -TERM $pw
wait $pw
exit $rc
""" % (RATE, RATE)

# The daemon's configuration: Debian's pipewire.conf cut to what one driver and JACK clients need, the
# dummy driver (a timer) at 48 kHz, the quantum fixed at the cell's period. Without module-access a
# client is never given permissions, and waits. A JACK client is always processed (node.always-process),
# so the core puts it on the dummy driver without a session manager. Debian's own has
# vm.overrides (min-quantum 1024 in a VM), which would make 64 frames impossible on this host.
# (bench/pipewire-dummy.conf, which tests/integration/test_xruns.py runs too: %(rate)d, %(period)d filled in)
with open(os.path.join(HERE, "pipewire-dummy.conf")) as _f:
    PW_CONF = _f.read()

SERVERS = {"jack": ("jackd", CELL), "pipewire": ("pipewire", PW_CELL)}


# ----------------------------------------------------------------------------------------- configurations

class Config(latency.Config):
    def wrap(self, cmd):
        """The cell's command line as this configuration runs it."""
        return cmd

    def env(self):
        return None


class NoTuning(Config):
    name = "none"


class Rtctl(latency.Rtctl, Config):
    """rtctld with PROFILE in force and nothing started by hand: what the profile's own [Attach] rules
    place (the shipped audio profile's: the server's real-time threads and every graph client's) is what
    is measured. This host has no logind, so user:active matches nobody here: root, who runs the cell,
    stands for the session's user (user:0), as in tests/integration/test_attach_rules.py."""

    def setup(self, ctx):
        super().setup(ctx)
        if self.path:
            return
        shipped = os.path.join(harness.ROOT, "conf.d", "profiles", self.profile + ".conf")
        if os.path.exists(shipped):
            with open(shipped) as f:
                latency.Rtctl.shared["env"].profile(self.profile, f.read().replace("user:active", "user:0"))

    def attach(self, pid):
        pass


class RtctlRun(latency.Rtctl, Config):
    """rtctld (base profile off) with each cell run as `rtctl run --profile PROFILE -- CELL`, as an audio
    user would: the profile is held for the cell's lifetime and the cell put on the isolated CPUs before
    it starts, so the server and the client, started by it, run there."""

    def __init__(self, profile):
        super().__init__(profile)
        self.name = "rtctl-run:" + profile

    def apply(self):
        pass

    def revert(self):
        pass

    def attach(self, pid):
        pass

    def wrap(self, cmd):
        return [harness.RTCTL, "run", "--profile", self.profile, "--"] + cmd

    def env(self):
        return latency.Rtctl.shared["env"].environ


class Tuned(latency.Tuned, Config):
    """tuned with PROFILE; the cell pinned to the measured CPU, which the realtime profile isolates."""

    def setup(self, ctx):
        super().setup(ctx)
        self.cpu = ctx.cpu

    def apply(self):
        seen = set(latency.Tuned.shared.output().splitlines())
        super().apply()
        # What tuned's plugins could not do here (it goes on without it): evidence for the report.
        self.notes = [line for line in latency.Tuned.shared.output().splitlines() if line not in seen
                      and "tuned.plugins" in line and (" ERROR " in line or " WARNING " in line)]

    def attach(self, pid):
        os.sched_setaffinity(pid, {self.cpu})


class Hand(latency.Hand, Config):
    """What an expert does by hand on a 2-CPU machine with cgroup v1 cpusets: latency.py's hand tuning
    (IRQs, workqueues, C-states), with cpusets instead of task affinities and the watchdog moved too."""

    def setup(self, ctx):
        super().setup(ctx)
        self.rt = os.path.join(CPUSET, "rtctl-bench-rt")
        self.hk = os.path.join(CPUSET, "rtctl-bench-hk")

    def apply(self):
        if not os.path.exists(os.path.join(CPUSET, "cpuset.cpus")):
            raise RuntimeError("hand: no cgroup v1 cpuset at " + CPUSET)
        super().apply()
        self.watchdog = machine.read("/proc/sys/kernel/watchdog_cpumask")
        write("/proc/sys/kernel/watchdog_cpumask", latency.cpulist(latency.online_cpus() - {self.cpu}))

    def tasks_off(self, hk):
        """Two cpusets: the CPU alone, the rest for every other task; root's sched_load_balance off
        leaves the CPU without a scheduling domain, so nothing is balanced onto it."""
        self.affinities = rivals.task_affinities()
        mems = machine.read(os.path.join(CPUSET, "cpuset.mems"))
        for d, cpus, balance in ((self.hk, latency.cpulist(hk), "1"), (self.rt, str(self.cpu), "0")):
            os.mkdir(d)
            write(d + "/cpuset.cpus", cpus)
            write(d + "/cpuset.mems", mems)
            write(d + "/cpuset.sched_load_balance", balance)
        self.balance = machine.read(CPUSET + "/cpuset.sched_load_balance")
        write(CPUSET + "/cpuset.sched_load_balance", "0")
        for tid in self._tasks(CPUSET):
            try:
                write(self.hk + "/tasks", tid)
                self.log["tasks_moved"] += 1
            except OSError:
                self.log["tasks_refused"] += 1  # kernel threads bound to a CPU (EINVAL)

    @staticmethod
    def _tasks(d):
        with open(d + "/tasks") as f:
            return [t.strip() for t in f if t.strip()]

    def _dissolve(self):
        """Every task back into the root cpuset (tasks born meanwhile too), then the cpusets go."""
        for d in (self.rt, self.hk):
            if not os.path.isdir(d):
                continue
            for _ in range(20):
                tids = self._tasks(d)
                if not tids:
                    break
                for tid in tids:
                    try:
                        write(CPUSET + "/tasks", tid)
                    except OSError:
                        pass
            os.rmdir(d)

    def attach(self, pid):
        write(self.rt + "/cgroup.procs", str(pid))

    def revert(self):
        write("/proc/sys/kernel/watchdog_cpumask", self.watchdog)
        super().revert()

    def tasks_back(self):
        write(CPUSET + "/cpuset.sched_load_balance", self.balance)
        self._dissolve()
        # Joining a v1 cpuset replaced each task's CPU mask with the cpuset's: put back the masks.
        now = rivals.task_affinities()
        for key, cpus in self.affinities.items():
            if key in now and now[key] != cpus:
                try:
                    os.sched_setaffinity(key[0], parse_cpulist(cpus))
                except OSError:
                    pass

    def teardown(self):
        super().teardown()
        self._dissolve()  # after a failure half-way through apply()


def make_config(spec):
    kind, _, arg = spec.partition(":")
    if kind == "rtctl-run" and arg:
        return RtctlRun(arg)
    return latency.make_config(spec, {"none": NoTuning, "hand": Hand, "rtctl": Rtctl, "tuned": Tuned})


# ----------------------------------------------------------------------------------------- one cell

def descendants(root):
    children = {}
    for st in glob.glob("/proc/[0-9]*/stat"):
        s = machine.read(st)
        if s:
            children.setdefault(int(s.rsplit(")", 1)[1].split()[1]), []).append(int(st.split("/")[2]))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def placement(root):
    """Where the cell's jackd and client threads may run, and at which policy: evidence for the JSON."""
    out = {}
    for pid in descendants(root):
        comm = machine.read("/proc/%d/comm" % pid)
        if comm not in ("jackd", "pipewire", "xrun-client"):
            continue
        threads = []
        for t in glob.glob("/proc/%d/task/[0-9]*" % pid):
            st = machine.read(t + "/stat")
            status = machine.read(t + "/status") or ""
            if not st:
                continue
            f = st.rsplit(")", 1)[1].split()
            cpus = next((line.split(":", 1)[1].strip() for line in status.splitlines()
                         if line.startswith("Cpus_allowed_list:")), "?")
            threads.append({"comm": st[st.index("(") + 1:st.rindex(")")], "policy": int(f[38]),
                            "prio": int(f[37]), "cpus": cpus})
        out[comm] = {"pid": pid, "cpuset": machine.read("/proc/%d/cpuset" % pid), "threads": threads}
    return out


def hang_evidence(root, d):
    """What a hung cell's processes were doing when it was given up on: each thread's state, policy,
    allowed CPUs, last CPU, wait channel and kernel stack, and the server's tail of output."""
    pids = list(descendants(root))
    server = machine.read(os.path.join(d, "server.pid"))
    if server and server.isdigit() and int(server) not in pids:
        pids.append(int(server))
    lines = []
    for pid in pids:
        lines.append("%d %s cpuset %s %s" % (pid, machine.read("/proc/%d/comm" % pid),
                                             machine.read("/proc/%d/cpuset" % pid), autogroup(pid)))
        for t in sorted(glob.glob("/proc/%d/task/[0-9]*" % pid)):
            st = machine.read(t + "/stat")
            if not st:
                continue
            f = st.rsplit(")", 1)[1].split()
            status = machine.read(t + "/status") or ""
            cpus = next((x.split(":", 1)[1].strip() for x in status.splitlines()
                         if x.startswith("Cpus_allowed_list:")), "?")
            stack = " < ".join(x.split()[-1] for x in (machine.read(t + "/stack") or "").splitlines()[:8])
            lines.append("  %s %s state %s policy %s prio %s cpus %s last cpu %s wchan %s schedstat %s %s stack %s" % (
                os.path.basename(t), st[st.index("(") + 1:st.rindex(")")], f[0], f[38], f[37], cpus, f[36],
                machine.read(t + "/wchan"), machine.read(t + "/schedstat"), fair_entity(t), stack))
    lines.append("who ran over 1 s (ms of CPU, policy/priority, last CPU): " + top_threads(1.0))
    lines.append("/proc/pressure/cpu: " + (machine.read("/proc/pressure/cpu") or "").replace("\n", "; "))
    return "\n".join(lines)


def autogroup(pid):
    """The process's autogroup ("/autogroup-N nice 0"): with autogroups on, each session is a task group,
    and a group's share of a CPU is the group's weight, not its threads'."""
    return (machine.read("/proc/%d/autogroup" % pid) or "autogroup ?").strip()


def fair_entity(task):
    """The fair-class entity of a thread from /proc/PID/task/TID/sched: its weight, lag-relevant
    vruntime and slice, for a starved thread."""
    keep = ("se.load.weight", "se.vruntime", "se.slice", "se.avg.load_avg", "prio")
    vals = {}
    for line in (machine.read(task + "/sched") or "").splitlines():
        k, _, v = line.partition(":")
        if k.strip() in keep:
            vals[k.strip()] = v.strip()
    return " ".join("%s=%s" % (k, vals[k]) for k in keep if k in vals) or "sched ?"


def top_threads(seconds):
    """The machine's busiest threads over `seconds`, by their schedstat run time."""
    def sample():
        out = {}
        for t in glob.glob("/proc/[0-9]*/task/[0-9]*"):
            ss, st = machine.read(t + "/schedstat"), machine.read(t + "/stat")
            if ss and st:
                f = st.rsplit(")", 1)[1].split()
                out[t] = (int(ss.split()[0]), st[st.index("(") + 1:st.rindex(")")], f[38], f[37], f[36])
        return out
    a = sample()
    time.sleep(seconds)
    b = sample()
    ran = sorted(((b[t][0] - a[t][0], t) for t in b if t in a), reverse=True)[:10]
    return ", ".join("%s %s %.0f ms %s/%s cpu%s %s" % (t.split("/")[4], b[t][1], ns / 1e6, b[t][2], b[t][3], b[t][4],
                                                       autogroup(int(t.split("/")[2])))
                     for ns, t in ran)


def placement_line(p):
    parts = []
    for comm in ("jackd", "pipewire", "xrun-client"):
        if comm not in p:
            if comm != "xrun-client" and any(k in p for k in ("jackd", "pipewire")):
                continue
            parts.append("%s: ?" % comm)
            continue
        rt = [t for t in p[comm]["threads"] if t["policy"] in (1, 2)]
        other = sorted({t["cpus"] for t in p[comm]["threads"] if t["policy"] not in (1, 2)})
        parts.append("%s %s: %s%s" % (comm, p[comm]["cpuset"], ", ".join(
            "FIFO %d on %s" % (t["prio"], t["cpus"]) for t in rt) or "no RT thread",
            (" (others on %s)" % "/".join(other)) if other else ""))
    return "; ".join(parts)


def stop_server(d, comm, kill_wait=0):
    """The cell's server, by the PID the cell wrote, when it is still that server: SIGTERM, SIGKILL 10 s
    later, then up to kill_wait s for it to be gone (a starved server needs CPU time even to die).
    Whether it is gone."""
    pid = machine.read(os.path.join(d, "server.pid"))

    def alive():
        return pid and machine.read("/proc/%s/comm" % pid) == comm
    if not alive():
        return True
    os.kill(int(pid), signal.SIGTERM)
    for sig, wait in ((signal.SIGKILL, 10), (None, kill_wait)):
        deadline = time.monotonic() + wait
        while alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        if sig and alive():
            os.kill(int(pid), sig)
    return not alive()


class CellHung(RuntimeError):
    """The cell's processes did not exit in time (see hang_evidence)."""


def run_cell(cfg, server, cpu, period, units, seconds, warmup, workdir, tag):
    d = os.path.join(workdir, tag)
    os.makedirs(d)
    comm, script = SERVERS[server]
    if server == "pipewire":
        with open(os.path.join(d, "pipewire.conf"), "w") as f:
            f.write(PW_CONF % {"rate": RATE, "period": period})
    cell = ["/bin/sh", "-c", script, "cell", SERVER, str(period), d, str(JACKD_PRIO), str(warmup), str(seconds),
            CLIENT, "--units", str(units), "--warmup", str(warmup), "--seconds", str(seconds)]
    p = latency.start_stopped(cfg.wrap(cell), env=cfg.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, start_new_session=True)
    try:
        cfg.attach(p.pid)
    except Exception:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        raise
    os.kill(p.pid, signal.SIGCONT)
    evidence = state = None
    try:
        # Placement and the machine's state, looked at once the client counts.
        t_look = time.monotonic() + warmup + 1.5
        while p.poll() is None and time.monotonic() < t_look:
            time.sleep(0.1)
        stat0 = cpu_stat(cpu)
        if p.poll() is None:
            evidence = placement(p.pid)
            state = latency.describe(cpu)
        try:
            # The client waits up to 60 s for its server before it counts: give it that and a minute more.
            out, _ = p.communicate(timeout=seconds + warmup + 120)
        except subprocess.TimeoutExpired:
            out = None
        stat1 = cpu_stat(cpu)
        if out is None:
            raise CellHung("cell %s hung: no exit %d s after its start\n%s\nserver: %s" % (
                tag, seconds + warmup + 120, hang_evidence(p.pid, d),
                (machine.read(os.path.join(d, "server.err")) or "")[-1500:]))
    except BaseException:
        # The cell is its own session: this ends its client; jackd makes a session of its own.
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        stop_server(d, comm)
        raise
    try:
        with open(os.path.join(d, "client.json")) as f:
            res = json.load(f)
    except (OSError, ValueError):
        res = None
    if p.returncode != 0 or res is None:
        raise RuntimeError("cell %s failed (%s): %s\nclient: %s\n%s: %s" % (
            tag, p.returncode, out, machine.read(os.path.join(d, "client.err")), comm,
            (machine.read(os.path.join(d, "server.err")) or "")[-2000:]))
    stop_server(d, comm)  # a pipewire that outlived its cell's kill
    if server == "pipewire":
        res.update(profiler_counts(os.path.join(d, "profiler.log")))
    res["placement"] = evidence
    res["state"] = state
    # The audio CPU's time the hypervisor took (steal), and spent in hard and soft IRQs, over the
    # counting window (from a little after its start to the client's exit): a VM's own noise, which no
    # tuning inside it removes.
    res["cpu_ms"] = {k: (stat1[k] - stat0[k]) * 1000.0 / USER_HZ for k in stat0}
    res["server"] = server
    res["server_log_tail"] = (machine.read(os.path.join(d, "server.err")) or "").splitlines()[-5:]
    return res


# pw-profiler's log (0.3.65 and later): per cycle, 4 columns for the driver, then 8 per follower (id,
# signal, awake and finish offsets, wake-up and run times, status, 0), blank for a follower not in
# that cycle. A status of 1 (triggered) or 2 (awake) is a follower that had not finished when the
# driver began the next cycle: the graph was incomplete.
PROFILER_DRIVER_COLUMNS = 4
PROFILER_FOLLOWER_COLUMNS = 8
UNFINISHED = ("1", "2")


def profiler_counts(path):
    """PipeWire's own count of the counting window's cycles and of those its graph did not finish in time,
    from pw-profiler's log; split by what the late follower was doing: not yet awake (triggered: it was
    not woken in time; a cycle with any such follower counts here) or awake (it ran too long), with the
    longest wake-up (signal to awake; 0.3.65 prints integer µs, later versions µs with decimals)."""
    cycles = incomplete = unwoken = 0
    wake_max = 0.0
    with open(path) as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            if len(cols) < PROFILER_DRIVER_COLUMNS:
                continue
            cycles += 1
            followers = cols[PROFILER_DRIVER_COLUMNS:]
            status = [st.strip() for st in followers[6::PROFILER_FOLLOWER_COLUMNS]]
            for w in followers[4::PROFILER_FOLLOWER_COLUMNS]:
                try:
                    wake_max = max(wake_max, float(w))
                except ValueError:
                    pass
            if any(st in UNFINISHED for st in status):
                incomplete += 1
                unwoken += "1" in status
    if cycles == 0:
        raise RuntimeError("%s: pw-profiler logged no cycle" % path)
    return {"profiler_cycles": cycles, "profiler_xruns": incomplete, "profiler_unwoken": unwoken,
            "profiler_unfinished": incomplete - unwoken, "profiler_wake_max_us": wake_max}


USER_HZ = os.sysconf("SC_CLK_TCK")
STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def cpu_stat(cpu):
    """The CPU's line of /proc/stat: ticks spent in each state since boot."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu%d " % cpu):
                return {k: int(v) for k, v in zip(STAT_FIELDS, line.split()[1:])
                        if k in ("irq", "softirq", "steal")}
    return {"irq": 0, "softirq": 0, "steal": 0}


def per_min(n, res):
    return 60.0 * n / res["seconds"] if res["seconds"] else float("nan")


def row_of(config, res):
    """One cell's figures. xruns is the server's own count: jackd's xrun messages, or for PipeWire the
    cycles its profiler saw the graph unfinished when the next began (per minute of the profiler's own
    cycles, which cover the counting window to within the start of pw-profiler)."""
    pu = res["period_us"]
    if res.get("server") == "pipewire":
        primary = res["profiler_xruns"]
        primary_per_min = 60.0 * primary / (res["profiler_cycles"] * pu / 1e6)
    else:
        primary = res["server_xruns"]
        primary_per_min = per_min(primary, res)
    return {"config": config, "server": res.get("server", "jack"), "period": res["period_frames"],
            "period_us": pu, "seconds": res["seconds"],
            "xruns": primary, "xruns_per_min": round(primary_per_min, 2),
            "cycles": res["cycles"],
            "server_xruns": res["server_xruns"], "server_xruns_per_min": round(per_min(res["server_xruns"], res), 2),
            "client_xruns": res["client_xruns"], "client_xruns_per_min": round(per_min(res["client_xruns"], res), 2),
            "late_cycles": res["late_cycles"], "late_per_min": round(per_min(res["late_cycles"], res), 2),
            "missed_cycles": res["missed_cycles"],
            "busy_p50_pct": round(100.0 * res["busy_us"]["p50"] / pu, 1),
            "busy_p99_pct": round(100.0 * res["busy_us"]["p99"] / pu, 1),
            "busy_max_pct": round(100.0 * res["busy_us"]["max"] / pu, 1),
            "finish_p99_pct": round(100.0 * res["finish_us"]["p99"] / pu, 1),
            "wake_p99_us": res["wake_us"]["p99"], "wake_p99_9_us": res["wake_us"]["p99_9"],
            "steal_ms": round(res.get("cpu_ms", {}).get("steal", 0), 1),
            "irq_ms": round(res.get("cpu_ms", {}).get("irq", 0) + res.get("cpu_ms", {}).get("softirq", 0), 1),
            # PipeWire: the unfinished cycles split: a follower not yet awake, else one still running;
            # the longest wake-up of the window.
            "unwoken": res.get("profiler_unwoken"), "unfinished": res.get("profiler_unfinished"),
            "wake_max_us": res.get("profiler_wake_max_us")}


def print_table(rows):
    print("%-18s %-8s %5s %6s %7s %6s %8s %12s %12s %9s %8s %8s %8s %9s %8s %7s" % (
        "configuration", "server", "round", "period", "cycles", "xruns", "x/min", "server x/min", "client x/min",
        "late/min", "busy p50", "p99", "max", "wake p99", "steal", "irq"))
    for r in rows:
        print("%-18s %-8s %5s %6d %7d %6d %8.2f %12.2f %12.2f %9.1f %7.1f%% %7.1f%% %7.1f%% %7dus %6.0fms %5.0fms" % (
            r["config"], r["server"], r.get("round", "-"), r["period"], r["cycles"], r["xruns"], r["xruns_per_min"],
            r["server_xruns_per_min"], r["client_xruns_per_min"], r["late_per_min"], r["busy_p50_pct"],
            r["busy_p99_pct"], r["busy_max_pct"], r["wake_p99_us"], r["steal_ms"], r["irq_ms"]))


def summarize(rows, names, servers, periods, key="xruns_per_min"):
    """Per server and period: every configuration's cells ranked (ranking.rank)."""
    out = []
    for srv in servers:
        for p in periods:
            groups = {n: [r[key] for r in rows if r["config"] == n and r["server"] == srv and r["period"] == p]
                      for n in names}
            out.append({"server": srv, "period": p, "ranking": ranking.rank(groups)})
    return out


def print_summary(summary, rounds, duration):
    for s in summary:
        ranking.print_ranking("%s, %d frames: xruns per minute, %d cell%s of %d s per configuration" % (
            s["server"], s["period"], rounds, "" if rounds == 1 else "s", duration), "xruns per minute",
            s["ranking"])
        print()


# ----------------------------------------------------------------------------------------- main

def jack_shm():
    return sorted(f for f in os.listdir("/dev/shm") if f.startswith("jack"))


def calibrate(cpu):
    p = subprocess.run([CLIENT, "--calibrate", "--cpu", str(cpu)], capture_output=True, text=True, check=True)
    return json.loads(p.stdout)


def run_cell_once_more(results, *args):
    """run_cell, and once more when the cell hung: on this host a hang is the kernel starving runnable
    SCHED_OTHER tasks of the cell on a loaded CPU for minutes (bench/README.md, "hung cells"), in every
    configuration that confines tasks with cpusets, and it says nothing of the next cell. The hang is
    recorded with its evidence and counted per configuration; a second hang in a row fails the cell."""
    try:
        return run_cell(*args)
    except CellHung as e:
        server, workdir, tag = args[1], args[7], args[8]
        results.setdefault("hung_cells", []).append({"cell": tag, "evidence": str(e)})
        # The next server takes the same name: the hung one must be gone first.
        if not stop_server(os.path.join(workdir, tag), SERVERS[server][0], kill_wait=60):
            raise CellHung("%s\n(not run again: its %s outlived SIGKILL by 60 s)" % (e, SERVERS[server][0]))
        log("cell %s hung, run once more; evidence:\n%s" % (tag, str(e)))
        return run_cell(*(args[:-1] + (tag + "-again",)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=int, default=60, help="seconds counted per configuration and period")
    ap.add_argument("--warmup", type=float, default=3, help="seconds after the client starts before counting")
    ap.add_argument("--periods", default="64,128", help="frames per period (default 64,128)")
    ap.add_argument("--servers", default="jack,pipewire", help="jack (jackd2), pipewire (with pw-jack), or both")
    ap.add_argument("--load", type=float, default=0.45, help="work per cycle, fraction of the period on the idle machine")
    ap.add_argument("--cpu", type=int, default=1, help="the CPU tuned configurations set apart (default 1)")
    ap.add_argument("--configs", default="none,rtctl:audio,tuned:realtime,hand")
    ap.add_argument("--stress", default="cpu,io,vm", help="stress-ng stressors, N = online CPUs each")
    ap.add_argument("--check-seconds", type=int, default=10, help="length of the counter check")
    ap.add_argument("--rounds", type=int, default=8,
                    help="cells per configuration, server and period, in alternating order (default 8)")
    ap.add_argument("--quick", action="store_true", help="smoke test: 5 s per cell, one round")
    ap.add_argument("--json", default=None)
    ap.add_argument("--no-lock", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.duration, args.check_seconds, args.warmup, args.rounds = 5, 5, 2, 1
    if args.rounds < 1:
        sys.exit("--rounds must be at least 1")
    if os.geteuid() != 0:
        sys.exit("xruns needs root: it runs jackd SCHED_FIFO and changes kernel settings")
    for tool, pkg in ((JACKD, "jackd2"), (STRESS_NG, "stress-ng")):
        if not shutil.which(tool):
            sys.exit("%s is missing: apt-get install %s (tools/deps.sh)" % (tool, pkg))
    if not os.access(CLIENT, os.X_OK):
        sys.exit("%s is missing: install libjack-jackd2-dev (tools/deps.sh), then meson setup --reconfigure and "
                 "ninja -C %s" % (CLIENT, harness.BUILD))
    configs = [make_config(c.strip()) for c in args.configs.split(",") if c.strip()]
    if any(isinstance(c, Tuned) for c in configs) and not os.path.exists(rivals.TUNED):
        sys.exit("tuned is missing: apt-get install tuned (tools/deps.sh)")
    periods = [int(p) for p in args.periods.split(",")]
    servers = [x.strip() for x in args.servers.split(",") if x.strip()]
    if not servers or not set(servers) <= set(SERVERS):
        sys.exit("--servers: jack, pipewire")
    if "pipewire" in servers:
        for tool in ("pipewire", "pw-jack"):
            if not shutil.which(tool):
                sys.exit("%s is missing: apt-get install pipewire pipewire-bin pipewire-jack (tools/deps.sh)" % tool)
        if subprocess.run(["pgrep", "-x", "pipewire"], capture_output=True).returncode == 0:
            sys.exit("a pipewire is running already: stop it first")
    if args.cpu not in latency.online_cpus() or args.cpu == 0:
        sys.exit("--cpu must be an online CPU other than 0")
    if subprocess.run(["pgrep", "-x", "jackd"], capture_output=True).returncode == 0:
        sys.exit("a jackd is running already: stop it first")

    t_start = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="rtctl-xruns-")
    os.chmod(tmp, 0o755)
    results = {"periods": periods, "servers": servers, "rate": RATE, "load": args.load, "duration_s": args.duration,
               "jackd": "jackd -n %s -R -P %d -d dummy -r %d -p PERIOD -C 2 -P 2" % (SERVER, JACKD_PRIO, RATE),
               "configs": [c.name for c in configs], "cells": [], "leftovers": {}}
    rows = []
    check_ok = False
    check_lines = []
    with rivals.kernel_lock(not args.no_lock):
        shm_before = jack_shm()
        before = rivals.snapshot()
        before["/dev/shm jack*"] = shm_before
        cal = calibrate(args.cpu)
        ns = cal["ns_per_unit_median"]
        units = {p: int(args.load * (1e9 * p / RATE) / ns) for p in periods}
        results["calibration"] = cal
        results["units"] = units
        log("calibration on cpu%d, idle: %.2f ns per work unit; units per cycle: %s" % (
            args.cpu, ns, ", ".join("%d frames %d (%.0f us)" % (p, u, u * ns / 1000) for p, u in units.items())))
        ctx = latency.Context(tmp, args.cpu, configs)
        stress = None
        try:
            with rivals.irqs_restored():
                for c in configs:
                    c.setup(ctx)
                planned = (args.rounds * len(configs) * len(servers) * len(periods) + len(servers)) * \
                    (args.duration + args.warmup + 10) + args.rounds * len(configs) * 20 + 120
                stress, stress_cmd = latency.start_stress(args, planned * 1.5)
                results["stress"] = " ".join(stress_cmd)
                log("stress: %s" % results["stress"])

                # The counter check, per server: an overloaded client must be seen to xrun.
                p = max(periods)
                over = int(OVERLOAD * (1e9 * p / RATE) / ns)
                check_lines = []
                check_ok = True
                results["counter_check"] = {}
                for srv in servers:
                    res = run_cell_once_more(results, NoTuning(), srv, args.cpu, p, over, args.check_seconds,
                                             args.warmup, tmp, "check-" + srv)
                    r = row_of("check", res)
                    # jackd tells its clients; PipeWire 0.3.65 tells them nothing of an unfinished graph.
                    ok = r["xruns"] > 0 and (srv == "pipewire" or r["client_xruns"] > 0)
                    check_ok = check_ok and ok
                    results["counter_check"][srv] = dict(r, units=over, ok=ok)
                    check_lines.append(
                        "counter check, %s: overloaded client (%d%% of a %d-frame period) -> %.1f xruns/min "
                        "(server), %.1f (client), %.1f late cycles/min: %s" % (
                            srv, OVERLOAD * 100, p, r["xruns_per_min"], r["client_xruns_per_min"],
                            r["late_per_min"], "OK" if ok else "FAILED: the counters see nothing"))
                    log(check_lines[-1])

                # Rounds alternate the order (A B C, C B A, ...) so that the machine's drift over the
                # run (the host's other guests, stress-ng's phases) hits every configuration alike.
                for rnd in range(args.rounds):
                    order = configs if rnd % 2 == 0 else configs[::-1]
                    for c in order:
                        with latency.applied(c, lambda left: results["leftovers"].__setitem__(c.name, left)):
                            time.sleep(1)
                            cells = [(srv, p) for srv in servers for p in periods]
                            for srv, p in (cells if rnd % 2 == 0 else cells[::-1]):
                                tag = "%s-%s-%d-r%d" % (c.name.replace(":", "_"), srv, p, rnd)
                                try:
                                    res = run_cell_once_more(results, c, srv, args.cpu, p, units[p], args.duration,
                                                             args.warmup, tmp, tag)
                                    r = dict(row_of(c.name, res), round=rnd)
                                except (RuntimeError, OSError, KeyError, ValueError) as e:
                                    # One failed cell costs that cell, not hours of the others: it is
                                    # named, left out of the figures, and the run exits 1.
                                    results.setdefault("failed_cells", []).append({"cell": tag, "error": str(e)})
                                    log("round %d/%d %-18s %-8s %4d frames: FAILED: %s" % (
                                        rnd + 1, args.rounds, c.name, srv, p, str(e).splitlines()[0]))
                                    continue
                                rows.append(r)
                                results["cells"].append({"row": r, "raw": res})
                                pw = (" (%d not woken, %d running; wake-up max %.0f us)" % (
                                    r["unwoken"], r["unfinished"], r["wake_max_us"])
                                    if r["unwoken"] is not None else "")
                                log("round %d/%d %-18s %-8s %4d frames: %6.2f xruns/min%s, client %6.2f, "
                                    "late %6.1f/min, busy p99 %5.1f%% max %6.1f%%, steal %d ms | %s" % (
                                        rnd + 1, args.rounds, c.name, srv, p, r["xruns_per_min"], pw,
                                        r["client_xruns_per_min"], r["late_per_min"], r["busy_p99_pct"],
                                        r["busy_max_pct"], r["steal_ms"], placement_line(res["placement"] or {})))
                            if getattr(c, "notes", None):
                                results.setdefault("notes", {})[c.name] = c.notes
        finally:
            if stress:
                latency.stop_stress(stress)
            for c in configs:
                c.teardown()
            ctx.cleanup()
            for f in set(jack_shm()) - set(shm_before):  # jackd2 leaves its shm registry
                path = os.path.join("/dev/shm", f)
                shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)
        after = rivals.snapshot()
        after["/dev/shm jack*"] = jack_shm()
    left = rivals.diff(before, after)
    results.update({"table": rows, "machine_unchanged": not left, "machine_diff": left,
                    "runtime_s": round(time.monotonic() - t_start, 1),
                    "kernel": os.uname().release, "cpus": len(latency.online_cpus())})
    print("stress: %s (for the whole run)" % results.get("stress"))
    print("jackd: %s; client: %s units of work per cycle (%.0f%% of the period on the idle cpu%d)\n" % (
        results["jackd"], ", ".join("%d frames %d" % kv for kv in results["units"].items()), args.load * 100,
        args.cpu))
    if "counter_check" in results:
        print("\n".join(check_lines) + "\n")
    print_table(rows)
    summary = summarize(rows, [c.name for c in configs], servers, periods)
    results["summary"] = summary
    print()
    print_summary(summary, args.rounds, args.duration)
    print("\nxruns = jackd's own xrun messages in the window, or PipeWire's unfinished cycles by its profiler (the "
          "primary number); client x/min = xrun callbacks "
          "the client got;\nlate = cycles process() ended after the next was due by jack_get_cycle_times (inflated "
          "for ~1 s after each\nxrun while jackd's frame timer re-locks); busy = process() run time, % of the "
          "period; wake = process() start after\nthe cycle start (same caveat as late); steal, irq = the audio CPU's time taken by the hypervisor, and in\nhard+soft IRQs, over the window (/proc/stat)")
    print("\nplacement of the audio threads while counting (first round):")
    for cell in results["cells"]:
        if cell["row"]["round"] != 0:
            continue
        print("  %-18s %-8s %4d: %s" % (cell["row"]["config"], cell["row"]["server"], cell["row"]["period"],
                                        placement_line(cell["raw"]["placement"] or {})))
    print("\nstate while counting (period %d):" % periods[0])
    for cell in results["cells"]:
        st = cell["raw"]["state"]
        if st and cell["row"]["period"] == periods[0] and cell["row"]["round"] == 0:
            print("  %-18s %-8s dma_latency=%s pm_qos=%s irqs_on_cpu=%s tasks_on_cpu=%s wq=%s" % (
                cell["row"]["config"], cell["row"]["server"], st["cpu_dma_latency_us"], st["pm_qos_resume_latency_us"],
                st["irqs_allowed_on_cpu"], st["tasks_allowed_on_cpu"], st["workqueue_cpumask"]))
    for name, lst in results.get("notes", {}).items():
        print("%s complained while applying:" % name, *lst, sep="\n  ")
    for name, lst in results["leftovers"].items():
        print("%s left behind after its revert (repaired by the bench): %s" % (name, "; ".join(lst)))
    for h in results.get("hung_cells", []):
        print("cell %s hung and was run once more: %s" % (h["cell"], h["evidence"].splitlines()[0]))
    for f in results.get("failed_cells", []):
        print("cell %s FAILED: %s" % (f["cell"], f["error"]))
    latency.print_end(results, left, args.json)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0 if not left and check_ok and not results.get("failed_cells") else 1


if __name__ == "__main__":
    machine.interruptible()
    sys.exit(main())
