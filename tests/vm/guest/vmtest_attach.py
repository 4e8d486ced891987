"""The VM tier: attach and detach of audio processes, their origin, jackd (PipeWire's data loop:
vmtest_audio.py)."""

import os
import subprocess
import time

from vmtest_common import (call, cgroup_of, check, cpu_set, cpus_of, dbus_mod, journal, read, read_file, run,
    SESSION_UID, test, TEST_PROFILE, UNIT, wait_for)
from vmtest_isolation import cpu_list
from vmtest_session import (as_alice, brief, call_as_alice, ensure_rtctld_base, kill_quietly, last_cpu,
    pipewire_pid, rt_policy, rtprops, rules_brief, session, spawn_as_alice, thread_field, thread_table,
    threads_of, wakeups)


def cgroup_ino(path):
    """The inode (on cgroup v2: the cgroup id) of cgroup directory path (relative to the mount), or None."""
    try:
        return os.stat("/sys/fs/cgroup" + path).st_ino
    except OSError:
        return None


def start_time(pid):
    """Field 22 of /proc/PID/stat (the start time): with the PID, who the process is."""
    s = read("/proc/%d/stat" % pid)
    return s.rsplit(")", 1)[1].split()[19] if s else None


def alive(pid, born):
    """The process that started at born still runs: that PID, that start time, and no zombie (a killed
    child of ours keeps both until it is reaped)."""
    s = read("/proc/%d/stat" % pid)
    return bool(s) and start_time(pid) == born and s.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def wait_cgroup(pid, pred, timeout=30):
    return wait_for(lambda: pred(cgroup_of(pid) or ""), timeout, 0.1)


@test("pipewire-attach-detach", timeout=240)
def t_pipewire_attach_detach():
    """The README's `rtctl attach $(pidof pipewire)` with PipeWire where a desktop has it: alice's user
    service, in her user manager's delegated tree (user@1000.service/session.slice/pipewire.service).
    Attached, detached, attached again, then rtctld stopped: after the detach and after the stop the same
    PipeWire (PID and start time) runs in the very cgroup it ran in before the first attach (the same
    /proc/PID/cgroup, the same directory by inode). Before the fix the detach asked the system manager for
    pipewire.service, got NoSuchUnit, took that for "gone" and left PipeWire in rtctl's scope, where the
    stop of rtctl.slice killed it."""
    session()
    ensure_rtctld_base()
    steps = []
    try:
        pw = wait_for(pipewire_pid, 60, 0.5)
        check(pw, "no pipewire process of alice")
        born, home = start_time(pw), cgroup_of(pw)
        ino = cgroup_ino(home)
        check("/user@%d.service/" % SESSION_UID in home, "alice's pipewire is in %s, not in her user manager" % home)
        r, err, msg = call("SetProfile", "vmiso")
        check(err is None, "SetProfile(vmiso) as root: %s %s" % (err, msg))
        for round_ in (1, 2):
            r, err, msg = call("AttachProcess", dbus_mod().UInt32(pw))
            check(err is None, "AttachProcess(pipewire %d) #%d: %s %s" % (pw, round_, err, msg))
            check(wait_cgroup(pw, lambda c: c.startswith("/rtctl.slice/")),
                  "pipewire %d not in rtctl.slice after AttachProcess #%d: %s; %s" % (
                      pw, round_, cgroup_of(pw), brief(rtprops())))
            steps.append("attach #%d: %s" % (round_, cgroup_of(pw)))
            if round_ == 2:
                break
            r, err, msg = call("DetachProcess", dbus_mod().UInt32(pw))
            check(err is None, "DetachProcess(pipewire %d): %s %s" % (pw, err, msg))
            check(wait_cgroup(pw, lambda c: c == home),
                  "detached pipewire %d is in %s, it came from %s; %s" % (pw, cgroup_of(pw), home, brief(rtprops())))
            check(cgroup_ino(home) == ino, "%s is another directory now" % home)
            steps.append("detach: back in %s" % home)
        run(["systemctl", "stop", UNIT], check_rc=True, timeout=120)
        alive = start_time(pw) == born
        check(alive, "pipewire %d did not live through `systemctl stop rtctld` (start time %s, was %s); alice's "
              "pipewire now: %s" % (pw, start_time(pw), born, pipewire_pid()))
        check(cgroup_of(pw) == home and cgroup_ino(home) == ino,
              "after the stop pipewire %d is in %s, it came from %s" % (pw, cgroup_of(pw), home))
        steps.append("stop: pipewire %d alive in %s" % (pw, home))
        return "; ".join(steps)
    finally:
        ensure_rtctld_base()


@test("attach-origin-deputy", timeout=240)
def t_attach_origin_deputy():
    """Confused deputy: in her delegated tree alice names the directories. She moves a process of hers
    into a directory she made, named as if it were another user's manager (.../user@UID.service/stolen
    for tester's running user@UID.service), and has it attached and detached. The detach must put it
    back into the directory it came from (checked by inode) and never into tester's tree, where rtctld,
    replaying her path as root through AttachProcessesToUnit, used to move it."""
    session()
    ensure_rtctld_base()
    tester_uid = int(run(["id", "-u", "tester"], check_rc=True).stdout.strip())
    other = "user@%d.service" % tester_uid
    run(["systemctl", "start", other], check_rc=True, timeout=120)
    unit = "rtctl-vmtest-deputy"
    pid = None
    try:
        p = as_alice(["systemd-run", "--user", "--unit", unit, "sleep", "600"])
        check(p["rc"] == 0, "systemd-run --user as alice: %s" % p["stderr"][-300:])
        p = as_alice(["systemctl", "--user", "show", "-p", "MainPID", "--value", unit + ".service"])
        pid = int(p["stdout"].strip() or 0)
        check(pid, "no MainPID for alice's %s.service" % unit)
        mine = cgroup_of(pid)
        base = mine.rsplit("/", 1)[0]  # app.slice of her user manager: hers to write
        planted = "%s/rtctl-deputy/%s/stolen" % (base, other)
        p = as_alice(["sh", "-c", "mkdir -p /sys/fs/cgroup%s && echo %d > /sys/fs/cgroup%s/cgroup.procs" % (
            planted, pid, planted)])
        check(p["rc"] == 0 and cgroup_of(pid) == planted,
              "alice could not move her process into %s: rc %d %s; it is in %s" % (planted, p["rc"], p["stderr"], cgroup_of(pid)))
        ino = cgroup_ino(planted)
        r, err, msg = call("SetProfile", "vmiso")
        check(err is None, "SetProfile(vmiso) as root: %s %s" % (err, msg))
        ans = call_as_alice("AttachProcess", "u:%d" % pid)
        check("error" not in ans, "AttachProcess as alice: %s" % ans)
        check(wait_cgroup(pid, lambda c: c.startswith("/rtctl.slice/")),
              "process %d not in rtctl.slice after AttachProcess: %s" % (pid, cgroup_of(pid)))
        ans = call_as_alice("DetachProcess", "u:%d" % pid)
        check("error" not in ans, "DetachProcess as alice: %s" % ans)
        check(wait_cgroup(pid, lambda c: not c.startswith("/rtctl.slice/")),
              "process %d still in %s after DetachProcess; %s" % (pid, cgroup_of(pid), brief(rtprops())))
        where = cgroup_of(pid)
        check("user-%d.slice" % tester_uid not in where,
              "rtctld moved alice's process %d into %s, another user's tree, replaying the path she named (%s)" % (
                  pid, where, planted))
        check(where == planted and cgroup_ino(planted) == ino,
              "alice's process %d went to %s, it came from %s" % (pid, where, planted))
        return "attached and detached: back in %s (same inode), not in %s's tree" % (planted, other)
    finally:
        if pid:
            kill_quietly([pid])
        as_alice(["systemctl", "--user", "stop", unit + ".service"])
        run(["systemctl", "stop", other], timeout=120)
        ensure_rtctld_base()


@test("attach-origin-gone", timeout=300)
def t_attach_origin_gone():
    """A process alice runs in a transient scope of her user manager (`systemd-run --user --scope`, as a
    desktop starts an app) is the only one there: once it is attached, her manager removes the emptied
    scope. The detach, and the restore of `systemctl stop rtctld`, must put it somewhere in her own tree
    and never leave it in rtctl's scope, which the stop of rtctl.slice kills. Before the fix the restore
    found the origin gone, fell back to user@UID.service's own cgroup (which the kernel refuses: it has
    children), and the process died with rtctl.slice."""
    session()
    ensure_rtctld_base()
    mine = "/user-%d.slice/user@%d.service/" % (SESSION_UID, SESSION_UID)
    pids, steps = [], []
    try:
        r, err, msg = call("SetProfile", "vmiso")
        check(err is None, "SetProfile(vmiso) as root: %s %s" % (err, msg))
        for how in ("detach", "stop"):
            scope = "rtctl-vmtest-gone-%s.scope" % how
            pid = spawn_as_alice(["systemd-run", "--user", "--scope", "--unit", scope, "sleep", "1000"])
            pids.append(pid)
            check(wait_cgroup(pid, lambda c: c.endswith("/" + scope)),
                  "alice's sleep %d is in %s, not in %s" % (pid, cgroup_of(pid), scope))
            home, born = cgroup_of(pid), start_time(pid)
            r, err, msg = call("AttachProcess", dbus_mod().UInt32(pid))
            check(err is None, "AttachProcess(%d): %s %s" % (pid, err, msg))
            check(wait_cgroup(pid, lambda c: c.startswith("/rtctl.slice/")),
                  "process %d not in rtctl.slice after AttachProcess: %s" % (pid, cgroup_of(pid)))
            check(wait_for(lambda: cgroup_ino(home) is None, 30, 0.1),
                  "alice's manager did not remove the emptied %s" % home)
            if how == "detach":
                r, err, msg = call("DetachProcess", dbus_mod().UInt32(pid))
                check(err is None, "DetachProcess(%d): %s %s" % (pid, err, msg))
            else:
                run(["systemctl", "stop", UNIT], check_rc=True, timeout=120)
            check(alive(pid, born), "process %d did not live through the %s (its scope %s had gone)" % (
                pid, how, home))
            where = cgroup_of(pid)
            check(mine in where and not where.startswith("/rtctl.slice/"),
                  "after the %s process %d is in %s, not in alice's tree (it came from %s, now gone)" % (
                      how, pid, where, home))
            if how == "detach":
                check(not rtprops().get("Failures"), "the detach into %s is reported failed: %s" % (
                    where, rules_brief(rtprops())))
            check([l for l in journal(UNIT, 60) if "%s) is gone; put back into a new cgroup" % home in l],
                  "rtctld did not say where it put process %d: %s" % (pid, journal(UNIT, 8)))
            steps.append("%s: %d from the gone %s lives in %s" % (how, pid, home, where))
        return "; ".join(steps)
    finally:
        kill_quietly(pids)
        ensure_rtctld_base()


@test("attach-origin-nowhere", timeout=300)
def t_attach_origin_nowhere():
    """No safe place to go back to: alice's process ran in a transient scope of the system manager
    (`systemd-run --scope --uid=alice`, root's tree), which is removed once rtctld takes its only process;
    the unit systemd named is gone too. The stop of rtctld must not kill it: rtctl.slice, still holding
    it, is left alone, and the process lives on in rtctl's scope."""
    ensure_rtctld_base()
    scope = "rtctl-vmtest-nowhere.scope"
    proc = subprocess.Popen(["systemd-run", "--scope", "--uid", "alice", "--unit", scope, "sleep", "1000"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pid = proc.pid
    try:
        check(wait_cgroup(pid, lambda c: c.endswith("/" + scope)),
              "sleep %d is in %s, not in %s" % (pid, cgroup_of(pid), scope))
        home, born = cgroup_of(pid), start_time(pid)
        r, err, msg = call("SetProfile", "vmiso")
        check(err is None, "SetProfile(vmiso) as root: %s %s" % (err, msg))
        r, err, msg = call("AttachProcess", dbus_mod().UInt32(pid))
        check(err is None, "AttachProcess(%d): %s %s" % (pid, err, msg))
        check(wait_cgroup(pid, lambda c: c.startswith("/rtctl.slice/")),
              "process %d not in rtctl.slice after AttachProcess: %s" % (pid, cgroup_of(pid)))
        check(wait_for(lambda: cgroup_ino(home) is None, 30, 0.1), "the system manager kept the emptied %s" % home)
        run(["systemctl", "stop", UNIT], timeout=120)
        check(alive(pid, born), "process %d was killed by the stop of rtctld (its scope %s had gone); "
              "rtctld said: %s" % (pid, home, journal(UNIT, 8)))
        where = cgroup_of(pid)
        said = [l for l in journal(UNIT, 60) if "Not stopping rtctl.slice" in l]
        check(said, "rtctld did not say it left rtctl.slice alone for process %d: %s" % (pid, journal(UNIT, 8)))
        return "process %d from the gone %s lives through the stop, in %s" % (pid, home, where)
    finally:
        kill_quietly([pid])
        proc.wait()
        ensure_rtctld_base()


def jackd_off_iso(pid, iso):
    """'' when jackd's real-time threads are on the isolated CPUs and its other threads are not, else where
    they are."""
    th = threads_of(pid)
    if not th:
        return "jackd %d is gone" % pid
    rt = [t for t in th if rt_policy(t)]
    off = ["%d:%s%s on %s" % (t, c, " (RT)" if t in rt else "", thread_field(pid, t, "Cpus_allowed_list"))
           for t, c in sorted(th.items())
           if (cpu_set(thread_field(pid, t, "Cpus_allowed_list")) == iso) != (t in rt)]
    if not rt:
        return "jackd %d has no real-time thread" % pid
    return ("%d of %d threads misplaced, isolated %s (%s), process in %s" % (
        len(off), len(th), cpu_list(iso), " ".join(off[:6]), cgroup_of(pid))) if off else ""


def start_jackd(name):
    """jackd with the dummy driver as alice in her session (no sound card needed); its PID once its
    real-time thread runs."""
    log = "/tmp/rtctl-vmtest-%s.log" % name
    pid = spawn_as_alice(["jackd", "-R", "-d", "dummy", "-r", "48000", "-p", "1024"], out=log)
    rt = wait_for(lambda: [t for t in threads_of(pid) if t != pid and rt_policy(t)], 30, 0.25)
    check(rt, "jackd %d as alice has no real-time thread after 30 s (threads %s): %s" % (
        pid, thread_table(pid), read_file(log).strip()[-300:]))
    return pid


@test("jackd-attach-rule", timeout=180)
def t_jackd_attach_rule():
    """jackd as alice (dummy driver): with the audio profile in force and no command typed, the shipped
    [Attach jackd] rule (Threads=realtime: jack2 names no thread) puts the server's real-time threads on
    the isolated CPUs and leaves its other threads on housekeeping, whether jackd was running before the
    profile or started under it, and its process cycle keeps running there; back to the base profile,
    jackd runs where alice's session runs."""
    info = session()
    ensure_rtctld_base()
    steps, pids = [], []
    try:
        jack = start_jackd("jackd-1")
        pids.append(jack)
        r, err, msg = call("SetProfile", "audio")
        check(err is None, "SetProfile(audio) as root: %s %s" % (err, msg))
        props = rtprops()
        iso = cpu_set(props["IsolatedCPUs"])
        check(iso, "the audio profile isolates nothing: %s" % brief(props))
        t0 = time.monotonic()
        check(wait_for(lambda: not jackd_off_iso(jack, iso), 20, 0.25),
              "jackd running before the audio profile, 20 s on: %s. rtctld: %s" % (
                  jackd_off_iso(jack, iso), rules_brief(rtprops())))
        steps.append("jackd %d (running before): its %d real-time of %d threads on %s in %.1f s, in %s" % (
            jack, len([t for t in threads_of(jack) if rt_policy(t)]), len(threads_of(jack)), cpu_list(iso),
            time.monotonic() - t0, cgroup_of(jack)))
        listed = [t for t in rtprops().get("AttachedThreads", []) if t[0] == jack]
        check(listed, "AttachedThreads does not name jackd %d: %s" % (jack, rtprops().get("AttachedThreads")))

        kill_quietly([jack])
        wait_for(lambda: not os.path.exists("/proc/%d" % jack), 10, 0.1)
        jack = start_jackd("jackd-2")
        pids.append(jack)
        t0 = time.monotonic()
        check(wait_for(lambda: not jackd_off_iso(jack, iso), 20, 0.25),
              "jackd started under the audio profile, 20 s on: %s. rtctld: %s" % (
                  jackd_off_iso(jack, iso), rules_brief(rtprops())))
        dt = time.monotonic() - t0
        rt = [t for t in threads_of(jack) if t != jack and rt_policy(t)][0]
        rate = wakeups(jack, rt, 1.0)
        check(rate >= 20 and last_cpu(jack, rt) in iso, "jackd's real-time thread on the isolated CPUs: %d "
              "wakeups/s, last ran on cpu%s" % (rate, last_cpu(jack, rt)))
        steps.append("jackd %d (started under audio): placed in %.1f s, its real-time thread %d wakeups/s on cpu%d" % (
            jack, dt, rate, last_cpu(jack, rt)))

        r, err, msg = call("SetProfile", TEST_PROFILE)
        check(err is None, "SetProfile(%s) as root: %s %s" % (TEST_PROFILE, err, msg))
        ok = wait_for(lambda: all(thread_field(jack, t, "Cpus_allowed_list") == cpus_of(info["pid"])
                                  for t in threads_of(jack)), 20, 0.25)
        check(ok, "back to %s: jackd's threads %s in %s, alice's session runs on %s" % (
            TEST_PROFILE, thread_table(jack), cgroup_of(jack), cpus_of(info["pid"])))
        steps.append("back to %s: jackd on %s, in %s" % (TEST_PROFILE, cpus_of(jack), cgroup_of(jack)))
        return "; ".join(steps)
    finally:
        kill_quietly(pids)
        call("SetProfile", TEST_PROFILE)
