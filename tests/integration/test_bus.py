"""The D-Bus API: its contract, its authorization, its errors."""
import os
import re
import subprocess

import dbus

from conftest import NOBODY, ROOT

IFACE = "org.rtctl.Manager1"
PATH = "/org/rtctl/Manager1"


def manager(env):
    conn = dbus.bus.BusConnection(env.bus.address)
    return conn, conn.get_object(IFACE, PATH)


def normalized_interface(xml):
    xml = re.sub(r"<!--.*?-->", "", xml, flags=re.S)
    m = re.search(r'<interface name="org.rtctl.Manager1">.*?</interface>', xml, re.S)
    assert m, "no org.rtctl.Manager1 interface"
    return [l.strip() for l in m.group(0).splitlines() if l.strip()]


def test_introspection_matches_the_contract(env):
    env.start("--profile", "off")
    conn, obj = manager(env)
    live = obj.Introspect(dbus_interface="org.freedesktop.DBus.Introspectable")
    with open(os.path.join(ROOT, "dbus", "org.rtctl.Manager1.xml")) as f:
        contract = f.read()
    assert normalized_interface(live) == normalized_interface(contract)


def test_properties(env):
    env.profile("t", "[Profile]\nDescription=A test profile\n")
    env.start("--profile", "t")
    conn, obj = manager(env)
    props = obj.GetAll(IFACE, dbus_interface="org.freedesktop.DBus.Properties")
    assert props["ActiveProfile"] == "t"
    assert props["State"] == "applied"
    assert ("t", "A test profile") in [tuple(p) for p in props["Profiles"]]
    assert ("desktop", "Desktop: I/O schedulers by disk type, no CPU isolation") in \
        [tuple(p) for p in props["Profiles"]]
    assert props["Failures"] == dbus.Array([], signature="(ssis)")
    assert props["HousekeepingCPUs"] == open("/sys/devices/system/cpu/possible").read().strip()
    ts, changes, failures, duration = props["LastPass"]
    assert ts > 0 and failures == 0


def test_non_root_is_refused_with_named_error(env):
    env.profile("t", "[Profile]\nDescription=t\n")
    env.start("--profile", "off")
    for args in (["profile", "t"], ["restore"]):
        p = env.rtctl(*args, user=NOBODY)
        assert p.returncode == 6, (args, p.stdout, p.stderr)
        # No polkit on this bus: fail closed, and say why.
        assert "polkit is not running, and without it only root may" in p.stderr, p.stderr
    # The error name itself, as a D-Bus client sees it.
    script = ("import dbus,sys\n"
              "c=dbus.bus.BusConnection(sys.argv[1])\n"
              "o=c.get_object('org.rtctl.Manager1','/org/rtctl/Manager1')\n"
              "try:\n o.SetProfile('t', dbus_interface='org.rtctl.Manager1')\n"
              "except dbus.DBusException as e: print(e.get_dbus_name())\n")
    out = subprocess.run(["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups",
                          "/usr/bin/python3", "-c", script, env.bus.address],
                         capture_output=True, text=True, timeout=30)
    assert out.stdout.strip() == "org.rtctl.Error.NotAuthorized", out.stderr
    assert env.rtctl_json("status")["profile"] == "off"
    # Reading is open to everyone.
    assert env.rtctl("status", user=NOBODY).returncode == 0
    assert env.rtctl("plan", "--profile", "t", user=NOBODY).returncode == 0


def test_only_root_may_own_the_name(env):
    script = ("import dbus,sys\n"
              "c=dbus.bus.BusConnection(sys.argv[1])\n"
              "try:\n c.request_name('org.rtctl.Manager1')\n print('owned')\n"
              "except dbus.DBusException as e: print(e.get_dbus_name())\n")
    out = subprocess.run(["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups",
                          "/usr/bin/python3", "-c", script, env.bus.address],
                         capture_output=True, text=True, timeout=30)
    assert out.stdout.strip() == "org.freedesktop.DBus.Error.AccessDenied"


def test_named_errors(env):
    env.profile("bad", "[Profile]\nDescription=bad\n[Nope]\nX=1\n")
    env.start("--profile", "off")
    conn, obj = manager(env)
    for name, error in (("missing", "org.rtctl.Error.NoSuchProfile"),
                        ("../etc/passwd", "org.rtctl.Error.InvalidArgument"),
                        ("bad", "org.rtctl.Error.InvalidProfile")):
        try:
            obj.SetProfile(name, dbus_interface=IFACE)
            raise AssertionError("SetProfile(%r) succeeded" % name)
        except dbus.DBusException as e:
            assert e.get_dbus_name() == error, (name, e)
    try:
        obj.SetProfile("bad", dbus_interface=IFACE)
    except dbus.DBusException as e:
        assert "bad.conf:3: [Nope]: unknown section" in e.get_dbus_message()


def test_reply_comes_after_the_pass(env):
    env.profile("t", "[Profile]\nDescription=t\n[Sysctl]\nkernel.sched_rt_runtime_us=950002\n")
    env.start("--profile", "off")
    conn, obj = manager(env)
    changes, failures = obj.SetProfile("t", dbus_interface=IFACE)
    # The reply comes after the pass: the value is in place when the call returns.
    assert open("/proc/sys/kernel/sched_rt_runtime_us").read().strip() == "950002"
    assert (changes, failures) == (1, 0)
    changes, failures = obj.Restore(dbus_interface=IFACE)
    assert (changes, failures) == (1, 0)
    props = obj.GetAll(IFACE, dbus_interface="org.freedesktop.DBus.Properties")
    assert props["State"] == "off" and props["ActiveProfile"] == ""
