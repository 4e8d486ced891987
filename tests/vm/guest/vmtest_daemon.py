"""The VM tier: the harness, rtctld's start, its D-Bus API and journal fields, the CLI and the
fleet playbook."""

import json
import os
import re
import signal
import time

from vmtest_common import (active_scheduler, call, call_as_user, check, cpu_ids, diff_snapshots,
    ERR_INVALID_ARGUMENT, ERR_NO_SUCH_PROFILE, ERR_NOT_AUTHORIZED, Fail, host, IFACE, manager, plain, read,
    require_rtctld, RTCTL, RTCTLD, rtctld_installed, run, settle, snapshot, STATE, test, TEST_PROFILE,
    TEST_USER, UNIT, unit_prop, wait_for)


@test("harness-boot")
def t_harness_boot():
    return "kernel %s, %d CPUs, boot-to-runner %.1f s" % (
        os.uname().release, len(cpu_ids()), STATE["uptime_at_start"])


# The tier's own survival (run.sh's harness run, tests/vm/README.md): a test that hangs the guest and one
# that panics its kernel, each FAIL by name, and the test after them still runs, in a boot of its own.
# In no other run. harness-hang comes after rtctld-start (below): the boot after the hang starts rtctld
# again for the test after it.
@test("harness-panic", timeout=30, own_run=True)
def t_harness_panic():
    with open("/proc/sys/kernel/sysrq", "w") as f:
        f.write("1")
    with open("/proc/sysrq-trigger", "w") as f:
        f.write("c")
    raise Fail("the kernel went on after sysrq-c")


@test("harness-reset", timeout=120, own_run=True)
def t_harness_reset():
    """A reboot that never comes back, as the host sees one: the kernel's last word, then QEMU's CPUs
    stop (QMP stop: the guest is paused, no reset follows)."""
    from vmtest_common import con
    con.line("harness-reset: reboot: Restarting system")
    host.call('qmp {"execute": "stop"}', timeout=30)
    time.sleep(300)
    raise Fail("the guest ran on after QEMU stopped it")


@test("harness-vmhost")
def t_harness_vmhost():
    t0 = time.monotonic()
    r = host.call("ping", timeout=30)
    check(r.startswith("pong"), "host answered %r to ping" % r)
    return "round trip %.0f ms" % ((time.monotonic() - t0) * 1000)


@test("rtctld-start")
def t_rtctld_start():
    """(a) rtctld started by systemd from the shipped unit reaches active (READY=1)."""
    settle()
    # the state before the daemon ever ran, for stop-restores
    STATE["before"] = snapshot()
    if not os.path.exists(RTCTLD):
        raise Fail("rtctld is not installed (no %s in the image; built with --no-rtctl or no meson install)" % RTCTLD)
    if not rtctld_installed():
        raise Fail("%s is not installed (no /usr/lib/systemd/system/%s)" % (UNIT, UNIT))
    props = unit_prop(UNIT, "Type", "LoadState", "FragmentPath")
    check(props.get("LoadState") == "loaded", "%s LoadState=%s" % (UNIT, props.get("LoadState")))
    check(props.get("Type") == "notify", "%s has Type=%s, want notify" % (UNIT, props.get("Type")))
    pre = unit_prop(UNIT, "ActiveState")
    check(pre.get("ActiveState") == "inactive", "rtctld already %s before the test started it (enabled at boot, or bus-activated?)" % pre.get("ActiveState"))
    t0 = time.monotonic()
    p = run(["systemctl", "start", UNIT], timeout=60)
    dt = time.monotonic() - t0
    st = unit_prop(UNIT, "ActiveState", "SubState", "MainPID", "Result")
    check(p.returncode == 0, "systemctl start %s exited %d: %s" % (UNIT, p.returncode, p.stderr.strip()))
    check(st.get("ActiveState") == "active" and st.get("SubState") == "running",
          "after start: ActiveState=%s SubState=%s Result=%s" % (st.get("ActiveState"), st.get("SubState"), st.get("Result")))
    STATE["started"] = True
    return "active (running) pid %s, start took %.2f s (from %s)" % (st.get("MainPID"), dt, props.get("FragmentPath"))


@test("harness-hang", timeout=10, own_run=True)
def t_harness_hang():
    """The runner stops dead (SIGSTOP: no alarm ends it), as a guest hung in the kernel looks from the
    host: no result ever comes."""
    os.kill(os.getpid(), signal.SIGSTOP)
    raise Fail("the runner went on after SIGSTOP")


@test("dbus-properties")
def t_dbus_properties():
    require_rtctld()
    _, props = manager()
    allp = plain(props.GetAll(IFACE, timeout=30))
    want = {"Version": str, "ActiveProfile": str, "Profiles": list, "State": str, "Failures": list}
    for k, typ in want.items():
        check(k in allp, "property %s missing (have: %s)" % (k, ", ".join(sorted(allp))))
        check(isinstance(allp[k], typ), "property %s is %r" % (k, allp[k]))
    check(allp["State"] in ("applied", "degraded", "off"), "State=%r" % allp["State"])
    names = [p[0] for p in allp["Profiles"]]
    check(all(isinstance(p, list) and len(p) == 2 for p in allp["Profiles"]), "Profiles is not a(ss): %r" % allp["Profiles"][:3])
    check(TEST_PROFILE in names, "profile %s (/etc/rtctl/profiles/%s.conf) not in Profiles %s" % (TEST_PROFILE, TEST_PROFILE, names))
    for f in allp["Failures"]:
        check(len(f) == 4 and isinstance(f[2], int), "Failures is not a(ssis): %r" % (f,))
    return "Version=%s State=%s ActiveProfile=%s, %d profiles" % (allp["Version"], allp["State"], allp["ActiveProfile"], len(names))


def block_state(devs):
    """Scheduler and every queue tunable of each disk, for 'unchanged' checks."""
    snap = snapshot()
    return {k: v for k, v in snap.items() if any(k.startswith("block/%s/" % d) for d in devs)}


def check_unchanged(what):
    """The extra disks are as SetProfile left them (independent of whether it worked)."""
    ref = STATE.get("applied")
    if ref is None:
        return
    d = diff_snapshots(ref, block_state(["vdb", "vdc"]))
    check(not d, "%s changed the disks: %s" % (what, "; ".join(d[:6])))


def check_block_profile(devs):
    bad = []
    for dev in devs:
        sch = active_scheduler(dev)
        ll = read("/sys/block/%s/queue/iosched/low_latency" % dev)
        if sch != "bfq" or ll != "0":
            bad.append("%s: scheduler=%s low_latency=%s (%s)" % (
                dev, sch, ll, read("/sys/block/%s/queue/scheduler" % dev)))
    return bad


def check_plan_shape(r):
    check(isinstance(r, list) and all(isinstance(x, list) and len(x) == 3 and all(isinstance(y, str) for y in x) for x in r),
          "Plan returned %r, want a(sss)" % (r[:3] if isinstance(r, list) else r,))


@test("dbus-plan-dry-run")
def t_dbus_plan_dry_run():
    """Plan(vmtest) before SetProfile: lists what would change on vdb/vdc, writes nothing."""
    require_rtctld()
    pre = snapshot()
    r, err, msg = call("Plan", TEST_PROFILE)
    check(err is None, "Plan(%s): %s: %s" % (TEST_PROFILE, err, msg))
    check_plan_shape(r)
    d = diff_snapshots(pre, snapshot())
    check(not d, "Plan is a dry run but changed: %s" % "; ".join(d[:6]))
    want = []
    for dev in ("vdb", "vdc"):
        cur = active_scheduler(dev)
        if cur != "bfq":
            ent = [e for e in r if dev in e[0] and e[0].endswith("scheduler")]
            check(ent, "Plan(%s) has no entry for %s's scheduler (now %s, the profile wants bfq); it has: %s" % (
                TEST_PROFILE, dev, cur, "; ".join("|".join(e) for e in r[:6])))
            check("bfq" in ent[0][2], "Plan(%s) wants %r for %s's scheduler, the profile says bfq" % (TEST_PROFILE, ent[0][2], dev))
            check(cur in ent[0][1], "Plan(%s) says %s's scheduler is %r, it is %s" % (TEST_PROFILE, dev, ent[0][1], cur))
            want.append("%s %s->bfq" % (dev, cur))
        else:
            ll = read("/sys/block/%s/queue/iosched/low_latency" % dev)
            if ll not in (None, "0"):
                ent = [e for e in r if dev in e[0] and e[0].endswith("low_latency")]
                check(ent and ent[0][2] == "0", "Plan(%s) has no low_latency=0 entry for %s (now %s): %s" % (
                    TEST_PROFILE, dev, ll, "; ".join("|".join(e) for e in r[:6])))
                want.append("%s low_latency %s->0" % (dev, ll))
    return "%d entries, writes nothing; %s" % (len(r), ", ".join(want) or "vdb/vdc already in place")


@test("set-profile")
def t_set_profile():
    """(b) root SetProfile("vmtest") over the system bus: vdb/vdc get bfq, low_latency=0."""
    require_rtctld()
    t0 = time.monotonic()
    r, err, msg = call("SetProfile", TEST_PROFILE)
    dt = time.monotonic() - t0
    check(err is None, "SetProfile(%s) failed: %s: %s" % (TEST_PROFILE, err, msg))
    check(isinstance(r, list) and len(r) == 2 and all(isinstance(x, int) for x in r), "SetProfile returned %r, want (uu)" % (r,))
    # returns when the profile is in place: no polling here
    STATE["applied"] = block_state(["vdb", "vdc"])
    bad = check_block_profile(["vdb", "vdc"])
    check(not bad, "right after SetProfile returned: " + "; ".join(bad))
    check(active_scheduler("vda") == STATE["before"].get("block/vda/scheduler"), "vda (not matched) changed to %s" % active_scheduler("vda"))
    _, props = manager()
    ap = str(props.Get(IFACE, "ActiveProfile"))
    check(ap == TEST_PROFILE, "ActiveProfile=%r after SetProfile" % ap)
    changes, failures = r
    check(failures == 0, "SetProfile reported %d failures: %r" % (failures, plain(props.Get(IFACE, "Failures"))))
    return "changes=%d failures=%d in %.0f ms; vdb, vdc: [bfq] low_latency=0" % (changes, failures, dt * 1000)


LOGFAIL_PROFILE = "vmtest-logfail"


def journal_entries(*matches):
    """rtctld's journal entries with these FIELD=value matches, as dicts."""
    p = run(["journalctl", "-u", UNIT, "--no-pager", "-o", "json"] + list(matches), timeout=20)
    return [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]


@test("journal-fields")
def t_journal_fields():
    """A failure rtctld logs carries RTCTL_TUNER=, RTCTL_OBJECT=, ERRNO=, so that `journalctl -u rtctld
    RTCTL_TUNER=block` finds it; a Reload that finds it again does not log it again; `systemctl status
    rtctld` shows the STATUS= line with the profile and the failure. vdc's NrRequests=1 is the failure:
    the kernel keeps at least 4."""
    require_rtctld()
    path = "/etc/rtctl/profiles/%s.conf" % LOGFAIL_PROFILE
    obj = "/sys/block/vdc/queue/nr_requests"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("[Profile]\nDescription=vmtest: a failure to log\n[Block logfail]\nMatch=name:vdc\nNrRequests=1\n")
    try:
        r, err, msg = call("SetProfile", LOGFAIL_PROFILE)
        check(err is None, "SetProfile(%s): %s: %s" % (LOGFAIL_PROFILE, err, msg))
        check(r[1] >= 1, "SetProfile(%s) reported no failure (nr_requests now %s)" % (LOGFAIL_PROFILE, read(obj)))
        found = lambda: [e for e in journal_entries("RTCTL_TUNER=block", "RTCTL_OBJECT=" + obj)
                         if e.get("PRIORITY") == "4"]
        wait_for(lambda: found(), 15)
        got = found()
        check(len(got) == 1, "journalctl -u rtctld RTCTL_TUNER=block RTCTL_OBJECT=%s: %d warnings, want 1: %s" % (
            obj, len(got), [e.get("MESSAGE") for e in got]))
        e = got[0]
        check(e.get("ERRNO") not in (None, "0"), "the failure has no ERRNO=: %r" % e)
        check(obj in e.get("MESSAGE", ""), "MESSAGE=%r does not name %s" % (e.get("MESSAGE"), obj))
        status = run(["systemctl", "status", "--no-pager", UNIT], timeout=20).stdout
        want = "Profile %s; 1 failure (block)" % LOGFAIL_PROFILE
        check(want in status, "systemctl status shows no %r:\n%s" % (want, status))
        # The same failure on the next pass: not logged again.
        _, err, msg = call("Reload")
        check(err is None, "Reload: %s: %s" % (err, msg))
        time.sleep(2)  # journald may be a moment behind
        check(len(found()) == 1, "the failure was logged again after Reload: %s" % [x.get("MESSAGE") for x in found()])
    finally:
        call("SetProfile", TEST_PROFILE)
        os.unlink(path)
    fixed = journal_entries("RTCTL_OBJECT=" + obj, "PRIORITY=6")
    status = unit_prop(UNIT, "StatusText").get("StatusText", "")
    check(status == "Profile %s; applied" % TEST_PROFILE, "StatusText=%r after SetProfile(%s)" % (status, TEST_PROFILE))
    return "1 entry RTCTL_TUNER=block ERRNO=%s %r; %d info after; status %r" % (
        e.get("ERRNO"), e.get("MESSAGE"), len(fixed), status)


@test("dbus-errors")
def t_dbus_errors():
    require_rtctld()
    _, err, msg = call("SetProfile", "no-such-profile-xyz")
    check(err == ERR_NO_SUCH_PROFILE, "SetProfile(no-such-profile-xyz): got %s (%s), want %s" % (err, msg, ERR_NO_SUCH_PROFILE))
    _, err2, msg2 = call("Plan", "no-such-profile-xyz")
    check(err2 == ERR_NO_SUCH_PROFILE, "Plan(no-such-profile-xyz): got %s (%s), want %s" % (err2, msg2, ERR_NO_SUCH_PROFILE))
    _, err3, msg3 = call("SetProfile", "../../etc/passwd")
    check(err3 in (ERR_INVALID_ARGUMENT, ERR_NO_SUCH_PROFILE), "SetProfile(../../etc/passwd): got %s (%s), want %s" % (err3, msg3, ERR_INVALID_ARGUMENT))
    _, props = manager()
    ap = str(props.Get(IFACE, "ActiveProfile"))
    check(ap == TEST_PROFILE, "a failed SetProfile changed ActiveProfile to %r" % ap)
    check_unchanged("a failed SetProfile")
    return "NoSuchProfile: %s" % msg


@test("unprivileged-denied")
def t_unprivileged():
    """(c) a non-root caller gets NotAuthorized from SetProfile/Reload/Restore."""
    require_rtctld()
    check(run(["id", TEST_USER]).returncode == 0, "user %s missing in the image" % TEST_USER)
    r = call_as_user(TEST_USER, "Get", "ActiveProfile")
    check("result" in r, "properties must be readable by anyone; %s got %s: %s" % (TEST_USER, r.get("error"), r.get("message")))
    check(r.get("uid", 0) != 0, "helper did not drop privileges (uid %s)" % r.get("uid"))
    for method, args in (("SetProfile", [TEST_PROFILE]), ("Reload", []), ("Restore", [])):
        r = call_as_user(TEST_USER, method, *args)
        check(r.get("error") == ERR_NOT_AUTHORIZED, "%s as %s: got %s, want %s" % (
            method, TEST_USER, r.get("error") or "success %r" % (r.get("result"),), ERR_NOT_AUTHORIZED) +
            (" (%s)" % r["message"] if r.get("message") else ""))
    check_unchanged("calls denied to %s" % TEST_USER)
    if os.path.exists(RTCTL):
        p = run([RTCTL, "profile", TEST_PROFILE], user=TEST_USER)
        check(p.returncode != 0, "`rtctl profile %s` as %s exited 0" % (TEST_PROFILE, TEST_USER))
    return "SetProfile, Reload, Restore -> NotAuthorized"


@test("dbus-plan-reload")
def t_dbus_plan_reload():
    require_rtctld()
    r, err, msg = call("Plan", TEST_PROFILE)
    check(err is None, "Plan(%s): %s: %s" % (TEST_PROFILE, err, msg))
    check_plan_shape(r)
    for obj, cur, want in r:
        m = re.search(r"\b(vd[a-z])\b.*scheduler$", obj)
        if m:  # current must be what the kernel says
            check(active_scheduler(m.group(1)) in cur, "Plan says %s's scheduler is %r while it is %s" % (
                m.group(1), cur, active_scheduler(m.group(1))))
    _, err, msg = call("Reload")
    check(err is None, "Reload(): %s: %s" % (err, msg))
    _, props = manager()
    ap = str(props.Get(IFACE, "ActiveProfile"))
    check(ap == TEST_PROFILE, "ActiveProfile=%r after Reload" % ap)
    check_unchanged("Reload()")
    return "Plan: %d entries; Reload kept %s" % (len(r), ap)


def cli(args, json_out=False, user=None, ok_rcs=(0,)):
    if not os.path.exists(RTCTL):
        raise Fail("rtctl is not installed (no %s in the image)" % RTCTL)
    p = run([RTCTL] + args + (["--json"] if json_out else []), timeout=60, user=user)
    check(p.returncode in ok_rcs, "`rtctl %s` exited %d: %s" % (" ".join(args + (["--json"] if json_out else [])), p.returncode, (p.stderr or p.stdout).strip()[-300:]))
    if json_out:
        try:
            return json.loads(p.stdout)
        except ValueError as e:
            raise Fail("`rtctl %s --json` printed no valid JSON (%s): %r" % (" ".join(args), e, p.stdout[:200]))
    return p.stdout


@test("cli-status")
def t_cli_status():
    require_rtctld()
    _, props = manager()
    state = str(props.Get(IFACE, "State"))
    # status exits non-zero while the state is not "applied": only then is 0 required
    rcs = (0,) if state == "applied" else tuple(range(0, 8))
    out = cli(["status"], ok_rcs=rcs)
    check(out.strip(), "`rtctl status` printed nothing")
    j = cli(["status"], json_out=True, ok_rcs=rcs)
    check(TEST_PROFILE in json.dumps(j), "`rtctl status --json` does not name the active profile %s: %s" % (TEST_PROFILE, json.dumps(j)[:200]))
    cli(["status"], json_out=True, user=TEST_USER, ok_rcs=rcs)  # status is for everyone
    return "State=%s; %d lines; --json ok" % (state, len(out.splitlines()))


@test("cli-profiles")
def t_cli_profiles():
    require_rtctld()
    out = cli(["profiles"])
    check(TEST_PROFILE in out, "`rtctl profiles` does not list %s" % TEST_PROFILE)
    j = cli(["profiles"], json_out=True)
    check(TEST_PROFILE in json.dumps(j), "`rtctl profiles --json` does not list %s" % TEST_PROFILE)
    return "lists %s" % TEST_PROFILE


@test("cli-plan")
def t_cli_plan():
    require_rtctld()
    cli(["plan"])
    j = cli(["plan"], json_out=True)
    return "--json: %s" % type(j).__name__


@test("cli-restore-profile")
def t_cli_restore_profile():
    require_rtctld()
    j = cli(["restore"], json_out=True)
    before = STATE["before"]
    bad = []
    for dev in ("vdb", "vdc"):
        if active_scheduler(dev) != before.get("block/%s/scheduler" % dev):
            bad.append("%s: %s, was %s" % (dev, active_scheduler(dev), before.get("block/%s/scheduler" % dev)))
    check(not bad, "after `rtctl restore`: " + "; ".join(bad))
    j2 = cli(["profile", TEST_PROFILE], json_out=True)
    check_unchanged("`rtctl restore` + `rtctl profile %s` (not the same as SetProfile)" % TEST_PROFILE)
    cli(["profile", TEST_PROFILE])  # idempotent, text output
    return "restore put vdb/vdc back, profile re-applied (restore: %s, profile: %s)" % (
        json.dumps(j)[:60], json.dumps(j2)[:60])


FLEET_PLAYBOOK = "/usr/local/share/rtctl-vmtest/fleet/rtctl.yml"  # docs/fleet/, copied by the image
FLEET_FILES = ("/etc/rtctl/profiles/studio.conf", "/etc/rtctl/rtctl.conf.d/50-fleet.conf")
# The example profile on the VM's disks: built on vmtest (vdb, vdc: bfq), with vdc's scheduler taken off
# as the example does for the disks recordings go to.
FLEET_VARS = {"rtctl_profile_include": TEST_PROFILE, "rtctl_scratch_match": "name:vdc",
              "rtctl_scratch_scheduler": "mq-deadline", "ansible_python_interpreter": "/usr/bin/python3"}


def fleet_play():
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", LC_ALL="C.UTF-8")
    p = run(["ansible-playbook", "--connection=local", "-i", "localhost,", FLEET_PLAYBOOK,
             "-e", json.dumps(FLEET_VARS)], timeout=200, env=env)
    m = re.search(r"^localhost\s*: ok=\d+\s+changed=(\d+)\s+unreachable=0\s+failed=(\d+)", p.stdout, re.M)
    check(p.returncode == 0 and m and m.group(2) == "0", "ansible-playbook exited %d: %s" % (
        p.returncode, (p.stdout + p.stderr).strip()[-600:]))
    verify = re.search(r"^TASK \[Everything the profile sets is in place \(rtctl verify\)\] \**\n(\w+):",
                       p.stdout, re.M)
    check(verify and verify.group(1) == "ok", "the play's verify task: %s" % (verify.group(1) if verify else "did not run"))
    return int(m.group(1))


@test("fleet-ansible", timeout=600)
def t_fleet_ansible():
    """docs/fleet.md's playbook with its defaults (/etc/rtctl, systemctl reload, the system bus): the
    profile in force and verified, a second run changes nothing; taken off again as the doc says."""
    require_rtctld()
    for f in ("/usr/bin/ansible-playbook", FLEET_PLAYBOOK):
        check(os.path.exists(f), "%s is not in the image (ansible-core, docs/fleet/)" % f)
    previous = cli(["status"], json_out=True, ok_rcs=(0, 1))["base_profile"]
    before = block_state(["vdb", "vdc"])
    was_enabled = run(["systemctl", "is-enabled", UNIT]).stdout.strip()
    try:
        changed = fleet_play()
        st = cli(["status"], json_out=True)
        check((st["profile"], st["base_profile"], st["state"]) == ("studio", "studio", "applied"),
              "after the play: profile %s, base %s, state %s" % (st["profile"], st["base_profile"], st["state"]))
        check(active_scheduler("vdc") == "mq-deadline" and active_scheduler("vdb") == "bfq",
              "after the play: vdb %s, vdc %s; want bfq, mq-deadline" % (active_scheduler("vdb"), active_scheduler("vdc")))
        cli(["verify"])
        again = fleet_play()
        check(again == 0, "the second run reported changed=%d" % again)
    finally:
        # Switched back first: a reload rereads the profile in force, and studio's file is going.
        run([RTCTL, "profile", previous], timeout=60)
        for f in FLEET_FILES:
            if os.path.exists(f):
                os.unlink(f)
        reload = run(["systemctl", "reload", UNIT], timeout=60)
        if was_enabled != "enabled":
            run(["systemctl", "disable", UNIT], timeout=60)
    check(reload.returncode == 0, "systemctl reload after taking the files off: %s" % reload.stderr.strip())
    st = cli(["status"], json_out=True, ok_rcs=(0, 1))
    check(st["base_profile"] == previous, "after clean-up the base profile is %s, was %s" % (st["base_profile"], previous))
    d = diff_snapshots(before, block_state(["vdb", "vdc"]))
    check(not d, "after clean-up vdb/vdc differ from before the play: %s" % "; ".join(d[:6]))
    return "studio in force and verified (first run changed=%d, second 0); back to %s" % (changed, previous)
