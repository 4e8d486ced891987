"""What bench/compare.py and bench/latency.py share: the shared kernel lock, a wider snapshot than the
host tier's (everything tuned, irqbalance and a hand tuning can change), and the daemons rtctl is
compared with -- tuned, irqbalance, systemd-udevd, a private system bus -- started by hand on a
machine without systemd as PID 1 and cleaned up after.

Nothing here leaves a trace: tuned runs in a private mount namespace whose /etc/tuned is a copy (its
active_profile, profile_mode, bootcmdline writes and the bench profiles never reach the real /etc),
IRQ affinities irqbalance moves are written back, /run/udev and /run/irqbalance are removed when this
module made them."""
import contextlib
import glob
import hashlib
import os
import re
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

import machine  # noqa: E402
from machine import parse_cpulist  # noqa: E402,F401 (the benches import it from here)
from harness import RTCTL, Bus  # noqa: E402

# Loop device numbers 300-399 belong to the benchmarks in this file's company (tests use 200-299).
BENCH_LOOP_BASE = 300


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------- statistics

def pct(sorted_values, q):
    """Nearest-rank percentile of an already sorted list (q in 0..100)."""
    if not sorted_values:
        return None
    i = min(len(sorted_values) - 1, max(0, int(round(q / 100.0 * (len(sorted_values) - 1)))))
    return sorted_values[i]


def stats(values):
    values = sorted(v for v in values if v is not None)
    if not values:
        return {"n": 0}
    return {"median": statistics.median(values), "p95": pct(values, 95), "min": values[0],
            "max": values[-1], "n": len(values)}


# ----------------------------------------------------------------------------------------- the lock

def kernel_lock(use=True):
    """The machine-wide kernel lock (machine.kernel_lock), with what an interrupted earlier run left put
    back once it is held."""
    return machine.kernel_lock(use, rtctl=RTCTL, say=log)


# ----------------------------------------------------------------------------------------- snapshot

EXTRA_SYSCTLS = [
    "vm/dirty_ratio", "vm/dirty_background_ratio", "vm/swappiness", "vm/stat_interval",
    "vm/dirty_expire_centisecs", "vm/dirty_writeback_centisecs",
    "kernel/hung_task_timeout_secs", "kernel/numa_balancing", "kernel/sched_autogroup_enabled",
    "kernel/sched_util_clamp_min_rt_default", "kernel/sched_rr_timeslice_ms",
    "net/core/busy_read", "net/core/busy_poll", "net/ipv4/tcp_fastopen",
]
EXTRA_FILES = [
    "/sys/kernel/mm/transparent_hugepage/enabled", "/sys/kernel/mm/transparent_hugepage/defrag",
    "/sys/devices/virtual/workqueue/cpumask", "/sys/bus/workqueue/devices/writeback/cpumask",
]
WATCHED_PROCS = ("tuned", "irqbalance", "systemd-udevd", "cyclictest", "stress-ng", "rtctld")


def cpu_dma_latency():
    """The PM QoS CPU latency target now in force, in µs (reading adds no request)."""
    try:
        fd = os.open("/dev/cpu_dma_latency", os.O_RDONLY)
    except OSError:
        return None
    try:
        return struct.unpack("i", os.read(fd, 4))[0]
    finally:
        os.close(fd)


def tree_digest(paths):
    h = hashlib.sha256()
    for p in paths:
        for root, dirs, files in sorted(os.walk(p)) if os.path.isdir(p) else [(os.path.dirname(p), [], [os.path.basename(p)])]:
            dirs.sort()
            for f in sorted(files):
                fp = os.path.join(root, f)
                h.update(fp.encode())
                try:
                    with open(fp, "rb") as fh:
                        h.update(fh.read())
                except OSError:
                    h.update(b"<unreadable>")
    return h.hexdigest()[:16]


def proc_comm(pid):
    return machine.read("/proc/%s/comm" % pid)


def task_affinities():
    """(tid, starttime) -> Cpus_allowed_list, for every thread of every process."""
    out = {}
    for st in glob.glob("/proc/[0-9]*/task/[0-9]*/status"):
        tid = st.split("/")[4]
        try:
            with open(st) as f:
                text = f.read()
            with open(st[:-6] + "stat") as f:
                start = f.read().rsplit(")", 1)[1].split()[19]
        except OSError:
            continue
        m = re.search(r"^Cpus_allowed_list:\s*(\S+)", text, re.M)
        if m:
            out[(int(tid), start)] = m.group(1)
    return out


def snapshot():
    """machine.snapshot() plus what tuned, irqbalance, udevd and the hand tuning can touch."""
    s = machine.snapshot()
    for k in EXTRA_SYSCTLS:
        v = machine.read("/proc/sys/" + k)
        if v is not None:
            s["/proc/sys/" + k] = v
    for f in EXTRA_FILES + sorted(glob.glob("/sys/devices/virtual/workqueue/*/cpumask")):
        v = machine.read(f)
        if v is not None:
            s[f] = v
    for f in sorted(glob.glob("/sys/kernel/debug/sched/*")):
        if os.path.isfile(f):
            s[f] = machine.read(f)
    s["/dev/cpu_dma_latency"] = cpu_dma_latency()
    s["/run/udev"] = os.path.exists("/run/udev")
    s["/run/irqbalance"] = os.path.exists("/run/irqbalance")
    s["/dev/disk"] = sorted(os.listdir("/dev/disk")) if os.path.isdir("/dev/disk") else None
    s["bench loop devices"] = sorted(d for d in os.listdir("/sys/block") if re.match(r"loop3\d\d$", d))
    s["/etc/tuned digest"] = tree_digest(["/etc/tuned"])
    s["/etc/default/irqbalance digest"] = tree_digest(["/etc/default/irqbalance"])
    procs = {}
    for p in glob.glob("/proc/[0-9]*/comm"):
        c = machine.read(p)
        if c in WATCHED_PROCS:
            procs[c] = procs.get(c, 0) + 1
    s["processes"] = procs
    s["task affinities"] = task_affinities()
    return s


def diff(before, after):
    """Like machine.diff, but task affinities compare only threads alive at both times."""
    b = dict(before)
    a = dict(after)
    ba = b.pop("task affinities", {})
    aa = a.pop("task affinities", {})
    lines = machine.diff(b, a)
    for key in sorted(set(ba) & set(aa)):
        if ba[key] != aa[key]:
            lines.append("affinity of thread %d (%s): %s -> %s" % (key[0], proc_comm(key[0]), ba[key], aa[key]))
    return lines


# ----------------------------------------------------------------------------------------- processes

def read_status(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def memory(pid):
    st = read_status(pid)
    pss = private = 0
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            if line.startswith("Pss:"):
                pss = int(line.split()[1])
            elif line.startswith(("Private_Clean:", "Private_Dirty:")):
                private += int(line.split()[1])
    return {"rss_kb": int(st["VmRSS"].split()[0]), "rss_anon_kb": int(st["RssAnon"].split()[0]),
            "rss_file_kb": int(st["RssFile"].split()[0]), "pss_kb": pss, "private_kb": private,
            "threads": int(st["Threads"])}


def ctxt_switches(pid):
    """Voluntary + involuntary context switches of every thread: each wakeup of a sleeping thread is
    one voluntary switch when it sleeps again."""
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            st = {}
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                for line in f:
                    k, _, v = line.partition(":")
                    st[k] = v.strip()
            total += int(st["voluntary_ctxt_switches"]) + int(st["nonvoluntary_ctxt_switches"])
        except (OSError, KeyError):
            pass
    return total


def stop_process(proc, name, sig=signal.SIGTERM, timeout=20):
    if proc is None or proc.poll() is not None:
        return proc.returncode if proc else None
    proc.send_signal(sig)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        log("%s (pid %d) did not stop in %d s: SIGKILL" % (name, proc.pid, timeout))
        proc.kill()
        return proc.wait(10)


def start_rtctld(env, *args):
    """env.start(), plus a thread that keeps reading the daemon's NOTIFY_SOCKET. harness.Daemon reads
    it only while waiting for READY=1; rtctld sends a STATUS= line after every pass that changes it,
    and sd_notify() blocks once net.unix.max_dgram_qlen (10) datagrams wait unread: after ~11 profile
    switches rtctld would hang in unix_wait_for_peer, its event loop and D-Bus calls with it."""
    import threading
    # As units/rtctld.service runs it: SCHED_FIFO 1, children reset to SCHED_OTHER.
    d = env.start("--realtime-priority=1", *args)

    def drain():
        while True:
            try:
                d.notify.settimeout(0.2)
                msg = d.notify.recv(4096)
            except OSError as e:  # socket.timeout is an OSError too
                if d.notify.fileno() < 0 or not d.running():
                    return
                if "timed out" not in str(e):
                    return
                continue
            d.messages.append(msg.decode(errors="replace"))

    threading.Thread(target=drain, daemon=True, name="notify-drain").start()
    return d


# ----------------------------------------------------------------------------------------- the bus

class SystemBus(Bus):
    """The harness's private system bus, with tuned's bus policy too (so tuned can own its name there).
    Services reach it through DBUS_SYSTEM_BUS_ADDRESS; the real /run/dbus is never touched."""

    def __init__(self, tmp):
        super().__init__(tmp, extra_policies=["/etc/dbus-1/system.d/com.redhat.tuned.conf"])


# ----------------------------------------------------------------------------------------- udevd

UDEVD = "/lib/systemd/systemd-udevd"


class Udevd:
    """systemd-udevd started by hand (no systemd as PID 1: it runs fine as a plain process, creates
    /run/udev/control and rebroadcasts kernel uevents after its rules ran; nothing triggers a coldplug).
    Refuses to start when /run/udev exists: that would be someone else's udevd."""

    def __init__(self, tmp):
        if os.path.exists("/run/udev"):
            raise RuntimeError("/run/udev exists: another udevd runs or one was left behind; not starting")
        self.log_path = os.path.join(tmp, "udevd.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([UDEVD, "--resolve-names=never"], stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 10
        while not os.path.exists("/run/udev/control"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("systemd-udevd did not start: " + open(self.log_path).read())
            time.sleep(0.01)
        time.sleep(0.2)

    def settle(self, timeout=10):
        subprocess.run(["udevadm", "settle", "-t", str(timeout)], check=False)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
        # Its workers are in its session (start_new_session): none may outlive it.
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if self.proc.poll() is None:
            self.proc.wait(10)
        self.log.close()
        # rtctld picks udev mode while /run/udev/control exists: nothing of udevd's may stay.
        shutil.rmtree("/run/udev", ignore_errors=True)


# ----------------------------------------------------------------------------------------- tuned

TUNED = "/usr/sbin/tuned"
TUNED_ADM = "/usr/sbin/tuned-adm"

# Without systemd, tuned's _full_rollback_required() runs `systemctl is-system-running`, which fails, so
# tuned takes every stop (SIGTERM, `tuned-adm off`) for a system shutdown: it logs "terminating TuneD due
# to system shutdown / reboot" and skips the full rollback of its bootloader, modules, systemd and script
# plugins (sysctl, sysfs, disk, cpu, scheduler and vm values are still put back). This stand-in answers
# as a running systemd would, so tuned stops as it does on a systemd host. Profile switches always roll
# back fully, shim or not. compare.py --no-systemctl-shim runs without it.
SYSTEMCTL_SHIM = """#!/bin/sh
echo "$@" >> "%s"
case "$1" in
  is-system-running) echo running; exit 0 ;;
  list-jobs) echo "No jobs running."; exit 0 ;;
esac
exit 0
"""

EMPTY_PROFILE = "[main]\nsummary=rtctl bench: no tuning\n"


class Tuned:
    """tuned 2.20 in the foreground, in its own mount namespace where /etc/tuned is a private copy, on
    a private system bus. Profiles given to __init__ go into that copy."""

    def __init__(self, tmp, bus, profiles, start_profile="rtctl-bench-empty", shim=True, debug=False,
                 files=None):
        self.dir = tempfile.mkdtemp(prefix="tuned-", dir=tmp)
        self.bus = bus
        self.etc = os.path.join(self.dir, "etc")
        shutil.copytree("/etc/tuned", self.etc, symlinks=True)
        profiles = dict(profiles)
        profiles.setdefault("rtctl-bench-empty", EMPTY_PROFILE)
        for name, text in profiles.items():
            os.makedirs(os.path.join(self.etc, name), exist_ok=True)
            with open(os.path.join(self.etc, name, "tuned.conf"), "w") as f:
                f.write(text)
        for rel, text in (files or {}).items():
            with open(os.path.join(self.etc, rel), "w") as f:
                f.write(text)
        with open(os.path.join(self.etc, "active_profile"), "w") as f:
            f.write(start_profile + "\n")
        with open(os.path.join(self.etc, "profile_mode"), "w") as f:
            f.write("manual\n")
        self.shim_dir = os.path.join(self.dir, "shim")
        os.makedirs(self.shim_dir)
        self.shim_log = os.path.join(self.dir, "systemctl-calls.log")
        if shim:
            with open(os.path.join(self.shim_dir, "systemctl"), "w") as f:
                f.write(SYSTEMCTL_SHIM % self.shim_log)
            os.chmod(os.path.join(self.shim_dir, "systemctl"), 0o755)
        self.log_path = os.path.join(self.dir, "tuned.log")
        self.out_path = os.path.join(self.dir, "tuned.out")
        self.out = open(self.out_path, "w")
        env = bus.env()
        env["PATH"] = self.shim_dir + ":" + env.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        script = 'mount --bind "$0" /etc/tuned && mount --make-private /etc/tuned && exec "$@"'
        cmd = ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script, self.etc,
               "/usr/bin/python3", "-Es", TUNED, "--log=" + self.log_path,
               "--pid=" + os.path.join(self.dir, "tuned.pid"), "--profile", start_profile]
        if debug:
            cmd.append("--debug")
        # tuned journals nothing: what it finds is kept, for the next run if this one is killed.
        machine.save_before_tuned(self.dir)
        self.t_spawn = time.monotonic()
        self.proc = subprocess.Popen(cmd, env=env, stdout=self.out, stderr=subprocess.STDOUT)
        self.pid = self.proc.pid
        self.wait_ready()

    def wait_ready(self, timeout=60):
        """Up when its D-Bus name answers and the first profile is applied."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("tuned exited %s:\n%s" % (self.proc.returncode, self.output()))
            if "static tuning from profile" in self.output():
                p = self.adm("active", check=False)
                if p.returncode == 0:
                    self.t_ready = time.monotonic()
                    return
            time.sleep(0.05)
        raise RuntimeError("tuned not ready in %d s:\n%s" % (timeout, self.output()))

    def output(self):
        try:
            with open(self.log_path) as f:
                text = f.read()
        except OSError:
            text = ""
        if not self.out.closed:
            self.out.flush()
        with open(self.out_path) as f:
            return text + f.read()

    def adm(self, *args, check=True):
        p = subprocess.run([TUNED_ADM] + list(args), env=self.bus.env(), capture_output=True, text=True,
                           timeout=120)
        if check and p.returncode != 0:
            raise RuntimeError("tuned-adm %s: rc=%d %s%s" % (args, p.returncode, p.stdout, p.stderr))
        return p

    def running(self):
        return self.proc.poll() is None

    def stop(self):
        """Switches to the empty profile first (a switch always rolls back fully, shim or not), then
        SIGTERM."""
        if self.running():
            try:
                self.adm("profile", "rtctl-bench-empty", check=False)
            except subprocess.TimeoutExpired:
                pass
            stop_process(self.proc, "tuned", timeout=30)
        self.out.close()

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


# ----------------------------------------------------------------------------------------- IRQs

def irq_affinities():
    out = {}
    for d in glob.glob("/proc/irq/[0-9]*"):
        out[int(d.rsplit("/", 1)[1])] = machine.read(d + "/smp_affinity_list")
    return out


def write_irq_affinity(irq, cpus):
    try:
        with open("/proc/irq/%d/smp_affinity_list" % irq, "w") as f:
            f.write(cpus)
        return None
    except OSError as e:
        return e.errno


@contextlib.contextmanager
def irqs_restored():
    """Every IRQ affinity and the default affinity back as they were, whatever happens inside."""
    saved = irq_affinities()
    default = machine.read("/proc/irq/default_smp_affinity")
    try:
        yield saved
    finally:
        for irq, cpus in irq_affinities().items():
            if irq in saved and saved[irq] != cpus:
                err = write_irq_affinity(irq, saved[irq])
                if err:
                    log("could not restore IRQ %d affinity to %s: %s" % (irq, saved[irq], os.strerror(err)))
        if machine.read("/proc/irq/default_smp_affinity") != default:
            with open("/proc/irq/default_smp_affinity", "w") as f:
                f.write(default)


class Irqbalance:
    """irqbalance 1.9 in the foreground. It never puts affinities back: callers wrap it in
    irqs_restored(). Its socket directory /run/irqbalance goes when this made it."""

    def __init__(self, tmp, args=(), debug=False):
        self.had_run_dir = os.path.exists("/run/irqbalance")
        self.out_path = os.path.join(tmp, "irqbalance-%d.out" % int(time.monotonic() * 1000))
        self.out = open(self.out_path, "w")
        cmd = ["irqbalance", "--foreground"] + (["--debug"] if debug else []) + list(args)
        env = dict(os.environ)
        for k in list(env):
            if k.startswith("IRQBALANCE_"):
                del env[k]
        self.t_spawn = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdout=self.out, stderr=subprocess.STDOUT, env=env)
        self.pid = self.proc.pid

    def output(self):
        if not self.out.closed:
            self.out.flush()
        with open(self.out_path) as f:
            return f.read()

    def stop(self):
        stop_process(self.proc, "irqbalance")
        self.out.close()
        if not self.had_run_dir:
            shutil.rmtree("/run/irqbalance", ignore_errors=True)


def write(path, value):
    with open(path, "w") as f:
        f.write(value)


WQ_FILES = "/sys/devices/virtual/workqueue/cpumask", "/sys/devices/virtual/workqueue/*/cpumask"


def guarded_state():
    """What a configuration's revert must leave as it found it: workqueue cpumasks, IRQ affinities, and
    the affinity of IRQ threads (the kernel moves an irq/N thread to its IRQ's new mask when the mask is
    written, so a write and its undo leave a thread that had followed the effective affinity on the
    whole mask)."""
    files = {}
    for pattern in WQ_FILES:
        for f in glob.glob(pattern):
            files[os.path.realpath(f)] = machine.read(f)
    threads = {}
    for key, cpus in task_affinities().items():
        if (proc_comm(key[0]) or "").startswith("irq/"):
            threads[key] = cpus
    return {"files": files, "irqs": irq_affinities(),
            "default": machine.read("/proc/irq/default_smp_affinity"), "irq_threads": threads}


def repair(saved, files=True, irqs=True):
    """Puts back what a configuration left changed; returns what it had left, as evidence. Only for
    what the caller itself changed in between (under the kernel lock): it writes the saved values
    back, whoever changed them. files=False leaves the workqueue cpumasks alone, irqs=False the IRQ
    affinities (IRQ threads are always compared)."""
    left = []
    for path, value in (saved["files"].items() if files else ()):
        now = machine.read(path)
        if now != value:
            left.append("%s: %s -> %s" % (path, value, now))
            try:
                write(path, value)
            except OSError as e:
                left[-1] += " (could not restore: %s)" % e.strerror
    for irq, cpus in (saved["irqs"].items() if irqs else ()):
        now = irq_affinities().get(irq)
        if now is not None and now != cpus:
            left.append("IRQ %d: %s -> %s" % (irq, cpus, now))
            write_irq_affinity(irq, cpus)
    if irqs and machine.read("/proc/irq/default_smp_affinity") != saved["default"]:
        left.append("default_smp_affinity: %s -> %s" % (saved["default"], machine.read("/proc/irq/default_smp_affinity")))
        write("/proc/irq/default_smp_affinity", saved["default"])
    time.sleep(0.1)  # an IRQ thread takes a new mask when it next runs; it is woken for that at once
    now = task_affinities()
    for key, cpus in saved["irq_threads"].items():
        if key in now and now[key] != cpus:
            left.append("thread %s: %s -> %s" % (proc_comm(key[0]), cpus, now[key]))
            try:
                os.sched_setaffinity(key[0], parse_cpulist(cpus))
            except OSError as e:
                left[-1] += " (could not restore: %s)" % e.strerror
    return left


# ----------------------------------------------------------------------------------------- devices

def bench_loop(n):
    if not BENCH_LOOP_BASE <= n < BENCH_LOOP_BASE + 100:
        raise ValueError("loop%d is not a bench device (300-399)" % n)
    return machine.add_loop(n)


def remove_bench_loops():
    for d in os.listdir("/sys/block"):
        if re.match(r"loop3\d\d$", d):
            machine.remove_loop(d)


def sched(name):
    return machine.active_choice(machine.read("/sys/block/%s/queue/scheduler" % name))
