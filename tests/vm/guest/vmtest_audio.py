"""The VM tier: the audio graph's real-time threads on the isolated CPU with nobody typing a command
(issue 22): alice's PipeWire and a PipeWire JACK client of ours (bench/xrun-client --busy under
pw-jack), split thread by thread on cgroup v2, and put back by detach, stop, SIGKILL + restore and a
profile switch."""

import json
import os
import re
import time

from vmtest_attach import alive, cgroup_ino, start_time
from vmtest_common import (call, cgroup_of, check, cpu_set, cpus_of, dbus_mod, Fail, read, read_file, RTCTL, run,
    SESSION_UID, test, TEST_PROFILE, UNIT, unit_prop, wait_for, write)
from vmtest_isolation import cpu_list
from vmtest_session import (as_alice, brief, data_loop_tids, ensure_rtctld_base, kill_quietly, last_cpu,
    limit_of, pids_by_comm, pipewire_pid, play, rt_policy, rtprops, rules_brief, sched_of, session,
    SINK, spawn_as_alice, thread_cgroup, thread_field, threads_of, wakeups)


CLIENT = "/usr/lib/rtctl-vmtest/xrun-client"  # bench/xrun-client, installed by build-image.sh
POLICY = {os.SCHED_OTHER: "OTHER", os.SCHED_FIFO: "FIFO", os.SCHED_RR: "RR", getattr(os, "SCHED_BATCH", 3): "BATCH",
          getattr(os, "SCHED_IDLE", 5): "IDLE", 6: "DEADLINE"}


def thread_list(pid):
    """tid:comm:POLICY/prio:cpus of every thread, for messages."""
    out = []
    for tid, comm in sorted(threads_of(pid).items()):
        pol, prio = sched_of(tid)
        out.append("%d:%s:%s/%s:%s" % (tid, comm, POLICY.get(pol, pol), prio, thread_field(pid, tid, "Cpus_allowed_list")))
    return " ".join(out)


def maps_marks(pid):
    """The names in /proc/PID/maps that tell a PipeWire or JACK connection (memfds, shm, sockets' libs)."""
    names = set()
    for line in (read("/proc/%d/maps" % pid) or "").splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and any(k in parts[5] for k in ("memfd", "pipewire", "jack", "/dev/shm", "spa-")):
            names.add(parts[5])
    return sorted(names)


def start_jack_client(name, timeout=60):
    """bench/xrun-client --busy as alice in her session under pw-jack (PipeWire's libjack); a dict
    {pid, process_tid, busy_tid, log} once the client says which thread is which."""
    log = "/tmp/rtctl-vmtest-%s.log" % name
    check(os.access(CLIENT, os.X_OK), "no %s in the image (build-image.sh installs bench/xrun-client from the "
          "meson build dir; libjack-jackd2-dev at meson setup)" % CLIENT)
    pid = spawn_as_alice(["pw-jack", CLIENT, "--units", "20", "--warmup", "0", "--seconds", "36000", "--busy",
                          "--name", name], out=log)

    def announced():
        for line in read_file(log).splitlines():
            if line.startswith("{") and "process_tid" in line:
                return json.loads(line)
        return None
    ids = wait_for(announced, timeout, 0.25)
    if not ids or not ids.get("process_tid"):
        kill_quietly([pid])
        raise Fail("the JACK client under pw-jack (pid %d) did not report its process thread in %d s: %s" % (
            pid, timeout, read_file(log).strip()[-400:]))
    ids["log"] = log
    ids["spawned"] = pid
    return ids


TRACE = "/sys/kernel/tracing/instances/rtctl-vmtest-policy"
TRACE_EVENTS = ("syscalls/sys_enter_sched_setscheduler", "syscalls/sys_enter_sched_setattr",
                "syscalls/sys_enter_sched_setparam")


def syscall_trace_start():
    """Who sets a real-time policy, and from which thread (for the findings): the policy syscalls'
    tracepoints in a tracefs instance of our own; None where there are none, and on Debian 13: there
    the 6.12 guest kernel under TCG panicked ("Oops: int3" in syscall_trace_enter, where the sys_enter
    tracepoint's static key is patched) seconds after this test had turned that tracepoint on and off
    (2026-11-29; tests/vm/README.md has the other panics of that guest). The policy's source is
    reported without it there (RLIMIT_RTPRIO, rtkit on the bus)."""
    if "VERSION_CODENAME=trixie" in read_file("/etc/os-release"):
        return None
    if not os.path.isdir("/sys/kernel/tracing/instances"):
        run(["mount", "-t", "tracefs", "tracefs", "/sys/kernel/tracing"], timeout=20)
    # As rtctld does: the instance made while the top level's record-cmd is off, so that enabling its
    # events does not hook sched_switch and sched_wakeup (comm recording): kernel code patched on every
    # CPU, once per test, for names nobody reads here.
    record_cmd = "/sys/kernel/tracing/options/record-cmd"
    was = read(record_cmd)
    try:
        if was == "1":
            with open(record_cmd, "w") as f:
                f.write("0")
        try:
            os.mkdir(TRACE)
        finally:
            if was == "1":
                with open(record_cmd, "w") as f:
                    f.write("1")
        for ev in TRACE_EVENTS:
            with open("%s/events/%s/enable" % (TRACE, ev), "w") as f:
                f.write("1")
        return TRACE
    except OSError:
        syscall_trace_stop(TRACE)
        return None


def syscall_trace_read(trace, pid):
    if not trace:
        return "(no syscall tracepoints: none here, or Debian 13 under TCG, see syscall_trace_start)"
    lines = [l.strip() for l in read_file(trace + "/trace").splitlines() if not l.startswith("#")]
    mine = [l for l in lines if "-%d " % pid in l or any("-%d " % t in l for t in threads_of(pid))]
    return "%d policy syscalls in all, of the client's threads: %s" % (len(lines), mine[:8])


def syscall_trace_stop(trace):
    if trace and os.path.isdir(trace):
        for ev in TRACE_EVENTS:
            try:
                with open("%s/events/%s/enable" % (trace, ev), "w") as f:
                    f.write("0")
            except OSError:
                pass
        try:
            os.rmdir(trace)
        except OSError:
            pass


@test("pipewire-jack-client", timeout=180)
def t_pipewire_jack_client():
    """No rtctl: the peers of the next tests. Our JACK client (bench/xrun-client --busy) runs under pw-jack
    as alice in her session against her PipeWire: its process callback runs in a real-time thread, its
    own `busy` thread and its main thread do not, and it maps PipeWire's shared memory. Reported: its
    threads (names, policies), where the real-time policy came from (rtkit on the system bus or
    RLIMIT_RTPRIO), what /proc/PID/maps shows of PipeWire, and the same for PipeWire itself."""
    session()
    pw = wait_for(pipewire_pid, 60, 0.5)
    check(pw, "no pipewire process of alice")
    pids = []
    trace = syscall_trace_start()
    try:
        ids = start_jack_client("pwjack-findings")
        pid = ids["pid"]
        pids.append(pid)
        check(ids["spawned"] == pid, "pw-jack did not exec the client: spawned %d, client %d" % (ids["spawned"], pid))
        rt = wait_for(lambda: rt_policy(ids["process_tid"]), 20, 0.25)
        check(rt, "the client's process thread %d is not real-time: %s (RLIMIT_RTPRIO %s): %s" % (
            ids["process_tid"], thread_list(pid), limit_of(pid, "Max realtime priority"),
            read_file(ids["log"])[-300:]))
        check(not rt_policy(ids["busy_tid"]) and not rt_policy(pid),
              "the client's busy or main thread runs real-time: %s" % thread_list(pid))
        marks = maps_marks(pid)
        check([m for m in marks if "memfd:pipewire-memfd" in m],
              "the JACK client maps no pipewire-memfd: %s" % marks)
        rtkit = run(["busctl", "--system", "status", "org.freedesktop.RealtimeKit1"], timeout=20).returncode == 0
        rt_tids = [t for t in threads_of(pw) if rt_policy(t)]
        calls = syscall_trace_read(trace, pid)
        others = ["%s %d: %s, maps %s" % (c, p, thread_list(p), [m for m in maps_marks(p) if "memfd" in m])
                  for p, c in sorted(audio_procs().items()) if c in ("wireplumber", "pw-cat")]
        return ("policy calls for the client %s; %s; client %d threads %s (process %d, busy %d); "
                "RLIMIT_RTPRIO %s, rtkit on the system bus: %s; maps %s; pipewire %d threads %s RLIMIT_RTPRIO "
                "%s, maps %s; RT tids %s; cgroup %s" % (
                    calls, " ".join(others), pid, thread_list(pid), ids["process_tid"], ids["busy_tid"],
                    limit_of(pid, "Max realtime priority"), rtkit, marks, pw, thread_list(pw),
                    limit_of(pw, "Max realtime priority"), maps_marks(pw), rt_tids, cgroup_of(pid)))
    finally:
        kill_quietly(pids)
        syscall_trace_stop(trace)


# --------------------------------------------------------------------------
# the split: the audio profile's rules, nobody typing a command


def audio_profile():
    """The shipped `audio` profile as rtctld offers it (no copy of the test's own shadows it): what its
    [Attach] rules do is what each test then observes, thread by thread."""
    p = run([RTCTL, "--json", "profiles"], timeout=60)
    check(p.returncode == 0, "rtctl profiles: %s" % p.stderr[-300:])
    offered = [x for x in json.loads(p.stdout) if x.get("name") == "audio"]
    check(offered and "audio graph" in offered[0].get("description", ""),
          "rtctld offers no shipped audio profile: %s" % p.stdout[-500:])
    for local in ("/etc/rtctl/profiles/audio.conf", "/etc/rtctl/profiles/audio.conf.d"):
        check(not os.path.exists(local), "%s changes the shipped audio profile" % local)
    return "audio"


def set_profile(name):
    r, err, msg = call("SetProfile", name, timeout=120)
    check(err is None, "SetProfile(%s) as root: %s %s" % (name, err, msg))
    return r


def audio_procs():
    """alice's audio processes now: {pid: comm} of pipewire, wireplumber, pw-cat and our JACK client."""
    out = {}
    for comm in ("pipewire", "wireplumber", "pw-cat", "xrun-client"):
        for pid in pids_by_comm(comm, SESSION_UID):
            out[pid] = comm
    return out


def where(pids):
    """What "back where it was" compares: per process its start time, cgroup (path and inode), and per
    thread its cgroup and allowed CPUs."""
    out = {}
    for pid in pids:
        home = cgroup_of(pid)
        out[pid] = {"born": start_time(pid), "cgroup": home, "ino": cgroup_ino(home or "/-"),
                    "comm": read("/proc/%d/comm" % pid),
                    "threads": {t: (c, thread_cgroup(pid, t), thread_field(pid, t, "Cpus_allowed_list"))
                                for t, c in threads_of(pid).items()}}
    return out


def not_back(before):
    """'' when every process of the snapshot lives on (same PID and start time) in the cgroup it was in
    (same path and inode) and each of its threads that still exists has its cgroup and CPUs as before;
    else what differs."""
    bad = []
    for pid, b in sorted(before.items()):
        if not alive(pid, b["born"]):
            bad.append("%s %d was killed (start time %s, was %s)" % (b["comm"], pid, start_time(pid), b["born"]))
            continue
        home = cgroup_of(pid)
        if home != b["cgroup"] or cgroup_ino(home or "/-") != b["ino"]:
            bad.append("%s %d is in %s, it was in %s" % (b["comm"], pid, home, b["cgroup"]))
        for tid, (comm, cg, cpus) in sorted(b["threads"].items()):
            now = (thread_cgroup(pid, tid), thread_field(pid, tid, "Cpus_allowed_list"))
            if now[0] is not None and now != (cg, cpus):
                bad.append("%s %d thread %d:%s in %s on %s, was in %s on %s" % (
                    b["comm"], pid, tid, comm, now[0], now[1], cg, cpus))
    return "; ".join(bad)


def rt_wanted(pid, tid):
    """Whether the audio rules want this thread isolated: real-time policy, or PipeWire's data-loop* name."""
    return rt_policy(tid) or (read("/proc/%d/comm" % pid) == "pipewire" and
                              (read("/proc/%d/task/%d/comm" % (pid, tid)) or "").startswith("data-loop"))


def cgroup_cpus(cg):
    """The CPUs a cgroup gives its threads: cpuset.cpus.effective of it or, where cpuset is not enabled
    down to it, of its nearest ancestor that has the file."""
    while cg is not None:
        eff = read("/sys/fs/cgroup%s/cpuset.cpus.effective" % cg.rstrip("/"))
        if eff is not None:
            return cpu_set(eff)
        if cg in ("", "/"):
            break
        cg = cg.rsplit("/", 1)[0]
    return set()


def maps_graph(pid):
    """Whether the process maps PipeWire's graph memory: what the shipped rule's graph:pipewire reads."""
    return any("memfd:pipewire-memfd" in m for m in maps_marks(pid))


def misplaced(pid, iso, hk, must_iso=(), must_hk=(), matched=True):
    """'' when every real-time thread of pid (and the tids in must_iso) is on the isolated CPUs and every
    other thread (and those in must_hk) on housekeeping: by Cpus_allowed_list and by the CPUs of the
    thread's own cgroup (/proc/PID/task/TID/cgroup), else what is not. matched=False: no rule takes the
    process, so every thread of it belongs on housekeeping, real-time or not."""
    th = threads_of(pid)
    if not th:
        return "process %d is gone" % pid
    bad = []
    for tid in sorted(set(must_iso) | set(must_hk)):
        if tid not in th:
            bad.append("thread %d is gone" % tid)
    for tid, comm in sorted(th.items()):
        want_iso = tid in must_iso or (matched and tid not in must_hk and rt_wanted(pid, tid))
        want, name = (iso, "isolated") if want_iso else (hk, "housekeeping")
        allowed = cpu_set(thread_field(pid, tid, "Cpus_allowed_list"))
        cg = thread_cgroup(pid, tid)
        eff = cgroup_cpus(cg)
        if not (allowed and eff) and tid not in must_iso and tid not in must_hk and \
                not os.path.exists("/proc/%d/task/%d" % (pid, tid)):
            continue  # it ended between the listing and the reads: no placement to judge
        if not allowed or not allowed <= want or not eff or not eff <= want:
            pol, prio = sched_of(tid)
            bad.append("%d:%s (%s/%s) allowed %s, cgroup %s (cpuset %s), wanted on %s %s" % (
                tid, comm, POLICY.get(pol, pol), prio, cpu_list(allowed), cg, cpu_list(eff), name, cpu_list(want)))
    return "; ".join(bad)


def cpus(props):
    iso, hk = cpu_set(props.get("IsolatedCPUs")), cpu_set(props.get("HousekeepingCPUs"))
    check(iso and hk, "the profile isolates nothing: %s" % brief(props))
    return iso, hk


def split_all(procs, client, iso, hk):
    """'' when every audio process is split: the client's process thread isolated, its busy and main
    threads on housekeeping, every other process's real-time threads isolated and the rest not.
    WirePlumber, the session manager, is a client of the graph like any other for the shipped rules:
    [Attach audio-clients] (graph:pipewire) takes it once it maps the graph's memory, and then its
    real-time thread is isolated; while it maps none (PipeWire 0.3.65 on Debian 12 may not), no rule
    takes it and all its threads stay on housekeeping."""
    bad = []
    for pid, comm in sorted(procs.items()):
        if client and pid == client["pid"]:
            m = misplaced(pid, iso, hk, must_iso=(client["process_tid"],), must_hk=(pid, client["busy_tid"]))
        else:
            m = misplaced(pid, iso, hk, matched=comm != "wireplumber" or maps_graph(pid))
        if m:
            bad.append("%s %d: %s" % (comm, pid, m))
    return "; ".join(bad)


def no_user_attach():
    """No process of alice's audio attached by a command (AttachProcess) from an earlier test: rtctld keeps
    such an attachment for as long as the process lives (pipewire-attach-detach leaves PipeWire attached
    whole), and these tests are about what the rules do with nobody typing a command."""
    for pid in audio_procs():
        call("DetachProcess", dbus_mod().UInt32(pid))


def audio_running(name):
    """alice's PipeWire with a stream playing and our JACK client under pw-jack: (pipewire pid, player
    pid, client ids); the data loop runs."""
    session()
    pw = wait_for(pipewire_pid, 60, 0.5)
    check(pw, "no pipewire process of alice")
    no_user_attach()
    player = play(name)
    client = start_jack_client(name)
    wait_for(lambda: [t for t in threads_of(pw) if t != pw and rt_policy(t)], 30, 0.5)
    return pw, player, client


def status_why(pid, tids):
    """`rtctl --json status`: the attached_by_rules entries of pid for tids, with why; '' when each
    tid is listed with a why (realtime or name), else what is missing."""
    p = run([RTCTL, "--json", "status"], timeout=60)
    try:
        rows = json.loads(p.stdout).get("attached_by_rules", [])
    except ValueError:
        return "rtctl --json status exited %d: %s" % (p.returncode, (p.stderr or p.stdout)[-300:])
    mine = {r.get("tid"): r for r in rows if r.get("pid") == pid}
    bad = []
    for tid in tids:
        r = mine.get(tid)
        why = str((r or {}).get("why", ""))
        # what the thread shows must be what status says: its policy, and, for the pipewire rule (the one
        # with the data-loop* glob), its name where PipeWire 1.2+ names it data-loop.N (Debian 13). A
        # client's data loop (pw-jack on PipeWire 1.4) is named so too, but its rule goes by policy only.
        named = (read("/proc/%d/task/%d/comm" % (pid, tid)) or "").startswith("data-loop")
        want = [w for w, holds in (("realtime", rt_policy(tid)),
                                   ("name", named and (r or {}).get("rule") == "pipewire")) if holds]
        if not r or not want or any(w not in why.split(",") for w in want):
            bad.append("tid %d (wants %s): %s" % (tid, "+".join(want) or "nothing", r or "not listed"))
    text = run([RTCTL, "status"], timeout=60).stdout
    for tid in tids:
        if not re.search(r"\b%d\b" % tid, text):
            bad.append("tid %d not in `rtctl status`" % tid)
    return ("%s (status lists for pid %d: %s)" % ("; ".join(bad), pid, list(mine.values()))) if bad else ""


def wait_split(procs, client, iso, hk, what, timeout=60):
    """Wait until every audio process is split (timeout s: TCG on a loaded machine), else Fail."""
    t0 = time.monotonic()
    ok = wait_for(lambda: not split_all(procs, client, iso, hk), timeout, 0.25)
    check(ok, "%s, %d s on: %s. rtctld: %s" % (what, timeout, split_all(procs, client, iso, hk), rules_brief(rtprops())))
    return time.monotonic() - t0


def wait_back(before, what, timeout=60):
    ok = wait_for(lambda: not not_back(before), timeout, 0.25)
    check(ok, "%s, %d s on: %s" % (what, timeout, not_back(before)))


def runs_isolated(pid, tid, iso, what):
    """The thread is real-time, wakes (the graph runs) and last ran on an isolated CPU."""
    rate = wakeups(pid, tid, 1.0)
    cpu = last_cpu(pid, tid)
    check(rt_policy(tid) and rate >= 20 and cpu in iso, "%s (tid %d): %d wakeups/s, last on cpu%s, %s" % (
        what, tid, rate, cpu, "real-time" if rt_policy(tid) else "not real-time"))
    return "%s %d wakeups/s on cpu%d" % (what, rate, cpu)


@test("pipewire-data-loop", timeout=360)
def t_pipewire_data_loop():
    """alice's PipeWire (her user service), a stream playing, and the audio profile applied by root: with
    no command typed its real-time thread(s) (the data loop: found by policy on PipeWire 0.3.65, which
    leaves it unnamed, and by policy or name data-loop.N on newer ones) run on the isolated CPU, by the
    thread's Cpus_allowed_list and by its own cgroup's CPUs, and every other thread on housekeeping; the
    data loop keeps running real-time there. `rtctl status` lists the data loop and why. Back to the base
    profile: every thread where it was, nothing killed. A PipeWire restarted under the profile is split
    the same; back to the base it runs where alice's session runs."""
    info = session()
    ensure_rtctld_base()
    prof = audio_profile()
    steps, pids = ["profile %s" % prof], []
    try:
        pw = wait_for(pipewire_pid, 60, 0.5)
        check(pw, "no pipewire process of alice")
        no_user_attach()
        pids.append(play("pipewire-data-loop"))
        dl = wait_for(lambda: data_loop_tids(pw), 30, 0.5)
        check(dl and wait_for(lambda: wakeups(pw, dl[0], 1.0) >= 20, 30, 0),
              "pipewire's data loop %s does not run with a stream playing (%s)" % (
                  dl, read_file("/tmp/rtctl-vmtest-pipewire-data-loop.log")[-300:]))
        procs = {p: c for p, c in audio_procs().items() if c != "xrun-client"}
        before = where(procs)
        set_profile(prof)
        iso, hk = cpus(rtprops())
        dt = wait_split(procs, None, iso, hk, "pipewire (%d) under %s" % (pw, prof))
        rts = sorted(t for t in threads_of(pw) if rt_wanted(pw, t))
        steps.append("pipewire %d: real-time %s on %s, the other %d threads on %s in %.1f s" % (
            pw, ["%d:%s" % (t, threads_of(pw).get(t)) for t in rts], cpu_list(iso), len(threads_of(pw)) - len(rts),
            cpu_list(hk), dt))
        steps.append(runs_isolated(pw, data_loop_tids(pw)[0], iso, "data loop"))
        why = status_why(pw, rts)  # asserted last: the placement and its undoing are checked first

        set_profile(TEST_PROFILE)
        wait_back(before, "back to %s" % TEST_PROFILE)
        steps.append("back to %s: %d processes and their threads where they were, none killed" % (
            TEST_PROFILE, len(before)))

        set_profile(prof)
        p = as_alice(["systemctl", "--user", "restart", "pipewire.service"], timeout=120)
        check(p["rc"] == 0, "systemctl --user restart pipewire as alice: %s" % p["stderr"][-300:])
        new = wait_for(lambda: pipewire_pid() not in (None, pw) and pipewire_pid(), 60, 0.5)
        check(new, "no new pipewire of alice after the restart")
        pids.append(play("pipewire-data-loop-2"))
        check(wait_for(lambda: data_loop_tids(new), 60, 0.5), "the new pipewire %d has no data loop: %s" % (
            new, thread_list(new)))
        dt = wait_split({new: "pipewire"}, None, iso, hk, "pipewire %d started under %s" % (new, prof))
        steps.append("restarted pipewire %d split in %.1f s" % (new, dt))
        set_profile(TEST_PROFILE)
        ok = wait_for(lambda: cgroup_of(new).endswith("/pipewire.service") and all(
            thread_field(new, t, "Cpus_allowed_list") == cpus_of(info["pid"]) for t in threads_of(new)), 60, 0.25)
        check(ok, "back to %s: the restarted pipewire %d in %s, threads %s; alice's session runs on %s" % (
            TEST_PROFILE, new, cgroup_of(new), thread_list(new), cpus_of(info["pid"])))
        steps.append("back to %s: in %s on %s" % (TEST_PROFILE, cgroup_of(new), cpus_of(new)))
        check(not why, "%s; but rtctl status on pipewire's isolated threads: %s" % ("; ".join(steps), why))
        steps.append("rtctl status named them and why")
        return "; ".join(steps)
    finally:
        kill_quietly(pids)
        call("SetProfile", TEST_PROFILE)


@test("pipewire-native-client-late", timeout=300)
def t_pipewire_native_client_late():
    """(issue 37 item 10) A native client started after the audio profile is in force: pw-cat, a plain
    libpipewire stream. Its data loop turns real-time when its node is made, before it maps the server's
    memfd (PipeWire 1.4), so no rule's graph: term matched on that policy change, and mapping memory
    makes no event. Within a second of the thread turning real-time it runs on the isolated CPUs, its
    other threads on housekeeping."""
    session()
    ensure_rtctld_base()
    prof = audio_profile()
    pids = []
    try:
        pw = wait_for(pipewire_pid, 60, 0.5)
        check(pw, "no pipewire process of alice")
        no_user_attach()
        set_profile(prof)
        iso, hk = cpus(rtprops())
        check(wait_for(lambda: not misplaced(pw, iso, hk), 30, 0.25), "pipewire %d not split under %s: %s" % (
            pw, prof, misplaced(pw, iso, hk)))
        # PipeWire 0.3.65's pw-cat plays from a real-time data loop; 1.4's from its main thread, with none.
        # pw-loopback's streams run in its context's data loop, real-time in both: the first of the two
        # that has a real-time thread is the client.
        rt, tried = None, []
        for name, argv in (("pw-cat", None), ("pw-loopback", ["pw-loopback", "--playback-props",
                                                               "target.object=%s" % SINK])):
            player = play("pipewire-native-late") if argv is None else \
                spawn_as_alice(argv, out="/tmp/rtctl-vmtest-pipewire-native-late-2.log")
            pids.append(player)
            rt = wait_for(lambda: [t for t in threads_of(player) if t != player and rt_wanted(player, t)], 10, 0.02)
            seen = time.monotonic()
            if rt:
                break
            tried.append("%s %d: %s" % (name, player, thread_list(player)))
        check(rt, "no native client with a real-time thread: %s" % "; ".join(tried))
        placed = wait_for(lambda: not misplaced(player, iso, hk), 10, 0.02)
        dt = time.monotonic() - seen
        check(placed, "%s %d, started under %s, not split 10 s after its thread turned real-time: %s" % (
            name, player, prof, misplaced(player, iso, hk)))
        check(dt <= 1.0, "%s %d split %.2f s after its thread turned real-time, not within 1 s" % (name, player, dt))
        return "%s%s %d started under %s: real-time %s on %s, the rest on %s, %.2f s after it turned real-time" % (
            "(%s) " % "; ".join(tried) if tried else "", name, player, prof, rt, cpu_list(iso), cpu_list(hk), dt)
    finally:
        kill_quietly(pids)
        call("SetProfile", TEST_PROFILE)


@test("pipewire-jack-split", timeout=360)
def t_pipewire_jack_split():
    """Our JACK client (process callback in a real-time thread, a busy non-real-time thread of its own)
    under pw-jack as alice, with her PipeWire and a stream playing: root applies the audio profile and
    nobody types a command. The client's process-callback thread runs on the isolated CPU, its busy thread
    and main thread on housekeeping; PipeWire, pw-cat (another client, whatever its name) split the same.
    `rtctl status` says which threads are isolated and why, and not the busy one. Detach (back to the
    base profile): every process in its own unit's cgroup again, every thread's CPUs as before, nothing
    killed."""
    def how(procs, client, iso, hk):
        cl = client["pid"]
        said = ["client %d process thread %d on %s, busy %d and main on %s (%s)" % (
            cl, client["process_tid"], cpu_list(iso), client["busy_tid"], cpu_list(hk), thread_list(cl)),
            runs_isolated(cl, client["process_tid"], iso, "process callback")]
        status["why"] = status_why(cl, [client["process_tid"]])
        status["not"] = (client["busy_tid"], cl)
        listed = run([RTCTL, "--json", "status"], timeout=60).stdout
        status["rows"] = [r for r in json.loads(listed).get("attached_by_rules", []) if r.get("pid") == cl]
        set_profile(TEST_PROFILE)
        return "; ".join(said) + "; detached (back to %s)" % TEST_PROFILE
    # rtctl status is asserted last: the placement and its undoing are checked first
    status = {}
    done = split_then("pipewire-jack-split", how)
    check(not status["why"], "%s; but rtctl status on the client's process thread: %s" % (done, status["why"]))
    check(not [r for r in status["rows"] if r.get("tid") in status["not"]],
          "%s; but rtctl status lists the client's busy or main thread as isolated: %s" % (done, status["rows"]))
    return "%s; rtctl status: %s" % (done, status["rows"])


def split_then(name, how):
    """The audio processes running and split under the audio profile (from the base profile); then
    how(procs, client, iso, hk) undoes it (and says how); every process and thread must be back, nothing
    killed."""
    session()
    ensure_rtctld_base()
    prof = audio_profile()
    pids = []
    try:
        pw, player, client = audio_running(name)
        pids += [player, client["pid"]]
        procs = audio_procs()
        before = where(procs)
        set_profile(prof)
        iso, hk = cpus(rtprops())
        dt = wait_split(procs, client, iso, hk, "the audio processes under %s" % prof)
        said = how(procs, client, iso, hk)
        wait_back(before, "after %s" % said)
        return "profile %s: %d processes split in %.1f s; %s: every process and thread back, none killed" % (
            prof, len(procs), dt, said)
    finally:
        kill_quietly(pids)
        ensure_rtctld_base()


@test("pipewire-split-stop", timeout=360)
def t_pipewire_split_stop():
    """`systemctl stop rtctld` with PipeWire, pw-cat and the JACK client split: each process back in its
    own unit's cgroup, its threads' CPUs as before, nothing killed."""
    def how(procs, client, iso, hk):
        run(["systemctl", "stop", UNIT], check_rc=True, timeout=120)
        return "systemctl stop rtctld"
    return split_then("pipewire-split-stop", how)


NORESTART = "/run/systemd/system/%s.d/rtctl-vmtest-norestart.conf" % UNIT


def kill_rtctld_for_good():
    """SIGKILL of rtctld with Restart= off (NORESTART, removed by the caller): only `rtctl restore` puts
    back what it left."""
    os.makedirs(os.path.dirname(NORESTART), exist_ok=True)
    with open(NORESTART, "w") as f:
        f.write("[Service]\nRestart=no\n")
    run(["systemctl", "daemon-reload"], check_rc=True, timeout=60)
    run(["systemctl", "kill", "-s", "KILL", UNIT], check_rc=True)
    check(wait_for(lambda: unit_prop(UNIT, "ActiveState")["ActiveState"] != "active", 30, 0.2),
          "rtctld still active after SIGKILL: %s" % unit_prop(UNIT, "ActiveState", "SubState"))


@test("pipewire-split-kill-restore", timeout=360)
def t_pipewire_split_kill_restore():
    """rtctld SIGKILLed with the audio processes split (Restart= off for the test, so nothing but `rtctl
    restore` puts things back): the split stays as it was, nothing is killed; then `rtctl restore`, with
    no daemon, puts every process and thread back from the journal."""
    def how(procs, client, iso, hk):
        kill_rtctld_for_good()
        check(not split_all(procs, client, iso, hk), "the SIGKILL of rtctld changed the split: %s" % split_all(
            procs, client, iso, hk))
        p = run([RTCTL, "restore"], timeout=120)
        check(p.returncode == 0, "rtctl restore after SIGKILL exited %d: %s" % (p.returncode, (p.stderr or p.stdout)[-400:]))
        return "SIGKILL (split kept) + `rtctl restore` (%s)" % (p.stdout.strip().splitlines() or ["-"])[-1]
    try:
        return split_then("pipewire-split-kill", how)
    finally:
        if os.path.exists(NORESTART):
            os.unlink(NORESTART)
            run(["systemctl", "daemon-reload"], timeout=60)
            ensure_rtctld_base()


MOVED_PROFILE = "/etc/rtctl/profiles/vmaudio-moved.conf"


def partition_check(said):
    """Where the kernel has cpuset.cpus.exclusive (6.7 and later) rtctl makes an isolated partition: valid
    again once the CPUs are back (an offline CPU invalidates it)."""
    scope = "/sys/fs/cgroup/rtctl.slice/rtctl-attached.scope"
    part = scope + "/isolated/cpuset.cpus.partition"
    if not os.path.exists(scope + "/cpuset.cpus.exclusive"):
        return said
    ok = wait_for(lambda: read(part) == "isolated", 30, 0.25)
    check(ok, "%s; but the partition reads %r after the CPU came back" % (said, read(part)))
    return said + "; partition %s again" % read(part)


@test("pipewire-split-hotplug", timeout=420)
def t_pipewire_split_hotplug():
    """The isolated CPU goes offline and comes back with PipeWire, pw-cat and the JACK client split. On a
    kernel that restores a cpuset's CPUs itself (6.1) that much passes without rtctld, so the profile in
    force changes while the CPU is offline: the audio profile again with another CPU isolated. The audio
    graph must be on that CPU, the rest of every audio process on the others, the CPU that came back among
    them; rtctld's pass after the online has nothing failed; detach then puts every process and thread
    back, nothing killed."""
    def how(procs, client, iso, hk):
        cpu = max(iso)
        other = max((hk - {0}) & cpu_set(read("/sys/devices/system/cpu/online")))
        with open(MOVED_PROFILE, "w") as f:
            f.write("[Profile]\nDescription=vmtest: audio on cpu%d\nInclude=audio\n[CPU]\nIsolate=%d\n" % (
                other, other))
        path = "/sys/devices/system/cpu/cpu%d/online" % cpu
        write(path, "0")
        try:
            check(read(path) == "0", "cpu%d did not go offline" % cpu)
            set_profile("vmaudio-moved")
            iso2, hk2 = cpus(rtprops())
            check(iso2 == {other} and cpu in hk2, "with cpu%d offline the moved profile isolates %s, housekeeping %s" % (
                cpu, cpu_list(iso2), cpu_list(hk2)))
            dt = wait_split(procs, client, iso2, hk2, "cpu%d offline, the isolated CPU moved to cpu%d" % (cpu, other))
            said = "cpu%d offline, audio moved to cpu%d: split in %.1f s" % (cpu, other, dt)
        finally:
            online_usec = time.time() * 1e6
            write(path, "1")
        check(read(path) == "1", "cpu%d did not come back online" % cpu)
        dt = wait_split(procs, client, iso2, hk2, "after cpu%d came back" % cpu)
        # The CPU that came back is a housekeeping CPU now: the busy thread may run there again.
        busy = cpu_set(thread_field(client["pid"], client["busy_tid"], "Cpus_allowed_list"))
        online = cpu_set(read("/sys/devices/system/cpu/online"))
        check(busy == hk2 & online, "%s; back online, the client's busy thread may run on %s, the online "
              "housekeeping CPUs are %s" % (said, cpu_list(busy), cpu_list(hk2 & online)))
        said += "; cpu%d back: split in %.1f s (%s), busy thread on %s" % (
            cpu, dt, runs_isolated(client["pid"], client["process_tid"], iso2, "process callback"), cpu_list(busy))
        # rtctld's own part: a pass after the online, with nothing failed.
        def passed():
            st = json.loads(run([RTCTL, "--json", "status"], timeout=60).stdout or "{}")
            return st if st.get("last_pass", {}).get("timestamp_usec", 0) > online_usec else None
        status = wait_for(passed, 30, 0.5)
        check(status, "%s; but rtctld made no pass after cpu%d came back" % (said, cpu))
        check(status.get("failures") == [], "%s; but rtctl status has failures: %s" % (said, status.get("failures")))
        said = partition_check(said)
        set_profile(TEST_PROFILE)
        return said + "; detached (back to %s)" % TEST_PROFILE
    try:
        return split_then("pipewire-split-hotplug", how)
    finally:
        if os.path.exists(MOVED_PROFILE):
            os.unlink(MOVED_PROFILE)


@test("pipewire-split-profile-switch", timeout=420)
def t_pipewire_split_profile_switch():
    """From vmiso (one CPU isolated, no [Attach] rules) to the audio profile and back, twice: under audio
    the audio processes are split; back under vmiso each process is in its own unit's cgroup again and
    each thread on the CPUs it had under vmiso before (housekeeping), nothing killed."""
    session()
    ensure_rtctld_base()
    prof = audio_profile()
    pids, steps = [], ["profile %s" % prof]
    try:
        pw, player, client = audio_running("pipewire-split-switch")
        pids += [player, client["pid"]]
        procs = audio_procs()
        set_profile("vmiso")
        iso, hk = cpus(rtprops())
        check(wait_for(lambda: all(cpu_set(cpus_of(p)) <= hk for p in procs), 60, 0.25),
              "under vmiso alice's audio processes are not all on housekeeping %s: %s" % (
                  cpu_list(hk), {p: cpus_of(p) for p in procs}))
        before = where(procs)
        for round_ in (1, 2):
            set_profile(prof)
            iso2, hk2 = cpus(rtprops())
            check((iso2, hk2) == (iso, hk), "%s isolates %s, vmiso %s" % (prof, cpu_list(iso2), cpu_list(iso)))
            dt = wait_split(procs, client, iso, hk, "round %d: vmiso -> %s" % (round_, prof))
            set_profile("vmiso")
            wait_back(before, "round %d: %s -> vmiso" % (round_, prof))
            steps.append("round %d: split in %.1f s, back under vmiso" % (round_, dt))
        steps.append("%d processes, none killed" % len(before))
        return "; ".join(steps)
    finally:
        kill_quietly(pids)
        call("SetProfile", TEST_PROFILE)


@test("boot-audio", timeout=300, own_run=True)
def t_boot_audio():
    """Boot 1: what an admin does for an audio workstation (`DefaultProfile=audio`, `systemctl enable
    rtctld`), alice logs in at boot; reboot. Boot 2 (after_reboot): nobody calls rtctld."""
    from vmtest_boot import Reboot
    if unit_prop(UNIT, "ActiveState").get("ActiveState") == "active":
        run(["systemctl", "stop", UNIT], timeout=60, check_rc=True)
    if os.path.exists("/var/lib/rtctl/active-profile"):  # a base profile chosen before wins over it
        os.unlink("/var/lib/rtctl/active-profile")
    write("/etc/rtctl/rtctl.conf", "[Daemon]\nDefaultProfile=audio\n")
    for u in (UNIT, "getty@tty1.service"):
        p = run(["systemctl", "enable", u], timeout=60)
        check(p.returncode == 0, "systemctl enable %s: %s" % (u, p.stderr.strip()))
    raise Reboot()


def t_boot_audio_after_reboot():
    """Boot 2: rtctld put the shipped audio profile in force at boot; alice's PipeWire runs, then she
    starts a player and a JACK client (pw-jack). With no command typed and nothing asked of rtctld (only
    its properties read), the graph's real-time threads (PipeWire's data loop, each client's) go to the isolated CPU and every other thread
    of them stays on housekeeping."""
    check(wait_for(lambda: unit_prop(UNIT, "ActiveState").get("ActiveState") == "active", 60, 0.5),
          "rtctld.service (enabled) not active at boot: %s" % unit_prop(UNIT, "ActiveState", "Result"))
    props = rtprops()
    check(props.get("ActiveProfile") == "audio" and props.get("BaseProfile") == "audio",
          "rtctld at boot: ActiveProfile=%s BaseProfile=%s, want audio (DefaultProfile=)" % (
              props.get("ActiveProfile"), props.get("BaseProfile")))
    iso, hk = cpus(props)
    pids = []
    try:
        # audio_running() less its DetachProcess calls: nothing here asks rtctld for anything.
        session()
        pw = wait_for(pipewire_pid, 60, 0.5)
        check(pw, "no pipewire process of alice")
        pids.append(play("boot-audio"))
        client = start_jack_client("boot-audio")
        pids.append(client["pid"])
        procs = audio_procs()
        dt = wait_split(procs, client, iso, hk, "at boot under DefaultProfile=audio, clients started after")
        said = runs_isolated(client["pid"], client["process_tid"], iso, "the JACK client's process callback")
        loops = [t for t in data_loop_tids(pw) if rt_policy(t)]
        check(loops, "PipeWire %d has no real-time data loop: %s" % (pw, thread_list(pw)))
        said += "; " + runs_isolated(pw, loops[0], iso, "PipeWire's data loop")
        return "rtctld at boot: audio (isolated %s); %d audio processes of alice split %.1f s after they " \
               "started, nothing asked of rtctld: %s" % (cpu_list(iso), len(procs), dt, said)
    finally:
        kill_quietly(pids)


t_boot_audio.after_reboot = t_boot_audio_after_reboot


FORKER_PROFILE = "/etc/rtctl/profiles/vmforker.conf"
# A process of root's that an [Attach] rule takes: it forks child A, turns its main thread real-time
# when told (a line on stdin), and then forks another child from that thread for each line; each child
# sleeps.
FORKER = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None)
libc.prctl(15, b"rtctl-forker", 0, 0, 0)
def child():
    pid = os.fork()
    if pid == 0:
        libc.prctl(15, b"forker-child", 0, 0, 0)
        time.sleep(600)
        os._exit(0)
    return pid
print(child(), flush=True)
sys.stdin.readline()
os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
for line in sys.stdin:
    print(child(), flush=True)
"""


def slice_stopped():
    active = unit_prop("rtctl.slice", "ActiveState").get("ActiveState")
    populated = read("/sys/fs/cgroup/rtctl.slice/cgroup.events") or ""
    return active != "active" and "populated 1" not in populated, "%s, %r" % (active, populated)


def all_home(pids, home, what, where):
    after = {pid: cgroup_of(pid) for pid in pids}
    check(after == {pid: home for pid in after}, "after %s, not all back in %s: %s (placed: %s)" % (
        what, home, after, where))
    stopped, how = slice_stopped()
    check(stopped, "rtctl.slice after %s: %s" % (what, how))
    return how


@test("attach-children-back", timeout=300)
def t_attach_children_back():
    """Issue 37 item 9: a process an [Attach] rule places forks two children, one before and one after it
    turned real-time; the later one is born in rtctl's scope, where no pass put it. `systemctl stop
    rtctld`: all three are back in the cgroup the parent came from, rtctl.slice is empty and stopped.
    Then the same with a third child, after a SIGKILL of rtctld and `rtctl restore`."""
    import subprocess
    ensure_rtctld_base()
    with open(FORKER_PROFILE, "w") as f:
        f.write("[Profile]\nDescription=vmtest: a forking process attached\nInclude=audio\n"
                "[Attach forker]\nMatch=comm:rtctl-forker user:root\nThreads=realtime\n")
    p = subprocess.Popen(["python3", "-c", FORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    kids = []
    try:
        home = cgroup_of(p.pid)
        kids.append(int(p.stdout.readline()))
        set_profile("vmforker")
        iso, hk = cpus(rtprops())
        p.stdin.write("real-time\n")
        p.stdin.flush()
        placed = wait_for(lambda: cgroup_of(p.pid).startswith("/rtctl.slice/"), 30, 0.2)
        check(placed, "the forker was not placed: %s, profile %s" % (cgroup_of(p.pid), rules_brief(rtprops())))
        p.stdin.write("fork\n")
        p.stdin.flush()
        kids.append(int(p.stdout.readline()))
        where = {pid: cgroup_of(pid) for pid in [p.pid] + kids}
        check(where[kids[1]].startswith("/rtctl.slice/"),
              "child B was not born in rtctl's scope (nothing to test): %s" % where)
        run(["systemctl", "stop", UNIT], check_rc=True, timeout=120)
        said = ["placed %s; after stop all three in %s, rtctl.slice %s" % (
            where, home, all_home([p.pid] + kids, home, "stop", where))]
        # Round 2: placed again, a child born in the scope, rtctld SIGKILLed (no restart), restore.
        ensure_rtctld_base()
        set_profile("vmforker")
        check(wait_for(lambda: cgroup_of(p.pid).startswith("/rtctl.slice/"), 30, 0.2),
              "round 2: the forker was not placed: %s" % cgroup_of(p.pid))
        p.stdin.write("fork\n")
        p.stdin.flush()
        kids.append(int(p.stdout.readline()))
        where = {pid: cgroup_of(pid) for pid in [p.pid] + kids}
        kill_rtctld_for_good()
        r = run([RTCTL, "restore"], timeout=120)
        check(r.returncode == 0, "rtctl restore after SIGKILL exited %d: %s" % (r.returncode, r.stderr[-300:]))
        if unit_prop(UNIT, "ActiveState")["ActiveState"] == "active":  # D-Bus activated by the restore
            run(["systemctl", "stop", UNIT], check_rc=True, timeout=120)
        said.append("SIGKILL + rtctl restore with child %d born in the scope: all four in %s, rtctl.slice %s" % (
            kids[-1], home, all_home([p.pid] + kids, home, "SIGKILL and restore", where)))
        return "; ".join(said)
    finally:
        kill_quietly([p.pid] + kids)
        p.wait()
        os.unlink(FORKER_PROFILE)
        if os.path.exists(NORESTART):
            os.unlink(NORESTART)
            run(["systemctl", "daemon-reload"], timeout=60)
        ensure_rtctld_base()
