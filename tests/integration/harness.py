"""The host tier's harness, shared by the tests and bench/: rtctld from the build tree on a private
dbus-daemon that runs a system-bus configuration plus the project's own bus policy file."""
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("RTCTL_BUILD_DIR", os.path.join(ROOT, "build"))
RTCTLD = os.path.join(BUILD, "src", "rtctld")
RTCTL = os.path.join(BUILD, "src", "rtctl")
NOBODY = 65534
# How long a wait may last before it counts as a hang: never a measure of speed (bench/ measures that).
# A wait ends as soon as what it waits for is there; on a loaded machine with one of its two CPUs
# isolated, everything else shares the other one, and a start or a call can take many seconds.
HANG_SECONDS = 300


class Bus:
    """A private dbus-daemon with the system-bus configuration, rtctl's own bus policy and, for services
    benchmarked beside rtctld, other policy files (skipped when missing)."""

    def __init__(self, tmp, extra_policies=()):
        self.dir = tempfile.mkdtemp(prefix="rtctl-bus-", dir=tmp)
        os.chmod(self.dir, 0o755)
        self.socket = os.path.join(self.dir, "system_bus_socket")
        self.address = "unix:path=" + self.socket
        conf = open("/usr/share/dbus-1/system.conf").read()
        conf = re.sub(r"<listen>.*?</listen>", "<listen>%s</listen>" % self.address, conf)
        conf = re.sub(r"<pidfile>.*?</pidfile>|<user>.*?</user>|<includedir>.*?</includedir>|"
                      r"<servicedir>.*?</servicedir>|<include [^>]*>.*?</include>|"
                      r"<standard_system_servicedirs/>", "", conf)
        inc = "<include>%s</include>\n" % os.path.join(ROOT, "dbus", "org.rtctl.Manager1.conf")
        inc += "".join('<include ignore_missing="yes">%s</include>\n' % p for p in extra_policies)
        conf = conf.replace("</busconfig>", inc + "</busconfig>")
        self.config = os.path.join(self.dir, "bus.conf")
        with open(self.config, "w") as f:
            f.write(conf)
        self.proc = subprocess.Popen(["dbus-daemon", "--config-file=" + self.config, "--nofork"],
                                     stderr=subprocess.DEVNULL)
        # Ready when it accepts a connection: the socket file exists from bind(), a moment before
        # listen(), and a client that connects in between is refused (seen on a loaded machine).
        deadline = time.monotonic() + 10
        while not self._accepts():
            assert time.monotonic() < deadline, "private dbus-daemon did not start"
            time.sleep(0.01)
        os.chmod(self.socket, 0o777)

    def _accepts(self):
        import socket
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            try:
                s.connect(self.socket)
                return True
            except OSError:
                return False

    def env(self):
        e = dict(os.environ)
        e["DBUS_SYSTEM_BUS_ADDRESS"] = self.address
        return e

    def stop(self):
        self.proc.terminate()
        self.proc.wait(5)
        shutil.rmtree(self.dir, ignore_errors=True)


def service_policy(tmp, name, callable=True):
    """Writes a bus policy that lets root own name on a private Bus (the test or its stand-in acts as that
    service) and, if callable, anyone call it; returns its path, for Bus(extra_policies=...)."""
    path = os.path.join(tmp, "%s-policy-%d.conf" % (name, os.getpid()))
    rules = '  <policy user="root"><allow own="%s"/></policy>\n' % name
    if callable:
        rules += '  <policy context="default"><allow send_destination="%s"/></policy>\n' % name
    with open(path, "w") as f:
        f.write('<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"\n'
                ' "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">\n'
                '<busconfig>\n%s</busconfig>\n' % rules)
    return path


class LogindBus(Bus):
    """A private bus on which the test may act as logind: resume() emits PrepareForSleep(false), what
    logind says when the machine wakes from suspend."""

    def __init__(self, tmp):
        super().__init__(tmp, extra_policies=[service_policy(tmp, "org.freedesktop.login1", callable=False)])
        import dbus
        self.conn = dbus.bus.BusConnection(self.address)
        self.conn.request_name("org.freedesktop.login1")

    def resume(self):
        import dbus.lowlevel
        msg = dbus.lowlevel.SignalMessage("/org/freedesktop/login1", "org.freedesktop.login1.Manager",
                                          "PrepareForSleep")
        msg.append(False, signature="b")
        self.conn.send_message(msg)
        self.conn.flush()

    def stop(self):
        self.conn.close()
        super().stop()


class Env:
    """Configuration, runtime and state directories of one test's daemon, and its environment."""

    def __init__(self, tmp, bus):
        self.dir = tempfile.mkdtemp(prefix="env-", dir=tmp)
        os.chmod(self.dir, 0o755)
        self.conf = os.path.join(self.dir, "conf")
        self.run = os.path.join(self.dir, "run")
        self.state = os.path.join(self.dir, "state")
        os.makedirs(os.path.join(self.conf, "profiles"))
        self.bus = bus
        self.daemons = []
        self.extra = {}  # more environment for rtctld and rtctl (RTCTL_SYSROOT for a fixture machine)
        self.write("rtctl.conf", "[Daemon]\nDefaultProfile=off\nUevents=kernel\n")

    def write(self, rel, text):
        path = os.path.join(self.conf, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        return path

    def profile(self, name, text):
        return self.write("profiles/%s.conf" % name, text)

    @property
    def environ(self):
        e = dict(os.environ)
        e.update({
            # The test's own profiles first, then the shipped ones from the source tree.
            "RTCTL_CONF_PATH": self.conf + ":" + os.path.join(ROOT, "conf.d"),
            "RUNTIME_DIRECTORY": self.run,
            "STATE_DIRECTORY": self.state,
            "DBUS_SYSTEM_BUS_ADDRESS": self.bus.address,
        })
        e.pop("NOTIFY_SOCKET", None)
        e.update(self.extra)
        # Kept beside the runtime directory, so that a later run can put back what this env's daemon
        # journalled if this run is killed before its cleanup (machine.restore_leftovers).
        with open(os.path.join(self.dir, "env.json"), "w") as f:
            json.dump(e, f)
        return e

    @property
    def journal(self):
        path = os.path.join(self.run, "journal.json")
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return json.load(f)

    def start(self, *args, wait_ready=True, wrapper=(), journal_stream=False):
        d = Daemon(self, list(args), wrapper, journal_stream)
        self.daemons.append(d)
        if wait_ready:
            d.wait_ready()
        return d

    def rtctl(self, *args, user=None, check=False):
        cmd = [RTCTL] + list(args)
        if user is not None:
            cmd = as_user(user, cmd)
        p = subprocess.run(cmd, env=self.environ, capture_output=True, text=True, timeout=HANG_SECONDS)
        if check:
            assert p.returncode == 0, "rtctl %s: rc=%d\n%s%s" % (args, p.returncode, p.stdout, p.stderr)
        return p

    def rtctl_json(self, *args):
        p = self.rtctl("--json", *args, check=True)
        return json.loads(p.stdout)

    def cleanup(self):
        for d in self.daemons:
            d.stop_if_running()
        # In the ASan+UBSan build a sanitizer's report is a failure of the test that ran the daemon.
        reports = [d.output() for d in self.daemons
                   if re.search(r"ERROR: (Address|Leak)Sanitizer|runtime error:", d.output())]
        # Whatever a failed test left behind goes back before the snapshot is taken.
        if self.journal or any(os.path.exists(os.path.join(self.run, j))
                               for j in ("tracefs.json", "xruns-tracefs.json")):
            subprocess.run([RTCTL, "restore"], env=self.environ, capture_output=True, timeout=HANG_SECONDS)
        shutil.rmtree(self.dir, ignore_errors=True)
        assert not reports, "rtctld's sanitizers reported:\n" + "\n".join(reports)


class Daemon:
    """rtctld with its output in a file. wrapper: a command that runs it (an argument vector that execs
    the rest). journal_stream: $JOURNAL_STREAM names that file, as systemd names the journal's stream, so
    the daemon logs to the journal socket."""

    def __init__(self, env, args, wrapper=(), journal_stream=False):
        self.env = env
        self.notify_path = os.path.join(env.dir, "notify-%d" % len(env.daemons))
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(self.notify_path)
        self.messages = []
        e = env.environ
        e["NOTIFY_SOCKET"] = self.notify_path
        self.log_path = os.path.join(env.dir, "rtctld-%d.log" % len(env.daemons))
        self.log = open(self.log_path, "w")
        if journal_stream:
            st = os.fstat(self.log.fileno())
            e["JOURNAL_STREAM"] = "%d:%d" % (st.st_dev, st.st_ino)
        else:
            e.pop("JOURNAL_STREAM", None)
        self.proc = subprocess.Popen(list(wrapper) + [RTCTLD] + args, env=e, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        # Read the notify socket all the time, as systemd does: sd_notify blocks once the socket's queue
        # (10 datagrams) is full.
        self.reader = threading.Thread(target=self._read_notify, daemon=True)
        self.reader.start()

    def _read_notify(self):
        self.notify.settimeout(0.1)
        while True:
            try:
                self.messages.append(self.notify.recv(4096).decode())
            except socket.timeout:
                if self.proc.poll() is not None:
                    return
            except OSError:
                return

    def wait_notify(self, key, timeout=HANG_SECONDS):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for m in list(self.messages):
                if key in m:
                    return m
            if self.proc.poll() is not None and not self.reader.is_alive():
                break
            time.sleep(0.005)
        raise AssertionError("rtctld sent no %s (exit %s):\n%s" % (key, self.proc.poll(), self.output()))

    def wait_ready(self):
        return self.wait_notify("READY=1")

    def output(self):
        self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def running(self):
        return self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=HANG_SECONDS):
        self.proc.send_signal(sig)
        rc = self.proc.wait(timeout)
        self.reader.join(1)
        self.notify.close()
        return rc

    def stop_if_running(self):
        if self.running():
            self.stop()


def wait_until(predicate, timeout=HANG_SECONDS, interval=0.01):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


FLOOD_CLIENT = os.path.join(ROOT, "tests", "integration", "flood_client.py")


@contextlib.contextmanager
def bench_env(profile, text, policies=()):
    """For a bench run as root, under the kernel lock (machine.kernel_lock: inherited from flock(1) or
    taken): an Env on a private bus (with the bus policies of services run beside rtctld), holding one
    profile. Yields (env, left); left is filled on exit with what the machine kept
    changed against its state on entry (machine.diff)."""
    import machine
    with machine.kernel_lock(rtctl=RTCTL, say=lambda m: print(m, file=sys.stderr, flush=True)):
        tmp = tempfile.mkdtemp(prefix="rtctl-bench-", dir=machine.run_tmp())
        os.chmod(tmp, 0o755)
        bus = Bus(tmp, policies)
        env = Env(tmp, bus)
        env.profile(profile, text)
        before = machine.snapshot()
        left = []
        try:
            yield env, left
        finally:
            env.cleanup()
            bus.stop()
            shutil.rmtree(tmp, ignore_errors=True)
            left.extend(machine.diff(before, machine.snapshot()))


def as_user(user, cmd):
    return ["setpriv", "--reuid=%d" % user, "--regid=%d" % user, "--clear-groups"] + cmd


class Flood:
    """Read calls from unprivileged clients, one process and bus connection each (flood_client.py), each
    keeping `inflight` calls under way (the next sent as soon as one is answered), for at most `seconds`
    or until stop()."""

    def __init__(self, env, connections, seconds, methods, inflight=1, user=NOBODY):
        self.stop_file = os.path.join(env.dir, "flood-stop-%d" % len(env.daemons))
        e = dict(env.environ, FLOOD_STOP=self.stop_file)
        cmd = ["/usr/bin/python3", FLOOD_CLIENT, env.bus.address, "flood", str(seconds), str(inflight)]
        self.procs = [subprocess.Popen(as_user(user, cmd + list(methods)), env=e, stdout=subprocess.PIPE,
                                       text=True) for _ in range(connections)]
        self.results = None

    def wait_started(self):
        """Until every client had its first answer."""
        for p in self.procs:
            line = p.stdout.readline()
            assert line == "started\n", "a flood client failed: %r (exit %s)" % (line, p.poll())

    def running(self):
        return all(p.poll() is None for p in self.procs)

    def stop(self):
        """Ends the flood; returns each client's counts (calls, ok, errors by name, seconds)."""
        if self.results is None:
            open(self.stop_file, "w").close()
            self.results = []
            for p in self.procs:
                out = p.stdout.read()
                p.wait(HANG_SECONDS)
                self.results.append(json.loads(out.strip().splitlines()[-1]) if out.strip() else None)
        return self.results


def pipeline(env, n, method, user=NOBODY):
    """n calls of method sent at once from one connection as user, then every answer awaited: the counts
    (ok, errors by name)."""
    cmd = ["/usr/bin/python3", FLOOD_CLIENT, env.bus.address, "pipeline", str(n), method]
    p = subprocess.run(as_user(user, cmd), env=env.environ, capture_output=True, text=True,
                       timeout=HANG_SECONDS)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.splitlines()[-1])


def fds_and_rss(pid):
    """Open files, less the pidfds of live kernel threads: rtctld holds one per kernel thread it has read
    (src/core/tasks.c), as many as the machine has, whatever the calls. A caller's pidfd counts (so would
    a user process's that a pass's scan holds: no call here runs a pass)."""
    import machine
    with open("/proc/%d/status" % pid) as f:
        rss = int(re.search(r"^VmRSS:\s+(\d+) kB", f.read(), re.M).group(1))
    fds = 0
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            if os.readlink("/proc/%d/fd/%s" % (pid, fd)) == "anon_inode:[pidfd]":
                with open("/proc/%d/fdinfo/%s" % (pid, fd)) as f:
                    held = [int(line.split()[1]) for line in f if line.startswith("Pid:")]
                if held and held[0] > 0 and machine.is_kthread(held[0]):
                    continue
            fds += 1
        except OSError:
            pass
    return fds, rss


class Hoard:
    """Calls sent at once as user over many connections, each carrying descriptors whatever the method
    takes (flood_client.py hoard), and left waiting: answers() once `expect` were answered (60 s at
    most), the calls still waiting until end() closes the connections."""

    def __init__(self, env, user, connections, calls, fds, expect, method, signature, args):
        cmd = ["/usr/bin/python3", FLOOD_CLIENT, env.bus.address, "hoard", str(connections), str(calls),
               str(fds), str(expect), method, signature, json.dumps(args)]
        self.proc = subprocess.Popen(as_user(user, cmd), env=env.environ, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)

    def answers(self):
        line = self.proc.stdout.readline()
        assert line, "the hoarding client failed (exit %s)" % self.proc.poll()
        return json.loads(line)

    def end(self):
        self.proc.stdin.close()
        self.proc.wait(HANG_SECONDS)
