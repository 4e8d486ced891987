"""Who may change what: polkit's answers, from python-dbusmock's polkitd template on the private bus (the
real polkitd is the VM tier's), and the daemon's behaviour without polkit."""
import json
import os
import subprocess
import sys
import time

import dbus
import pytest

import contract
import machine

from conftest import NOBODY, wait_until
from harness import HANG_SECONDS, Bus, Env, Hoard, RTCTL, fds_and_rss, service_policy

AUTHORITY = "/org/freedesktop/PolicyKit1/Authority"
PROFILES = {
    "lo": "[Profile]\nRank=5\n[Sysctl]\nvm.stat_interval=2\n",
    "hi": "[Profile]\nRank=15\n[Sysctl]\nvm.stat_interval=3\n",
}


class PolkitBus(Bus):
    """A private system bus with python-dbusmock's polkitd on it."""

    def __init__(self, tmp, extra_policies=()):
        super().__init__(tmp, extra_policies=[service_policy(tmp, "org.freedesktop.PolicyKit1")] + list(extra_policies))
        self.mock = subprocess.Popen([sys.executable, "-m", "dbusmock", "--system", "--template", "polkitd"],
                                     env=self.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.conn = dbus.bus.BusConnection(self.address)
        assert wait_until(lambda: self.conn.name_has_owner("org.freedesktop.PolicyKit1")), \
            "dbusmock's polkitd did not come up"
        self.control = dbus.Interface(self.conn.get_object("org.freedesktop.PolicyKit1", AUTHORITY),
                                      "org.freedesktop.DBus.Mock")

    def allow(self, *actions):
        self.control.SetAllowed(dbus.Array(actions, signature="s"))

    def stop(self):
        self.mock.terminate()
        self.mock.wait(HANG_SECONDS)
        super().stop()


@pytest.fixture(scope="module")
def pkbus(tmp_root):
    b = PolkitBus(tmp_root)
    yield b
    b.stop()


@pytest.fixture
def pkenv(tmp_root, pkbus):
    pkbus.allow()
    pkbus.control.SimulateHang(False)
    e = Env(tmp_root, pkbus)
    for name, text in PROFILES.items():
        e.profile(name, text)
    e.write("rtctl.conf", "[Daemon]\nDefaultProfile=lo\nUevents=kernel\n")
    yield e
    e.cleanup()


def stat_interval():
    with open("/proc/sys/vm/stat_interval") as f:
        return f.read().strip()


def nobody_sleep():
    return subprocess.Popen(["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups",
                             "sleep", "600"])


def test_polkit_yes_lets_an_unprivileged_user_hold_and_switch(pkenv, pkbus):
    pkenv.start()
    pkbus.allow("org.rtctl.hold-profile")
    p = pkenv.rtctl("hold", "hi", "--", "cat", "/proc/sys/vm/stat_interval", user=NOBODY)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "3", "the held profile was not in force while the command ran"
    assert stat_interval() == "2", "the base profile did not come back when the command ended"

    # Each action is its own: holding does not let the user switch the base profile...
    p = pkenv.rtctl("profile", "hi", user=NOBODY)
    assert p.returncode == 6 and "org.rtctl.set-profile" in p.stderr, p.stderr
    assert stat_interval() == "2"
    # ...until polkit says yes to set-profile.
    pkbus.allow("org.rtctl.set-profile")
    assert pkenv.rtctl("profile", "hi", user=NOBODY).returncode == 0
    assert stat_interval() == "3"
    p = pkenv.rtctl("hold", "lo", "--", "true", user=NOBODY)
    assert p.returncode == 6 and "org.rtctl.hold-profile" in p.stderr, p.stderr


def test_polkit_no_refuses_every_change_with_a_named_error(pkenv, pkbus):
    pkenv.start()
    victim = nobody_sleep()
    try:
        for args, action in [(("profile", "hi"), "set-profile"), (("restore",), "restore"),
                             (("hold", "hi", "--", "true"), "hold-profile"),
                             (("attach", str(victim.pid)), "attach-own-process"),
                             (("irq", "pin", "0", "0"), "pin-irq")]:
            p = pkenv.rtctl(*args, user=NOBODY)
            assert p.returncode == 6, (args, p.returncode, p.stderr)
            assert "org.rtctl." + action in p.stderr and "polkit says no" in p.stderr, (args, p.stderr)
        assert stat_interval() == "2"
        # Reading stays open.
        assert pkenv.rtctl("status", user=NOBODY).returncode == 0
        assert pkenv.rtctl("holds", user=NOBODY).returncode == 0
    finally:
        victim.kill()
        victim.wait()


def test_every_method_of_the_contract_that_changes_something_asks_polkit(pkenv, pkbus):
    """Driven by the contract XML: each method not listed as a read in contract.READS, one added later
    included, is refused by name for an unprivileged caller when polkit says no, and changes nothing."""
    pkenv.start()
    victim = nobody_sleep()
    holder = dbus.bus.BusConnection(pkbus.address)
    try:
        manager = dbus.Interface(holder.get_object(contract.IFACE, "/org/rtctl/Manager1"), contract.IFACE)
        cookie = int(manager.HoldProfile("hi", "root's hold", "org.rtctl.test", timeout=HANG_SECONDS))
        assert stat_interval() == "3"
        calls = [contract.sample_call(n, sig, victim.pid, "lo", cookie) for n, sig in contract.changing()]
        assert len(calls) >= 10, calls
        answers = polkit_client(pkenv, "call", json.dumps(calls))
        assert answers == ["org.rtctl.Error.NotAuthorized"] * len(calls), list(zip(calls, answers))
        assert stat_interval() == "3", "a refused call changed the tuning"
        holds = holder.get_object(contract.IFACE, "/org/rtctl/Manager1").Get(
            contract.IFACE, "ActiveProfileHolds", dbus_interface="org.freedesktop.DBus.Properties")
        assert [int(h["Cookie"]) for h in holds] == [cookie], holds
    finally:
        holder.close()
        victim.kill()
        victim.wait()


def test_attaching_another_users_process_is_a_separate_action(pkenv, pkbus):
    pkenv.profile("iso", "[Profile]\nRank=20\n[CPU]\nIsolate=1\n")
    pkenv.write("rtctl.conf", "[Daemon]\nDefaultProfile=iso\nUevents=kernel\n")
    pkenv.start()
    pkbus.allow("org.rtctl.attach-own-process")
    own = nobody_sleep()
    root_owned = subprocess.Popen(["sleep", "600"])
    try:
        p = pkenv.rtctl("attach", str(own.pid), user=NOBODY)
        assert p.returncode == 0, p.stderr
        p = pkenv.rtctl("attach", str(root_owned.pid), user=NOBODY)
        assert p.returncode == 6 and "org.rtctl.attach-other-process" in p.stderr, p.stderr
        pkbus.allow("org.rtctl.attach-own-process", "org.rtctl.attach-other-process")
        assert pkenv.rtctl("attach", str(root_owned.pid), user=NOBODY).returncode == 0
        for q in (own, root_owned):
            assert machine.task_cpus(q.pid) == "1", "an attached process is not on the isolated CPU"
    finally:
        for q in (own, root_owned):
            q.kill()
            q.wait()


def test_the_loop_answers_while_polkit_thinks(pkenv, pkbus):
    """A question polkit takes its time over (a password prompt) holds up nobody else."""
    pkenv.start()
    pkbus.allow("org.rtctl.set-profile")
    pkbus.control.SimulateHang(True)
    env = pkenv.environ
    waiting = subprocess.Popen(["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups",
                                RTCTL, "profile", "hi"], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        assert wait_until(lambda: pkbus.control.HaveHangingCalls()), "rtctld never asked polkit"
        # Meanwhile: reads, and root's changes, are answered.
        assert pkenv.rtctl("status", user=NOBODY).returncode == 0
        assert pkenv.rtctl("profile", "lo").returncode == 0
        assert waiting.poll() is None, "the call polkit has not answered yet was answered"
        pkbus.control.ReleaseHangingCalls()
        out, err = waiting.communicate(timeout=HANG_SECONDS)
        assert waiting.returncode == 0, err
        assert stat_interval() == "3"
    finally:
        pkbus.control.SimulateHang(False)
        if waiting.poll() is None:
            waiting.kill()
            waiting.wait()


def test_without_polkit_only_root_may_change_anything(env):
    env.profile("hi", PROFILES["hi"])
    env.start()
    p = env.rtctl("hold", "hi", "--", "true", user=NOBODY)
    assert p.returncode == 6 and "polkit is not running" in p.stderr, p.stderr
    p = env.rtctl("profile", "hi", user=NOBODY)
    assert p.returncode == 6 and "polkit is not running" in p.stderr, p.stderr
    before = stat_interval()
    p = env.rtctl("hold", "hi", "--", "cat", "/proc/sys/vm/stat_interval")
    assert p.returncode == 0 and p.stdout.strip() == "3", p.stderr
    assert stat_interval() == before


class InteractivePolkitBus(PolkitBus):
    """A polkit that says yes only to a caller that allowed interactive authorization, as polkit does for
    an auth_admin action when the user then types the password into the agent; without the flag it
    answers 'challenge'."""

    def __init__(self, tmp):
        Bus.__init__(self, tmp, extra_policies=[service_policy(tmp, "org.freedesktop.PolicyKit1")])
        self.mock = subprocess.Popen([sys.executable, "-m", "dbusmock", "--system", "org.freedesktop.PolicyKit1",
                                      AUTHORITY, "org.freedesktop.PolicyKit1.Authority"],
                                     env=self.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.conn = dbus.bus.BusConnection(self.address)
        assert wait_until(lambda: self.conn.name_has_owner("org.freedesktop.PolicyKit1"))
        self.control = dbus.Interface(self.conn.get_object("org.freedesktop.PolicyKit1", AUTHORITY),
                                      "org.freedesktop.DBus.Mock")
        self.control.AddMethod("", "CheckAuthorization", "(sa{sv})sa{ss}us", "(bba{ss})",
                               "ret = (bool(args[3] & 1), not (args[3] & 1), {})")


def test_the_callers_interactive_flag_reaches_polkit(tmp_root):
    bus = InteractivePolkitBus(tmp_root)
    env = Env(tmp_root, bus)
    try:
        for name, text in PROFILES.items():
            env.profile(name, text)
        env.write("rtctl.conf", "[Daemon]\nDefaultProfile=lo\nUevents=kernel\n")
        env.start()
        as_nobody = ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups"]
        call = ["busctl", "call", "org.rtctl.Manager1", "/org/rtctl/Manager1", "org.rtctl.Manager1",
                "SetProfile", "s", "hi"]
        # busctl allows interactive authorization unless told not to.
        p = subprocess.run(as_nobody + call[:1] + ["--allow-interactive-authorization=no"] + call[1:],
                           env=env.environ, capture_output=True, text=True, timeout=HANG_SECONDS)
        assert p.returncode != 0 and "asks for authentication" in p.stderr, p.stderr
        assert stat_interval() == "2"
        p = subprocess.run(as_nobody + call[:1] + ["--allow-interactive-authorization=yes"] + call[1:],
                           env=env.environ, capture_output=True, text=True, timeout=HANG_SECONDS)
        assert p.returncode == 0, p.stderr
        assert stat_interval() == "3"
        # rtctl allows it on a terminal (script(1) gives it one), not in a pipe.
        p = env.rtctl("profile", "lo", user=NOBODY)
        assert p.returncode == 6 and "asks for authentication" in p.stderr, p.stderr
        p = subprocess.run(as_nobody + ["script", "-qec", "%s profile lo" % RTCTL, "/dev/null"],
                           env=env.environ, capture_output=True, text=True, timeout=HANG_SECONDS,
                           stdin=subprocess.DEVNULL)
        assert p.returncode == 0, p.stdout + p.stderr
        assert stat_interval() == "2"
    finally:
        env.cleanup()
        bus.stop()


POLKIT_CLIENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "polkit_client.py")


def polkit_client(env, *args):
    p = subprocess.run(["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups",
                        "/usr/bin/python3", POLKIT_CLIENT, env.bus.address] + [str(a) for a in args],
                       env=env.environ, capture_output=True, text=True, timeout=HANG_SECONDS)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.splitlines()[-1])


def sanitized(pid):
    """ASan keeps freed memory in quarantine: RSS says nothing of leaks there (LeakSanitizer does)."""
    with open("/proc/%d/maps" % pid) as f:
        return "libasan" in f.read()


def test_answered_questions_are_freed_whatever_the_call_then_does(pkenv, pkbus):
    """A call whose polkit answer comes after its reason went away (the pidfd's process exited, the hold
    ended) is answered without asking polkit again; its question, its message and the pidfd in it are
    freed all the same, so a desktop user cannot use up rtctld's file descriptors or memory."""
    d = pkenv.start()
    pkbus.allow("org.rtctl.hold-profile")
    pkbus.control.SimulateHangActions(["org.rtctl.attach-own-process", "org.rtctl.release-other-hold"])
    try:
        rounds, batch = 40, 16  # a batch: the most calls one caller may have waiting for polkit
        counts = polkit_client(pkenv, "answered", 1, batch)  # warm-up: what the daemon allocates once
        assert counts == {"org.rtctl.Error.NoSuchProcess": batch, "org.rtctl.Error.NoSuchHold": batch}, counts
        fds, rss = fds_and_rss(d.proc.pid)
        counts = polkit_client(pkenv, "answered", rounds, batch)
        assert counts == {"org.rtctl.Error.NoSuchProcess": rounds * batch,
                          "org.rtctl.Error.NoSuchHold": rounds * batch}, counts
        fds_after, rss_after = fds_and_rss(d.proc.pid)
        print("rtctld: %d fds, %d kB RSS before; %d fds, %d kB after" % (fds, rss, fds_after, rss_after))
        assert fds_after == fds, "rtctld kept %d file descriptors of %d answered calls" % (
            fds_after - fds, rounds * batch * 2)
        assert sanitized(d.proc.pid) or rss_after - rss < 512, "rtctld's RSS grew by %d kB over %d answered calls" % (
            rss_after - rss, rounds * batch * 2)
        assert d.running()
    finally:
        pkbus.control.SimulateHangActions(dbus.Array([], signature="s"))


def test_calls_waiting_for_polkit_are_bounded_and_dropped_with_their_caller(pkenv, pkbus):
    """Each call waiting for polkit keeps its message and the descriptors in it, up to 5 minutes with a
    password prompt: one caller may have 16 waiting, and once it leaves the bus they are dropped, so a
    desktop user cannot use up rtctld's file descriptors."""
    d = pkenv.start()
    pkbus.allow("org.rtctl.attach-own-process")
    pkbus.control.ReleaseHangingCalls()
    victim = nobody_sleep()
    try:
        # Warm-up: what the daemon allocates once for a polkit question with a pidfd. Polkit says yes;
        # the call then fails on what it asks for (no profile isolates CPUs here), which is all it needs.
        attach = json.dumps([["AttachProcessByPIDFD", "h", [victim.pid]]])
        served = polkit_client(pkenv, "call", attach)
        assert served == ["org.rtctl.Error.NotIsolated"], served
        fds, _ = fds_and_rss(d.proc.pid)
        pkbus.control.SimulateHangActions(["org.rtctl.attach-own-process"])
        client = subprocess.Popen(["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups",
                                   "/usr/bin/python3", POLKIT_CLIENT, pkenv.bus.address, "fill", "16"],
                                  env=pkenv.environ, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert json.loads(client.stdout.readline()) == "org.rtctl.Error.LimitExceeded", \
                "the 17th call of one caller waiting for polkit was not refused"
            assert fds_and_rss(d.proc.pid)[0] >= fds + 16, "the 16 waiting calls did not keep their pidfds"
        finally:
            client.stdin.close()
            client.wait(HANG_SECONDS)
        assert wait_until(lambda: fds_and_rss(d.proc.pid)[0] == fds), \
            "rtctld kept %d descriptors of a caller that left the bus" % (fds_and_rss(d.proc.pid)[0] - fds)
        pkbus.control.SimulateHangActions(dbus.Array([], signature="s"))
        assert polkit_client(pkenv, "call", attach) == served, "a new caller was not served"
        assert d.running()
    finally:
        pkbus.control.SimulateHangActions(dbus.Array([], signature="s"))
        pkbus.control.ReleaseHangingCalls()
        victim.kill()
        victim.wait()


LIMIT = "org.rtctl.Error.LimitExceeded"
ATTACHED_PER_USER = 64
HOLDS_PER_USER = 32
OTHER_USER = 1  # daemon: the bus takes only users it can look up


def user_sleep(uid):
    return subprocess.Popen(["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups",
                             "sleep", "600"])


def spread(env, uid, connections, calls):
    """The calls, made as uid over that many connections in turn: their answers ("" or "name: message"),
    and the client, whose connections (and holds) last until end() is called on it."""
    p = subprocess.Popen(["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups",
                          "/usr/bin/python3", POLKIT_CLIENT, env.bus.address, "spread", str(connections),
                          json.dumps(calls)], env=env.environ, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    line = p.stdout.readline()
    if not line:
        end(p)
    assert line, "the client as uid %d failed" % uid
    return json.loads(line), p


def end(client):
    client.stdin.close()
    client.wait(HANG_SECONDS)


def another_user_holds(env):
    """HoldProfile as OTHER_USER, the hold released as its connection closes: its answers."""
    answers, client = spread(env, OTHER_USER, 1, [["HoldProfile", "sss", ["hi", "mine", "org.example.Other"]]])
    end(client)
    return answers


def test_attached_processes_are_bounded_per_user(pkenv, pkbus):
    """One user attaching process after process is refused, by name, beyond its share; another user is
    still served."""
    pkenv.profile("iso", "[Profile]\nRank=20\n[CPU]\nIsolate=1\n")
    pkenv.write("rtctl.conf", "[Daemon]\nDefaultProfile=iso\nUevents=kernel\n")
    d = pkenv.start()
    pkbus.allow("org.rtctl.attach-own-process")
    mine = [user_sleep(NOBODY) for _ in range(ATTACHED_PER_USER + 1)]
    theirs = user_sleep(OTHER_USER)
    try:
        answers, client = spread(pkenv, NOBODY, 1, [["AttachProcess", "u", [q.pid]] for q in mine])
        end(client)
        assert answers[:ATTACHED_PER_USER] == [""] * ATTACHED_PER_USER, answers
        name, _, message = answers[-1].partition(": ")
        assert name == LIMIT and str(ATTACHED_PER_USER) in message, answers[-1]
        assert machine.task_cpus(mine[-1].pid) != "1", "the refused process was attached all the same"
        answers, client = spread(pkenv, OTHER_USER, 1, [["AttachProcess", "u", [theirs.pid]]])
        end(client)
        assert answers == [""], answers
        assert machine.task_cpus(theirs.pid) == "1", "another user's process was not attached"
        assert d.running()
    finally:
        for q in mine + [theirs]:
            q.kill()
            q.wait()


def test_holds_are_bounded_per_user(pkenv, pkbus):
    """One user with several connections cannot take every hold: beyond its share it is refused by name,
    and another user's hold still succeeds."""
    d = pkenv.start()
    pkbus.allow("org.rtctl.hold-profile")
    calls = [["HoldProfile", "sss", ["hi", "take %d" % i, "org.example.Daw"]]
             for i in range(HOLDS_PER_USER + 1)]
    answers, client = spread(pkenv, NOBODY, 3, calls)
    try:
        assert answers[:HOLDS_PER_USER] == [""] * HOLDS_PER_USER, answers
        name, _, message = answers[-1].partition(": ")
        assert name == LIMIT and str(HOLDS_PER_USER) in message, answers[-1]
        assert another_user_holds(pkenv) == [""]
        assert d.running()
    finally:
        end(client)


POLKIT_PER_USER = 16


def test_calls_waiting_for_polkit_are_bounded_per_user(pkenv, pkbus):
    """One user with many connections and an agent that never answers used to fill the whole polkit queue
    for 5 minutes (16 a connection, 256 in all), and everyone's HoldProfile and slider failed meanwhile.
    Now that user fills only its own share, its surplus is refused at once by name, and another user's
    hold still gets its answer."""
    d = pkenv.start()
    pkbus.allow("org.rtctl.hold-profile", "org.rtctl.set-profile")
    pkbus.control.SimulateHangActions(["org.rtctl.set-profile"])
    connections, calls = 16, 16
    surplus = connections * calls - POLKIT_PER_USER
    hoard = Hoard(pkenv, NOBODY, connections, calls, 0, surplus, "SetProfile", "s", ["hi"])
    try:
        answers = hoard.answers()
        assert answers == {LIMIT: surplus}, answers
        assert another_user_holds(pkenv) == [""]
        assert d.running()
    finally:
        hoard.end()
        pkbus.control.SimulateHangActions(dbus.Array([], signature="s"))
        pkbus.control.ReleaseHangingCalls()


def test_descriptors_a_call_does_not_take_are_not_kept_while_polkit_thinks(pkenv, pkbus):
    """A caller may attach descriptors to a call whose arguments name none (the system bus lets a message
    carry 16); a call waiting for polkit used to keep them all, up to 5 minutes. It keeps none now."""
    d = pkenv.start()
    pkbus.control.SimulateHangActions(["org.rtctl.set-profile"])
    fds, _ = fds_and_rss(d.proc.pid)
    # The share's last call is refused once the others wait for polkit, in the order they came.
    hoard = Hoard(pkenv, NOBODY, 1, POLKIT_PER_USER + 1, 16, 1, "SetProfile", "s", ["hi"])
    try:
        assert hoard.answers() == {LIMIT: 1}
        assert pkbus.control.HaveHangingCalls(), "rtctld did not ask polkit"
        kept = fds_and_rss(d.proc.pid)[0] - fds
        assert kept < 16, "%d calls waiting for polkit kept %d descriptors they do not take" % (
            POLKIT_PER_USER, kept)
        assert d.running()
    finally:
        hoard.end()
        pkbus.control.SimulateHangActions(dbus.Array([], signature="s"))
        pkbus.control.ReleaseHangingCalls()
