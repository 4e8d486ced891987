"""What a D-Bus caller hands rtctld is data: text with control characters is refused at the bus by name,
an application id is a reverse-DNS-like name, what is shown anyway is escaped (systemd's STATUS=, the
client's tables), and what a caller can make rtctld keep is bounded (holds per caller and in all)."""
import json
import os
import re
import subprocess

import dbus
import dbus.mainloop.glib
import pytest
from gi.repository import GLib

import contract
from conftest import ROOT, wait_until
from harness import HANG_SECONDS, RTCTL

IFACE = "org.rtctl.Manager1"
PATH = "/org/rtctl/Manager1"
INVALID = "org.rtctl.Error.InvalidArgument"
LIMIT = "org.rtctl.Error.LimitExceeded"
# The contract's bounds (dbus/org.rtctl.Manager1.xml, rtctld(8)).
HOLDS_PER_CALLER = 16
HOLDS_MAX = 256


STRING_ARGS = contract.string_args()


@pytest.fixture
def tenv(env):
    env.profile("lo", "[Profile]\nRank=5\n[Sysctl]\nvm.stat_interval=2\n")
    env.profile("hi", "[Profile]\nRank=15\n[Sysctl]\nvm.stat_interval=3\n")
    env.write("rtctl.conf", "[Daemon]\nDefaultProfile=lo\nUevents=kernel\n")
    env.daemon = env.start()
    return env


def connect(env):
    conn = dbus.bus.BusConnection(env.bus.address)
    return conn, dbus.Interface(conn.get_object(IFACE, PATH), IFACE)


def error_of(call):
    with pytest.raises(dbus.DBusException) as e:
        call()
    return e.value.get_dbus_name(), e.value.get_dbus_message() or ""


def holds(conn):
    return conn.get_object(IFACE, PATH).Get(IFACE, "ActiveProfileHolds",
                                            dbus_interface="org.freedesktop.DBus.Properties")


def test_notify_injection_is_refused_and_never_reaches_systemd(tenv):
    conn, api = connect(tenv)
    name, message = error_of(lambda: api.HoldProfile("audio", "r", "x\nWATCHDOG=trigger\nMAINPID=1\ny",
                                                     timeout=HANG_SECONDS))
    assert name == INVALID and "application_id" in message, (name, message)
    assert "\n" not in message, "the error echoes the caller's newline: %r" % message
    assert len(holds(conn)) == 0
    # A hold that is taken afterwards makes a STATUS= of its own: every datagram before it was sent.
    api.HoldProfile("hi", "mixing", "org.example.Daw", timeout=HANG_SECONDS)
    d = tenv.daemon
    assert wait_until(lambda: any("org.example.Daw" in m for m in list(d.messages))), d.messages
    for m in list(d.messages):
        for line in m.split("\n"):
            assert re.match(r"^[A-Z_]+=", line) and not line.startswith(("WATCHDOG=trigger", "MAINPID=")), \
                "rtctld told systemd %r" % m
    assert d.running()
    conn.close()


@pytest.mark.parametrize("method,arg,sig,pos", STRING_ARGS, ids=["%s-%s" % (m, a) for m, a, _, _ in STRING_ARGS])
def test_every_string_argument_refuses_control_characters(tenv, method, arg, sig, pos):
    conn, _ = connect(tenv)
    plain = {"s": "hi", "u": dbus.UInt32(4_000_000), "t": dbus.UInt64(0)}
    for bad in ("x\ny", "x\x1b[2Jy", "x\ty", "x\x7fy", "x\u0085y", "x\u202ey"):
        args = [plain[t] for t in sig]
        args[pos] = bad
        msg = dbus.lowlevel.MethodCallMessage(IFACE, PATH, IFACE, method)
        msg.append(*args, signature=sig)
        name, message = error_of(lambda: conn.send_message_with_reply_and_block(msg, HANG_SECONDS * 1000))
        assert name == INVALID, (method, arg, repr(bad), name, message)
        assert arg in message, "%s: the error does not name %s: %s" % (method, arg, message)
        assert not re.search(r"[\x00-\x1f\x7f]", message), repr(message)
    assert len(holds(conn)) == 0
    assert tenv.daemon.running()
    conn.close()


def test_application_ids_are_reverse_dns_like(tenv):
    conn, api = connect(tenv)
    for good in ("org.example.Daw", "rtctl", "com.bitwig-studio.Bitwig_Studio"):
        api.ReleaseProfile(api.HoldProfile("hi", "r", good, timeout=HANG_SECONDS), timeout=HANG_SECONDS)
    for bad in ("a b", "a/b", "caf\u00e9", "../x", "x;y", "a" * 256):
        name, message = error_of(lambda: api.HoldProfile("hi", "r", bad, timeout=HANG_SECONDS))
        assert name == INVALID and "application_id" in message, (bad, name, message)
    # Any printable text is a reason, non-ASCII too.
    api.ReleaseProfile(api.HoldProfile("hi", "Aufnahme \u00fcber Nacht \U0001f3b9", "org.example.Daw",
                                       timeout=HANG_SECONDS), timeout=HANG_SECONDS)
    conn.close()


def test_holds_are_bounded_per_caller(tenv):
    conn, api = connect(tenv)
    cookies = [api.HoldProfile("hi", "take %d" % i, "org.example.Daw", timeout=HANG_SECONDS)
               for i in range(HOLDS_PER_CALLER)]
    name, message = error_of(lambda: api.HoldProfile("hi", "one more", "org.example.Daw", timeout=HANG_SECONDS))
    assert name == LIMIT and str(HOLDS_PER_CALLER) in message, (name, message)
    assert len(holds(conn)) == HOLDS_PER_CALLER
    # Someone else still gets a hold, and the caller one more once it released one.
    other, other_api = connect(tenv)
    other_api.HoldProfile("lo", "mine", "org.example.Other", timeout=HANG_SECONDS)
    api.ReleaseProfile(cookies[0], timeout=HANG_SECONDS)
    api.HoldProfile("hi", "again", "org.example.Daw", timeout=HANG_SECONDS)
    assert len(holds(conn)) == HOLDS_PER_CALLER + 1
    assert tenv.daemon.running()
    other.close()
    conn.close()


def test_holds_are_bounded_in_all(tenv):
    conns = [connect(tenv) for _ in range(HOLDS_MAX // HOLDS_PER_CALLER + 1)]
    for conn, api in conns[:-1]:
        for i in range(HOLDS_PER_CALLER):
            api.HoldProfile("hi", "take %d" % i, "org.example.Daw", timeout=HANG_SECONDS)
    name, message = error_of(lambda: conns[-1][1].HoldProfile("hi", "r", "org.example.Late", timeout=HANG_SECONDS))
    assert name == LIMIT and str(HOLDS_MAX) in message, (name, message)
    conns[0][0].close()  # its holds end with its bus name
    assert wait_until(lambda: len(holds(conns[-1][0])) == HOLDS_MAX - HOLDS_PER_CALLER)
    conns[-1][1].HoldProfile("hi", "r", "org.example.Late", timeout=HANG_SECONDS)
    assert tenv.daemon.running()
    for conn, _ in conns[1:]:
        conn.close()


def test_rtctl_run_with_a_long_command_line_runs(tenv):
    arg = "\u00e9" * 300  # 600 bytes, two-byte characters across any cut
    p = tenv.rtctl("run", "--profile", "hi", "--", "sh", "-c", "exit 3", arg)
    assert p.returncode == 3, p.stderr


def test_set_profile_emits_base_profile_changed(tenv):
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    conn = dbus.bus.BusConnection(tenv.bus.address)
    seen = []
    loop = GLib.MainLoop()

    def changed(iface, props, invalidated):
        seen.append((dict(props), list(invalidated)))
        if "BaseProfile" in props or "BaseProfile" in invalidated:
            loop.quit()

    conn.add_signal_receiver(changed, "PropertiesChanged", "org.freedesktop.DBus.Properties", IFACE, PATH)
    api = dbus.Interface(conn.get_object(IFACE, PATH), IFACE)
    api.SetProfile("hi", reply_handler=lambda *a: None, error_handler=lambda e: loop.quit(),
                   timeout=HANG_SECONDS)
    GLib.timeout_add_seconds(HANG_SECONDS, loop.quit)
    loop.run()
    base = [p["BaseProfile"] for p, _ in seen if "BaseProfile" in p]
    assert base and str(base[-1]) == "hi", "no PropertiesChanged for BaseProfile: %r" % seen
    conn.close()


def test_rtctl_holds_escapes_what_it_shows(tmp_root, bus):
    # rtctld refuses such text now; a daemon that passed it on (an older one, a stand-in) must still not
    # reach the terminal with it.
    hostile = "x\x1b]0;owned\x07\nCOOKIE 1 forged"
    props = {"ActiveProfileHolds": ["aa{sv}", [{"Cookie": 7, "Profile": "hi", "Reason": hostile,
                                                "ApplicationId": "app\rX", "BusName": ":1.5", "Since": 0}]]}
    fake = subprocess.Popen(["/usr/bin/python3", os.path.join(ROOT, "tests", "integration", "fake_manager.py"),
                             bus.address, json.dumps(props)], stdout=subprocess.PIPE, text=True)
    try:
        assert fake.stdout.readline() == "ready\n"
        e = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=bus.address)
        for args in (["holds"], ["--no-legend", "holds"]):
            p = subprocess.run([RTCTL] + args, env=e, capture_output=True, text=True, timeout=HANG_SECONDS)
            assert p.returncode == 0, p.stderr
            assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", p.stdout), repr(p.stdout)
            assert p.stdout.count("\n") == len(p.stdout.splitlines()) and "forged" in p.stdout
            assert "\\x1b" in p.stdout and "\\x0a" in p.stdout, repr(p.stdout)
            assert len([ln for ln in p.stdout.splitlines() if "forged" in ln or "COOKIE" in ln]) == \
                (2 if args == ["holds"] else 1), repr(p.stdout)
        # --json carries the text as it is: JSON escapes it itself.
        p = subprocess.run([RTCTL, "--json", "holds"], env=e, capture_output=True, text=True,
                           timeout=HANG_SECONDS)
        assert json.loads(p.stdout)[0]["reason"] == hostile
    finally:
        fake.terminate()
        fake.wait(HANG_SECONDS)


def test_pager_runs_less_in_secure_mode(tenv):
    # rtctl runs as root: the pager it starts must offer no shell (less's !, v, |) and run no LESSOPEN.
    import pty
    seen = os.path.join(tenv.dir, "pager-env")
    master, slave = pty.openpty()
    try:
        # RTCTL_PAGERSECURE=0: root asks for its own pager command, which then still runs secured.
        e = dict(tenv.environ, RTCTL_PAGER="env > %s; cat > /dev/null" % seen, LESSOPEN="|touch /tmp/x %s",
                 LESSCLOSE="x", LESSSECURE="0", RTCTL_PAGERSECURE="0")
        p = subprocess.run([RTCTL, "--pager", "holds"], env=e, stdout=slave, stderr=subprocess.PIPE, text=True,
                           timeout=HANG_SECONDS)
    finally:
        os.close(slave)
        os.close(master)
    assert p.returncode == 0, p.stderr
    with open(seen) as f:
        env = dict(line.split("=", 1) for line in f.read().splitlines() if "=" in line)
    assert env.get("LESSSECURE") == "1" and "LESSOPEN" not in env and "LESSCLOSE" not in env, env


def test_root_gets_no_pager_but_less(tenv):
    """As root, a pager other than less (vi's :!sh, more's !) would hand out a root shell: rtctl runs less
    in its secure mode instead, as systemd does, unless RTCTL_PAGERSECURE=0."""
    import pty
    marker = os.path.join(tenv.dir, "pager-ran")
    master, slave = pty.openpty()
    try:
        e = dict(tenv.environ, RTCTL_PAGER="touch %s; cat > /dev/null" % marker, LESS="FRX")
        p = subprocess.run([RTCTL, "--pager", "holds"], env=e, stdin=subprocess.DEVNULL, stdout=slave,
                           stderr=subprocess.PIPE, text=True, timeout=HANG_SECONDS)
    finally:
        os.close(slave)
        os.close(master)
    assert p.returncode == 0, p.stderr
    assert not os.path.exists(marker), "rtctl ran $RTCTL_PAGER as root"
