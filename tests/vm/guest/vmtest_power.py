"""The VM tier: the desktop's power slider (issue 25). Debian's own powerprofilesctl (0.12 on Debian 12:
net.hadess.PowerProfiles; 0.30 on Debian 13: org.freedesktop.UPower.PowerProfiles) as alice in her active
session, on the real system bus with the real polkitd, drives rtctld while power-profiles-daemon does not
run; when it runs, it keeps its names."""

import os
import subprocess
import time

from vmtest_common import (call, check, con, dbus_mod, RTCTL, run, test, TEST_PROFILE, UNIT, unit_prop,
                           wait_for)
from vmtest_session import (as_alice, brief, ensure_rtctld_base, holds_of, kill_quietly, rtprops, session,
    spawn_as_alice)

PPCTL = "/usr/bin/powerprofilesctl"
PPD_UNIT = "power-profiles-daemon.service"
NAMES = ("net.hadess.PowerProfiles", "org.freedesktop.UPower.PowerProfiles")


def owner_pid(name):
    """The PID that owns a bus name, 0 for none."""
    dbus = dbus_mod()
    bus = dbus.SystemBus()
    try:
        daemon = dbus.Interface(bus.get_object("org.freedesktop.DBus", "/org/freedesktop/DBus"),
                                "org.freedesktop.DBus")
        return int(daemon.GetConnectionUnixProcessID(name))
    except dbus.exceptions.DBusException:
        return 0


def ppd_will_own():
    """The names power-profiles-daemon's D-Bus activation files name: both for 0.20 and later (Debian
    13), the old one for 0.12 (Debian 12)."""
    dbus = dbus_mod()
    daemon = dbus.Interface(dbus.SystemBus().get_object("org.freedesktop.DBus", "/org/freedesktop/DBus"),
                            "org.freedesktop.DBus")
    names = [str(n) for n in daemon.ListActivatableNames()]
    return [n for n in NAMES if n in names] or [NAMES[0]]


def rtctld_pid():
    return int(unit_prop(UNIT, "MainPID").get("MainPID", 0))


SLOW_DROPIN = "/run/systemd/system/power-profiles-daemon.service.d/vmtest-slow.conf"
SLOW_START = 100  # s: past the 90 s rtctld once bounded its wait with


@test("power-slider", timeout=480)
def t_power_slider():
    """power-profiles-daemon disabled (as the image has it): rtctld answers both names. alice, in her active session, moves the slider with powerprofilesctl (no password, as
    power-profiles-daemon allows the active session): over root's base profile vmtest, which the slider
    does not show, her choice is a hold and vmtest stays the base (saved too); over desktop each choice
    is rtctld's base profile; `launch`
    holds performance for its command; a slider move while audio is held keeps the audio isolation, and
    the choice takes over when the hold ends. A user outside the session is refused. power-profiles-daemon
    enabled: a restarted rtctld leaves it the names, it starts and answers; stopped, rtctld answers; its
    start job held 100 s across a restart of rtctld, the names wait for it."""
    session()
    ensure_rtctld_base()
    check(os.access(PPCTL, os.X_OK), "no %s in the image" % PPCTL)
    steps = []
    holder = None
    enabled = False
    try:
        me = rtctld_pid()
        check(wait_for(lambda: all(owner_pid(n) == me for n in NAMES), 20, 0.2),
              "power-profiles-daemon disabled: the names' owners %s, rtctld is %d" % (
                  [owner_pid(n) for n in NAMES], me))
        steps.append("power-profiles-daemon disabled: rtctld (pid %d) answers both names" % me)

        p = as_alice([PPCTL, "get"])
        check(p["rc"] == 0 and p["stdout"].strip() == "balanced",
              "powerprofilesctl get as alice: rc=%d %s" % (p["rc"], (p["stdout"] + p["stderr"]).strip()[-300:]))

        # root's base profile vmtest is none the slider shows: alice's choice is held over it, never the base
        p = as_alice([PPCTL, "set", "performance"])
        check(p["rc"] == 0, "powerprofilesctl set performance over vmtest: %s" % p["stderr"].strip()[-300:])
        time.sleep(1)
        props = rtprops()
        check(props.get("BaseProfile") == TEST_PROFILE and
              [h.get("ApplicationId") for h in holds_of(props)] == ["power slider"],
              "the slider moved root's base profile %s: %s" % (TEST_PROFILE, brief(props)))
        with open("/var/lib/rtctl/active-profile") as f:
            saved = f.read().strip()
        check(saved == TEST_PROFILE, "the slider's choice was saved as the base profile: %r" % saved)
        check(as_alice([PPCTL, "get"])["stdout"].strip() == "performance", "get after set over vmtest")
        r, err, msg = call("SetProfile", "desktop")
        check(err is None and not holds_of(rtprops()), "SetProfile(desktop): %s %s %s" % (err, msg, brief(rtprops())))
        steps.append("alice's `set performance` over root's vmtest: held, base and saved profile stay vmtest")

        for name, profile in (("performance", "performance"), ("power-saver", "power-saver")):
            p = as_alice([PPCTL, "set", name])
            check(p["rc"] == 0, "powerprofilesctl set %s as alice: rc=%d %s" % (name, p["rc"], p["stderr"].strip()[-300:]))
            check(wait_for(lambda: rtprops().get("BaseProfile") == profile and
                           rtprops().get("ActiveProfile") == profile, 20, 0.2),
                  "after `powerprofilesctl set %s`: %s" % (name, brief(rtprops())))
            p = as_alice([PPCTL, "get"])
            check(p["stdout"].strip() == name, "powerprofilesctl get after set %s: %r" % (name, p["stdout"]))
        steps.append("alice's `set performance`, `set power-saver`: rtctld's base profile each time")

        # outside the active session: polkit says no
        p = run(["setpriv", "--reuid=tester", "--regid=tester", "--clear-groups", PPCTL, "set", "performance"])
        check(p.returncode != 0 and rtprops().get("BaseProfile") == "power-saver",
              "powerprofilesctl set as tester (no session): rc=%d %s; %s" % (
                  p.returncode, (p.stderr or p.stdout).strip()[-200:], brief(rtprops())))
        steps.append("tester (no session) refused: %s" % p.stderr.strip().splitlines()[-1][-120:])

        # launch: performance held while the command runs
        p = as_alice([PPCTL, "launch", "-p", "performance", "-r", "vmtest", "-i", "org.rtctl.vmtest", "--",
                      "sh", "-c", "busctl --system get-property org.rtctl.Manager1 /org/rtctl/Manager1 "
                      "org.rtctl.Manager1 ActiveProfile"], timeout=60)
        check(p["rc"] == 0 and '"performance"' in p["stdout"],
              "powerprofilesctl launch -p performance as alice: rc=%d %s" % (p["rc"], (p["stdout"] + p["stderr"]).strip()[-300:]))
        check(wait_for(lambda: not rtprops().get("ActiveProfileHolds") and rtprops().get("ActiveProfile") == "power-saver",
                       20, 0.2), "after launch ended: %s" % brief(rtprops()))
        steps.append("launch: ActiveProfile performance during the command, power-saver after")

        # the audio hold survives the slider
        holder = spawn_as_alice([RTCTL, "hold", "audio", "--reason", "daw", "--", "sleep", "600"])
        check(wait_for(lambda: rtprops().get("ActiveProfile") == "audio" and rtprops().get("IsolatedCPUs"), 30, 0.25),
              "alice's `rtctl hold audio`: %s" % brief(rtprops()))
        iso = rtprops()["IsolatedCPUs"]
        p = as_alice([PPCTL, "set", "performance"])
        check(p["rc"] == 0, "powerprofilesctl set performance during the audio hold: %s" % p["stderr"].strip()[-300:])
        check(wait_for(lambda: rtprops().get("BaseProfile") == "performance", 20, 0.2), brief(rtprops()))
        time.sleep(1)
        props = rtprops()
        check(props.get("ActiveProfile") == "audio" and props.get("IsolatedCPUs") == iso and holds_of(props, "audio"),
              "the slider dropped the audio hold: %s" % brief(props))
        kill_quietly([holder])
        holder = None
        check(wait_for(lambda: rtprops().get("ActiveProfile") == "performance" and not rtprops().get("IsolatedCPUs"),
                       30, 0.25), "after the audio hold ended: %s" % brief(rtprops()))
        steps.append("slider to performance while audio was held: isolation %s kept, performance after" % iso)

        # power-profiles-daemon enabled: it starts after rtctld at boot and exits if it cannot own its
        # names, so rtctld leaves them to it and queues once it has them; stopped, rtctld answers again
        run(["systemctl", "enable", PPD_UNIT], check_rc=True, timeout=60)
        enabled = True
        run(["systemctl", "restart", UNIT], check_rc=True, timeout=120)
        me = rtctld_pid()
        time.sleep(1)
        check(all(owner_pid(n) != me for n in NAMES), "rtctld took the names of an enabled power-profiles-daemon")
        run(["systemctl", "start", PPD_UNIT], check_rc=True, timeout=60)
        ppd = int(unit_prop(PPD_UNIT, "MainPID").get("MainPID", 0))
        own = ppd_will_own()
        check(ppd and wait_for(lambda: all(owner_pid(n) == ppd for n in own), 20, 0.2),
              "power-profiles-daemon (pid %d) does not own %s (owners %s)" % (ppd, own, [owner_pid(n) for n in own]))
        run(["systemctl", "stop", PPD_UNIT], check_rc=True, timeout=60)
        check(wait_for(lambda: all(owner_pid(n) == me for n in NAMES), 20, 0.2),
              "power-profiles-daemon stopped: the names' owners %s, rtctld is %d" % ([owner_pid(n) for n in NAMES], me))
        steps.append("power-profiles-daemon enabled: rtctld left it the names, it ran (pid %d, owning %s), "
                     "stopped: rtctld answers" % (ppd, ", ".join(own)))

        # Its start job queued for longer than any clock rtctld could bound its wait with (a loaded boot):
        # ExecStartPre= sleeps 100 s, rtctld restarts meanwhile, and the names stay free until it has them.
        os.makedirs(os.path.dirname(SLOW_DROPIN), exist_ok=True)
        with open(SLOW_DROPIN, "w") as f:
            # its start timeout (90 s by default) past the sleep: the job stays queued, not failed
            f.write("[Service]\nExecStartPre=/bin/sleep %d\nTimeoutStartSec=%d\n" % (SLOW_START, SLOW_START + 120))
        run(["systemctl", "daemon-reload"], check_rc=True, timeout=60)
        run(["systemctl", "start", "--no-block", PPD_UNIT], check_rc=True, timeout=60)
        run(["systemctl", "restart", UNIT], check_rc=True, timeout=120)
        me = rtctld_pid()
        t0, taken = time.monotonic(), []
        while time.monotonic() - t0 < SLOW_START + 60 and not unit_prop(PPD_UNIT, "ActiveState").get(
                "ActiveState") == "active":
            # Read before whether power-profiles-daemon has a name yet: a name of rtctld's while it has
            # none (it never gives one back here) was taken before it came; once it has one, rtctld may
            # queue (0.12 never asks for the new name, which is then rtctld's).
            taken = [n for n in NAMES if owner_pid(n) == me]
            if any(owner_pid(n) not in (0, me) for n in NAMES):
                break
            check(not taken, "rtctld took %s %.0f s into power-profiles-daemon's start job" % (
                taken, time.monotonic() - t0))
            time.sleep(1)
        check(wait_for(lambda: unit_prop(PPD_UNIT, "ActiveState").get("ActiveState") == "active", 60),
              "power-profiles-daemon's unit never became active after its slow start")
        ppd = int(unit_prop(PPD_UNIT, "MainPID").get("MainPID", 0))
        # every name it will own is its own (0.12 owns only the old one, and the new one is rtctld's once
        # it queued); seen on Debian 13 with the new one rtctld's, and power-profiles-daemon gone
        own = ppd_will_own()
        check(ppd and wait_for(lambda: all(owner_pid(n) == (ppd if n in own else me) for n in NAMES), 30, 0.2),
              "after its slow start, power-profiles-daemon (pid %d, owning %s) does not own them: owners %s, "
              "rtctld %d" % (ppd, own, [owner_pid(n) for n in NAMES], me))
        steps.append("its start job queued %.0f s across a restart of rtctld: the names waited for it" % (
            time.monotonic() - t0))
        return "; ".join(steps)
    finally:
        if holder:
            kill_quietly([holder])
        r = run(["systemctl", "stop", PPD_UNIT], timeout=60)
        if r.returncode != 0:
            con.line("VMLOG power-slider cleanup: %s" % r.stderr.strip())
        if os.path.exists(SLOW_DROPIN):
            os.unlink(SLOW_DROPIN)
            run(["systemctl", "daemon-reload"], timeout=60)
        if enabled:
            run(["systemctl", "disable", PPD_UNIT], timeout=60)
        ensure_rtctld_base()


DAW_DIR = "/usr/local/lib/rtctl-vmtest-daw"
HOLD_PROFILE = "/etc/rtctl/profiles/vmhold.conf"


@test("hold-rule", timeout=240)
def t_hold_rule():
    """A [Hold] rule of the base profile (issue 25): a stand-in DAW (a copy of sleep whose path the rule's
    exe: glob matches) started by alice in her active session holds audio, with no command typed: the
    isolation comes, the hold is listed with the rule's name, and it ends when the program exits. The same
    program run by root (not the active session's user) holds nothing."""
    session()
    ensure_rtctld_base()
    os.makedirs(DAW_DIR, exist_ok=True)
    exe = os.path.join(DAW_DIR, "fakedaw-8.12")
    run(["install", "-m", "0755", "/bin/sleep", exe], check_rc=True)
    with open(HOLD_PROFILE, "w") as f:
        f.write("[Profile]\nDescription=VM tier: a [Hold] rule\nInclude=vmtest\n"
                "[Hold daw]\nMatch=exe:%s/fakedaw-[0-9]* user:active\nProfile=audio\n" % DAW_DIR)
    steps = []
    pids = []
    try:
        r, err, msg = call("SetProfile", "vmhold")
        check(err is None, "SetProfile(vmhold): %s %s" % (err, msg))
        rootp = subprocess.Popen([exe, "60"])
        pids.append(rootp.pid)
        time.sleep(1.5)
        props = rtprops()
        check(props.get("ActiveProfile") == "vmhold" and not holds_of(props),
              "root's stand-in DAW (not the active user) held: %s" % brief(props))
        kill_quietly([rootp.pid])
        rootp.wait()
        steps.append("root's process: no hold")
        pid = spawn_as_alice([exe, "120"])
        pids.append(pid)
        check(wait_for(lambda: rtprops().get("ActiveProfile") == "audio" and rtprops().get("IsolatedCPUs"), 30, 0.25),
              "alice's stand-in DAW (pid %d): %s" % (pid, brief(rtprops())))
        holds = holds_of(rtprops(), "audio")
        check(len(holds) == 1 and holds[0].get("ApplicationId") == "daw" and "PID %d" % pid in holds[0].get("Reason", ""),
              "the rule's hold: %s" % holds)
        iso = rtprops()["IsolatedCPUs"]
        # The desktop's power slider lists it too, by the rule's name (power-profiles-daemon's API).
        p = as_alice(["busctl", "--system", "--json=short", "get-property", NAMES[0], "/net/hadess/PowerProfiles",
                      NAMES[0], "ActiveProfileHolds"])
        check(p["rc"] == 0 and '"ApplicationId":{"type":"s","data":"daw"}' in p["stdout"].replace(" ", ""),
              "ActiveProfileHolds on %s: rc=%d %s" % (NAMES[0], p["rc"], (p["stdout"] + p["stderr"])[-400:]))
        steps.append("alice's fakedaw-8.12 (pid %d): audio held as %r, CPUs %s isolated" % (
            pid, holds[0].get("Reason"), iso))
        kill_quietly([pid])
        check(wait_for(lambda: rtprops().get("ActiveProfile") == "vmhold" and not rtprops().get("IsolatedCPUs")
                       and not holds_of(rtprops()), 30, 0.25), "after it exited: %s" % brief(rtprops()))
        steps.append("it exited: vmhold back, nothing isolated")
        return "; ".join(steps)
    finally:
        kill_quietly(pids)
        ensure_rtctld_base()
        for path in (HOLD_PROFILE, exe):
            try:
                os.unlink(path)
            except OSError:
                pass
