"""The VM tier: the session user alice (tests/vm/README.md: the session user), polkit, holds and
`rtctl check` from her session."""

import glob
import json
import os
import re
import signal
import subprocess
import sys
import time

from vmtest_common import (AGENT_SOCK, BUS_NAME, call, cgroup_of, check, cpu_set, cpus_of,
    ERR_NOT_AUTHORIZED, Fail, IFACE, manager, OBJ_PATH, plain, read, read_file, recv_line, require_rtctld,
    RTCTL, run, SESSION_UID, SESSION_USER, STATE, test, TEST_PROFILE, UNIT, unit_prop, wait_for)
from vmtest_daemon import cli
from vmtest_isolation import cpu_list


SCRIPT = "/usr/lib/rtctl-vmtest/rtctl-vmtest.py"
SILENCE_WAV = "/var/tmp/rtctl-vmtest-silence.wav"
SINK = "rtctl-vmtest-sink"  # guest/pipewire/rtctl-vmtest-sink.conf
POLKIT_RULES = "/etc/polkit-1/rules.d/50-rtctl-vmtest.rules"


def agent(req, timeout=60):
    """One request to the agent in alice's session; its answer (Fail on an error)."""
    import socket
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout + 15)
    try:
        s.connect(AGENT_SOCK)
        s.sendall((json.dumps(req) + "\n").encode())
        data = recv_line(s)
    except OSError as e:
        raise Fail("the agent in alice's session did not answer %s: %s" % (req.get("op"), e))
    finally:
        s.close()
    try:
        ans = json.loads(data)
    except ValueError:
        raise Fail("the agent in alice's session answered %r" % data[:200])
    if "error" in ans:
        raise Fail("in alice's session: %s" % ans["error"])
    return ans


def as_alice(argv, timeout=60):
    """Run argv as alice in her session; {'rc', 'stdout', 'stderr'}."""
    return agent({"op": "run", "argv": argv, "timeout": timeout}, timeout)


def spawn_as_alice(argv, out=None):
    """Start argv as alice in her session, not waited for; its PID (output to the file `out`)."""
    return agent({"op": "spawn", "argv": argv, "out": out})["pid"]


def call_as_alice(method, *args):
    """A D-Bus call by alice from her session (dbus-python: the error's name); 'u:N' and 'h:PID'
    arguments as typed_arg."""
    p = as_alice([sys.executable, SCRIPT, "--call-as-user-helper", method] + list(args))
    try:
        return json.loads(p["stdout"].strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise Fail("%s as alice: rc=%d %s" % (method, p["rc"], (p["stderr"] or p["stdout"]).strip()[-300:]))


def busctl_as_alice(method, sig, *args):
    """busctl call by alice, with no interactive authorization: nobody could type a password."""
    return as_alice(["busctl", "--system", "--allow-interactive-authorization=no", "--timeout=60", "call",
                     BUS_NAME, OBJ_PATH, IFACE, method, sig] + [str(a) for a in args], timeout=70)


def pkcheck(action, pid):
    """polkit's answer for process PID (0 authorized, 1 not, 2 only with authentication, 3 dismissed)."""
    return run(["pkcheck", "--action-id", action, "--process", str(pid)], timeout=30).returncode


def session_diagnostics():
    out = []
    for cmd in (["systemctl", "status", "--no-pager", "-n", "8", "getty@tty1.service"],
                ["loginctl", "list-sessions", "--no-legend"],
                ["journalctl", "-b", "-n", "15", "--no-pager", "-o", "short-monotonic",
                 "_SYSTEMD_UNIT=systemd-logind.service", "+", "_SYSTEMD_UNIT=getty@tty1.service"]):
        p = run(cmd, timeout=30)
        out.append("%s: %s" % (" ".join(cmd[:2]), " | ".join((p.stdout + p.stderr).strip().splitlines()[-10:])))
    return "; ".join(out)


def wait_for_agent(timeout):
    """The agent's info once alice's login shell on tty1 became it, else None after timeout s."""
    def up():
        try:
            return agent({"op": "info"}, 10)
        except Fail:
            return None
    return wait_for(up, timeout, 0.5)


def session():
    """alice's session, started once per run: getty@tty1 logs her in, her login shell becomes the
    agent. Checked here: logind has the session active, local, on seat0, and polkit counts the agent
    as a process of an active local session (org.freedesktop.login1.reboot is allow_active=yes only)."""
    info = STATE.get("session")
    if info:
        try:
            agent({"op": "info"}, 15)
            return info
        except Fail:
            STATE.pop("session")
    run(["systemctl", "start", "getty@tty1.service"], check_rc=True)
    info = wait_for_agent(120)
    check(info, "no agent in alice's session 120 s after starting getty@tty1: %s" % session_diagnostics())
    check(info["uid"] == SESSION_UID, "the agent runs as uid %s" % info["uid"])
    sid = info["env"].get("XDG_SESSION_ID")
    check(sid, "alice's login has no XDG_SESSION_ID (pam_systemd did not register it): %s" % info["env"])
    keys = ("Name", "Active", "Remote", "Seat", "Class", "Type", "State", "VTNr")
    p = run(["loginctl", "show-session", sid] + ["-p" + k for k in keys], timeout=30)
    sp = dict(l.split("=", 1) for l in p.stdout.splitlines() if "=" in l)
    want = {"Name": SESSION_USER, "Active": "yes", "Remote": "no", "Seat": "seat0", "Class": "user"}
    bad = ["%s=%s" % (k, sp.get(k)) for k, v in want.items() if sp.get(k) != v]
    check(not bad, "logind's session %s of alice: %s, want %s (%s)" % (sid, " ".join(bad), want, sp))
    check(info["cgroup"].endswith("/session-%s.scope" % sid),
          "the agent is in %s, not in session %s's scope" % (info["cgroup"], sid))
    rc = pkcheck("org.freedesktop.login1.reboot", info["pid"])
    check(rc == 0, "polkit does not count alice's agent (pid %d) as in an active local session: pkcheck "
          "org.freedesktop.login1.reboot exited %d" % (info["pid"], rc))
    info["session"] = sp
    STATE["session"] = info
    return info


def chvt(n):
    """Bring VT n to the front (VT_ACTIVATE, VT_WAITACTIVE): logind makes the session on it the active one."""
    import fcntl
    fd = os.open("/dev/tty0", os.O_RDWR | os.O_NOCTTY)
    try:
        fcntl.ioctl(fd, 0x5606, n)
        fcntl.ioctl(fd, 0x5607, n)
    finally:
        os.close(fd)


def session_prop(sid, key):
    return run(["loginctl", "show-session", sid, "-p", key, "--value"], timeout=30).stdout.strip()


def kill_quietly(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def ensure_rtctld_base():
    """rtctld running with the base profile vmtest (no isolation); no holds left from earlier tests."""
    if unit_prop(UNIT, "ActiveState").get("ActiveState") != "active":
        run(["systemctl", "start", UNIT], check_rc=True, timeout=60)
    require_rtctld()
    r, err, msg = call("SetProfile", TEST_PROFILE)
    check(err is None, "SetProfile(%s) as root: %s %s" % (TEST_PROFILE, err, msg))


def rtprops():
    return plain(manager()[1].GetAll(IFACE, dbus_interface="org.freedesktop.DBus.Properties", timeout=30))


def holds_of(props, profile=None):
    return [h for h in props.get("ActiveProfileHolds", []) if profile is None or h.get("Profile") == profile]


def brief(props):
    return "ActiveProfile=%s BaseProfile=%s holds=%s IsolatedCPUs=%r Failures=%s Unsupported=%s" % (
        props.get("ActiveProfile"), props.get("BaseProfile", "(no such property)"),
        props.get("ActiveProfileHolds", "(no such property)"), props.get("IsolatedCPUs"),
        props.get("Failures"), props.get("Unsupported"))


def uid_of(pid):
    for line in (read("/proc/%d/status" % pid) or "").splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    return None


def pids_by_cmdline(argv, uid=None):
    want = "\0".join(argv)
    out = []
    for d in glob.glob("/proc/[0-9]*"):
        try:
            with open(d + "/cmdline", "rb") as f:
                cmd = f.read().decode("utf-8", "replace").rstrip("\0")
        except OSError:
            continue
        pid = int(d.split("/")[2])
        if cmd == want and (uid is None or uid_of(pid) == uid):
            out.append(pid)
    return out


def no_base_isolation():
    """'' when the machine shows no isolation (the base profile vmtest isolates nothing), else what is left."""
    bad = []
    for unit in ("user.slice", "system.slice"):
        got = unit_prop(unit, "AllowedCPUs").get("AllowedCPUs")
        if got:
            bad.append("%s AllowedCPUs=%s" % (unit, got))
    if os.path.exists("/sys/fs/cgroup/rtctl.slice"):
        bad.append("rtctl.slice (partition %r) still there" % read("/sys/fs/cgroup/rtctl.slice/cpuset.cpus.partition"))
    return "; ".join(bad)


@test("session-pipewire", timeout=180)
def t_session_pipewire():
    """The session user as a desktop has one: alice logged in on tty1 is in a logind session that is
    active and local on seat0, and polkit counts her processes as in it; PipeWire and WirePlumber run as
    her user services, PipeWire's data loop runs real-time, and a stream played to the null sink drives
    the graph. No rtctl in this one: it checks the peers the next tests rely on."""
    info = session()
    sleeper = spawn_as_alice(["sleep", "120"])
    try:
        check(cgroup_of(sleeper) == info["cgroup"], "a process alice's agent started is in %s, the session is %s" % (
            cgroup_of(sleeper), info["cgroup"]))
        rc = pkcheck("org.freedesktop.login1.reboot", sleeper)
        check(rc == 0, "polkit: a process started in alice's session is not in an active local session (pkcheck %d)" % rc)
    finally:
        kill_quietly([sleeper])
    # the control: alice's process started by root with setpriv is in no session, and polkit says so
    outsider = subprocess.Popen(["setpriv", "--reuid", SESSION_USER, "--regid", SESSION_USER, "--init-groups",
                                 "--reset-env", "sleep", "120"])
    try:
        time.sleep(0.2)
        rc_out = pkcheck("org.freedesktop.login1.reboot", outsider.pid)
        check(rc_out != 0, "polkit authorizes org.freedesktop.login1.reboot for alice's process %d outside her session "
              "(in %s): the session checks above prove nothing" % (outsider.pid, cgroup_of(outsider.pid)))
    finally:
        outsider.kill()
        outsider.wait()
    pw = wait_for(pipewire_pid, 60, 0.5)
    units = as_alice(["systemctl", "--user", "show", "-p", "Id", "-p", "ActiveState", "-p", "MainPID",
                      "pipewire.socket", "pipewire.service", "wireplumber.service"])
    check(pw, "no pipewire process of alice 60 s after her login: %s" % units["stdout"].replace("\n", " "))
    check(units["stdout"].count("ActiveState=active") == 3,
          "alice's PipeWire units: %s" % units["stdout"].replace("\n", " "))
    check(wait_for(lambda: pids_by_comm("wireplumber", SESSION_UID), 30, 0.5), "no wireplumber process of alice")
    dl = wait_for(lambda: data_loop_tids(pw), 30, 0.5)
    check(dl, "pipewire %d has no data-loop thread (none named data-loop*, none real-time; RLIMIT_RTPRIO %s): %s"
          % (pw, limit_of(pw, "Max realtime priority"), thread_table(pw)))
    tid = dl[0]
    policy, prio = sched_of(tid)
    check(policy in (os.SCHED_FIFO, os.SCHED_RR) and prio > 0,
          "pipewire's %s (tid %d) runs policy %d priority %d, not real-time (RLIMIT_RTPRIO %s)" % (
              threads_of(pw).get(tid), tid, policy, prio, limit_of(pw, "Max realtime priority")))
    # what polkit says of a process in her user manager (PipeWire, an app a desktop starts as a user
    # unit) rather than in the session scope: reported, not asserted
    rc_unit = pkcheck("org.freedesktop.login1.reboot", pw)
    idle = wakeups(pw, tid, 1.0)
    player = play("session-pipewire")
    try:
        busy = wait_for(lambda: wakeups(pw, tid, 1.0) >= 20, 30, 0)
        check(busy, "the data loop did not run with a stream playing to %s: %s; pw-cat said: %s" % (
            SINK, wakeups(pw, tid, 1.0), read_file("/tmp/rtctl-vmtest-session-pipewire.log")[-300:]))
        busy = wakeups(pw, tid, 1.0)
    finally:
        kill_quietly([player])
    return "session %s (%s, seat0, vt%s) active and local for logind and polkit (alice's process outside it: " \
        "pkcheck %d; pipewire in her user manager: pkcheck %d); pipewire %d, data loop tid %d " \
        "(comm %s) SCHED_%s %d; %d wakeups/s idle, %d playing to %s; threads %s" % (
            info["env"]["XDG_SESSION_ID"], info["session"].get("Type"), info["session"].get("VTNr"), rc_out, rc_unit, pw, tid,
            threads_of(pw).get(tid), "FIFO" if policy == os.SCHED_FIFO else "RR", prio, idle, busy, SINK,
            thread_table(pw))


def pids_by_comm(comm, uid):
    out = []
    for d in glob.glob("/proc/[0-9]*"):
        pid = int(d.split("/")[2])
        if read(d + "/comm") == comm and uid_of(pid) == uid:
            out.append(pid)
    return sorted(out)


def pipewire_pid():
    p = pids_by_comm("pipewire", SESSION_UID)
    return p[0] if p else None


def threads_of(pid):
    out = {}
    for d in glob.glob("/proc/%d/task/[0-9]*" % pid):
        c = read(d + "/comm")
        if c is not None:
            out[int(d.split("/")[-1])] = c
    return out


def sched_of(tid):
    """(policy without SCHED_RESET_ON_FORK, priority) of a thread; (None, None) when it is gone."""
    try:
        return os.sched_getscheduler(tid) & ~os.SCHED_RESET_ON_FORK, os.sched_getparam(tid).sched_priority
    except OSError:
        return None, None


def rt_policy(tid):
    return sched_of(tid)[0] in (os.SCHED_FIFO, os.SCHED_RR)


def data_loop_tids(pid):
    """PipeWire's data-loop threads: named data-loop.N by newer PipeWire; PipeWire 0.3.65 (Debian 12)
    leaves the thread unnamed ("pipewire", as its main thread), and there it is the thread
    libpipewire-module-rt made real-time (the main thread never is)."""
    th = threads_of(pid)
    named = sorted(t for t, c in th.items() if c.startswith("data-loop"))
    return named or sorted(t for t in th if t != pid and rt_policy(t))


def thread_table(pid):
    """tid:comm:policy/priority of every thread of pid, for a failure message."""
    out = []
    for tid, comm in sorted(threads_of(pid).items()):
        pol, prio = sched_of(tid)
        out.append("%d:%s:%s/%s" % (tid, comm, pol, prio))
    return " ".join(out)


def thread_field(pid, tid, key):
    for line in (read("/proc/%d/task/%d/status" % (pid, tid)) or "").splitlines():
        if line.startswith(key + ":"):
            return line.split(":", 1)[1].strip()
    return None


def thread_cgroup(pid, tid):
    for line in (read("/proc/%d/task/%d/cgroup" % (pid, tid)) or "").splitlines():
        if line.startswith("0::"):
            return line[3:]
    return None


def last_cpu(pid, tid):
    """The CPU the thread last ran on (field 39 of stat)."""
    st = read("/proc/%d/task/%d/stat" % (pid, tid)) or ""
    try:
        return int(st.rsplit(")", 1)[1].split()[36])
    except (IndexError, ValueError):
        return None


def limit_of(pid, name):
    for line in (read("/proc/%d/limits" % pid) or "").splitlines():
        if line.startswith(name):
            return " ".join(line[len(name):].split()[:2])
    return None


def wakeups(pid, tid, secs):
    """Context switches of one thread in `secs` seconds: how often the data loop ran."""
    def n():
        return sum(int(thread_field(pid, tid, k) or 0) for k in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"))
    a = n()
    time.sleep(secs)
    return int((n() - a) / secs)


def silence_wav():
    """A WAV of silence alice can read (8 kHz mono, 10 minutes: PipeWire converts it)."""
    if not os.path.exists(SILENCE_WAV):
        import wave
        tmp = SILENCE_WAV + ".tmp"
        with wave.open(tmp, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(8000)
            w.writeframes(b"\0" * (2 * 8000 * 600))
        os.chmod(tmp, 0o644)
        os.rename(tmp, SILENCE_WAV)
    return SILENCE_WAV


def play(name):
    """pw-cat as alice playing silence to the null sink: a client that keeps the graph running."""
    return spawn_as_alice(["pw-cat", "--playback", "--target", SINK, silence_wav()],
                          out="/tmp/rtctl-vmtest-%s.log" % name)


@test("polkit-session-user", timeout=240)
def t_polkit_session_user():
    """alice, in her active local session, holds the audio profile and attaches her own processes with no
    password (busctl with no interactive authorization, `rtctl hold`, `rtctl run`, AttachProcessByPIDFD);
    she is refused (NotAuthorized) attaching root's process and switching the base profile, until a
    polkit rules file grants her org.rtctl.set-profile; removing it takes that back."""
    session()
    ensure_rtctld_base()
    steps, pids = [], []
    root_sleep = None
    switched = False
    try:
        # a hold with busctl: granted, and released when busctl leaves the bus
        p = busctl_as_alice("HoldProfile", "sss", "audio", "vmtest busctl", "org.rtctl.vmtest")
        check(p["rc"] == 0 and re.match(r"u \d+$", p["stdout"].strip()),
              "busctl HoldProfile(audio) as alice, no interactive authorization: rc=%d %s" % (
                  p["rc"], (p["stderr"] or p["stdout"]).strip()))
        steps.append("busctl HoldProfile -> %s" % p["stdout"].strip())

        # `rtctl hold`: the hold lasts while the command runs
        hold_log = "/tmp/rtctl-vmtest-hold.log"
        holder = spawn_as_alice([RTCTL, "hold", "audio", "--", "sleep", "600"], out=hold_log)
        pids.append(holder)
        ok = wait_for(lambda: (lambda pr: pr.get("ActiveProfile") == "audio" and holds_of(pr, "audio") and
                               pr.get("IsolatedCPUs"))(rtprops()), 30, 0.25)
        props = rtprops()
        check(ok, "`rtctl hold audio -- sleep 600` as alice: %s; rtctl said: %s" % (
            brief(props), read_file(hold_log).strip()[-300:]))
        check(props.get("BaseProfile") == TEST_PROFILE, "during alice's hold: %s" % brief(props))
        iso, hk = cpu_set(props["IsolatedCPUs"]), cpu_set(props["HousekeepingCPUs"])
        h = holds_of(props, "audio")[0]
        check(str(h.get("BusName", "")).startswith(":"), "the hold's BusName is %r" % h.get("BusName"))
        listed = as_alice([RTCTL, "holds"])
        check(listed["rc"] == 0 and "audio" in listed["stdout"],
              "`rtctl holds` as alice: rc=%d %s" % (listed["rc"], (listed["stdout"] + listed["stderr"]).strip()[-300:]))
        steps.append("rtctl hold: ActiveProfile audio over base %s, isolated %s" % (TEST_PROFILE, cpu_list(iso)))

        # her own processes: AttachProcess with busctl, AttachProcessByPIDFD, `rtctl run`
        own = spawn_as_alice(["sleep", "601"])
        pids.append(own)
        p = busctl_as_alice("AttachProcess", "u", own)
        check(p["rc"] == 0, "busctl AttachProcess(%d) of her own sleep as alice: rc=%d %s" % (
            own, p["rc"], (p["stderr"] or p["stdout"]).strip()))
        check(wait_for(lambda: cpu_set(cpus_of(own)) == iso, 10, 0.1),
              "alice's attached sleep runs on %s, isolated is %s" % (cpus_of(own), cpu_list(iso)))
        own2 = spawn_as_alice(["sleep", "602"])
        pids.append(own2)
        r = call_as_alice("AttachProcessByPIDFD", "h:%d" % own2)
        check("result" in r, "AttachProcessByPIDFD of her own sleep as alice: %s %s" % (r.get("error"), r.get("message")))
        check(wait_for(lambda: cpu_set(cpus_of(own2)) == iso, 10, 0.1),
              "alice's sleep attached by pidfd runs on %s, isolated is %s" % (cpus_of(own2), cpu_list(iso)))
        run_log = "/tmp/rtctl-vmtest-run.log"
        runner = spawn_as_alice([RTCTL, "run", "--profile", "audio", "--", "sh", "-c", "sleep 603; exit 0"], out=run_log)
        pids.append(runner)

        def run_placed():
            kids = pids_by_cmdline(["sleep", "603"], SESSION_UID)
            return kids and all(cpu_set(cpus_of(k)) == iso for k in kids) and kids
        kids = wait_for(run_placed, 20, 0.2)
        found = pids_by_cmdline(["sleep", "603"], SESSION_UID)
        pids.extend(found)
        check(kids, "`rtctl run --profile audio -- sh -c 'sleep 603; exit 0'` as alice: the command's child %s "
              "on %s, isolated is %s; rtctl said: %s" % (found, [cpus_of(k) for k in found], cpu_list(iso),
                                                         read_file(run_log).strip()[-300:]))
        steps.append("own processes attached (busctl AttachProcess, AttachProcessByPIDFD, rtctl run's child)")

        # refused: someone else's process, the base profile
        root_sleep = subprocess.Popen(["sleep", "604"])
        cpus_before = cpus_of(root_sleep.pid)
        r = call_as_alice("AttachProcess", "u:%d" % root_sleep.pid)
        check(r.get("error") == ERR_NOT_AUTHORIZED, "AttachProcess(root's sleep) as alice: %s, want %s" % (
            r.get("error") or "success %r" % (r.get("result"),), ERR_NOT_AUTHORIZED))
        p = busctl_as_alice("AttachProcess", "u", root_sleep.pid)
        check(p["rc"] != 0, "busctl AttachProcess(root's sleep) as alice succeeded")
        check(cpus_of(root_sleep.pid) == cpus_before, "root's sleep moved to %s after alice's refused attach" % cpus_of(root_sleep.pid))
        r = call_as_alice("SetProfile", "vmiso")
        check(r.get("error") == ERR_NOT_AUTHORIZED, "SetProfile(vmiso) as alice: %s, want %s" % (
            r.get("error") or "success %r" % (r.get("result"),), ERR_NOT_AUTHORIZED))
        p = as_alice([RTCTL, "profile", "vmiso"])
        check(p["rc"] != 0, "`rtctl profile vmiso` as alice exited 0")
        check(rtprops().get("BaseProfile") == TEST_PROFILE, "after alice's refused SetProfile: %s" % brief(rtprops()))
        steps.append("refused: AttachProcess(root's process), SetProfile")

        # a rules file grants her org.rtctl.set-profile; polkitd reloads rules files when they change
        with open(POLKIT_RULES + ".tmp", "w") as f:
            f.write('// rtctl VM tier (polkit-session-user): alice may switch the base profile\n'
                    'polkit.addRule(function(action, subject) {\n'
                    '    if (action.id == "org.rtctl.set-profile" && subject.user == "%s")\n'
                    '        return polkit.Result.YES;\n'
                    '});\n' % SESSION_USER)
        os.chmod(POLKIT_RULES + ".tmp", 0o644)
        os.rename(POLKIT_RULES + ".tmp", POLKIT_RULES)
        t0 = time.monotonic()
        granted = wait_for(lambda: "result" in call_as_alice("SetProfile", "vmiso"), 30, 0.5)
        check(granted, "SetProfile(vmiso) as alice still refused 30 s after %s granted it: %s" % (
            POLKIT_RULES, call_as_alice("SetProfile", "vmiso")))
        check(rtprops().get("BaseProfile") == "vmiso", "alice's granted SetProfile(vmiso): %s" % brief(rtprops()))
        steps.append("rules file: SetProfile granted after %.1f s" % (time.monotonic() - t0))
        os.unlink(POLKIT_RULES)
        t0 = time.monotonic()
        denied = wait_for(lambda: call_as_alice("SetProfile", TEST_PROFILE).get("error") == ERR_NOT_AUTHORIZED, 30, 0.5)
        check(denied, "SetProfile as alice still allowed 30 s after the rules file was removed")
        steps.append("rules file removed: refused again after %.1f s" % (time.monotonic() - t0))

        # the control: with another VT in front her session is inactive, and a hold needs authentication
        sid = STATE["session"]["env"]["XDG_SESSION_ID"]
        switched = True
        chvt(2)
        check(wait_for(lambda: session_prop(sid, "Active") == "no", 10, 0.2),
              "tty2 in front, alice's session is still Active=%s" % session_prop(sid, "Active"))
        r = call_as_alice("HoldProfile", "audio", "vmtest inactive", "org.rtctl.vmtest")
        check(r.get("error") == ERR_NOT_AUTHORIZED, "HoldProfile(audio) as alice with her session inactive: %s, want %s" % (
            r.get("error") or "success %r" % (r.get("result"),), ERR_NOT_AUTHORIZED))
        chvt(1)
        switched = False
        check(wait_for(lambda: session_prop(sid, "Active") == "yes", 10, 0.2), "tty1 back in front, alice's session is "
              "Active=%s" % session_prop(sid, "Active"))
        steps.append("her session inactive (tty2 in front): HoldProfile refused")
        return "; ".join(steps)
    finally:
        if switched:
            chvt(1)
        if os.path.exists(POLKIT_RULES):
            os.unlink(POLKIT_RULES)
        kill_quietly(pids + pids_by_cmdline(["sleep", "600"], SESSION_UID))
        if root_sleep:
            root_sleep.kill()
            root_sleep.wait()
        call("SetProfile", TEST_PROFILE)


@test("hold-released-on-disconnect")
def t_hold_released_on_disconnect():
    """A client of alice's holding the audio profile (as a DAW would) is killed with SIGKILL: its bus name
    leaves the bus, the hold goes with it and the base profile is back, on the machine too, at once."""
    session()
    ensure_rtctld_base()
    left = no_base_isolation()
    check(not left, "before the hold, with the base profile %s: %s" % (TEST_PROFILE, left))
    log = "/tmp/rtctl-vmtest-holder.log"
    holder = spawn_as_alice([sys.executable, SCRIPT, "--hold-helper", "audio", "vmtest: killed", "org.rtctl.vmtest.daw"],
                            out=log)
    try:
        first = wait_for(lambda: read_file(log).strip(), 30, 0.2)
        try:
            h = json.loads(first.splitlines()[0])
        except (ValueError, IndexError):
            raise Fail("alice's holder printed %r" % first[:300])
        check("cookie" in h, "HoldProfile(audio) by alice's client: %s %s" % (h.get("error"), h.get("message")))
        ok = wait_for(lambda: (lambda pr: pr.get("ActiveProfile") == "audio" and pr.get("IsolatedCPUs") and
                               os.path.exists("/sys/fs/cgroup/rtctl.slice"))(rtprops()), 30, 0.25)
        props = rtprops()
        check(ok, "alice's client holds audio (cookie %d): %s" % (h["cookie"], brief(props)))
        mine = [x for x in holds_of(props) if x.get("BusName") == h["bus_name"]]
        check(len(mine) == 1 and mine[0].get("Cookie") == h["cookie"] and mine[0].get("Profile") == "audio" and
              mine[0].get("ApplicationId") == "org.rtctl.vmtest.daw" and mine[0].get("Reason") == "vmtest: killed",
              "ActiveProfileHolds has no entry for the holder %s: %s" % (h["bus_name"], props.get("ActiveProfileHolds")))
        iso = props["IsolatedCPUs"]
        os.kill(holder, signal.SIGKILL)
        t0 = time.monotonic()

        def back():
            pr = rtprops()
            return (pr.get("ActiveProfile") == TEST_PROFILE and not holds_of(pr) and not pr.get("IsolatedCPUs")
                    and not no_base_isolation())
        ok = wait_for(back, 10, 0.05)
        dt = time.monotonic() - t0
        props = rtprops()
        check(ok, "10 s after alice's holder (%s) was SIGKILLed: %s; on the machine: %s" % (
            h["bus_name"], brief(props), no_base_isolation() or "no isolation"))
        check(not os.path.exists("/proc/%d" % holder), "the holder %d is still there" % holder)
        return "hold %d of %s (audio, isolated %s): SIGKILL -> base %s back, no holds, AllowedCPUs and rtctl.slice " \
            "gone in %.2f s" % (h["cookie"], h["bus_name"], iso, TEST_PROFILE, dt)
    finally:
        kill_quietly([holder])
        call("SetProfile", TEST_PROFILE)


@test("isolation-back-to-back")
def t_isolation_back_to_back():
    """Isolation ended and asked for again at once (a DAW closed and opened, a hold dropped and retaken):
    rtctl.slice may still be loaded from its stop, which systemd's StartTransientUnit refuses; rtctld
    starts the loaded slice again instead. Every round ends applied, with no failure."""
    ensure_rtctld_base()
    rounds = []
    try:
        for i in range(4):
            r, err, msg = call("SetProfile", "audio")
            check(err is None, "round %d: SetProfile(audio): %s %s" % (i, err, msg))
            props = rtprops()
            slice_state = unit_prop("rtctl.slice", "ActiveState").get("ActiveState")
            check(not props.get("Failures") and props.get("IsolatedCPUs") and slice_state == "active",
                  "round %d, isolating again right after the end: %s; rtctl.slice %s" % (
                      i, brief(props), slice_state))
            rounds.append(props["IsolatedCPUs"])
            r, err, msg = call("SetProfile", TEST_PROFILE)
            check(err is None, "round %d: SetProfile(%s): %s %s" % (i, TEST_PROFILE, err, msg))
            props = rtprops()
            check(not props.get("Failures") and not props.get("IsolatedCPUs"),
                  "round %d, isolation ended: %s" % (i, brief(props)))
        return "4 rounds of audio then %s back to back, isolated %s each time, no failures" % (
            TEST_PROFILE, rounds[0])
    finally:
        call("SetProfile", TEST_PROFILE)


def rules_brief(props):
    """What rtctld says about its [Attach] rules: the threads they placed, its cpuset notes, failures."""
    notes = [u for u in props.get("Unsupported", []) if u[0] == "cpuset" or str(u[1]).startswith("attach:")]
    return "ActiveProfile=%s AttachedThreads=%s Failures=%s cpuset notes=%s" % (
        props.get("ActiveProfile"), props.get("AttachedThreads", "(no such property)"), props.get("Failures"), notes)


@test("check-session-user", timeout=120)
def t_check_session_user():
    """rtctl check run as root judges the desktop user, not root: alice, whose session is the active one
    on seat0, by her limits and a real SCHED_FIFO attempt as her. Run by alice in her session it judges
    her as the caller; both attempts answer alike, as they try with the same limits."""
    info = session()
    as_root = cli(["check", "--local"], json_out=True, ok_rcs=(0, 1))
    f = {c["check"]: c for c in as_root}
    check(f["user"]["detail"] == "judged %s (uid %d, the active session's user)" % (SESSION_USER, SESSION_UID),
          "rtctl check as root judged: %s" % f["user"])
    p = as_alice([RTCTL, "--json", "check", "--local"])
    check(p["rc"] in (0, 1), "rtctl check as alice exited %d: %s" % (p["rc"], p["stderr"][-300:]))
    mine = {c["check"]: c for c in json.loads(p["stdout"])}
    check(mine["user"]["detail"] == "judged %s (uid %d, the caller)" % (SESSION_USER, SESSION_UID),
          "rtctl check as alice judged: %s" % mine["user"])
    check(mine["sched-fifo"]["status"] == f["sched-fifo"]["status"],
          "SCHED_FIFO as alice in her session: %s; as root judging her: %s" % (mine["sched-fifo"], f["sched-fifo"]))
    return "as root: %s; %s" % (f["user"]["detail"], f["sched-fifo"]["detail"])
