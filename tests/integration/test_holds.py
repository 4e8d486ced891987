"""Holds (HoldProfile, `rtctl hold`), `rtctl run` and attaching by pidfd, on the real kernel."""
import ctypes
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import dbus
import pytest

import harness
import machine
from conftest import wait_until
from harness import HANG_SECONDS, RTCTL

PROFILES = {
    "lo": "[Profile]\nRank=5\n[Sysctl]\nvm.stat_interval=2\n",
    "mid": "[Profile]\nRank=10\n[Sysctl]\nvm.stat_interval=4\n",
    "hi": "[Profile]\nRank=15\n[Sysctl]\nvm.stat_interval=3\n",
    "iso": "[Profile]\nRank=20\n[CPU]\nIsolate=1\n",
}
IFACE = "org.rtctl.Manager1"


@pytest.fixture
def henv(env):
    for name, text in PROFILES.items():
        env.profile(name, text)
    env.write("rtctl.conf", "[Daemon]\nDefaultProfile=lo\nUevents=kernel\n")
    env.start()
    return env


@pytest.fixture(autouse=True)
def cpu1_stays():
    with machine.cpu1_hotplug_guard():
        yield


def stat_interval():
    return machine.read("/proc/sys/vm/stat_interval")


class Client:
    """A D-Bus client of rtctld, as a DAW would be one."""

    def __init__(self, env):
        self.conn = dbus.bus.BusConnection(env.bus.address)
        self.obj = self.conn.get_object(IFACE, "/org/rtctl/Manager1")
        self.api = dbus.Interface(self.obj, IFACE)

    def prop(self, name):
        return self.obj.Get(IFACE, name, dbus_interface="org.freedesktop.DBus.Properties")

    def close(self):
        self.conn.close()


@pytest.fixture
def clients(henv):
    made = []

    def make():
        c = Client(henv)
        made.append(c)
        return c
    yield make
    for c in made:
        c.close()


def test_holds_of_different_rank_go_straight_from_one_to_the_next(henv, clients):
    a, b = clients(), clients()
    assert stat_interval() == "2"
    mid = a.api.HoldProfile("mid", "recording", "org.example.Daw", timeout=HANG_SECONDS)
    hi = b.api.HoldProfile("hi", "mixing", "org.example.Other", timeout=HANG_SECONDS)
    assert mid != 0 and hi != 0 and mid != hi
    assert a.prop("ActiveProfile") == "hi" and stat_interval() == "3"
    assert a.prop("BaseProfile") == "lo"
    holds = {int(h["Cookie"]): h for h in a.prop("ActiveProfileHolds")}
    assert holds[mid]["Profile"] == "mid" and holds[mid]["ApplicationId"] == "org.example.Daw"
    assert holds[mid]["Reason"] == "recording" and holds[mid]["BusName"] == a.conn.get_unique_name()

    # Lower-ranked held later: the higher one stays in force.
    low = a.api.HoldProfile("lo", "idle", "org.example.Daw", timeout=HANG_SECONDS)
    assert a.prop("ActiveProfile") == "hi"
    a.api.ReleaseProfile(low, timeout=HANG_SECONDS)

    # hi -> mid is one write (3 -> 4): nothing goes back to the original on the way.
    changes, failures = b.api.ReleaseProfile(hi, timeout=HANG_SECONDS)
    assert (changes, failures) == (1, 0)
    assert a.prop("ActiveProfile") == "mid" and stat_interval() == "4"
    changes, failures = a.api.ReleaseProfile(mid, timeout=HANG_SECONDS)
    assert (changes, failures) == (1, 0)
    assert a.prop("ActiveProfile") == "lo" and stat_interval() == "2"
    assert list(a.prop("ActiveProfileHolds")) == []


def test_set_profile_under_a_hold_changes_the_base_only(henv, clients):
    a = clients()
    a.api.HoldProfile("hi", "", "app", timeout=HANG_SECONDS)
    assert henv.rtctl("profile", "mid").returncode == 0
    assert a.prop("ActiveProfile") == "hi" and a.prop("BaseProfile") == "mid" and stat_interval() == "3"
    status = henv.rtctl("status").stdout
    assert "hi (held; base profile: mid)" in status, status
    a.close()
    assert wait_until(lambda: stat_interval() == "4"), "the new base profile did not come back"


def test_a_holder_killed_with_sigkill_releases_its_hold(henv):
    holder = subprocess.Popen([RTCTL, "hold", "hi", "--", "sleep", "600"], env=henv.environ)
    try:
        assert wait_until(lambda: stat_interval() == "3"), "the hold never took effect"
        sleeper = [int(p) for p in machine.read("/proc/%d/task/%d/children" % (holder.pid, holder.pid)).split()]
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
        assert wait_until(lambda: stat_interval() == "2"), "the base profile did not come back"
        assert henv.rtctl_json("holds") == []
    finally:
        for p in locals().get("sleeper", []):
            os.kill(p, signal.SIGKILL)


def test_a_holder_gone_before_its_hold_is_taken_holds_nothing(henv):
    """Holders that disconnect right after asking: the bus delivers the call, then the holder's leaving.
    A hold follows its holder's name from the moment it is taken (sd_bus_track asks the bus whether the
    name still has an owner), so none of them outlives its holder."""
    for _ in range(8):
        conn = dbus.bus.BusConnection(henv.bus.address)
        # No introspection first: dbus-python would hold the call back until it is answered.
        api = dbus.Interface(conn.get_object(IFACE, "/org/rtctl/Manager1", introspect=False), IFACE)
        api.HoldProfile("hi", "", "app", ignore_reply=True)
        conn.flush()
        conn.close()
    assert wait_until(lambda: henv.rtctl_json("holds") == []), "a hold outlived its holder"
    assert wait_until(lambda: stat_interval() == "2"), "the base profile did not come back"
    assert henv.daemons[-1].running()


def test_release_is_for_the_holder_or_an_admin(henv, clients):
    a = clients()
    cookie = a.api.HoldProfile("hi", "", "app", timeout=HANG_SECONDS)
    b = clients()
    monitor = subprocess.Popen(["dbus-monitor", "--address", henv.bus.address,
                                "type='signal',interface='%s',member='ProfileReleased'" % IFACE],
                               stdout=subprocess.PIPE, text=True)
    nobody = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "busctl",
                             "call", IFACE, "/org/rtctl/Manager1", IFACE, "ReleaseProfile", "u", str(cookie)],
                            env=henv.environ, capture_output=True, text=True, timeout=HANG_SECONDS)
    assert nobody.returncode != 0 and "org.rtctl.release-other-hold" in nobody.stderr, nobody.stderr
    assert stat_interval() == "3"
    with pytest.raises(dbus.DBusException) as e:
        b.api.ReleaseProfile(dbus.UInt32(cookie ^ 1 or 7), timeout=HANG_SECONDS)
    assert e.value.get_dbus_name() == "org.rtctl.Error.NoSuchHold"
    b.api.ReleaseProfile(cookie, timeout=HANG_SECONDS)  # root is an admin
    assert stat_interval() == "2"
    try:
        for line in monitor.stdout:
            if line.strip().startswith("uint32"):
                assert int(line.split()[1]) == cookie
                break
    finally:
        monitor.kill()
        monitor.wait()


def test_rtctl_run_holds_and_isolates_the_whole_tree_and_passes_the_status(henv):
    script = ("grep Cpus_allowed_list /proc/self/status; "
              "sh -c 'grep Cpus_allowed_list /proc/self/status'; exit 7")
    p = henv.rtctl("run", "--profile", "iso", "--", "sh", "-c", script)
    assert p.returncode == 7, p.stderr
    lines = [line.split()[1] for line in p.stdout.splitlines()]
    assert lines == ["1", "1"], "the command or its child was not on the isolated CPU: %s" % p.stdout
    assert henv.rtctl_json("status")["profile"] == "lo", "the hold did not end with the command"
    assert henv.rtctl("run", "--profile", "iso", "--", "sh", "-c", "kill -TERM $$").returncode == 128 + 15
    p = henv.rtctl("run", "--profile", "iso", "--", "/nonexistent/cmd")
    assert p.returncode == 127 and "/nonexistent/cmd" in p.stderr


def test_rtctl_run_forwards_signals_to_the_command(henv):
    run = subprocess.Popen([RTCTL, "run", "--profile", "iso", "--", "sh", "-c",
                            "trap 'exit 42' TERM; echo ready; while :; do sleep 0.05; done"],
                           env=henv.environ, stdout=subprocess.PIPE, text=True)
    try:
        assert run.stdout.readline() == "ready\n"  # the command runs, with its trap set
        assert henv.rtctl_json("status")["profile"] == "iso"
        run.send_signal(signal.SIGTERM)
        assert run.wait(HANG_SECONDS) == 42
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()


@pytest.mark.skipif(not shutil.which("jackd"), reason="jackd2 is in tools/deps.sh")
def test_jackd_under_rtctl_run(henv):
    shm_before = machine.jack_shm()
    run = subprocess.Popen([RTCTL, "run", "--profile", "iso", "--", "jackd", "-n", "rtctl-test", "-R", "-d",
                            "dummy", "-r", "48000", "-p", "64"], env=henv.environ, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
    try:
        def jackd_pid():
            kids = machine.read("/proc/%d/task/%d/children" % (run.pid, run.pid)) or ""
            kids = [int(k) for k in kids.split()]
            return kids[0] if kids and machine.read("/proc/%d/comm" % kids[0]) == "jackd" else None
        assert wait_until(lambda: jackd_pid() is not None and len(os.listdir("/proc/%d/task" % jackd_pid())) > 2)
        pid = jackd_pid()
        tids = os.listdir("/proc/%d/task" % pid)
        cpus = {t: machine.read("/proc/%d/task/%s/status" % (pid, t)).split("Cpus_allowed_list:")[1].split()[0]
                for t in tids}
        assert set(cpus.values()) == {"1"}, "jackd's threads are not all on the isolated CPU: %s" % cpus
        assert henv.rtctl_json("status")["profile"] == "iso"
        run.send_signal(signal.SIGTERM)
        assert run.wait(HANG_SECONDS) == 0, run.stderr.read()
        assert wait_until(lambda: henv.rtctl_json("status")["profile"] == "lo")
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        subprocess.run(["pkill", "-KILL", "-x", "jackd"], capture_output=True)
        machine.remove_jack_shm_since(shm_before)


def test_attach_by_pidfd(henv, clients):
    henv.rtctl("profile", "iso", check=True)
    a = clients()
    live = subprocess.Popen(["sleep", "600"])
    gone = subprocess.Popen(["true"])
    gone_fd = os.pidfd_open(gone.pid)
    gone.wait()
    live_fd = os.pidfd_open(live.pid)
    try:
        with pytest.raises(dbus.DBusException) as e:
            a.api.AttachProcessByPIDFD(dbus.types.UnixFd(gone_fd), timeout=HANG_SECONDS)
        assert e.value.get_dbus_name() == "org.rtctl.Error.NoSuchProcess"
        with open("/dev/null") as f, pytest.raises(dbus.DBusException) as e:
            a.api.AttachProcessByPIDFD(dbus.types.UnixFd(f.fileno()), timeout=HANG_SECONDS)
        assert e.value.get_dbus_name() == "org.rtctl.Error.InvalidArgument"
        a.api.AttachProcessByPIDFD(dbus.types.UnixFd(live_fd), timeout=HANG_SECONDS)
        assert machine.task_cpus(live.pid) == "1"
        assert live.pid in [int(p) for p in a.prop("AttachedProcesses")]
    finally:
        os.close(gone_fd)
        os.close(live_fd)
        live.kill()
        live.wait()


@pytest.fixture
def daw_dir():
    """A directory every user can reach, for a stand-in DAW executable (a copy of sleep)."""
    d = tempfile.mkdtemp(prefix="rtctl-hold-", dir="/tmp")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def rule_holds(c):
    return [h for h in c.prop("ActiveProfileHolds") if h["ApplicationId"] == "daw"]


def end_all(procs, client, daemon):
    """The end of a test of [Hold] rules: its programs killed, its client and rtctld gone."""
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    client.close()
    daemon.stop()


def test_a_hold_rule_holds_its_profile_while_the_program_runs(env, daw_dir):
    """A [Hold] rule of the base profile: a program whose executable its exe: glob matches holds the
    rule's profile for as long as one such process runs, with no command typed; the hold is an ordinary
    one (ranked, listed with the rule's name as application id); another user's process, which the
    rule's user: term leaves out, holds nothing; a restarted rtctld finds a program already running.
    The held profile's own [Hold] rules are not followed, and the log says so."""
    for name, text in PROFILES.items():
        env.profile(name, text)
    env.profile("hi", PROFILES["hi"] + "[Hold chained]\nMatch=comm:fakedaw-* user:root\nProfile=mid\n")
    exe = os.path.join(daw_dir, "fakedaw-8.12")
    shutil.copy("/bin/sleep", exe)
    os.chmod(exe, 0o755)
    env.profile("base", "[Profile]\nRank=5\n[Sysctl]\nvm.stat_interval=2\n"
                "[Hold daw]\nMatch=exe:%s/fakedaw-[0-9]* user:root\nProfile=hi\n" % daw_dir)
    env.write("rtctl.conf", "[Daemon]\nDefaultProfile=base\nUevents=kernel\n")
    d = env.start()
    c = Client(env)
    procs = []
    try:
        assert c.prop("ActiveProfile") == "base" and stat_interval() == "2" and not rule_holds(c)
        procs.append(subprocess.Popen([exe, "60"]))
        assert wait_until(lambda: c.prop("ActiveProfile") == "hi" and stat_interval() == "3"), c.prop("ActiveProfile")
        holds = rule_holds(c)
        assert len(holds) == 1 and holds[0]["Profile"] == "hi", holds
        assert exe in holds[0]["Reason"] and "PID %d" % procs[0].pid in holds[0]["Reason"], holds
        assert c.prop("BaseProfile") == "base"
        # hi's own rule matches the very program and holds nothing: said in the log.
        assert not [h for h in c.prop("ActiveProfileHolds") if h["ApplicationId"] == "chained"]
        assert "Profile hi is held, not the base profile: its 1 [Hold] rule is not followed" in d.output()
        # ... and on a reload that gives it another one
        env.profile("hi", PROFILES["hi"] + "[Hold chained]\nMatch=comm:fakedaw-* user:root\nProfile=mid\n"
                    "[Hold chained2]\nMatch=comm:fakedaw-* user:root\nProfile=mid\n")
        d.proc.send_signal(signal.SIGHUP)
        assert wait_until(lambda: "its 2 [Hold] rules are not followed" in d.output()), d.output()[-2000:]
        assert c.prop("ActiveProfile") == "hi"
        # A second instance shares the hold; the first one's exit keeps it.
        procs.append(subprocess.Popen([exe, "60"]))
        time.sleep(0.5)
        assert len(rule_holds(c)) == 1
        procs[0].kill()
        procs[0].wait()
        time.sleep(1)
        assert c.prop("ActiveProfile") == "hi" and len(rule_holds(c)) == 1
        # rtctld restarted while it runs: the scan at start finds it.
        d.stop()
        d = env.start()
        c.close()
        c = Client(env)
        assert wait_until(lambda: c.prop("ActiveProfile") == "hi" and len(rule_holds(c)) == 1)
        # The last one exits: the hold ends, the base profile is back.
        procs[1].kill()
        procs[1].wait()
        assert wait_until(lambda: c.prop("ActiveProfile") == "base" and stat_interval() == "2")
        assert not rule_holds(c)
        # Another user's process: not the rule's user, so it holds nothing.
        procs.append(subprocess.Popen([exe, "60"], user=harness.NOBODY, group=harness.NOBODY))
        time.sleep(1.5)
        assert c.prop("ActiveProfile") == "base" and not rule_holds(c)
    finally:
        end_all(procs, c, d)


FLIP = """
import ctypes, sys, time
libc = ctypes.CDLL(None)
for i in range(400):
    libc.prctl(15, b"flipdaw" if i % 2 == 0 else b"other", 0, 0, 0)
    time.sleep(0.005)
libc.prctl(15, b"other", 0, 0, 0)
time.sleep(30)
"""


def test_a_program_renaming_itself_fast_takes_one_hold(env):
    """A [Hold] rule on comm: a program that flips its name 400 times in two seconds (prctl is free) costs
    one hold, kept while it flips, and one release a second after it stopped matching: holds are taken
    and released from a timer, never per event."""
    for name, text in PROFILES.items():
        env.profile(name, text)
    env.profile("base", "[Profile]\nRank=5\n[Sysctl]\nvm.stat_interval=2\n"
                "[Hold flip]\nMatch=comm:flipdaw user:root\nProfile=hi\n")
    env.write("rtctl.conf", "[Daemon]\nDefaultProfile=base\nUevents=kernel\n")
    d = env.start()
    c = Client(env)
    p = subprocess.Popen(["/usr/bin/python3", "-c", FLIP])
    try:
        assert wait_until(lambda: c.prop("ActiveProfile") == "hi"), c.prop("ActiveProfile")
        assert wait_until(lambda: c.prop("ActiveProfile") == "base", timeout=20)
        time.sleep(1.5)
        out = d.output()
        takes = out.count("for flip (")
        assert takes == 1, "%d holds taken:\n%s" % (takes, out[-3000:])
        assert out.count("no matching process for a second") == 1, out[-3000:]
    finally:
        p.kill()
        p.wait()
        c.close()
        d.stop()


PR_SET_NAME = 15


def rename_flood(until):
    """A thread of this process renames itself (PR_SET_NAME: one PROC_EVENT_COMM each) in a tight loop
    until until() holds, as any user can."""
    libc = ctypes.CDLL(None, use_errno=True)
    done = threading.Event()

    def loop():
        names = (b"rtctl-flood-a", b"rtctl-flood-b")
        i = 0
        while not done.is_set():
            libc.prctl(PR_SET_NAME, names[i & 1], 0, 0, 0)
            i += 1
    t = threading.Thread(target=loop, daemon=True)
    t.start()
    try:
        return wait_until(until, timeout=30)
    finally:
        done.set()
        t.join()


def while_events_are_lost(d, action):
    """Runs action() at a moment the kernel drops every process event for rtctld and has told it so
    already: the proc connector says ENOBUFS once, at the overflow, and drops all that follows, without
    another word, until rtctld has read its socket's queue empty. So: rtctld stopped, a rename flood
    until its socket drops events (the overflow), rtctld let run until it has read the ENOBUFS (which
    comes before the queue: the queue shrinks) and stopped again before the queue is empty. Proven, not
    assumed: while rtctld is stopped with a queue left, action()'s events add nothing to the queue and
    the kernel's drop count grows. Then rtctld runs on. Another attempt, before action(), when rtctld read
    the whole queue (the overflow is over) or nothing of it before it was stopped again."""
    pid = d.proc.pid
    sock = machine.proc_connector_socket(pid)
    for _ in range(30):
        drops = machine.netlink_queue(sock)[1]
        d.proc.send_signal(signal.SIGSTOP)
        try:
            assert wait_until(lambda: machine.task_state(pid) in ("T", "t")), "rtctld did not stop"
            assert rename_flood(lambda: machine.netlink_queue(sock)[1] > drops), \
                "the proc connector never overflowed: %s" % (machine.netlink_queue(sock),)
            full = machine.netlink_queue(sock)[0]
            d.proc.send_signal(signal.SIGCONT)
            wait_until(lambda: machine.netlink_queue(sock)[0] < full, timeout=10, interval=0)
            d.proc.send_signal(signal.SIGSTOP)
            assert wait_until(lambda: machine.task_state(pid) in ("T", "t")), "rtctld did not stop"
            left, before = machine.netlink_queue(sock)
            if left == 0 or left >= full:
                continue  # the queue was read empty (the overflow is over), or not read at all
            action()
            after_left, after = machine.netlink_queue(sock)
            assert after_left == left and after > before, \
                "the events were not lost: queue %d -> %d bytes, drops %d -> %d" % (left, after_left, before, after)
            return
        finally:
            d.proc.send_signal(signal.SIGCONT)
    raise AssertionError("no moment found where process events were lost unseen")


def hold_rule_env(env, daw_dir):
    exe = os.path.join(daw_dir, "fakedaw-8.12")
    shutil.copy("/bin/sleep", exe)
    os.chmod(exe, 0o755)
    for name, text in PROFILES.items():
        env.profile(name, text)
    env.profile("base", "[Profile]\nRank=5\n[Sysctl]\nvm.stat_interval=2\n"
                "[Hold daw]\nMatch=exe:%s/fakedaw-[0-9]* user:root\nProfile=hi\n" % daw_dir)
    env.write("rtctl.conf", "[Daemon]\nDefaultProfile=base\nUevents=kernel\n")
    return exe


def test_a_hold_whose_program_exit_was_lost_ends_all_the_same(env, daw_dir):
    """The kernel drops process events when rtctld's socket overflows, and says so once (ENOBUFS) at
    the start: any user can cause that by renaming threads in a loop. A [Hold] program that exits later
    in the same overflow sends an exit rtctld never sees; the hold must end all the same, within
    seconds, not when the PID is reused."""
    exe = hold_rule_env(env, daw_dir)
    d = env.start()
    c = Client(env)
    daw = subprocess.Popen([exe, "600"])
    try:
        assert wait_until(lambda: c.prop("ActiveProfile") == "hi" and len(rule_holds(c)) == 1)

        def kill():
            daw.kill()
            daw.wait()
        while_events_are_lost(d, kill)
        assert wait_until(lambda: c.prop("ActiveProfile") == "base" and not rule_holds(c), timeout=5), \
            "the hold outlived its program: %s\n%s" % (rule_holds(c), d.output()[-2000:])
        assert stat_interval() == "2"
        out = d.output()
        assert "Process events were lost" in out, out[-2000:]
        assert "Rule [Hold daw]: its last process is gone, its exit unseen" in out, out[-2000:]
    finally:
        end_all([daw], c, d)


def test_a_program_started_while_events_were_lost_takes_its_hold(env, daw_dir):
    """The same overflow, the other way: a [Hold] program that starts while the kernel drops events (its
    exec is lost) takes its hold once rtctld has read what was left."""
    exe = hold_rule_env(env, daw_dir)
    d = env.start()
    c = Client(env)
    procs = []
    try:
        assert c.prop("ActiveProfile") == "base" and not rule_holds(c)

        def start():
            procs.append(subprocess.Popen([exe, "600"]))
            # Asleep in its nanosleep: its exec is done, and its event sent (or dropped).
            assert wait_until(lambda: machine.task_state(procs[-1].pid) == "S")
            time.sleep(0.1)
        while_events_are_lost(d, start)
        assert wait_until(lambda: c.prop("ActiveProfile") == "hi" and len(rule_holds(c)) == 1, timeout=5), \
            "the program started unseen holds nothing:\n%s" % d.output()[-2000:]
        assert "PID %d" % procs[-1].pid in rule_holds(c)[0]["Reason"]
        assert stat_interval() == "3"
        assert "Process events were lost" in d.output()
    finally:
        end_all(procs, c, d)

