"""PID 1 that does not answer: a stand-in for systemd's manager on the private bus, stopped with SIGSTOP
(a process that never answers, as a hung PID 1 looks to a client), must not hold up rtctld's loop.
The unprivileged reads (Plan, Verify, Check) do not ask it at all, and a pass that must ask it is
bounded far below the unit's WatchdogSec=30s (sd-bus's default of 25 s per call before): one call's
timeout, then calls fail at once and are tried again once systemd answers."""
import os
import signal
import subprocess
import sys
import time

import pytest

from harness import Bus, Env, service_policy, wait_until

# systemd's manager as far as the conflict tuner asks it: LoadUnit and a unit's LoadState, ActiveState,
# UnitFileState (every rival "not-found": nothing to stop). Each call is logged to argv[2], one line.
STAND_IN = r"""
import sys, dbus, dbus.service, dbus.mainloop.glib
from gi.repository import GLib
dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
bus = dbus.bus.BusConnection(sys.argv[1])
log = open(sys.argv[2], "a", buffering=1)
UNIT = "/org/freedesktop/systemd1/unit/rival"

class Manager(dbus.service.Object):
    @dbus.service.method("org.freedesktop.systemd1.Manager", in_signature="s", out_signature="o")
    def LoadUnit(self, name):
        log.write("LoadUnit %s\n" % name)
        return dbus.ObjectPath(UNIT)

class Unit(dbus.service.Object):
    @dbus.service.method("org.freedesktop.DBus.Properties", in_signature="ss", out_signature="v")
    def Get(self, iface, prop):
        log.write("Get %s\n" % prop)
        return {"LoadState": "not-found", "ActiveState": "inactive", "UnitFileState": ""}[prop]

name = dbus.service.BusName("org.freedesktop.systemd1", bus)
Manager(bus, "/org/freedesktop/systemd1")
Unit(bus, UNIT)
print("ready", flush=True)
GLib.MainLoop().run()
"""


@pytest.fixture
def systemd(tmp_root):
    """A private bus with a stand-in systemd on it, and /run/systemd/system (systemd as PID 1, for
    rtctld) for as long as the test runs."""
    bus = Bus(tmp_root, extra_policies=[service_policy(tmp_root, "org.freedesktop.systemd1")])
    calls = os.path.join(bus.dir, "calls")
    proc = subprocess.Popen(["/usr/bin/python3", "-c", STAND_IN, bus.address, calls], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "ready"
    made = not os.path.exists("/run/systemd/system")
    if made:
        os.makedirs("/run/systemd/system")
    try:
        yield bus, proc, calls
    finally:
        proc.send_signal(signal.SIGCONT)
        proc.terminate()
        proc.wait(10)
        if made:
            os.rmdir("/run/systemd/system")
        bus.stop()


def calls_made(path):
    with open(path) as f:
        return f.read().splitlines()


def timed(fn):
    t = time.monotonic()
    r = fn()
    return r, time.monotonic() - t


def test_reads_never_wait_on_a_hung_pid1_and_a_pass_is_bounded(tmp_root, systemd):
    bus, standin, calls = systemd
    env = Env(tmp_root, bus)
    try:
        env.write("rtctl.conf", "[Daemon]\nDefaultProfile=off\nUevents=kernel\nOnConflict=stop\n")
        env.profile("gov", "[Profile]\nDescription=test: power rivals\n[Power]\nGovernor=performance\n")
        d = env.start("--profile", "gov")
        assert wait_until(lambda: any(c.startswith("LoadUnit tuned.service") for c in calls_made(calls)), 20), \
            "rtctld did not ask the stand-in about the power rivals: %s\n%s" % (calls_made(calls), d.output())
        assert env.rtctl("verify").returncode == 0

        standin.send_signal(signal.SIGSTOP)  # PID 1 hangs from here on
        asked = len(calls_made(calls))
        import dbus
        mgr = dbus.Interface(dbus.bus.BusConnection(bus.address).get_object(
            "org.rtctl.Manager1", "/org/rtctl/Manager1", introspect=False), "org.rtctl.Manager1")
        for name, fn in (("Plan", lambda: mgr.Plan("gov", timeout=60)), ("Verify", lambda: mgr.Verify(timeout=60)),
                         ("Check", lambda: mgr.Check(timeout=60))):
            _, secs = timed(fn)
            # A wait on the stand-in would take at least one call's timeout (2 s; 25 s before).
            assert secs < 1.5, "%s took %.1f s while PID 1 hangs" % (name, secs)
        # The verdict of a read with a warm cache is what systemd said last: in place.
        p, secs = timed(lambda: env.rtctl("verify"))
        assert p.returncode == 0 and secs < 1.5, (secs, p.stdout, p.stderr)

        # A marker queued behind whatever the reads sent, before the pass sends anything.
        import dbus.lowlevel
        marker = dbus.lowlevel.MethodCallMessage("org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                                 "org.freedesktop.systemd1.Manager", "LoadUnit")
        marker.append("marker.service", signature="s")
        conn = dbus.bus.BusConnection(bus.address)
        conn.send_message(marker)
        conn.flush()

        # A pass that has to ask it: one call's timeout (5 s) and retries that fail at once, not 25 s per
        # call; the watchdog is 30 s.
        _, secs = timed(lambda: mgr.Reload(timeout=120))
        assert secs < 15, "a pass took %.1f s while PID 1 hangs" % secs
        assert wait_until(lambda: "systemd did not answer" in d.output(), 20)
        assert d.running()

        standin.send_signal(signal.SIGCONT)
        assert wait_until(lambda: "LoadUnit marker.service" in calls_made(calls), 30)
        during = calls_made(calls)[asked:]
        assert during.index("LoadUnit marker.service") == 0, \
            "the reads sent the hung PID 1 %s" % during[:during.index("LoadUnit marker.service")]
        d.stop()
    finally:
        env.cleanup()
