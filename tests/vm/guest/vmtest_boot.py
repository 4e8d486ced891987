"""The VM tier: tuning at boot, a second boot of the guest with rtctld enabled (README:
boot-tuning)."""

import glob
import os
import re

from vmtest_common import (check, con, cpu_ids, cpu_set, read, rtctld_installed, run, SESSION_UID, test,
    UNIT, unit_prop, wait_for, write)
from vmtest_isolation import cpu_list
from vmtest_session import rtprops, session_diagnostics, wait_for_agent


RESUME = "/var/lib/rtctl-vmtest/resume.json"
LOGIN_RECORD = "/tmp/rtctl-vmtest-login.txt"
TRACEFS = "/sys/kernel/tracing"
FORK_INSTANCE = TRACEFS + "/instances/rtctlfork"

# Started before sysinit.target of the second boot: every context switch (top buffer) and every
# fork and thread creation (an instance of its own, small enough never to wrap) from then on, with
# CLOCK_MONOTONIC timestamps, the clock of systemd's *TimestampMonotonic properties.
TRACE_UNIT = """[Unit]
Description=rtctl VM tier: trace context switches and forks from early boot
DefaultDependencies=no
Wants=sys-kernel-tracing.mount
After=sys-kernel-tracing.mount
Before=sysinit.target rtctld.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -ec 'T=%s; I=%s; echo mono > $T/trace_clock; echo 2048 > $T/buffer_size_kb; \\
 mkdir -p $I; echo mono > $I/trace_clock; echo 2048 > $I/buffer_size_kb; \\
 echo 1 > $I/events/sched/sched_process_fork/enable; echo 1 > $T/events/sched/sched_switch/enable; \\
 echo 1 > $T/tracing_on; echo 1 > $I/tracing_on'

[Install]
WantedBy=sysinit.target
""" % (TRACEFS, FORK_INSTANCE)

# Sourced by alice's login shell before the session agent's hook: what her session has at login.
LOGIN_HOOK = """if [ "$(id -un)" = alice ] && [ "$(tty)" = /dev/tty1 ]; then
	cg=$(cut -d: -f3 /proc/$$/cgroup)
	d=/sys/fs/cgroup$cg
	while [ ! -e "$d/cpuset.cpus.effective" ] && [ "$d" != /sys/fs/cgroup ]; do d=${d%%/*}; done
	{
		echo "uptime $(cut -d' ' -f1 /proc/uptime)"
		echo "pid $$"
		echo "cgroup $cg"
		echo "cpuset_dir $d"
		echo "effective $(cat "$d/cpuset.cpus.effective")"
		grep Cpus_allowed_list /proc/$$/status | tr -d '\\t' | sed 's/:/ /'
	} > %s
fi
""" % LOGIN_RECORD


class Reboot(Exception):
    """Raised by a test that continues in the next boot: main() reboots the guest and the runner of
    that boot calls the test's .after_reboot()."""


def boot_unit_unordered(how):
    """The premise broken on purpose (the test must fail then): rtctl_vmtest.boot_unordered drops
    rtctld's Before= ordering; rtctl_vmtest.boot_unordered=late also holds its start until alice's
    user manager runs, so her session begins untuned (an After= alone would not: user@1000 is not
    in the boot's transaction when rtctld is started)."""
    with open("/usr/lib/systemd/system/" + UNIT) as f:
        text = f.read()
    out = []
    for l in text.splitlines():
        if l.startswith("Before="):
            l = "Before=shutdown.target"
        if l.startswith("ExecStart=") and how == "late":
            out.append("ExecStartPre=/bin/sh -c 'until systemctl -q is-active user@%d.service; do sleep 0.2; done'"
                       % SESSION_UID)
            out.append("TimeoutStartSec=300")
        out.append(l)
    write("/etc/systemd/system/" + UNIT, "\n".join(out) + "\n")


@test("boot-tuning", timeout=240, own_run=True)
def t_boot_tuning():
    """Boot 1: configure what an admin does (DefaultProfile=vmiso, `systemctl enable rtctld`), let
    alice log in at boot (getty@tty1 enabled, autologin), trace from early boot, reboot."""
    check(rtctld_installed(), "%s is not installed" % UNIT)
    if unit_prop(UNIT, "ActiveState").get("ActiveState") == "active":
        run(["systemctl", "stop", UNIT], timeout=60, check_rc=True)
    # a profile chosen by an earlier test is remembered and would win over DefaultProfile=
    for f in glob.glob("/var/lib/rtctl/active-profile"):
        os.unlink(f)
    write("/etc/rtctl/rtctl.conf", "[Daemon]\nDefaultProfile=vmiso\n")
    write("/etc/systemd/system/rtctl-vmtest-trace.service", TRACE_UNIT)
    write("/etc/profile.d/rtctl-vmtest-boot.sh", LOGIN_HOOK)
    m = re.search(r"(?:^|\s)rtctl_vmtest\.boot_unordered(?:=(\S+))?(?:\s|$)", read("/proc/cmdline", ""))
    if m:
        boot_unit_unordered(m.group(1))
        run(["systemctl", "daemon-reload"], check_rc=True)
    for u in (UNIT, "getty@tty1.service", "rtctl-vmtest-trace.service"):
        p = run(["systemctl", "enable", u], timeout=60)
        check(p.returncode == 0, "systemctl enable %s: %s" % (u, p.stderr.strip()))
    raise Reboot()


def mono(v):
    """A systemd *TimestampMonotonic property (µs) in seconds; None when unset (0)."""
    try:
        return int(v) / 1e6 or None
    except (TypeError, ValueError):
        return None


def trace_lines(path):
    with open(path, errors="replace") as f:
        for l in f:
            if not l.startswith("#"):
                yield l


RE_TRACE = re.compile(r"^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): (\w+): (.*)$")


def trace_events(path, event):
    for l in trace_lines(path):
        m = RE_TRACE.match(l)
        if m and m.group(5) == event:
            yield int(m.group(3)), float(m.group(4)), dict(
                kv.split("=", 1) for kv in m.group(6).replace(" ==> ", " ").split() if "=" in kv)


def trace_stats(cpu, base=TRACEFS):
    st = {}
    for l in read("%s/per_cpu/cpu%d/stats" % (base, cpu), "").splitlines():
        k, _, v = l.partition(":")
        st[k.strip()] = v.strip()
    return st


def descendants(roots, parent_of):
    """Every PID/TID whose fork chain leads to one of roots (roots included)."""
    out = set(roots)
    changed = True
    while changed:
        changed = False
        for child, parent in parent_of.items():
            if parent in out and child not in out:
                out.add(child)
                changed = True
    return out


def is_kthread(pid):
    st = read("/proc/%d/stat" % pid)
    if not st:
        return None
    flags = int(st.rsplit(")", 1)[1].split()[6])
    return bool(flags & 0x00200000)  # PF_KTHREAD


def t_boot_tuning_after_reboot():
    """Boot 2: rtctld enabled with DefaultProfile=vmiso tuned before the first login."""
    steps, wrong = [], []
    check(wait_for(lambda: unit_prop(UNIT, "ActiveState").get("ActiveState") == "active", 60, 0.5),
          "rtctld.service (enabled) not active at boot: %s" % unit_prop(UNIT, "ActiveState", "Result"))
    boot_log = run(["journalctl", "-b", "--no-pager", "-o", "short-monotonic"], timeout=60).stdout.splitlines()
    check(len(boot_log) > 50, "the boot's journal has %d lines" % len(boot_log))
    cycles = [l for l in boot_log if "ordering cycle" in l or "to break ordering cycle" in l]
    check(not cycles, "the boot's journal reports an ordering cycle: %s" % " | ".join(cycles[:5]))
    props = rtprops()
    iso = cpu_set(props["IsolatedCPUs"])
    check(props["ActiveProfile"] == "vmiso" and iso,
          "rtctld at boot: ActiveProfile=%s IsolatedCPUs=%s, want vmiso (DefaultProfile=) isolating a CPU" % (
              props["ActiveProfile"], props["IsolatedCPUs"]))
    info = wait_for_agent(120)
    check(info, "alice's autologin session did not come up at boot: %s" % session_diagnostics())
    sid = info["env"].get("XDG_SESSION_ID")

    # 1. the order: rtctld READY (ActiveEnter of a Type=notify unit) before any way in started
    r = unit_prop(UNIT, "InactiveExitTimestampMonotonic", "ActiveEnterTimestampMonotonic")
    start, ready = mono(r["InactiveExitTimestampMonotonic"]), mono(r["ActiveEnterTimestampMonotonic"])
    later = {}
    for u, prop in (("systemd-user-sessions.service", "InactiveExitTimestampMonotonic"),
                    ("getty@tty1.service", "InactiveExitTimestampMonotonic"),
                    ("user@%d.service" % SESSION_UID, "InactiveExitTimestampMonotonic"),
                    ("session-%s.scope" % sid, "InactiveExitTimestampMonotonic")):
        later[u] = mono(unit_prop(u, prop).get(prop))
    check(start and ready and all(later.values()), "timestamps missing: rtctld start %s ready %s, %s" % (
        start, ready, later))
    early = ["%s %.3f" % (u, t) for u, t in later.items() if t <= ready]
    if early:
        wrong.append("started before rtctld was READY (%.3f s): %s" % (ready, ", ".join(early)))
    # `systemd-analyze blame` refuses while the boot's jobs run, and this runner is one of them: its
    # figure for a unit is ActiveEnter - InactiveExit, computed here from the same properties. What
    # the logins waited for rtctld: how much later than everything else systemd-user-sessions.service
    # is ordered after rtctld became READY.
    others, after = [], unit_prop("systemd-user-sessions.service", "After").get("After", "").split()
    for u in after:
        t = mono(unit_prop(u, "ActiveEnterTimestampMonotonic").get("ActiveEnterTimestampMonotonic"))
        if u != UNIT and t:
            others.append((t, u))
    last_other = max(others) if others else (0, "nothing")
    if UNIT in after:
        waited = "logins waited %.2f s for it (the rest of systemd-user-sessions' After= done at %.2f s, %s)" % (
            max(0.0, ready - last_other[0]), last_other[0], last_other[1])
    else:
        waited = "systemd-user-sessions.service is not ordered after it"
    steps.append("rtctld activating %.2f s, READY %.2f s: %.2f s in blame; %s; then %s" % (
        start, ready, ready - start, waited,
        ", ".join("%s %.2f s" % (u, t) for u, t in sorted(later.items(), key=lambda x: x[1]))))
    # where rtctld's time went: its bus name waits for dbus-daemon, then the first pass
    dbus_up = mono(unit_prop("dbus.service", "ActiveEnterTimestampMonotonic").get("ActiveEnterTimestampMonotonic"))
    first = [l for l in boot_log if "rtctld[" in l and "Pass (" in l][:1]
    for l in boot_log:
        if "rtctld" in l or "systemd-user-sessions" in l or "getty@tty1" in l:
            con.line("VMLOG boot-tuning " + l)  # the boot, in the console log: a passing test's too
    steps.append("dbus.service active %.2f s; first pass: %s" % (
        dbus_up or 0, re.sub(r"^\S+ \S+ \S+ ", "", first[0]) if first else "none logged"))

    # 2. alice's login shell, at login: its cpuset and affinity exclude the isolated CPUs
    check(wait_for(lambda: os.path.exists(LOGIN_RECORD), 20, 0.25), "no %s from alice's login" % LOGIN_RECORD)
    rec = dict(l.split(" ", 1) for l in read(LOGIN_RECORD, "").splitlines() if " " in l)
    eff, allowed = cpu_set(rec.get("effective", "")), cpu_set(rec.get("Cpus_allowed_list", ""))
    if not (eff and allowed and not (eff & iso) and not (allowed & iso)):
        wrong.append("alice's login shell at login (uptime %s, %s): cpuset.cpus.effective %s (%s), "
                     "Cpus_allowed_list %s; isolated %s" % (
                         rec.get("uptime"), rec.get("cgroup"), rec.get("effective"), rec.get("cpuset_dir"),
                         rec.get("Cpus_allowed_list"), cpu_list(iso)))
    steps.append("alice's login shell at uptime %s: %s effective %s, allowed %s" % (
        rec.get("uptime"), rec.get("cpuset_dir", "").replace("/sys/fs/cgroup", ""), rec.get("effective"),
        rec.get("Cpus_allowed_list")))

    # 3. the trace: no task of her session (getty's process tree: login, her shell, all they started;
    # her user manager's: PipeWire, wireplumber) was ever switched in on an isolated CPU
    check(os.path.isdir(FORK_INSTANCE), "rtctl-vmtest-trace.service did not set up tracing: %s" % (
        unit_prop("rtctl-vmtest-trace.service", "ActiveState", "Result")))
    write(TRACEFS + "/tracing_on", "0")
    write(FORK_INSTANCE + "/tracing_on", "0")
    traced_from = mono(unit_prop("rtctl-vmtest-trace.service", "ActiveEnterTimestampMonotonic")
                       .get("ActiveEnterTimestampMonotonic"))
    lost = {c: trace_stats(c, FORK_INSTANCE).get("overrun") for c in cpu_ids()}
    check(all(v == "0" for v in lost.values()), "fork trace lost events (overrun per CPU): %s" % lost)
    parent_of = {int(e["child_pid"]): int(e["pid"]) for _, _, e in
                 trace_events(FORK_INSTANCE + "/trace", "sched_process_fork")}
    roots = [int(unit_prop(u, "MainPID").get("MainPID", "0")) for u in
             ("getty@tty1.service", "user@%d.service" % SESSION_UID)]
    check(all(roots), "no MainPID for getty@tty1 / user@%d: %s" % (SESSION_UID, roots))
    theirs = descendants(roots, parent_of)
    seen_session, others, n_switches, n_before = [], {}, 0, set()
    for c in sorted(iso):
        oldest = float(trace_stats(c).get("oldest event ts", "inf"))
        check(oldest <= later["getty@tty1.service"],
              "the trace of cpu%d begins at %.3f s, after getty@tty1 started (%.3f s): it cannot speak for "
              "the session's whole life" % (c, oldest, later["getty@tty1.service"]))
        for cpu, ts, e in trace_events("%s/per_cpu/cpu%d/trace" % (TRACEFS, c), "sched_switch"):
            pid = int(e.get("next_pid", "0"))
            n_switches += 1
            if pid and ts <= ready and not is_kthread(pid):
                n_before.add(pid)  # the trace sees user tasks there: they ran before the tuning
            if pid in theirs:
                seen_session.append("%s[%d] on cpu%d at %.3f s" % (e.get("next_comm"), pid, c, ts))
            elif pid and ts > ready and not is_kthread(pid):
                others.setdefault("%s[%d]" % (e.get("next_comm"), pid), ts)
    if seen_session:
        wrong.append("%d context switches of tasks of alice's session onto the isolated CPUs: %s" % (
            len(seen_session), ", ".join(seen_session[:8])))
    steps.append("trace from %.2f s: %d of the %d tasks of her session (getty@tty1 and user@%d trees) ever "
                 "ran on cpu%s (%d switches traced there, to %d live or gone user tasks before READY); other "
                 "user tasks there after READY: %s" % (
                     traced_from or 0, len({x.split()[0] for x in seen_session}), len(theirs), SESSION_UID,
                     cpu_list(iso), n_switches, len(n_before),
                     ", ".join(sorted(others)) or "none"))
    # the three parts are judged separately: a broken premise shows which of them it breaks
    check(not wrong, "; ".join(wrong) + " || " + "; ".join(steps))
    return "; ".join(steps)


t_boot_tuning.after_reboot = t_boot_tuning_after_reboot
