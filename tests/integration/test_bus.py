"""The D-Bus API: its contract, its authorization, its errors."""
import json
import os
import re
import shutil
import subprocess
import time

import dbus

import harness
from conftest import NOBODY, ROOT

IFACE = "org.rtctl.Manager1"
PATH = "/org/rtctl/Manager1"


def python_as_nobody(env, script):
    """What script, run by /usr/bin/python3 as nobody with the bus address as argv[1], printed."""
    out = subprocess.run(harness.as_user(NOBODY, ["/usr/bin/python3", "-c", script, env.bus.address]),
                         capture_output=True, text=True, timeout=30)
    return out.stdout.strip(), out.stderr


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
    assert props["RebootPending"] is not None and not props["RebootPending"]  # no isolation: nothing
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
    out, err = python_as_nobody(env, script)
    assert out == "org.rtctl.Error.NotAuthorized", err
    assert env.rtctl_json("status")["profile"] == "off"
    # Reading is open to everyone.
    assert env.rtctl("status", user=NOBODY).returncode == 0
    assert env.rtctl("plan", "--profile", "t", user=NOBODY).returncode == 0


def test_only_root_may_own_the_name(env):
    script = ("import dbus,sys\n"
              "c=dbus.bus.BusConnection(sys.argv[1])\n"
              "try:\n c.request_name('org.rtctl.Manager1')\n print('owned')\n"
              "except dbus.DBusException as e: print(e.get_dbus_name())\n")
    assert python_as_nobody(env, script)[0] == "org.freedesktop.DBus.Error.AccessDenied"


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


# A write under a flood of reads returns within this: far above what it takes on a loaded machine (tens of
# ms here, hundreds with ASan), far below what the flood costs a daemon that answers reads in place first.
WRITE_UNDER_FLOOD_SECONDS = 5
FLOOD_SECONDS = 60


def fixture_copy(tmp_path, shape):
    src = os.path.join(harness.BUILD, "tests", "unit", "fixtures", shape)
    assert os.path.isdir(src), "fixtures are built with the tree (ninja -C %s)" % harness.BUILD
    root = str(tmp_path / shape)
    shutil.copytree(src, root, symlinks=True)
    return root


def test_a_flood_of_reads_does_not_hold_back_a_write(env, tmp_path):
    """On the 128-CPU fixture, where every Plan("") and ListIrqs() reads 3,000 IRQs (20-100 ms when answered
    in place), 16 connections of nobody keep 16 calls each under way: all a caller may have waiting, and
    all one user may over its connections. A root
    SetProfile meanwhile returns within WRITE_UNDER_FLOOD_SECONDS, the flood still going. A daemon that
    answers reads in place first answers the ~250 calls ahead of the write in its socket, each reading the
    IRQs: many seconds."""
    root = fixture_copy(tmp_path, "server-2x32")
    knob = os.path.join(root, "proc", "sys", "kernel", "sched_rt_runtime_us")
    with open(knob, "w") as f:
        f.write("950000\n")
    env.extra["RTCTL_SYSROOT"] = root
    irqs = "[IRQ]\nBalance=all\n"  # so that a Plan("") reads every IRQ, as an audio profile's does
    env.profile("a", "[Profile]\nDescription=t\n" + irqs)
    env.profile("b", "[Profile]\nDescription=t\n" + irqs + "[Sysctl]\nkernel.sched_rt_runtime_us=950002\n")
    env.start("--profile", "a")
    conn, obj = manager(env)
    flood = harness.Flood(env, 16, FLOOD_SECONDS, ["Plan:", "ListIrqs"], inflight=16)
    try:
        flood.wait_started()
        time.sleep(1)  # every client on its way
        start = time.monotonic()
        changes, failures = obj.SetProfile("b", dbus_interface=IFACE, timeout=harness.HANG_SECONDS)
        took = time.monotonic() - start
        flooding = flood.running()
    finally:
        results = flood.stop()
    assert took < WRITE_UNDER_FLOOD_SECONDS, "SetProfile took %.1f s under the flood" % took
    assert flooding, "the flood ended before SetProfile returned: nothing was measured"
    assert failures == 0  # changes: the sysctl, and IRQs placed anew by the rates since the last pass
    assert open(knob).read().strip() == "950002"
    # Reads were answered all along, and none refused: a client within its share is never Busy.
    assert all(r is not None and r["errors"] == {} for r in results), results
    assert sum(r["ok"] for r in results) > 16 * len(results), results


def test_a_caller_may_queue_only_its_share_of_reads(env):
    """On the 128-CPU fixture, where a Plan of a profile takes about 100 ms, one connection of nobody sends
    100 Plan calls at once: those beyond the 16 a caller may have waiting are answered at once with
    org.rtctl.Error.Busy, the others are answered in full. Another caller meanwhile takes its turn after
    one of them, not after all of them."""
    src = os.path.join(harness.BUILD, "tests", "unit", "fixtures", "server-2x32")
    assert os.path.isdir(src), "fixtures are built with the tree (ninja -C %s)" % harness.BUILD
    env.extra["RTCTL_SYSROOT"] = src  # only read: profile off writes nothing, and Plan never does
    env.profile("big", "[Profile]\nDescription=t\n[CPU]\nIsolate=auto:4\n[IRQ]\nBalance=housekeeping\n")
    env.start("--profile", "off")
    conn, obj = manager(env)
    cmd = ["/usr/bin/python3", harness.FLOOD_CLIENT, env.bus.address, "pipeline", "100", "Plan:big"]
    p = subprocess.Popen(harness.as_user(NOBODY, cmd), env=env.environ, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "started\n"
        irqs = obj.ListIrqs(dbus_interface=IFACE, timeout=harness.HANG_SECONDS)
        others_waited = p.poll() is None
    finally:
        out = p.stdout.read()
        p.wait(harness.HANG_SECONDS)
    counts = json.loads(out.splitlines()[-1])
    busy = counts["errors"].pop("org.rtctl.Error.Busy", 0)
    assert counts["errors"] == {}, counts
    assert counts["ok"] + busy == 100, counts
    assert counts["ok"] >= 16, counts
    assert busy > 0 and counts["ok"] < 50, counts
    assert len(irqs) == 3000
    assert others_waited, "ListIrqs was answered only after all of nobody's Plan calls"


def test_verify_and_check(env):
    """Verify() reads everything the profile keeps in force and writes nothing: in place after the pass,
    drift named once a value is changed behind rtctl's back. Check() is the audit of rtctl check."""
    env.profile("t", "[Profile]\nDescription=t\n[Sysctl]\nkernel.sched_rt_runtime_us=950002\n")
    env.start("--profile", "t")
    conn, obj = manager(env)
    knob = "/proc/sys/kernel/sched_rt_runtime_us"
    rows = [tuple(r) for r in obj.Verify(dbus_interface=IFACE)]
    assert rows == [(knob, "950002", "950002", "")], rows
    p = env.rtctl("verify", user=NOBODY)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "1 settings in force: 1 in place, 0 not." in p.stdout
    with open(knob, "w") as f:
        f.write("950003")  # behind rtctl's back: no event tells the daemon
    rows = [tuple(r) for r in obj.Verify(dbus_interface=IFACE)]
    assert rows == [(knob, "950002", "950003",
                     "not as the profile sets it: changed outside rtctl, or not applied yet")], rows
    assert open(knob).read().strip() == "950003", "Verify wrote"
    p = env.rtctl("--json", "verify")
    assert p.returncode == 1, p.stdout + p.stderr
    assert json.loads(p.stdout) == [{"object": knob, "desired": "950002", "actual": "950003",
                                     "in_place": False, "why": rows[0][3]}]
    # Plan("") may answer from a reading up to a second old; after that it sees the drift too.
    assert harness.wait_until(lambda: [tuple(r) for r in obj.Plan("", dbus_interface=IFACE)] ==
                              [(knob, "950003", "950002")])

    findings = {c: (s, d) for c, s, d, f in obj.Check(dbus_interface=IFACE)}
    assert set(findings) == {"kernel-config", "high-res-timers", "tickless", "irq-threads", "preemption",
                             "mitigations", "smt", "irqbalance", "power-rivals", "sched-ext", "audio-devices", "rt-throttling", "cpufreq",
                             "swappiness", "filesystems", "shared-irq", "inversion", "isolation", "reboot-pending"}, findings
    assert findings["irq-threads"][0] == "warn"  # this host boots without threadirqs
    # rtctl adds the user's side (limits, the SCHED_FIFO attempt) to the machine's.
    local = {c["check"]: c["status"] for c in json.loads(env.rtctl("--json", "check", "--local").stdout)}
    assert {c: local[c] for c in findings} == {c: s for c, (s, d) in findings.items()}
    assert {"user", "sched-fifo", "cpu-dma-latency"} <= set(local)
    assert obj.Restore(dbus_interface=IFACE) == (1, 0)


def test_plan_names_what_it_leaves_alone(env):
    # A misspelt sysctl is no write, so the plan has nothing to change; it must say so, not look clean.
    env.profile("typo", "[Profile]\nDescription=t\n[Sysctl]\nkernel.timer_migrashun=0\n")
    want = {"object": "/proc/sys/kernel/timer_migrashun",
            "left_alone": "not supported: this kernel does not have it"}
    for running in (False, True):  # rtctl plan reads the machine itself, then asks rtctld
        if running:
            d = env.start("--profile", "off")
        p = env.rtctl("plan", "--profile", "typo")
        assert p.returncode == 0, p.stderr
        assert "Nothing to change, but:" in p.stdout, p.stdout
        assert "/proc/sys/kernel/timer_migrashun: not supported: this kernel does not have it" in p.stdout
        assert env.rtctl_json("plan", "--profile", "typo") == [want]
    conn, obj = manager(env)
    changes, left = obj.PlanWithNotes("typo", dbus_interface=IFACE)
    assert list(changes) == [] and [tuple(x) for x in left] == [(want["object"], want["left_alone"])]
    # Plan keeps its contract: writes only.
    assert list(obj.Plan("typo", dbus_interface=IFACE)) == []
    d.stop()
