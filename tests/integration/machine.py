"""Helpers that touch the real kernel: snapshots of everything rtctl can change, and devices the tests
make and remove themselves. Never touches devices the test did not make, never offlines cpu0."""
import collections
import contextlib
import errno
import fcntl
import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

LOOP_CTL_ADD = 0x4C80
LOOP_CTL_REMOVE = 0x4C81
# Loop numbers the tests own; test profiles match only these names (loop2NN).
TEST_LOOP_BASE = 200

SYSCTLS = [
    "kernel/sched_rt_runtime_us",
    "kernel/timer_migration",
    "kernel/nmi_watchdog",
    "kernel/watchdog_cpumask",
    "kernel/sched_rt_period_us",
    "kernel/hung_task_timeout_secs",
    "kernel/numa_balancing",
    "vm/stat_interval",
]

DEBUGFS = "/sys/kernel/debug"
# The knobs under debugfs' sched/ that a [Scheduler] section can write, on EEVDF and CFS kernels.
SCHED_KNOBS = [
    "base_slice_ns", "latency_ns", "min_granularity_ns", "wakeup_granularity_ns", "migration_cost_ns",
    "nr_migrate", "features",
]


def read(path, default=None):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return default


def active_choice(line):
    m = re.search(r"\[([^\]]+)\]", line or "")
    return m.group(1) if m else line


class IrqThreadCpus(collections.namedtuple("IrqThreadCpus", "cpus irq_effective")):
    """An IRQ thread's CPUs, which are the kernel's to set: when the thread runs after its IRQ moved, the
    kernel puts it on the IRQ's effective CPUs (and only then: an ACPI:Ged thread may never run again).
    So the thread is as the module found it when its CPUs are unchanged, or when the kernel has put it
    with its IRQ since; any other CPUs are a change someone else made."""

    def same_as(self, before):
        return self.cpus == before.cpus or self.cpus == self.irq_effective


def irq_thread_irq(comm):
    m = re.match(r"irq/(\d+)-", comm)
    return int(m.group(1)) if m else None


def irq_threads():
    """pid -> IRQ number of every IRQ thread."""
    out = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        st = read(stat)
        if st and "(irq/" in st and int(st.rsplit(")", 1)[1].split()[6]) & PF_KTHREAD:
            irq = irq_thread_irq(st[st.index("(") + 1:st.rindex(")")])
            if irq is not None:
                out[int(stat.split("/")[2])] = irq
    return out


def spread_irqs_like_boot(settle=3.0):
    """Leaves the IRQs as a freshly booted machine has them: each mask as it was, but the effective
    affinity of every IRQ that fired since on the last CPU of its mask, not on cpu0 where earlier runs
    leave them. A move waits for the IRQ's next interrupt, so each is pointed at that CPU alone for
    `settle` seconds, then given its mask back. Returns the IRQs whose effective affinity moved."""
    online = read("/sys/devices/system/cpu/online") or "0"
    masks = {}
    for d in sorted(glob.glob("/proc/irq/[0-9]*")):
        mask = read(d + "/smp_affinity_list")
        last = mask.replace("-", ",").split(",")[-1] if mask else None
        if not last or last == "0" or online == "0":
            continue
        try:
            with open(d + "/smp_affinity_list", "w") as f:
                f.write(last)
        except OSError:
            continue  # kernel-managed, or no handler: the kernel keeps those where it put them
        masks[d] = (mask, read(d + "/effective_affinity_list"))
    time.sleep(settle)
    moved = []
    for d, (mask, before) in masks.items():
        if read(d + "/effective_affinity_list") != before:
            moved.append(os.path.basename(d))
        with open(d + "/smp_affinity_list", "w") as f:
            f.write(mask)
    return moved


TRACEFS = "/sys/kernel/tracing"


def tracefs_state():
    """tracefs mounted or not, and its instances (global in the kernel, seen through a mount made in a
    private mount namespace when nothing has tracefs mounted): rtctld's Threads=realtime makes one."""
    s = {"tracefs": "mounted" if os.path.ismount(TRACEFS) else "not mounted"}
    p = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                        "mount -t tracefs nodev %s 2>/dev/null; ls %s/instances" % (TRACEFS, TRACEFS)],
                       capture_output=True, text=True)
    s["tracefs instances"] = " ".join(sorted(p.stdout.split())) if p.returncode == 0 else "unreadable"
    return s


def owner_is_root(path):
    try:
        return os.lstat(path).st_uid == 0
    except FileNotFoundError:
        return False


def jack_shm():
    """Root's JACK shared memory in /dev/shm: jackd2 leaves its registry there even when it ends
    cleanly, so a test that runs jackd takes this before and removes what it made after
    (remove_jack_shm_since)."""
    return {f for f in os.listdir("/dev/shm") if f.startswith("jack") and owner_is_root("/dev/shm/" + f)}


def remove_jack_shm_since(before):
    for f in jack_shm() - before:
        subprocess.run(["rm", "-rf", os.path.join("/dev/shm", f)])


def snapshot():
    """What rtctl can touch, as a dict of path -> value. Equal before and after a test module, or the
    module left something behind."""
    s = {}
    for d in sorted(glob.glob("/proc/irq/[0-9]*")):
        s[d + "/smp_affinity_list"] = read(d + "/smp_affinity_list")
    s["/proc/irq/default_smp_affinity"] = read("/proc/irq/default_smp_affinity")
    for f in sorted(glob.glob("/sys/devices/system/cpu/cpu[0-9]*/cpuidle/state*/disable")):
        s[f] = read(f)
    for f in sorted(glob.glob("/sys/devices/system/cpu/cpu[0-9]*/power/pm_qos_resume_latency_us")):
        s[f] = read(f)
    s["/sys/devices/system/cpu/online"] = read("/sys/devices/system/cpu/online")
    # Where unbound kernel workers may run (rtctld's KernelThreads=, tuned's isolated_cores).
    for f in ["/sys/devices/virtual/workqueue/cpumask"] + sorted(glob.glob("/sys/bus/workqueue/devices/*/cpumask")):
        v = read(f)
        if v is not None:
            s[f] = v
    for dev in sorted(glob.glob("/sys/block/*")):
        q = dev + "/queue/"
        if not os.path.exists(q + "scheduler"):
            s[dev] = "present (no scheduler)"
            continue
        s[q + "scheduler"] = active_choice(read(q + "scheduler"))
        for attr in ("read_ahead_kb", "nr_requests"):
            s[q + attr] = read(q + attr)
        for f in sorted(glob.glob(q + "iosched/*")):
            s[f] = read(f)
    for root in ("/sys/fs/cgroup/cpuset", "/sys/fs/cgroup/unified", "/sys/fs/cgroup"):
        for d in sorted(glob.glob(root + "/*")):
            name = os.path.basename(d)
            if os.path.isdir(d) and re.search(r"rtctl|housekeeping|isolated", name):
                s[d] = "cgroup"
    for k in SYSCTLS:
        v = read("/proc/sys/" + k)
        if v is not None:
            s["/proc/sys/" + k] = v
    # debugfs mounted or not (a test that mounts it unmounts it), and the scheduler's knobs where the
    # kernel lets them be read (lockdown refuses every debugfs read: nothing rtctl could change then).
    s["debugfs"] = "mounted" if os.path.ismount(DEBUGFS) else "not mounted"
    # Root's only: a desktop user's JACK may come and go meanwhile.
    s["/dev/shm jack*"] = " ".join(sorted(jack_shm()))
    s.update(tracefs_state())
    for k in SCHED_KNOBS:
        v = read(DEBUGFS + "/sched/" + k)
        if v is not None:
            s[DEBUGFS + "/sched/" + k] = v
    for stat in glob.glob("/proc/[0-9]*/stat"):
        st = read(stat)
        if not st:
            continue
        fields = st.rsplit(")", 1)[1].split()
        comm = st[st.index("(") + 1:st.rindex(")")]
        pid = stat.split("/")[2]
        if "(irq/" in st:
            s["irqthread " + comm] = "policy %s prio %s" % (fields[38], fields[37])
        # Every task's CPUs and cpuset, keyed by PID and start time (PIDs are reused).
        task = "task %s@%s (%s)" % (pid, fields[19], comm)
        where = live_thread(pid, fields[0])
        if where is None:
            continue
        status = read("%s/status" % where) or ""
        irq = irq_thread_irq(comm) if int(fields[6]) & PF_KTHREAD else None
        for line in status.splitlines():
            if line.startswith("Cpus_allowed_list:"):
                cpus = line.split(":", 1)[1].strip()
                if irq is not None:
                    cpus = IrqThreadCpus(cpus, read("/proc/irq/%d/effective_affinity_list" % irq))
                s[task + " cpus"] = cpus
        cs = read("%s/cpuset" % where)
        if cs is not None:
            s[task + " cpuset"] = cs
    return s


def live_thread(pid, state):
    """Where a process's CPUs and cpuset are read: its own /proc directory, or one of its live threads
    when its leader has exited before them (the leader stays listed, a zombie); None when the whole
    process has ended and only its parent's wait is left. The kernel moves no exiting task (a write of
    its PID into a cgroup succeeds and leaves it where it was), and an emptied cgroup goes away under a
    zombie, whose cpuset file still names it: what it says is not a place anything runs."""
    if state not in ("Z", "X"):
        return "/proc/%s" % pid
    try:
        tids = os.listdir("/proc/%s/task" % pid)
    except OSError:
        return None
    for tid in tids:
        st = read("/proc/%s/task/%s/stat" % (pid, tid))
        if st and st.rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
            return "/proc/%s/task/%s" % (pid, tid)
    return None


def diff(before, after):
    """What differs. Tasks that started or ended in between (a zombie has ended) are not differences."""
    lines = []
    for k in sorted(set(before) | set(after)):
        if k.startswith("task ") and (k not in before or k not in after):
            continue
        if isinstance(after.get(k), IrqThreadCpus) and after[k].same_as(before[k]):
            continue
        if before.get(k) != after.get(k):
            lines.append("%s: %r -> %r%s" % (k, before.get(k), after.get(k), task_now(k)))
    return lines


def task_now(key):
    """For a task's line: what the process is now (state, parent, flags, command line), so that a task
    left behind on a busy machine says whose it is."""
    if not key.startswith("task "):
        return ""
    pid = key.split()[1].split("@")[0]
    try:
        with open("/proc/%s/cmdline" % pid, "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()[:160]
    except OSError:
        cmd = ""
    st = read("/proc/%s/stat" % pid)
    if not st:
        return " (gone now)"
    fields = st.rsplit(")", 1)[1].split()
    return " (now: state %s, ppid %s, flags %#x, threads %s: %s)" % (fields[0], fields[1], int(fields[6]),
                                                                   fields[17], cmd)


def task_cpus(pid):
    for line in (read("/proc/%d/status" % pid) or "").splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    return None


PF_EXITING = 0x00000004
PF_KTHREAD = 0x00200000
PF_NO_SETAFFINITY = 0x04000000


def is_kthread(pid):
    """Whether PID is a kernel thread now (False once it is gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[6]) & PF_KTHREAD != 0
    except (OSError, IndexError, ValueError):
        return False


def task_flags(pid):
    st = read("/proc/%d/stat" % pid)
    return int(st.rsplit(")", 1)[1].split()[6]) if st else None


def last_cpu(pid):
    st = read("/proc/%d/stat" % pid)
    return int(st.rsplit(")", 1)[1].split()[36]) if st else None


def task_state(pid):
    """The state letter of /proc/PID/stat (R, S, D, T, Z...), None once the process is gone."""
    st = read("/proc/%d/stat" % pid)
    return st.rsplit(")", 1)[1].split()[0] if st else None


NETLINK_CONNECTOR = 11


def proc_connector_socket(pid):
    """The inode of process pid's proc connector socket (NETLINK_CONNECTOR), found in /proc/net/netlink
    through its fds."""
    inodes = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[len("socket:["):-1])
    with open("/proc/net/netlink") as f:
        for line in f.readlines()[1:]:
            cols = line.split()
            if int(cols[1]) == NETLINK_CONNECTOR and cols[9] in inodes:
                return cols[9]
    raise AssertionError("process %d has no proc connector socket" % pid)


def netlink_queue(inode):
    """(bytes queued, messages dropped) of a netlink socket, as the kernel counts them."""
    with open("/proc/net/netlink") as f:
        for line in f.readlines()[1:]:
            cols = line.split()
            if cols[9] == inode:
                return int(cols[4]), int(cols[8])
    raise AssertionError("the netlink socket %s is gone" % inode)


def cpu_busy_ticks():
    """user+nice+system+irq+softirq ticks per CPU from /proc/stat."""
    out = {}
    for line in open("/proc/stat"):
        if line.startswith("cpu") and line[3].isdigit():
            f = line.split()
            out[int(f[0][3:])] = sum(int(x) for x in (f[1], f[2], f[3], f[6], f[7]))
    return out


def _loop_ctl(op, n):
    fd = os.open("/dev/loop-control", os.O_RDWR | os.O_CLOEXEC)
    try:
        return fcntl.ioctl(fd, op, n)
    finally:
        os.close(fd)


def remove_stale_test_loops():
    """Loop devices in the tests' own number range (TEST_LOOP_BASE on) that nothing is bound to: what a
    test run that was killed before its cleanup left. Profiles of the tests match loop2*, so one left
    over would join every later test's devices. Removed; their names returned."""
    gone = []
    for n in range(TEST_LOOP_BASE, TEST_LOOP_BASE + 100):
        name = "loop%d" % n
        if os.path.exists("/sys/block/%s" % name) and not os.path.exists("/sys/block/%s/loop/backing_file" % name):
            remove_loop(name)
            gone.append(name)
    return gone


def free_test_loop_number():
    for n in range(TEST_LOOP_BASE, TEST_LOOP_BASE + 100):
        if not os.path.exists("/sys/block/loop%d" % n):
            return n
    raise RuntimeError("no free test loop number")


def add_loop(n=None):
    """Makes loop device N through /dev/loop-control, which sends a real 'add' uevent."""
    if n is None:
        n = free_test_loop_number()
    _loop_ctl(LOOP_CTL_ADD, n)
    name = "loop%d" % n
    deadline = time.monotonic() + 5
    while not os.path.exists("/sys/block/%s/queue/scheduler" % name):
        if time.monotonic() > deadline:
            raise RuntimeError(name + " did not appear")
        time.sleep(0.01)
    return name


def remove_loop(name):
    n = int(name[4:])
    for _ in range(100):
        try:
            _loop_ctl(LOOP_CTL_REMOVE, n)
            return
        except OSError as e:
            if e.errno == errno.ENODEV or e.errno == errno.ENXIO:
                return
            if e.errno != errno.EBUSY:
                raise
            time.sleep(0.05)
    raise RuntimeError("could not remove " + name)


@contextlib.contextmanager
def loop_devices(count):
    names = []
    try:
        for _ in range(count):
            names.append(add_loop())
        yield names
    finally:
        for n in names:
            remove_loop(n)


def zram_available():
    return os.path.exists("/sys/class/zram-control/hot_add")


@contextlib.contextmanager
def zram_device():
    """A zram device: bio-based, so it has no queue/scheduler file at all."""
    with open("/sys/class/zram-control/hot_add") as f:
        n = int(f.read().strip())
    name = "zram%d" % n
    try:
        yield name
    finally:
        for _ in range(50):
            try:
                with open("/sys/class/zram-control/hot_remove", "w") as f:
                    f.write(str(n))
                break
            except OSError as e:
                if e.errno != errno.EBUSY:
                    raise
                time.sleep(0.05)


@contextlib.contextmanager
def process_named(name, directory):
    """A harmless process whose comm is name (a copy of sleep), killed afterwards: what a rival service
    such as irqbalance or tuned looks like to rtctld's detection."""
    exe = os.path.join(str(directory), name)
    shutil.copy("/bin/sleep", exe)
    proc = subprocess.Popen([exe, "60"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


CPU1_ONLINE = "/sys/devices/system/cpu/cpu1/online"


def set_cpu1(online):
    with open(CPU1_ONLINE, "w") as f:
        f.write("1" if online else "0")


@contextlib.contextmanager
def cpu1_hotplug_guard():
    """Whatever happens inside, cpu1 is online again afterwards (cpu0 is never touched)."""
    try:
        yield
    finally:
        if read(CPU1_ONLINE) != "1":
            set_cpu1(True)


class UeventListener:
    """Kernel uevents with the time they arrived (CLOCK_MONOTONIC)."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, 15)  # NETLINK_KOBJECT_UEVENT
        self.sock.bind((0, 1))
        self.sock.settimeout(0.05)

    def wait_for(self, action, devpath_suffix, timeout=60.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            now = time.monotonic()
            parts = data.split(b"\0")
            head = parts[0].decode(errors="replace")
            if head.startswith(action + "@") and head.endswith(devpath_suffix):
                return now
        raise TimeoutError("no %s uevent for %s" % (action, devpath_suffix))

    def close(self):
        self.sock.close()


def run_tmp():
    """Where a benchmark's daemon keeps its runtime directory: a tmpfs, as /run is for rtctld.service
    (RuntimeDirectory=), so that its journal writes cost what they cost there and not an ext4 create
    and rename (5 ms of a 30 ms hotplug pass here). /dev/shm is a tmpfs on every Linux system; the
    temporary directory where it is not."""
    with open("/proc/self/mounts") as f:
        if any(line.split()[1:3] == ["/dev/shm", "tmpfs"] for line in f):
            return "/dev/shm"
    return tempfile.gettempdir()


def _leftover_tops(tmp=None):
    """Where killed runs leave their top directories: tmp if given, else the temporary directory and
    run_tmp()."""
    return [tmp] if tmp else sorted({tempfile.gettempdir(), run_tmp()})


def _excluded(path, exclude):
    return any(os.path.commonpath([path, x]) == x for x in exclude)


def leftover_runs(tmp=None):
    """Runtime directories of test and bench daemons whose run was killed before its cleanup: they
    still hold a journal (or a tracefs record), and the machine still holds what it names. Every
    run's top directory is named rtctl-* (rtctl-test-, rtctl-xruns-, rtctl-latency-, ...): naming
    each prefix here missed the ones added later, and a bench killed mid-run then left cpu1 isolated
    for every run after it."""
    runs = []
    for top in _leftover_tops(tmp):
        for run in sorted(glob.glob(os.path.join(top, "rtctl-*", "env-*", "run"))):
            if any(os.path.exists(os.path.join(run, f)) for f in ("journal.json", "tracefs.json")):
                runs.append(run)
    return runs


def _pids_with(what, item):
    """PIDs whose /proc/PID/what (environ or cmdline) has item as one of its strings."""
    key = item.encode()
    pids = []
    for path in glob.glob("/proc/[0-9]*/" + what):
        try:
            with open(path, "rb") as f:
                if key in f.read().split(b"\0"):
                    pids.append(int(path.split("/")[2]))
        except OSError:
            continue
    return pids


def _kill_left_running(find):
    """Kills the PIDs find() names (a killed run's processes, left running) and waits until find()
    names none (a killed process's environ and cmdline read empty once it is a zombie). Returns the
    PIDs killed."""
    killed = []
    for pid in find():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
    for _ in range(100):
        if not find():
            break
        time.sleep(0.05)
    return killed


def _processes_of(run):
    """PIDs whose environment names `run` as their runtime directory: an rtctld (or rtctl) an interrupted
    run left running when it was killed."""
    return _pids_with("environ", "RUNTIME_DIRECTORY=" + run)


def _json_or_why(path):
    try:
        with open(path) as f:
            return json.load(f), None
    except (OSError, ValueError) as e:
        return None, e


def restore_leftovers(rtctl, tmp=None, exclude=()):
    """Puts back what the daemons of an interrupted earlier run left on this machine, with the product's
    own crash recovery: for each leftover runtime directory, its processes are killed, then `rtctl restore`
    replays its journal with the environment the daemon had (env.json, written by harness.Env). The
    run's directory goes once the restore succeeded. Before them, a killed bench's tuned
    (restore_tuned_leftovers); after them, the runs' private buses. The caller holds the kernel lock,
    so no live run owns these. Returns one line per leftover: what was done, or why it was not."""
    report = restore_tuned_leftovers(tmp, exclude)
    for run in leftover_runs(tmp):
        top = os.path.dirname(os.path.dirname(run))
        if _excluded(top, exclude):
            continue
        e, err = _json_or_why(os.path.join(os.path.dirname(run), "env.json"))
        if err:
            report.append("%s: not restored: no record of its environment (%s)" % (run, err))
            continue
        for pid in _kill_left_running(lambda: _processes_of(run)):
            report.append("%s: killed PID %d, left running" % (run, pid))
        p = subprocess.run([rtctl, "restore"], env=e, capture_output=True, text=True, timeout=300)
        said = (p.stdout + p.stderr).strip().replace("\n", " / ")
        if p.returncode == 0:
            shutil.rmtree(top, ignore_errors=True)
            report.append("%s: %s" % (run, said))
        else:
            report.append("%s: rtctl restore failed (%d): %s" % (run, p.returncode, said))
    report.extend(_stop_leftover_buses(tmp, exclude))
    return report


def _stop_leftover_buses(tmp=None, exclude=()):
    """The private dbus-daemons (harness.Bus: TOP/rtctl-bus-*/bus.conf) of killed runs, still running:
    nothing of a live run, as the caller holds the kernel lock and exclude names its own directories."""
    report = []
    for top in _leftover_tops(tmp):
        for conf in sorted(glob.glob(os.path.join(top, "rtctl-*", "rtctl-bus-*", "bus.conf"))):
            run_top = os.path.dirname(os.path.dirname(conf))
            if _excluded(run_top, exclude):
                continue
            for pid in _kill_left_running(lambda: _pids_with("cmdline", "--config-file=" + conf)):
                report.append("%s: stopped its bus, PID %d, left running" % (run_top, pid))
    return report


TUNED_BEFORE = "before.json"


def save_before_tuned(directory):
    """Called by a bench before it starts tuned in directory (bench/rivals.py): the machine as tuned
    finds it, so that a run killed with tuned running can be put back (restore_tuned_leftovers). tuned
    journals nothing: its isolated_cores pins every task with sched_setaffinity, which no later cpuset
    move undoes, and a tuned killed with its bench leaves every process of the machine on cpu0."""
    s = {k: (v.cpus if isinstance(v, IrqThreadCpus) else v) for k, v in snapshot().items()}
    with open(os.path.join(directory, TUNED_BEFORE + ".tmp"), "w") as f:
        json.dump(s, f)
    os.rename(os.path.join(directory, TUNED_BEFORE + ".tmp"), os.path.join(directory, TUNED_BEFORE))


def parse_cpulist(text):
    """A kernel CPU list ("0-2,5") as a set of CPU numbers; empty for None or ""."""
    cpus = set()
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        a, _, b = part.partition("-")
        cpus.update(range(int(a), int(b or a) + 1))
    return cpus


def _put_back_before(before):
    """What differs from before, put back where it can be: tasks' CPUs (every thread of a process still
    running with the same start time), IRQ affinities, sysctls, C-states and PM QoS, the unbound
    workqueues' CPUs, block queues. Returns how many values were put back and the ones that could not
    be."""
    now = snapshot()
    done, failed = 0, []
    for key, was in sorted(before.items()):
        cur = now.get(key)
        cur = cur.cpus if isinstance(cur, IrqThreadCpus) else cur
        if cur is None or cur == was:
            continue
        try:
            if key.startswith("task ") and key.endswith(" cpus"):
                pid = key.split()[1].split("@")[0]
                for tid in os.listdir("/proc/%s/task" % pid):
                    with contextlib.suppress(OSError):
                        os.sched_setaffinity(int(tid), parse_cpulist(was))
            elif key.startswith(("/proc/irq/", "/proc/sys/", "/sys/devices/system/cpu/cpu", "/sys/block/",
                                 "/sys/devices/virtual/workqueue/", "/sys/bus/workqueue/")):
                with open(key, "w") as f:
                    f.write(was)
            else:
                continue
            done += 1
        except (OSError, ValueError) as e:
            failed.append("%s (%s)" % (key, e))
    return done, failed


def restore_tuned_leftovers(tmp=None, exclude=()):
    """A bench killed while its tuned ran (rtctl-*/tuned-*/ with the state save_before_tuned() wrote):
    that tuned is killed if it still runs, and what differs from the saved state is put back. Returns
    one line per leftover."""
    report = []
    for top in _leftover_tops(tmp):
        for saved in sorted(glob.glob(os.path.join(top, "rtctl-*", "tuned-*", TUNED_BEFORE))):
            d = os.path.dirname(saved)
            if _excluded(d, exclude):
                continue
            pid_arg = "--pid=" + os.path.join(d, "tuned.pid")
            said = ["killed its tuned, PID %d, left running" % pid
                    for pid in _kill_left_running(lambda: _pids_with("cmdline", pid_arg))]
            before, err = _json_or_why(saved)
            if err:
                report.append("%s: not put back: its saved state is unreadable (%s)" % (d, err))
                continue
            done, failed = _put_back_before(before)
            said.append("%d values put back as they were before its tuned started" % done)
            if failed:
                said.append("could not put back: " + ", ".join(failed))
            else:
                shutil.rmtree(d, ignore_errors=True)
            report.append("%s: %s" % (d, "; ".join(said)))
    return report


KERNEL_LOCK = "/run/rtctl-kernel.lock"


def _inherited_kernel_lock():
    """An fd on the lock file this process inherited (`flock /run/rtctl-kernel.lock bench/...`): it
    holds the lock already, as the same open file description."""
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            if os.readlink("/proc/self/fd/" + fd) == KERNEL_LOCK:
                return int(fd)
    return None


@contextlib.contextmanager
def kernel_lock(use=True, rtctl=None, say=print, exclude=()):
    """The machine-wide lock every kernel-changing command takes, held for the block. Taken both ways:
    inherited from flock(1), or taken here. Once it is held and rtctl is given, what the daemons of an
    interrupted earlier run left on the machine is put back (restore_leftovers) before the caller
    measures anything against it: a bench killed mid-run otherwise leaves cpu1 isolated for every
    run after it (exclude: top directories of this run's own live daemons). use=False (a caller that
    knows it runs alone) takes nothing and puts nothing back."""
    if not use:
        yield
        return
    fd = _inherited_kernel_lock()
    owned = fd is None
    if owned:
        fd = os.open(KERNEL_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        t0 = time.monotonic()
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if int(time.monotonic() - t0) % 30 == 0:
                    say("kernel lock: waiting for %s (someone else is changing the kernel)" % KERNEL_LOCK)
                time.sleep(1)
        if owned:
            say("kernel lock: taken after %.1f s" % (time.monotonic() - t0))
        else:
            say("kernel lock: held (inherited from flock)")
        if rtctl:
            for line in restore_leftovers(rtctl, exclude=exclude):
                say("kernel lock: an interrupted earlier run left changes: %s" % line)
        yield
    finally:
        if owned:
            os.close(fd)


def online_cpu1_left_offline():
    """A freshly booted machine has cpu1 online; a run killed inside a hotplug test leaves it offline."""
    if os.path.exists(CPU1_ONLINE) and read(CPU1_ONLINE) == "0":
        set_cpu1(True)
        return True
    return False


def interruptible():
    """SIGINT raises KeyboardInterrupt again, so that a benchmark's cleanups run (cpu1 back online, cpusets
    removed, tuned stopped) when bench/smoke's timeout stops it with SIGINT. A script started in the
    background of a non-interactive shell (CI's `nohup ... &`) inherits SIGINT ignored, and Python then
    leaves it ignored: the timeout's SIGKILL 30 s later would end it with the machine changed."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
