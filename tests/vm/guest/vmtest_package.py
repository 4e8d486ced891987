"""The VM tier: the Debian package's install, upgrade, remove and purge (run.sh's package run)."""

import glob
import os
import threading
import time

from vmtest_common import (call, check, diff_snapshots, RTCTL, RTCTLD, run, settle, snapshot, STATE, test,
    TEST_PROFILE, UNIT, unit_prop)
from vmtest_session import brief, rtprops


PKG_CACHE = "/var/cache/rtctl-vmtest"


def pkg_status():
    return run(["dpkg-query", "-W", "-f", "${Status}", "rtctl"]).stdout.strip()


def pkg_files():
    """What dpkg -L lists for rtctl that is no directory (directories like /usr/share/man, and /lib, a link
    to one on merged /usr, are shared)."""
    p = run(["dpkg", "-L", "rtctl"])
    return [f for f in p.stdout.splitlines() if f.startswith("/") and not os.path.isdir(f)]


@test("package-installed", own_run=True)
def t_package_installed():
    """The package installed as a user would (dpkg -i): after boot the service is enabled and running with
    the default profile in place, without anyone starting it."""
    check(pkg_status() == "install ok installed", "dpkg-query: rtctl is %r" % pkg_status())
    files = pkg_files()
    STATE["pkg_files"] = files
    for want in (RTCTLD, RTCTL, "/usr/share/polkit-1/actions/org.rtctl.policy",
                 "/usr/lib/rtctl/profiles/desktop.conf", "/usr/share/man/man8/rtctld.8.gz"):
        check(want in files or want.replace("/usr/lib/", "/lib/") in files, "dpkg -L rtctl lacks %s" % want)
    check(any(f.endswith("/systemd/system/rtctld.service") for f in files), "dpkg -L rtctl lacks the unit")
    enabled = run(["systemctl", "is-enabled", UNIT]).stdout.strip()
    check(enabled == "enabled", "systemctl is-enabled %s: %s" % (UNIT, enabled))
    st = unit_prop(UNIT, "ActiveState", "SubState", "MainPID", "ActiveEnterTimestampMonotonic")
    check(st.get("ActiveState") == "active", "%s after boot: %s" % (UNIT, st))
    # The unit's CPUSchedulingPolicy=fifo, CPUSchedulingPriority=1, CPUSchedulingResetOnFork=yes.
    pid = int(st.get("MainPID") or 0)
    policy, prio = os.sched_getscheduler(pid), os.sched_getparam(pid).sched_priority
    check(policy == os.SCHED_FIFO | os.SCHED_RESET_ON_FORK and prio == 1,
          "rtctld's scheduling: policy %#x priority %d, not SCHED_FIFO 1 with SCHED_RESET_ON_FORK" % (policy, prio))
    props = rtprops()
    check(props.get("ActiveProfile") == "desktop" and props.get("State") == "applied" and not props.get("Failures"),
          "after boot, the package's default profile: %s" % brief(props))
    v = run([RTCTL, "verify"], timeout=60)
    check(v.returncode == 0, "rtctl verify after boot: rc %d %s" % (v.returncode, (v.stdout + v.stderr).strip()[-300:]))
    return "rtctl %s: %d files; %s enabled, active since boot (pid %s, SCHED_FIFO 1), desktop applied, rtctl verify ok" % (
        run(["dpkg-query", "-W", "-f", "${Version}", "rtctl"]).stdout.strip(), len(files), UNIT, st.get("MainPID"))


def tuned_values():
    """The values the vmtest profile changes (the extra disks' scheduler and bfq tunable)."""
    return {k: v for k, v in snapshot().items() if k.startswith(("block/vdb/", "block/vdc/"))}


@test("package-upgrade", own_run=True, timeout=240)
def t_package_upgrade():
    """dpkg -i of the package over itself runs the upgrade path of the maintainer scripts (prerm upgrade,
    postinst configure with the old version): the daemon is restarted, and the tuning is never lost
    meanwhile: the new daemon takes over the journal of original values, so a later stop still restores
    the machine as it was before any rtctld ran."""
    run(["systemctl", "stop", UNIT], check_rc=True, timeout=90)
    settle()
    STATE["pkg_before"] = snapshot()
    original = tuned_values()
    run(["systemctl", "start", UNIT], check_rc=True, timeout=90)
    r, err, msg = call("SetProfile", TEST_PROFILE)
    check(err is None, "SetProfile(%s): %s %s" % (TEST_PROFILE, err, msg))
    tuned = tuned_values()
    changed = sorted(k for k in tuned if tuned[k] != original.get(k))
    check(changed, "%s changed nothing on vdb/vdc: %s" % (TEST_PROFILE, tuned))
    old_pid = unit_prop(UNIT, "MainPID")["MainPID"]
    debs = sorted(glob.glob(PKG_CACHE + "/rtctl_*.deb"))
    check(debs, "no .deb in %s" % PKG_CACHE)
    samples, lost = [0], []
    done = threading.Event()

    def sample():
        while not done.is_set():
            now = tuned_values()
            samples[0] += 1
            if any(now.get(k) != tuned[k] for k in changed) and not lost:
                lost.append(now)
            time.sleep(0.02)
    th = threading.Thread(target=sample)
    th.start()
    try:
        p = run(["dpkg", "-i", debs[-1]], timeout=180)
    finally:
        done.set()
        th.join()
    check(p.returncode == 0, "dpkg -i %s: rc %d %s" % (debs[-1], p.returncode, (p.stdout + p.stderr).strip()[-400:]))
    st = unit_prop(UNIT, "ActiveState", "MainPID")
    check(st.get("ActiveState") == "active" and st.get("MainPID") not in (old_pid, "0"),
          "after the upgrade: %s (pid before %s): not restarted" % (st, old_pid))
    check(not lost, "the tuning was lost during the upgrade (%d samples): %s, tuned %s" % (samples[0], lost[:1], tuned))
    props = rtprops()
    check(props.get("ActiveProfile") == TEST_PROFILE and props.get("State") == "applied" and not props.get("Failures"),
          "after the upgrade: %s" % brief(props))
    check(tuned_values() == tuned, "after the upgrade: %s, want %s" % (tuned_values(), tuned))
    return "pid %s -> %s; %d tuned values (vdb, vdc: %s) held through dpkg -i, %d samples; %s applied again" % (
        old_pid, st.get("MainPID"), len(changed), tuned.get("block/vdb/scheduler"), samples[0], TEST_PROFILE)


@test("package-remove", own_run=True, timeout=180)
def t_package_remove():
    """apt-get remove stops the daemon, which restores every value: the machine is as before any rtctld ran
    (the snapshot package-upgrade took with the daemon stopped), the binaries are gone, the admin's
    configuration stays (conffiles), as with any Debian package."""
    check("pkg_before" in STATE, "no snapshot from package-upgrade")
    p = run(["apt-get", "remove", "-y", "-q", "rtctl"], timeout=150)
    check(p.returncode == 0, "apt-get remove: rc %d %s" % (p.returncode, (p.stdout + p.stderr).strip()[-400:]))
    st = unit_prop(UNIT, "ActiveState", "LoadState")
    check(st.get("ActiveState") in ("inactive", "failed", "") or st.get("LoadState") == "not-found",
          "after remove: %s" % st)
    settle()
    d = diff_snapshots(STATE["pkg_before"], snapshot())
    check(not d, "%d values not restored by apt-get remove: %s" % (len(d), "; ".join(d[:8])))
    check(not os.path.exists(RTCTLD) and not os.path.exists(RTCTL), "binaries left after remove")
    status = pkg_status()
    check(status in ("deinstall ok config-files", "unknown ok not-installed", ""),
          "dpkg-query after remove: %r" % status)
    return "every value back (%d compared); dpkg: %s" % (len(STATE["pkg_before"]), status)


@test("package-purge", own_run=True, timeout=180)
def t_package_purge():
    """apt-get purge leaves nothing of the package: dpkg -L knows no rtctl, no file it listed is left,
    and the daemon's state and runtime directories are gone."""
    p = run(["apt-get", "purge", "-y", "-q", "rtctl"], timeout=150)
    check(p.returncode == 0, "apt-get purge: rc %d %s" % (p.returncode, (p.stdout + p.stderr).strip()[-400:]))
    listed = run(["dpkg", "-L", "rtctl"])
    check(listed.returncode != 0, "dpkg -L rtctl after purge still lists: %s" % listed.stdout.strip()[:300])
    left = [f for f in STATE.get("pkg_files", []) if os.path.lexists(f)]
    check(not left, "left behind after purge: %s" % left[:10])
    gone = [d for d in ("/var/lib/rtctl", "/run/rtctl") if os.path.lexists(d)]
    check(not gone, "left behind after purge: %s" % gone)
    etc = sorted(os.path.relpath(os.path.join(dp, f), "/etc/rtctl") for dp, _, fs in os.walk("/etc/rtctl") for f in fs)
    foreign = [f for f in etc if not f.startswith("profiles/vm")]
    check(not foreign, "/etc/rtctl after purge holds files the test image did not put there: %s" % foreign)
    return "dpkg -L: %s; none of the %d files left; /var/lib/rtctl, /run/rtctl gone; /etc/rtctl: %s" % (
        (listed.stderr.strip() or listed.stdout.strip())[:80], len(STATE.get("pkg_files", [])),
        ", ".join(etc) or "empty")
