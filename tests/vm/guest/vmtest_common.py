"""The VM tier's guest side: what every test module uses. The console and host channel, the
helpers, D-Bus, the session user's agent, the kernel state snapshot and the @test registry."""

import glob
import json
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import time


BUS_NAME = "org.rtctl.Manager1"
OBJ_PATH = "/org/rtctl/Manager1"
IFACE = "org.rtctl.Manager1"
ERR_NOT_AUTHORIZED = "org.rtctl.Error.NotAuthorized"
ERR_NO_SUCH_PROFILE = "org.rtctl.Error.NoSuchProfile"
ERR_INVALID_ARGUMENT = "org.rtctl.Error.InvalidArgument"
TEST_PROFILE = "vmtest"
TEST_USER = "tester"
UNIT = "rtctld.service"
RTCTL = "/usr/bin/rtctl"
RTCTLD = "/usr/sbin/rtctld"
CONSOLE = "/dev/ttyS0"
TEST_TIMEOUT = 90  # seconds, per test
# the runner beside this module: call_as_user() starts it as a helper
RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rtctl-vmtest.py")


# --------------------------------------------------------------------------
# output


class Console:
    def __init__(self):
        try:
            self.fd = os.open(CONSOLE, os.O_WRONLY | os.O_NOCTTY)
        except OSError:
            self.fd = None

    def line(self, text):
        text = text.replace("\n", " ").replace("\r", " ")
        data = (text + "\n").encode("utf-8", "replace")
        # one write() per line: the line reaches the UART in one piece
        if self.fd is not None:
            try:
                os.write(self.fd, data)
            except OSError:
                pass
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


con = Console()


class Fail(Exception):
    pass


class Skip(Exception):
    pass


class TestTimeout(Exception):
    pass


def check(cond, reason):
    if not cond:
        raise Fail(reason)


# --------------------------------------------------------------------------
# host channel


class Host:
    """VMHOST requests to the host over the `vmhost` virtio-serial port."""

    def __init__(self):
        self.fd = None
        self.buf = b""
        self.seq = 0

    def _path(self):
        if os.path.exists("/dev/virtio-ports/vmhost"):
            return "/dev/virtio-ports/vmhost"
        for name in glob.glob("/sys/class/virtio-ports/*/name"):
            try:
                with open(name) as f:
                    if f.read().strip() == "vmhost":
                        return "/dev/" + name.split("/")[-2]
            except OSError:
                pass
        return None

    def open(self, timeout=20):
        deadline = time.monotonic() + timeout
        while self.fd is None:
            path = self._path()
            if path:
                self.fd = os.open(path, os.O_RDWR | os.O_NONBLOCK | os.O_NOCTTY)
                break
            if time.monotonic() > deadline:
                raise Fail("no vmhost virtio-serial port (/dev/virtio-ports/vmhost)")
            subprocess.run(["modprobe", "virtio_console"], capture_output=True)
            time.sleep(0.2)

    def call(self, command, timeout=60):
        """Send one request; return the OK text, raise Fail on ERR/timeout."""
        self.open()
        self.seq += 1
        seq = self.seq
        req = "VMHOST %d %s" % (seq, command)
        con.line(req)
        data = (req + "\n").encode()
        deadline = time.monotonic() + timeout
        while data:
            try:
                n = os.write(self.fd, data)
                data = data[n:]
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise Fail("vmhost: cannot send %r (host not reading)" % command)
                select.select([], [self.fd], [], 0.5)
        while True:
            while b"\n" in self.buf:
                raw, self.buf = self.buf.split(b"\n", 1)
                m = re.match(r"VMHOSTACK (\d+) (OK|ERR) ?(.*)$", raw.decode("utf-8", "replace").strip())
                if not m or int(m.group(1)) != seq:
                    continue  # stale or noise
                if m.group(2) == "OK":
                    return m.group(3)
                raise Fail("host could not %s: %s" % (command, m.group(3)))
            left = deadline - time.monotonic()
            if left <= 0:
                raise Fail("vmhost: no answer to %r in %d s" % (command, timeout))
            r, _, _ = select.select([self.fd], [], [], min(left, 1.0))
            if r:
                try:
                    chunk = os.read(self.fd, 4096)
                except BlockingIOError:
                    chunk = b""
                if chunk:
                    self.buf += chunk
                else:
                    time.sleep(0.1)  # host side not connected: EOF until it is


host = Host()


# --------------------------------------------------------------------------
# helpers


def run(cmd, timeout=60, user=None, check_rc=False, env=None):
    if isinstance(cmd, str):
        cmd = shlex.split(cmd)
    if user:
        cmd = ["setpriv", "--reuid", user, "--regid", user, "--clear-groups", "--reset-env"] + cmd
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise Fail("%s: no exit in %d s" % (" ".join(cmd), timeout))
    except FileNotFoundError:
        raise Fail("%s: not found" % cmd[0])
    if check_rc and p.returncode != 0:
        raise Fail("%s exited %d: %s" % (" ".join(cmd), p.returncode, (p.stderr or p.stdout).strip()[-300:]))
    return p


def read(path, default=None):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return default


def write(path, value):
    with open(path, "w") as f:
        f.write(value)


def wait_for(pred, timeout, interval=0.1):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            return v
        time.sleep(interval)


def settle(timeout=30):
    run(["udevadm", "settle", "--timeout=%d" % timeout], timeout=timeout + 5)


def active_scheduler(dev):
    s = read("/sys/block/%s/queue/scheduler" % dev)
    if s is None:
        return None
    m = re.search(r"\[([^\]]+)\]", s)
    return m.group(1) if m else s  # "none" alone has no brackets on some kernels


def disk_by_serial(serial):
    for p in glob.glob("/sys/block/*/serial"):
        if read(p) == serial:
            return p.split("/")[3]
    return None


def cpu_ids():
    return sorted(int(m.group(1)) for m in
                  (re.match(r".*/cpu(\d+)$", p) for p in glob.glob("/sys/devices/system/cpu/cpu[0-9]*")) if m)


def unit_prop(unit, *props):
    p = run(["systemctl", "show", unit] + ["-p" + x for x in props])
    out = {}
    for line in p.stdout.splitlines():
        k, _, v = line.partition("=")
        out[k] = v
    return out


def journal(unit, lines=25, since=None):
    """The unit's last `lines` journal lines; with since (a time.time()), only those from then on."""
    p = run(["journalctl", "-u", unit, "-n", str(lines), "--no-pager", "-o", "short-monotonic"] +
            (["--since", "@%d" % int(since)] if since else []), timeout=20)
    return p.stdout.splitlines()


def rtctld_installed():
    return os.path.exists("/usr/lib/systemd/system/" + UNIT) or os.path.exists("/etc/systemd/system/" + UNIT)


def require_rtctld():
    if not os.path.exists(RTCTLD):
        raise Fail("rtctld is not installed (no %s in the image; built with --no-rtctl or no meson install)" % RTCTLD)
    if not rtctld_installed():
        raise Fail("%s is not installed (no /usr/lib/systemd/system/%s)" % (UNIT, UNIT))
    st = unit_prop(UNIT, "ActiveState")
    if st.get("ActiveState") != "active":
        raise Fail("rtctld is not running (ActiveState=%s)" % st.get("ActiveState"))


def cpus_of(pid):
    for line in (read("/proc/%d/status" % pid) or "").splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    return None


def cgroup_of(pid):
    for line in (read("/proc/%d/cgroup" % pid) or "").splitlines():
        if line.startswith("0::"):
            return line[3:]
    return None


def cpu_set(s):
    """'0-2,4-5' or systemctl's '0-2 4-5' as a set of CPU numbers."""
    out = set()
    for item in (s or "").replace(" ", ",").split(","):
        if item:
            lo, _, hi = item.partition("-")
            out.update(range(int(lo), int(hi or lo) + 1))
    return out


def online_cpus():
    return cpu_set(read("/sys/devices/system/cpu/online"))


def read_file(path):
    return read(path, "") or ""


# --------------------------------------------------------------------------
# D-Bus


def dbus_mod():
    try:
        import dbus
    except ImportError as e:
        raise Fail("python3-dbus missing in the image: %s" % e)
    return dbus


def manager(bus=None):
    dbus = dbus_mod()
    bus = bus or dbus.SystemBus()
    obj = bus.get_object(BUS_NAME, OBJ_PATH, introspect=False)
    return dbus.Interface(obj, IFACE), dbus.Interface(obj, "org.freedesktop.DBus.Properties")


def call(method, *args, timeout=60):
    """Call a manager method as this process; return (result, error_name, message)."""
    dbus = dbus_mod()
    mgr, _ = manager()
    try:
        r = getattr(mgr, method)(*args, timeout=timeout)
        return plain(r), None, None
    except dbus.exceptions.DBusException as e:
        return None, e.get_dbus_name(), e.get_dbus_message()


def plain(v):
    """dbus-python values to plain Python (JSON-able)."""
    dbus = dbus_mod()
    if isinstance(v, (dbus.Struct, tuple, list, dbus.Array)):
        return [plain(x) for x in v]
    if isinstance(v, (dict, dbus.Dictionary)):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, dbus.Boolean):
        return bool(v)
    if isinstance(v, (int, dbus.Byte, dbus.Int16, dbus.Int32, dbus.Int64, dbus.UInt16, dbus.UInt32, dbus.UInt64)):
        return int(v)
    if isinstance(v, (float, dbus.Double)):
        return float(v)
    if isinstance(v, (str, dbus.String, dbus.ObjectPath, dbus.Signature)):
        return str(v)
    return v


def call_as_user(user, method, *args):
    """Run one method call as `user` in a fresh process: {'result'|'error', 'message'}."""
    p = run([sys.executable, RUNNER, "--call-as-user-helper", method] + list(args),
            user=user, timeout=60)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise Fail("call as %s failed: rc=%d %s" % (user, p.returncode, (p.stderr or p.stdout).strip()[-300:]))


def typed_arg(a):
    """A helper's argument: 'u:N' is a UInt32, 'h:PID' a pidfd of process PID, anything else a string."""
    dbus = dbus_mod()
    if a.startswith("u:"):
        return dbus.UInt32(int(a[2:]))
    if a.startswith("h:"):
        return dbus.types.UnixFd(os.pidfd_open(int(a[2:])))
    return a


def helper_main(method, args):
    try:
        if method == "Get":
            _, props = manager()
            r = plain(props.Get(IFACE, args[0], timeout=30))
        else:
            r, name, msg = call(method, *[typed_arg(a) for a in args], timeout=30)
            if name:
                print(json.dumps({"error": name, "message": msg, "uid": os.getuid()}))
                return 0
        print(json.dumps({"result": r, "uid": os.getuid()}))
    except Exception as e:  # report, never crash silently
        name = e.get_dbus_name() if hasattr(e, "get_dbus_name") else type(e).__name__
        print(json.dumps({"error": name, "message": str(e), "uid": os.getuid()}))
    return 0


def hold_main(profile, reason, app_id):
    """A client holding a profile for as long as it lives, as a DAW would: prints the cookie and its
    unique bus name as one JSON line, then waits for a signal."""
    try:
        dbus = dbus_mod()
        bus = dbus.SystemBus()
        mgr, _ = manager(bus)
        cookie = mgr.HoldProfile(profile, reason, app_id, timeout=60)
    except Exception as e:
        name = e.get_dbus_name() if hasattr(e, "get_dbus_name") else type(e).__name__
        print(json.dumps({"error": name, "message": str(e)}), flush=True)
        return 1
    print(json.dumps({"cookie": int(cookie), "bus_name": str(bus.get_unique_name()), "pid": os.getpid()}), flush=True)
    while True:
        signal.pause()


# --------------------------------------------------------------------------
# the session user's agent (tests/vm/README.md: the session user)

SESSION_USER = "alice"
SESSION_UID = 1000
AGENT_SOCK = "/run/user/%d/rtctl-vmtest-agent.sock" % SESSION_UID
SESSION_ENV = ("XDG_SESSION_ID", "XDG_SEAT", "XDG_VTNR", "XDG_SESSION_TYPE", "XDG_SESSION_CLASS",
               "XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS", "USER", "HOME")


def recv_line(sock):
    data = b""
    while b"\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data.split(b"\n", 1)[0].decode("utf-8", "replace")


def agent_do(req, children):
    op = req.get("op")
    if op == "info":
        return {"pid": os.getpid(), "uid": os.getuid(), "cgroup": cgroup_of(os.getpid()),
                "env": {k: os.environ.get(k) for k in SESSION_ENV}}
    if op == "run":
        try:
            p = subprocess.run(req["argv"], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               timeout=req.get("timeout", 60))
        except subprocess.TimeoutExpired:
            return {"error": "%s: no exit in %s s" % (" ".join(req["argv"]), req.get("timeout", 60))}
        except OSError as e:
            return {"error": "%s: %s" % (req["argv"][0], e)}
        return {"rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr}
    if op == "spawn":
        try:
            with open(req.get("out") or os.devnull, "w") as out:
                p = subprocess.Popen(req["argv"], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        except OSError as e:
            return {"error": "%s: %s" % (req["argv"][0], e)}
        children[p.pid] = p
        return {"pid": p.pid}
    return {"error": "unknown op %r" % op}


def agent_main():
    """alice's login shell on tty1 becomes this (/etc/profile.d/rtctl-vmtest-session.sh): it runs what
    the runner asks, as alice, inside her logind session: the processes it starts are in the
    session's scope with her login environment. One JSON request per connection, one JSON answer:
    {"op": "info"}, {"op": "run", "argv": [...], "timeout": s}, {"op": "spawn", "argv": [...],
    "out": file for stdout and stderr}. Children it spawned are reaped as they end."""
    import socket
    path = os.path.join(os.environ.get("XDG_RUNTIME_DIR") or "/run/user/%d" % os.getuid(),
                        os.path.basename(AGENT_SOCK))
    for p in (path, path + ".new"):
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path + ".new")
    srv.listen(4)
    os.rename(path + ".new", path)  # the socket appears once it accepts
    children = {}
    while True:
        for pid in [pid for pid, p in children.items() if p.poll() is not None]:
            del children[pid]
        r, _, _ = select.select([srv], [], [], 0.5)
        if not r:
            continue
        conn, _ = srv.accept()
        try:
            conn.settimeout(30)
            ans = agent_do(json.loads(recv_line(conn)), children)
        except Exception as e:  # answer, never die: the session would end with it
            ans = {"error": "%s: %s" % (type(e).__name__, e)}
        try:
            conn.settimeout(30)
            conn.sendall((json.dumps(ans) + "\n").encode())
        except OSError:
            pass
        conn.close()


# --------------------------------------------------------------------------
# kernel state snapshot (for "stop restores everything")


def snapshot():
    s = {}
    for q in sorted(glob.glob("/sys/block/*/queue")):
        dev = q.split("/")[3]
        if dev.startswith(("loop", "ram", "zram")):
            continue
        s["block/%s/scheduler" % dev] = active_scheduler(dev)
        for k in ("read_ahead_kb", "nr_requests", "rotational", "add_random", "rq_affinity", "nomerges", "wbt_lat_usec"):
            v = read("%s/%s" % (q, k))
            if v is not None:
                s["block/%s/%s" % (dev, k)] = v
        for t in sorted(glob.glob(q + "/iosched/*")):
            v = read(t)
            if v is not None:
                s["block/%s/iosched/%s" % (dev, os.path.basename(t))] = v
    for p in sorted(glob.glob("/proc/irq/[0-9]*/smp_affinity_list")):
        s["irq/%s" % p.split("/")[3]] = read(p)
    s["irq/default_smp_affinity"] = read("/proc/irq/default_smp_affinity")
    for c in cpu_ids():
        base = "/sys/devices/system/cpu/cpu%d" % c
        s["cpu%d/online" % c] = read(base + "/online", "1")
        s["cpu%d/pm_qos_resume_latency_us" % c] = read(base + "/power/pm_qos_resume_latency_us")
        for d in sorted(glob.glob(base + "/cpuidle/state*/disable")):
            s["cpu%d/%s" % (c, "/".join(d.split("/")[-2:]))] = read(d)
        for k in ("scaling_governor", "scaling_min_freq", "energy_performance_preference"):
            v = read(base + "/cpufreq/" + k)
            if v is not None:
                s["cpu%d/cpufreq/%s" % (c, k)] = v
    for k in ("sched_rt_runtime_us", "sched_rt_period_us", "timer_migration", "nmi_watchdog",
              "watchdog_cpumask", "watchdog", "sched_autogroup_enabled"):
        v = read("/proc/sys/kernel/" + k)
        if v is not None:
            s["sysctl/kernel.%s" % k] = v
    s["workqueue/cpumask"] = read("/sys/devices/virtual/workqueue/cpumask")
    for k in ("cpuset.cpus.partition", "cpuset.cpus", "cpuset.cpus.exclusive", "cgroup.subtree_control"):
        for p in sorted(glob.glob("/sys/fs/cgroup/*/" + k) + glob.glob("/sys/fs/cgroup/" + k)):
            s["cgroup" + p[len("/sys/fs/cgroup"):]] = read(p)
    return s


def diff_snapshots(before, after):
    out = []
    for k in sorted(set(before) | set(after)):
        b, a = before.get(k), after.get(k)
        if b != a:
            out.append("%s: %s -> %s" % (k, b, a))
    return out


# --------------------------------------------------------------------------
# the tests

TESTS = []
STATE = {}


def test(name, timeout=TEST_TIMEOUT, own_run=False):
    """own_run: left out of a run without rtctl_vmtest.only= (run.sh gives it a VM run of its own)."""
    def deco(fn):
        fn.timeout = timeout
        fn.own_run = own_run
        TESTS.append((name, fn))
        return fn
    return deco


ATTACHED_SCOPE = "/rtctl.slice/rtctl-attached.scope"


def remote_partition_possible():
    """Whether this kernel has cpuset.cpus.exclusive (6.7 and later): then rtctl makes the isolated
    threaded child a remote isolated partition; on 6.1 there is none."""
    return os.path.exists("/sys/fs/cgroup/rtctl.slice/cpuset.cpus.exclusive") or \
        os.path.exists("/sys/fs/cgroup/system.slice/cpuset.cpus.exclusive")


def v2_isolation_problems(iso, hk, pid=None):
    """What differs from rtctl's cgroup v2 split for isolated CPUs iso and housekeeping hk (sets): the
    top-level units on hk, rtctl.slice on both, process pid (attached whole) in the scope's isolated
    threaded child and every thread of it on iso, and where the kernel can, that child a valid remote
    isolated partition. [] when all is so."""
    bad = []
    for unit in ("user.slice", "system.slice", "init.scope"):
        got = unit_prop(unit, "AllowedCPUs").get("AllowedCPUs")
        if cpu_set(got) != hk:
            bad.append("%s AllowedCPUs=%s" % (unit, got))
    got = unit_prop("rtctl.slice", "AllowedCPUs").get("AllowedCPUs")
    if cpu_set(got) != iso | hk:
        bad.append("rtctl.slice AllowedCPUs=%s" % got)
    if pid is not None:
        where = cgroup_of(pid)
        if where != ATTACHED_SCOPE + "/isolated":
            bad.append("attached process %d in %s" % (pid, where))
        for t in os.listdir("/proc/%d/task" % pid) if os.path.isdir("/proc/%d/task" % pid) else []:
            cpus = read("/proc/%d/task/%s/status" % (pid, t)) or ""
            line = [l for l in cpus.splitlines() if l.startswith("Cpus_allowed_list:")]
            if line and cpu_set(line[0].split(":", 1)[1].strip()) != iso & online_cpus():
                bad.append("thread %s of %d on %s" % (t, pid, line[0].split(":", 1)[1].strip()))
        if remote_partition_possible():
            part = read("/sys/fs/cgroup" + ATTACHED_SCOPE + "/isolated/cpuset.cpus.partition")
            if part != "isolated":
                bad.append("isolated child's cpuset.cpus.partition=%r" % part)
            got = read("/sys/fs/cgroup/cpuset.cpus.isolated")
            if cpu_set(got or "") != iso & online_cpus():
                bad.append("/sys/fs/cgroup/cpuset.cpus.isolated=%r" % got)
    return bad
