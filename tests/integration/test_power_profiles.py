"""The desktop's power slider and powerprofilesctl against rtctld (issue 25): power-profiles-daemon's D-Bus
API answered by rtctld while power-profiles-daemon does not run, driven by Debian 12's own powerprofilesctl
(0.12: net.hadess.PowerProfiles) on the private bus, polkit from python-dbusmock's polkitd. The VM tier runs
the same against the real system bus and polkitd."""
import os
import subprocess
import sys
import time

import dbus
import dbus.lowlevel
import pytest

from conftest import NOBODY, wait_until
from harness import HANG_SECONDS, RTCTL, Env, service_policy
from test_polkit import PolkitBus

PPCTL = "/usr/bin/powerprofilesctl"
OLD = ("net.hadess.PowerProfiles", "/net/hadess/PowerProfiles")
NEW = ("org.freedesktop.UPower.PowerProfiles", "/org/freedesktop/UPower/PowerProfiles")

# Each power profile an rtctl profile with a value of its own to read; "held" outranks them all, as the
# shipped audio profile outranks power-saver, desktop and performance.
PROFILES = {
    "low": "[Profile]\nRank=5\n[Sysctl]\nvm.stat_interval=2\n",
    "mid": "[Profile]\nRank=10\n[Sysctl]\nvm.stat_interval=3\n",
    "high": "[Profile]\nRank=15\n[Sysctl]\nvm.stat_interval=4\n",
    "held": "[Profile]\nRank=20\n[Sysctl]\nvm.stat_interval=7\n",
}
CONF = ("[Daemon]\nDefaultProfile=mid\nUevents=kernel\n"
        "[PowerProfiles]\nPowerSaver=low\nBalanced=mid\nPerformance=high\n")

pytestmark = pytest.mark.skipif(not os.access(PPCTL, os.X_OK), reason="needs powerprofilesctl (tools/deps.sh)")


@pytest.fixture(scope="module")
def ppbus(tmp_root):
    b = PolkitBus(tmp_root)
    yield b
    b.stop()


@pytest.fixture
def ppenv(tmp_root, ppbus):
    ppbus.allow()
    e = Env(tmp_root, ppbus)
    for name, text in PROFILES.items():
        e.profile(name, text)
    e.write("rtctl.conf", CONF)
    yield e
    e.cleanup()


def stat_interval():
    with open("/proc/sys/vm/stat_interval") as f:
        return f.read().strip()


def ppctl(env, *args, user=None):
    cmd = [PPCTL] + list(args)
    if user is not None:
        cmd = ["setpriv", "--reuid=%d" % user, "--regid=%d" % user, "--clear-groups"] + cmd
    return subprocess.run(cmd, env=env.environ, capture_output=True, text=True, timeout=HANG_SECONDS)


def status(env):
    return env.rtctl_json("status")


def ppd(bus, which=OLD):
    return dbus.Interface(bus.get_object(which[0], which[1]), "org.freedesktop.DBus.Properties")


def wait_serving(env):
    conn = dbus.bus.BusConnection(env.bus.address)
    assert wait_until(lambda: conn.name_has_owner(OLD[0]) and conn.name_has_owner(NEW[0])), \
        "rtctld does not answer power-profiles-daemon's names"
    return conn


def test_the_slider_switches_the_base_profile(ppenv):
    ppenv.start()
    wait_serving(ppenv)
    p = ppctl(ppenv, "get")
    assert p.returncode == 0 and p.stdout == "balanced\n", p.stdout + p.stderr
    listed = ppctl(ppenv, "list").stdout
    assert "* balanced:" in listed and "  performance:" in listed and "  power-saver:" in listed, listed
    assert "Driver:     rtctl" in listed, listed
    assert stat_interval() == "3"

    for name, rtctl_profile, value in [("performance", "high", "4"), ("power-saver", "low", "2"),
                                       ("balanced", "mid", "3")]:
        p = ppctl(ppenv, "set", name)
        assert p.returncode == 0, p.stderr
        assert wait_until(lambda: stat_interval() == value), (name, stat_interval())
        assert status(ppenv)["base_profile"] == rtctl_profile
        assert ppctl(ppenv, "get").stdout == name + "\n"
    # The choice is the base profile, remembered as `rtctl profile` remembers it.
    ppctl(ppenv, "set", "performance")
    d = ppenv.daemons[-1]
    d.stop()
    ppenv.start()
    assert stat_interval() == "4" and ppctl(ppenv, "get").stdout == "performance\n"


def test_both_names_answer_and_signal_the_change(ppenv):
    ppenv.start()
    conn = wait_serving(ppenv)
    for which in (OLD, NEW):
        props = ppd(conn, which).GetAll(which[0])
        assert props["ActiveProfile"] == "balanced"
        assert [str(p["Profile"]) for p in props["Profiles"]] == ["power-saver", "balanced", "performance"]
        assert all(str(p["Driver"]) != "placeholder" for p in props["Profiles"])
        assert props["PerformanceDegraded"] == "" and list(props["Actions"]) == []
    # dbus-monitor, as a user would watch: the bus's own account of what was signalled.
    monitor = subprocess.Popen(["dbus-monitor", "--address", ppenv.bus.address,
                                "type='signal',interface='org.freedesktop.DBus.Properties',"
                                "member='PropertiesChanged'"], stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)
        # Written through the new name: both objects tell it.
        ppd(conn, NEW).Set(NEW[0], "ActiveProfile", "power-saver")
        time.sleep(1)
        # A pass that changes nothing the slider shows (a reload; a hotplug storm makes many) tells nothing.
        conn.get_object("org.rtctl.Manager1", "/org/rtctl/Manager1").Reload(dbus_interface="org.rtctl.Manager1",
                                                                            timeout=HANG_SECONDS)
        time.sleep(1)
    finally:
        monitor.terminate()
        out = monitor.communicate(timeout=HANG_SECONDS)[0]
    told = []
    for block in ("\n" + out).split("\nsignal ")[1:]:
        if '"ActiveProfile"' in block and any("path=%s;" % p in block for p in (OLD[1], NEW[1])):
            assert '"power-saver"' in block, block
            told += [p for p in (OLD[1], NEW[1]) if "path=%s;" % p in block]
    assert sorted(told) == sorted([OLD[1], NEW[1]]), out[-3000:]
    assert ppd(conn).Get(OLD[0], "ActiveProfile") == "power-saver"


def test_launch_holds_performance_for_the_command(ppenv):
    ppenv.start()
    wait_serving(ppenv)
    p = ppctl(ppenv, "launch", "-p", "performance", "-r", "building", "-i", "org.example.Build", "--",
              "sh", "-c", "cat /proc/sys/vm/stat_interval; %s list-holds" % PPCTL)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "4", "the held performance profile was not in force while the command ran: %s" % p.stdout
    assert "Profile:         performance" in p.stdout and "org.example.Build" in p.stdout, p.stdout
    # Released when the command ended (powerprofilesctl's ReleaseProfile, or its leaving the bus).
    assert wait_until(lambda: stat_interval() == "3")
    assert status(ppenv)["holds"] == []


def test_a_slider_change_never_drops_the_audio_hold(ppenv):
    """A DAW's hold of a higher-ranked profile stays in force while the slider moves; the slider's choice
    is the base profile, in force again once the hold ends. A power-profile hold is released by a slider
    change, as power-profiles-daemon does; rtctl's own hold is not."""
    ppenv.start()
    conn = wait_serving(ppenv)
    holder = subprocess.Popen([RTCTL, "hold", "held", "--reason", "daw", "--", "sleep", "600"],
                              env=ppenv.environ)
    try:
        assert wait_until(lambda: stat_interval() == "7")
        ppd_holder = dbus.bus.BusConnection(ppenv.bus.address)
        iface = dbus.Interface(ppd_holder.get_object(*OLD), OLD[0])
        cookie = int(iface.HoldProfile("performance", "render", "org.example.Render"))
        # Both holds, the DAW's (an rtctl profile above performance) shown as performance.
        holds = ppd(conn).Get(OLD[0], "ActiveProfileHolds")
        assert len(holds) == 2 and {str(h["Profile"]) for h in holds} == {"performance"}, holds
        assert "org.example.Render" in [str(h["ApplicationId"]) for h in holds], holds
        p = ppctl(ppenv, "set", "power-saver")
        assert p.returncode == 0, p.stderr
        assert wait_until(lambda: status(ppenv)["base_profile"] == "low")
        time.sleep(0.5)
        assert stat_interval() == "7", "the slider dropped the audio hold"
        held = [h["profile"] for h in status(ppenv)["holds"]]
        assert held == ["held"], "the slider released %s" % held
        # The power-profile hold went with the change, as in power-profiles-daemon.
        with pytest.raises(dbus.exceptions.DBusException) as e:
            iface.ReleaseProfile(dbus.UInt32(cookie))
        assert e.value.get_dbus_name() == "org.freedesktop.DBus.Error.InvalidArgs"
        assert ppctl(ppenv, "get").stdout == "power-saver\n"
    finally:
        holder.terminate()
        holder.wait(HANG_SECONDS)
    assert wait_until(lambda: stat_interval() == "2"), "the slider's choice is not in force after the hold"


def test_bad_calls_get_named_errors_and_change_nothing(ppenv):
    ppenv.start()
    conn = wait_serving(ppenv)
    iface = dbus.Interface(conn.get_object(*NEW), NEW[0])
    for args, name, text in [
            (("balanced", "r", "a"), "InvalidArgs", "Only profiles 'performance' and 'power-saver'"),
            (("turbo", "r", "a"), "InvalidArgs", "Only profiles"),
            (("performance", "r\x01", "a"), "org.rtctl.Error.InvalidArgument", "control characters"),
            (("performance", "r" * 300, "a"), "InvalidArgs", "up to 256 bytes")]:
        with pytest.raises(dbus.exceptions.DBusException) as e:
            iface.HoldProfile(*args)
        assert e.value.get_dbus_name().endswith(name) and text in e.value.get_dbus_message(), e.value
    with pytest.raises(dbus.exceptions.DBusException) as e:
        iface.ReleaseProfile(dbus.UInt32(12345))
    assert e.value.get_dbus_name() == "org.freedesktop.DBus.Error.InvalidArgs"
    with pytest.raises(dbus.exceptions.DBusException) as e:
        ppd(conn, NEW).Set(NEW[0], "ActiveProfile", "turbo")
    assert e.value.get_dbus_name() == "org.freedesktop.DBus.Error.Failed"
    assert "Invalid profile name 'turbo'" in e.value.get_dbus_message()
    with pytest.raises(dbus.exceptions.DBusException) as e:
        ppd(conn, NEW).Set(NEW[0], "Profiles", dbus.Array([], signature="a{sv}"))
    assert e.value.get_dbus_name() in ("org.freedesktop.DBus.Error.PropertyReadOnly",
                                       "org.freedesktop.DBus.Error.InvalidArgs"), e.value
    # rtctl's own holds are released through rtctl's API only.
    rtctl_iface = dbus.Interface(conn.get_object("org.rtctl.Manager1", "/org/rtctl/Manager1"), "org.rtctl.Manager1")
    cookie = int(rtctl_iface.HoldProfile("held", "r", "org.example.Daw", timeout=HANG_SECONDS))
    with pytest.raises(dbus.exceptions.DBusException):
        iface.ReleaseProfile(dbus.UInt32(cookie))
    assert stat_interval() == "7"
    rtctl_iface.ReleaseProfile(dbus.UInt32(cookie), timeout=HANG_SECONDS)
    assert wait_until(lambda: stat_interval() == "3")
    assert ppenv.daemons[-1].running()


def test_the_session_user_needs_polkit_as_with_power_profiles_daemon(ppenv, ppbus):
    ppenv.start()
    wait_serving(ppenv)
    p = ppctl(ppenv, "set", "performance", user=NOBODY)
    assert p.returncode == 1 and "org.rtctl.power-profiles.switch-profile" in p.stderr, p.stderr
    p = ppctl(ppenv, "launch", "-p", "performance", "--", "true", user=NOBODY)
    assert "org.rtctl.power-profiles.hold-profile" in p.stderr, p.stderr
    assert stat_interval() == "3" and status(ppenv)["holds"] == []
    # Reading stays open.
    assert ppctl(ppenv, "get", user=NOBODY).stdout == "balanced\n"
    # What power-profiles-daemon allows the active session, polkit allows here.
    ppbus.allow("org.rtctl.power-profiles.switch-profile", "org.rtctl.power-profiles.hold-profile")
    p = ppctl(ppenv, "set", "performance", user=NOBODY)
    assert p.returncode == 0, p.stderr
    assert wait_until(lambda: stat_interval() == "4")
    p = ppctl(ppenv, "launch", "-p", "power-saver", "--", "cat", "/proc/sys/vm/stat_interval", user=NOBODY)
    # A power-saver hold is ranked below the base profile it would lower: performance stays.
    assert p.returncode == 0 and p.stdout.strip() == "4", p.stdout + p.stderr
    # rtctl's own switch is still its own action.
    assert ppenv.rtctl("profile", "low", user=NOBODY).returncode == 6


def test_the_slider_never_moves_a_base_profile_it_does_not_show(ppenv, ppbus):
    """An admin's base profile the slider does not show ("held" here, as realtime or audio) stays the base
    when the active session moves the slider: the move is a hold over it, which never lowers it, is not
    remembered, and ends when the admin chooses a base profile again."""
    d = ppenv.start()
    wait_serving(ppenv)
    assert ppenv.rtctl("profile", "held").returncode == 0
    assert wait_until(lambda: stat_interval() == "7")
    # The active session may switch the power profile, not rtctl's base profile.
    ppbus.allow("org.rtctl.power-profiles.switch-profile")
    p = ppctl(ppenv, "set", "performance", user=NOBODY)
    assert p.returncode == 0, p.stderr
    time.sleep(0.5)
    st = status(ppenv)
    assert st["base_profile"] == "held", "the slider replaced the admin's base profile: %s" % st["base_profile"]
    assert stat_interval() == "7", "the slider lowered the admin's base profile"
    with open(os.path.join(ppenv.state, "active-profile")) as f:
        assert f.read() == "held\n", "the slider's choice was remembered as the base profile"
    # The slider shows the choice made on it; rtctl lists it as the hold it is.
    assert ppctl(ppenv, "get", user=NOBODY).stdout == "performance\n"
    assert [(h["profile"], h["application_id"]) for h in st["holds"]] == [("high", "power slider")], st["holds"]
    assert ppctl(ppenv, "list-holds").stdout.strip() == "", "the slider's choice is not an application's hold"

    d.stop()
    ppenv.start()
    wait_serving(ppenv)
    st = status(ppenv)
    assert st["base_profile"] == "held" and st["holds"] == [] and stat_interval() == "7", st
    assert ppctl(ppenv, "get").stdout == "balanced\n"

    # Over a base it does not show, a slider choice lasts until the admin chooses a base profile.
    assert ppctl(ppenv, "set", "power-saver", user=NOBODY).returncode == 0
    assert ppctl(ppenv, "get").stdout == "power-saver\n" and stat_interval() == "7"
    assert ppenv.rtctl("profile", "mid").returncode == 0
    assert wait_until(lambda: stat_interval() == "3")
    assert status(ppenv)["holds"] == [] and ppctl(ppenv, "get").stdout == "balanced\n"
    # Over one it shows, the slider switches the base profile again.
    assert ppctl(ppenv, "set", "performance", user=NOBODY).returncode == 0
    assert wait_until(lambda: status(ppenv)["base_profile"] == "high")


def call_at(conn, dest, which, method, signature="", *args, iface="org.freedesktop.DBus.Properties"):
    """A call sent to dest as named: dbus-python's proxies would send it to the name's owner instead."""
    msg = dbus.lowlevel.MethodCallMessage(dest, which[1], iface, method)
    if args:
        msg.append(*args, signature=signature)
    return conn.send_message_with_reply_and_block(msg, HANG_SECONDS).get_args_list()


def refused_at(conn, dest, which):
    """Every call rtctld could answer at power-profiles-daemon's path, each refused as for no object there."""
    props = "org.freedesktop.DBus.Properties"
    for method, signature, args, iface in [
            ("GetAll", "s", (which[0],), props),
            ("Get", "ss", (which[0], "ActiveProfile"), props),
            ("Set", "ssv", (which[0], "ActiveProfile", dbus.String("performance", variant_level=1)), props),
            ("HoldProfile", "sss", ("performance", "r", "org.example.Sneak"), which[0]),
            ("Introspect", "", (), "org.freedesktop.DBus.Introspectable"),
            ("Ping", "", (), "org.freedesktop.DBus.Peer")]:
        with pytest.raises(dbus.exceptions.DBusException) as e:
            call_at(conn, dest, which, method, signature, *args, iface=iface)
            pytest.fail("%s at %s, sent to %s, was answered" % (method, which[1], dest))
        assert e.value.get_dbus_name() in ("org.freedesktop.DBus.Error.UnknownObject",
                                           "org.freedesktop.DBus.Error.UnknownMethod"), (method, e.value)


def test_power_profiles_daemons_paths_are_answered_only_under_its_names(ppenv):
    """While another owns power-profiles-daemon's names, rtctld answers nothing at its paths, even a call
    sent to rtctld's own name; under them, only calls sent to them (or to rtctld's unique name, where a
    client that resolved the owner sends), never ones sent to org.rtctl.Manager1."""
    other = dbus.bus.BusConnection(ppenv.bus.address)
    try:
        for name in (OLD[0], NEW[0]):
            assert other.request_name(name, dbus.bus.NAME_FLAG_DO_NOT_QUEUE) == \
                dbus.bus.REQUEST_NAME_REPLY_PRIMARY_OWNER
        d = ppenv.start()
        conn = dbus.bus.BusConnection(ppenv.bus.address)
        assert wait_until(lambda: all("power-profiles-daemon owns %s" % n in d.output() for n in (OLD[0], NEW[0])))
        unique = conn.get_name_owner("org.rtctl.Manager1")
        for which in (OLD, NEW):
            for dest in (unique, "org.rtctl.Manager1"):
                refused_at(conn, dest, which)
        assert status(ppenv)["base_profile"] == "mid" and status(ppenv)["holds"] == []

        # Given up: rtctld, queued, has them now.
        for name in (OLD[0], NEW[0]):
            other.release_name(name)
        assert wait_until(lambda: conn.get_name_owner(OLD[0]) == unique and conn.get_name_owner(NEW[0]) == unique)
        for which in (OLD, NEW):
            assert call_at(conn, unique, which, "Get", "ss", which[0], "ActiveProfile") == ["balanced"]
            assert call_at(conn, which[0], which, "Get", "ss", which[0], "ActiveProfile") == ["balanced"]
            refused_at(conn, "org.rtctl.Manager1", which)
            # The other interface's name at this path is no interface here.
            wrong = NEW if which == OLD else OLD
            with pytest.raises(dbus.exceptions.DBusException) as e:
                call_at(conn, unique, which, "HoldProfile", "sss", "performance", "r", "a", iface=wrong[0])
            assert e.value.get_dbus_name() in ("org.freedesktop.DBus.Error.UnknownMethod",
                                               "org.freedesktop.DBus.Error.UnknownInterface"), e.value
        assert status(ppenv)["base_profile"] == "mid" and status(ppenv)["holds"] == []

        # Taken back (rtctld allows replacement, as power-profiles-daemon does it): nothing answered again.
        for name in (OLD[0], NEW[0]):
            assert other.request_name(name, dbus.bus.NAME_FLAG_REPLACE_EXISTING | dbus.bus.NAME_FLAG_DO_NOT_QUEUE) \
                == dbus.bus.REQUEST_NAME_REPLY_PRIMARY_OWNER
        assert wait_until(lambda: conn.get_name_owner(OLD[0]) != unique)
        time.sleep(0.2)
        for which in (OLD, NEW):
            refused_at(conn, unique, which)
        assert d.running()
    finally:
        other.close()  # the bus is the module's: its names go with it


def test_power_profiles_daemon_keeps_its_names_and_rtctld_follows_it(ppenv, tmp_root):
    """Where power-profiles-daemon runs (here python-dbusmock's stand-in for it), it answers the slider;
    rtctld waits behind it and answers once it is gone."""
    mock = subprocess.Popen([sys.executable, "-m", "dbusmock", "--system", "--template", "power_profiles_daemon"],
                            env=ppenv.bus.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    conn = dbus.bus.BusConnection(ppenv.bus.address)
    try:
        assert wait_until(lambda: conn.name_has_owner(OLD[0])), "dbusmock's power-profiles-daemon did not come up"
        mock_owner = conn.get_name_owner(OLD[0])
        d = ppenv.start()
        assert wait_until(lambda: "power-profiles-daemon owns %s" % OLD[0] in d.output()), d.output()
        assert conn.get_name_owner(OLD[0]) == mock_owner
        listed = ppctl(ppenv, "list").stdout
        assert "Driver:     rtctl" not in listed, listed
    finally:
        mock.terminate()
        mock.wait(HANG_SECONDS)
    assert wait_until(lambda: conn.name_has_owner(OLD[0]) and "rtctl" in ppctl(ppenv, "list").stdout)
    assert ppctl(ppenv, "get").stdout == "balanced\n"


def test_serve_no_leaves_the_names_alone(ppenv):
    ppenv.write("rtctl.conf", CONF + "Serve=no\n")
    ppenv.start()
    conn = dbus.bus.BusConnection(ppenv.bus.address)
    time.sleep(0.5)
    assert not conn.name_has_owner(OLD[0]) and not conn.name_has_owner(NEW[0])
    p = ppctl(ppenv, "get")
    assert p.returncode == 1 and "Failed to communicate with power-profiles-daemon" in p.stderr, p.stderr


def test_a_bad_power_profiles_section_is_named_by_file_line_and_key(ppenv):
    """Bad settings fall back to the defaults as the rest of rtctl.conf does, each problem named."""
    ppenv.write("rtctl.conf", CONF.replace("Performance=high", "Performance=mid\nTurbo=x"))
    d = ppenv.start()
    out = d.output()
    assert "rtctl.conf:7: Performance=mid: the same profile as another power profile's" in out, out
    assert "rtctl.conf:8: Turbo=x: unknown key in [PowerProfiles]" in out, out
    wait_serving(ppenv)
    assert ppctl(ppenv, "get").returncode == 0


SYSTEMD = ("org.freedesktop.systemd1", "/org/freedesktop/systemd1")
PPD_UNIT = "/org/freedesktop/systemd1/unit/power_2dprofiles_2ddaemon_2eservice"


def job(n):
    """A unit's Job property as systemd has it: (uo), / for none."""
    return dbus.Struct((dbus.UInt32(n), dbus.ObjectPath("/org/freedesktop/systemd1/job/%d" % n if n else "/")),
                       signature="uo")


def activatable(tmp, *names):
    """A bus configuration that makes names activatable (listed by ListActivatableNames), as
    power-profiles-daemon's D-Bus activation files do; for Bus(extra_policies=...)."""
    d = os.path.join(tmp, "services-%d" % os.getpid())
    os.makedirs(d, exist_ok=True)
    for n in names:
        with open(os.path.join(d, n + ".service"), "w") as f:
            f.write("[D-BUS Service]\nName=%s\nExec=/bin/false\nUser=root\n"
                    "SystemdService=power-profiles-daemon.service\n" % n)
    path = os.path.join(tmp, "services-%d.conf" % os.getpid())
    with open(path, "w") as f:
        f.write('<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"\n'
                ' "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">\n'
                '<busconfig><servicedir>%s</servicedir></busconfig>\n' % d)
    return path


@pytest.fixture
def sdenv(tmp_root, request):
    """A bus with polkit and python-dbusmock's stand-in for systemd, on which power-profiles-daemon is
    enabled and its unit inactive with a start job queued, as at boot before it has started. Marked
    `ppd_names(...)`: the names its activation files name (none by default, as power-profiles-daemon's
    old name only)."""
    mark = request.node.get_closest_marker("ppd_names")
    extra = [service_policy(tmp_root, SYSTEMD[0])] + ([activatable(tmp_root, *mark.args)] if mark else [])
    b = PolkitBus(tmp_root, extra_policies=extra)
    b.allow()
    mock = subprocess.Popen([sys.executable, "-m", "dbusmock", "--system", SYSTEMD[0], SYSTEMD[1],
                             "org.freedesktop.systemd1.Manager"],
                            env=b.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    e = None
    try:
        assert wait_until(lambda: b.conn.name_has_owner(SYSTEMD[0])), "dbusmock's systemd did not come up"
        manager = dbus.Interface(b.conn.get_object(*SYSTEMD), "org.freedesktop.DBus.Mock")
        manager.AddMethod("", "GetUnitFileState", "s", "s", "ret = 'enabled'")
        manager.AddMethod("", "LoadUnit", "s", "o", "ret = '%s'" % PPD_UNIT)
        manager.AddObject(PPD_UNIT, "org.freedesktop.systemd1.Unit",
                          {"ActiveState": "inactive", "Job": job(7)}, [])
        e = Env(tmp_root, b)
        for name, text in PROFILES.items():
            e.profile(name, text)
        e.write("rtctl.conf", CONF)
        props = dbus.Interface(b.conn.get_object(SYSTEMD[0], PPD_UNIT), "org.freedesktop.DBus.Properties")

        def unit(active, job_id=None):
            props.Set("org.freedesktop.systemd1.Unit", "ActiveState", active)
            if job_id is not None:
                props.Set("org.freedesktop.systemd1.Unit", "Job", job(job_id))
        e.unit = unit
        yield e
    finally:
        if e:
            e.cleanup()
        mock.terminate()
        mock.wait(HANG_SECONDS)
        b.stop()


def test_the_slider_waits_for_power_profiles_daemons_start_job_not_a_clock(sdenv):
    """Enabled and about to start (its start job queued, however long that takes on a slow machine):
    its names stay free for it. Once its unit says it is not coming (failed, no job), rtctld answers the
    slider at once, not after a fixed wait."""
    conn = dbus.bus.BusConnection(sdenv.bus.address)
    d = sdenv.start()
    assert wait_until(lambda: "power-profiles-daemon is enabled: it answers the power slider; rtctld waits "
                      "for it." in d.output()), d.output()
    time.sleep(3)  # three reads of its unit: the job still queued
    assert not conn.name_has_owner(OLD[0]) and not conn.name_has_owner(NEW[0]), d.output()
    sdenv.unit("failed", 0)
    t0 = time.monotonic()
    assert wait_until(lambda: conn.name_has_owner(OLD[0]) and conn.name_has_owner(NEW[0]), timeout=30), d.output()
    assert time.monotonic() - t0 < 10, "rtctld took %.1f s to answer after the unit failed" % (time.monotonic() - t0)
    assert "power-profiles-daemon is enabled but failed with no job queued: answering the power slider." \
        in d.output(), d.output()
    assert ppctl(sdenv, "get").stdout == "balanced\n"
    assert d.running()


def test_the_slider_queues_behind_power_profiles_daemon_once_its_unit_runs(sdenv):
    """Its unit activating, then power-profiles-daemon (dbusmock's) takes its names: rtctld queues behind
    it and never takes them; once it is gone, rtctld answers."""
    conn = dbus.bus.BusConnection(sdenv.bus.address)
    sdenv.unit("activating")
    d = sdenv.start()
    assert wait_until(lambda: "rtctld waits for it." in d.output()), d.output()
    time.sleep(2)
    assert not conn.name_has_owner(OLD[0]), d.output()
    mock = subprocess.Popen([sys.executable, "-m", "dbusmock", "--system", "--template", "power_profiles_daemon"],
                            env=sdenv.bus.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: conn.name_has_owner(OLD[0])), "dbusmock's power-profiles-daemon did not come up"
        mock_owner = conn.get_name_owner(OLD[0])
        sdenv.unit("active", 0)
        assert wait_until(lambda: "power-profiles-daemon owns %s" % OLD[0] in d.output()), d.output()
        assert conn.get_name_owner(OLD[0]) == mock_owner
    finally:
        mock.terminate()
        mock.wait(HANG_SECONDS)
    assert wait_until(lambda: conn.name_has_owner(OLD[0]) and "rtctl" in ppctl(sdenv, "get").stdout + ppctl(sdenv, "list").stdout)


@pytest.mark.ppd_names(OLD[0], NEW[0])
def test_the_slider_waits_for_every_name_power_profiles_daemon_will_own(sdenv):
    """power-profiles-daemon 0.2x owns both names, and its unit is active once it has the first
    (seen on Debian 13: net.hadess.PowerProfiles, with org.freedesktop.UPower.PowerProfiles still free).
    Asked for then, that name was rtctld's and power-profiles-daemon exited. Both names activatable, one
    owned: rtctld waits; once the other has an owner, it queues behind both."""
    conn = dbus.bus.BusConnection(sdenv.bus.address)
    sdenv.unit("activating")
    d = sdenv.start()
    assert wait_until(lambda: "rtctld waits for it." in d.output()), d.output()
    stand_in = dbus.bus.BusConnection(sdenv.bus.address)
    try:
        assert stand_in.request_name(OLD[0], dbus.bus.NAME_FLAG_DO_NOT_QUEUE) == dbus.bus.REQUEST_NAME_REPLY_PRIMARY_OWNER
        sdenv.unit("active", 0)
        time.sleep(3)  # three reads of its unit, active, with one of its names
        assert not conn.name_has_owner(NEW[0]), d.output()
        assert stand_in.request_name(NEW[0], dbus.bus.NAME_FLAG_DO_NOT_QUEUE) == dbus.bus.REQUEST_NAME_REPLY_PRIMARY_OWNER
        for name in (OLD[0], NEW[0]):
            assert wait_until(lambda: "power-profiles-daemon owns %s" % name in d.output()), d.output()
            assert conn.get_name_owner(name) == stand_in.get_unique_name()
    finally:
        stand_in.close()
    assert wait_until(lambda: all(conn.name_has_owner(n) and conn.get_name_owner(n) != stand_in.get_unique_name()
                                  for n in (OLD[0], NEW[0]))), d.output()
    assert d.running()
