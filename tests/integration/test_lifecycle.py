"""Stop, crash, restart and restore; bad configuration while running."""
import json
import os
import select
import signal
import subprocess
import time

import dbus

import contract
import machine
from conftest import wait_until
from harness import RTCTL
from polkit_client import call_each

RULES = """
[Profile]
Description=test
[Block test]
Match=name:loop2[0-9][0-9]
Scheduler=bfq
Tunables=low_latency=0
[Sysctl]
kernel.sched_rt_runtime_us=950001
"""


def test_sigterm_puts_every_value_back(env):
    env.profile("t", RULES)
    with machine.loop_devices(2):
        before = machine.snapshot()
        d = env.start("--profile", "t")
        assert machine.diff(before, machine.snapshot()) != []
        assert d.stop(signal.SIGTERM) == 0
        assert machine.diff(before, machine.snapshot()) == []
        assert env.journal is None


def test_sigkill_then_restart_then_restore(env):
    env.profile("t", RULES)
    with machine.loop_devices(2):
        before = machine.snapshot()
        d = env.start("--profile", "t")
        d.stop(signal.SIGKILL)
        assert env.journal and len(env.journal["entries"]) >= 5
        # A new daemon finds the journal and keeps the true originals, not the tuned values.
        d2 = env.start("--profile", "t")
        assert "from an earlier run" in d2.output()
        assert env.rtctl_json("restore")["failures"] == 0
        assert machine.diff(before, machine.snapshot()) == []
        d2.stop()


def test_sigkill_then_restore_without_daemon(env):
    env.profile("t", RULES)
    with machine.loop_devices(1):
        before = machine.snapshot()
        d = env.start("--profile", "t")
        d.stop(signal.SIGKILL)
        p = env.rtctl("restore")
        assert p.returncode == 0, p.stderr
        assert "not running" in p.stdout
        assert machine.diff(before, machine.snapshot()) == []
        assert env.journal is None


def monitor_until(mon, text, timeout=60):
    """What a dbus-monitor printed until text (or its timeout, or its end)."""
    seen = b""
    deadline = time.monotonic() + timeout
    while text not in seen and time.monotonic() < deadline:
        r, _, _ = select.select([mon.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if not r:
            break
        chunk = os.read(mon.stdout.fileno(), 65536)
        if not chunk:
            break
        seen += chunk
    return seen


def test_a_restore_sent_to_a_daemon_that_dies_restores_from_the_journal(env):
    """`rtctl restore` sent while rtctld is dying (killed, crashed, OOM) reaches it on the bus, and the bus
    answers NoReply when it is gone: the restore then puts back from the journal itself, as it does when
    no daemon runs. (Seen in CI on a busy machine: a restore right after the daemon's SIGKILL still found
    its name on the bus, failed, and left the tuned values.) Here the daemon is stopped (SIGSTOP) so the
    call waits in its socket; a monitor of the bus sees the call go out before the SIGKILL."""
    env.profile("t", RULES)
    with machine.loop_devices(1):
        before = machine.snapshot()
        d = env.start("--profile", "t")
        mon = subprocess.Popen(["dbus-monitor", "--address", env.bus.address,
                                "type='method_call',member='Restore'"], stdout=subprocess.PIPE)
        restore = None
        try:
            # The monitor is in place once its own NameLost comes (it gives up its name to monitor).
            seen = monitor_until(mon, b"member=NameLost")
            assert b"member=NameLost" in seen, seen
            os.kill(d.proc.pid, signal.SIGSTOP)
            restore = subprocess.Popen([RTCTL, "restore"], env=env.environ, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True)
            seen = monitor_until(mon, b"member=Restore")
            assert b"member=Restore" in seen, seen
            os.kill(d.proc.pid, signal.SIGKILL)
            d.proc.wait()
            out, err = restore.communicate(timeout=60)
        finally:
            mon.kill()
            mon.wait()
            if restore and restore.poll() is None:
                restore.kill()
        assert restore.returncode == 0, (out, err)
        assert "not running; restored from its journal" in out, (out, err)
        assert machine.diff(before, machine.snapshot()) == []
        assert env.journal is None


def test_broken_profile_reported_daemon_keeps_last_good(env):
    path = env.profile("t", RULES)
    env.profile("bad", "[Profile]\nDescription=bad\n[Block x]\nMatch=name:loop2*\nScheduler=fastest\n"
                "Frobnicate=1\n")
    with machine.loop_devices(1) as (name,):
        d = env.start("--profile", "t")
        p = env.rtctl("profile", "bad")
        assert p.returncode == 5
        assert "bad.conf:5: Scheduler=fastest: unknown I/O scheduler 'fastest'" in p.stderr
        assert "bad.conf:6: Frobnicate=1: unknown key in [Block x]" in p.stderr
        assert env.rtctl_json("status")["profile"] == "t"

        # The active profile's file breaks; a reload (by call or SIGHUP) keeps the last good policy.
        with open(path, "a") as f:
            f.write("[CPU]\nIsolate=0-1\nbogus line\n")
        p = env.rtctl("profile", "t")
        assert p.returncode == 5 and "t.conf:12: expected Key=Value" in p.stderr
        d.proc.send_signal(signal.SIGHUP)
        assert wait_until(lambda: "Reload failed" in d.output())
        assert d.running()
        status = env.rtctl_json("status")
        assert status["profile"] == "t" and status["state"] == "applied"
        assert machine.active_choice(machine.read("/sys/block/%s/queue/scheduler" % name)) == "bfq"


def test_profile_errors_name_file_line_key(env):
    env.profile("base", "[Profile]\nDescription=base\n[Block x]\nMatch=rotational:2\n")
    env.profile("child", "[Profile]\nInclude=base\n[CPU]\nIsolate=3-1\n")
    env.profile("loop1", "[Profile]\nInclude=loop2\n")
    env.profile("loop2", "[Profile]\nInclude=loop1\n")
    env.start("--profile", "off")
    p = env.rtctl("plan", "--profile", "child")
    assert p.returncode == 5
    assert "base.conf:4: Match=rotational:2: rotational: takes 0 or 1, not '2'" in p.stderr
    assert "child.conf:4: Isolate=3-1:" in p.stderr and "runs backwards" in p.stderr
    p = env.rtctl("profile", "loop1")
    assert p.returncode == 5 and "include cycle: loop1 -> loop2 -> loop1" in p.stderr
    p = env.rtctl("profile", "nonexistent")
    assert p.returncode == 4


def test_remembered_profile_survives_restart(env):
    env.profile("t", RULES)
    with machine.loop_devices(1):
        d = env.start()
        assert env.rtctl_json("status")["profile"] == "off"
        env.rtctl("profile", "t", check=True)
        d.stop()
        d = env.start()
        assert env.rtctl_json("status")["profile"] == "t"
        d.stop()


def test_on_stop_keep_leaves_tuning_then_restore_puts_it_back(env):
    env.write("rtctl.conf.d/keep.conf", "[Daemon]\nOnStop=keep\n")
    env.profile("t", RULES)
    with machine.loop_devices(1) as (name,):
        before = machine.snapshot()
        d = env.start("--profile", "t")
        tuned = machine.snapshot()
        assert d.stop() == 0
        assert machine.diff(tuned, machine.snapshot()) == []
        assert env.journal and len(env.journal["entries"]) == 3
        assert env.rtctl("restore").returncode == 0
        assert machine.diff(before, machine.snapshot()) == []


def test_bad_daemon_settings_fall_back_to_defaults(env):
    env.write("rtctl.conf.d/bad.conf", "[Daemon]\nOnStop=sometimes\nColour=red\n")
    env.profile("t", RULES)
    d = env.start("--profile", "t")
    out = d.output()
    assert "bad.conf:2: OnStop=sometimes: expected restore or keep" in out
    assert "bad.conf:3: Colour=red: unknown key in [Daemon]" in out
    assert d.stop() == 0
    # Defaults include OnStop=restore: nothing is left tuned.
    assert env.journal is None


def test_cpu_hotplug_event_refreshes_topology(env):
    env.profile("t", RULES)
    d = env.start("--profile", "t", "--verbose")
    with machine.cpu1_hotplug_guard():
        machine.set_cpu1(False)
        assert wait_until(lambda: "cpu offline cpu1" in d.output())
        machine.set_cpu1(True)
        assert wait_until(lambda: "cpu online cpu1" in d.output())
    assert d.running()
    status = env.rtctl_json("status")
    assert status["state"] == "applied"
    assert status["housekeeping_cpus"] == machine.read("/sys/devices/system/cpu/possible")


def test_build_tree_finds_its_own_configuration(env):
    e = env.environ
    del e["RTCTL_CONF_PATH"]
    p = subprocess.run([RTCTL, "--json", "profiles"], env=e, capture_output=True, text=True, timeout=30)
    names = [x["name"] for x in json.loads(p.stdout)]
    assert "desktop" in names and "off" in names


def test_damaged_journal_costs_only_the_damaged_entries(env, tmp_path):
    """A journal left by a killed daemon, damaged: one entry with a null kind, the file cut off halfway
    through its last entry. rtctld starts (no crash), keeps and restores every original it can read,
    lists what it cannot by object in status and in `rtctl restore` (which exits 1), and keeps the damaged
    file beside the new one. On a fixture machine (RTCTL_SYSROOT)."""
    import glob
    import os
    import shutil
    import harness
    src = os.path.join(harness.BUILD, "tests", "unit", "fixtures", "vm2")
    root = str(tmp_path / "vm2")
    shutil.copytree(src, root, symlinks=True)
    tm = root + "/proc/sys/kernel/timer_migration"
    ra = root + "/sys/block/vda/queue/read_ahead_kb"
    nr = root + "/sys/block/vda/queue/nr_requests"
    # What the killed daemon had set; the journal holds the originals.
    for path, value in ((tm, "0"), (ra, "4096"), (nr, "64")):
        with open(path, "w") as f:
            f.write(value + "\n")
    entries = [
        {"kind": "file", "tuner": "sysctl", "object": "/proc/sys/kernel/timer_migration", "original": "1"},
        {"kind": None, "tuner": "block", "object": "/sys/block/vda/queue/nr_requests", "original": "256"},
        {"kind": "file", "tuner": "block", "object": "/sys/block/vda/queue/read_ahead_kb", "original": "8192"},
        {"kind": "file", "tuner": "block", "object": "/sys/block/loop0/queue/read_ahead_kb", "original": "128"},
    ]
    text = json.dumps({"version": 1, "entries": entries}, indent=2)
    text = text[:text.rindex('"object": "/sys/block/loop0') + 12]  # killed halfway through the last entry
    os.makedirs(env.run)
    with open(os.path.join(env.run, "journal.json"), "w") as f:
        f.write(text)
    env.extra["RTCTL_SYSROOT"] = root
    env.profile("tm", "[Profile]\nDescription=test: sysctl only\n[Sysctl]\nkernel.timer_migration=0\n")
    d = env.start("--profile", "tm")

    copies = glob.glob(os.path.join(env.run, "journal.json.damaged*"))
    assert len(copies) == 1 and open(copies[0]).read() == text, copies
    status = json.loads(env.rtctl("--json", "status").stdout)
    assert status["state"] == "degraded"
    lost = {f["object"]: f["message"] for f in status["failures"] if f["tuner"] == "journal"}
    assert "/sys/block/vda/queue/nr_requests" in lost, status["failures"]
    assert any("trunc" in m for m in lost.values()), lost
    # The profile's own value is in place, and what it does not touch went back at once.
    assert machine.read(tm) == "0" and machine.read(ra) == "8192"
    assert machine.read(nr) == "64", "an original that could not be read was made up"

    p = env.rtctl("restore")
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    assert "/sys/block/vda/queue/nr_requests" in p.stderr, p.stderr
    assert machine.read(tm) == "1", "the original the journal kept was not restored"
    # Reported once: the next restore is clean, and so is a daemon started again.
    p = env.rtctl("restore")
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    assert d.running()
    d.stop()
    d = env.start("--profile", "tm")
    status = json.loads(env.rtctl("--json", "status").stdout)
    assert [f for f in status["failures"] if f["tuner"] == "journal"] == [], status["failures"]
    d.stop()
    assert machine.read(tm) == "1"


def test_cpu_lists_beyond_this_machine_are_failures_naming_the_key(env):
    # [IRQ] CPUs=40-47 on this 2-CPU machine balanced quietly over every CPU, and [Power] CPUs=40-47 did
    # nothing: each is now a failure naming file:line: key, and the rest of the profile still applies.
    path = env.profile("far", "[Profile]\nDescription=t\n[IRQ]\nBalance=housekeeping\nCPUs=40-47\n"
                              "[Power rt]\nCPUs=40-47\nMaxExitLatencyUs=0\n")
    possible = machine.read("/sys/devices/system/cpu/possible")
    why = "CPUs 40-47 are not CPUs of this machine (its CPUs are %s)" % possible
    left = {r["object"]: r["left_alone"] for r in env.rtctl_json("plan", "--profile", "far") if "left_alone" in r}
    for line in (5, 7):
        assert why in left.get("%s:%d: CPUs=40-47" % (path, line), ""), left
    d = env.start("--profile", "far")
    p = env.rtctl("--json", "status")
    assert p.returncode == 1, p.stdout + p.stderr  # degraded: status says so in its exit code too
    status = json.loads(p.stdout)
    failed = {f["object"]: f["message"] for f in status["failures"]}
    for line in (5, 7):
        assert why in failed.get("%s:%d: CPUs=40-47" % (path, line), ""), status["failures"]
    assert status["profile"] == "far"
    d.stop()


def test_hostile_profile_files_are_refused_and_the_daemon_stays_up(env):
    # What a careless or hostile admin can put in /etc/rtctl/profiles: each is refused with file and
    # line, at once (a FIFO used to block the daemon for ever, /dev/zero to eat memory), and rtctld keeps
    # its last good profile and answers everything after.
    import os
    profiles = os.path.join(env.conf, "profiles")
    os.mkfifo(os.path.join(profiles, "fifo.conf"))
    os.symlink("/dev/zero", os.path.join(profiles, "zero.conf"))
    with open(os.path.join(profiles, "nul.conf"), "wb") as f:
        f.write(b"[Profile]\nDescription=n\n[Sysctl]\nvm.swappiness=1\0\n")
    with open(os.path.join(profiles, "latin1.conf"), "wb") as f:
        f.write(b"[Profile]\nDescription=l\n[Sysctl\xe9]\n")
    d = env.start("--profile", "off")
    want = {"fifo": "fifo.conf: not a regular file (a FIFO)",
            "zero": "zero.conf: not a regular file (a character device)",
            "nul": "nul.conf:4: a NUL byte",
            "latin1": "latin1.conf:3: not valid UTF-8"}
    for name, why in want.items():
        p = env.rtctl("profile", name)
        assert p.returncode == 5 and why in p.stderr, (name, p.returncode, p.stderr)
    assert d.running()
    status = env.rtctl_json("status")
    assert status["profile"] == "off" and status["failures"] == []
    # Every property still goes out over D-Bus (names that are not UTF-8 used to break GetAll).
    assert env.rtctl("--json", "profiles").returncode == 0
    d.stop()


def test_daemon_command_line_exit_codes():
    # The daemon conventions: --help and --version exit 0, a wrong command line 2 with the reason.
    from harness import RTCTLD
    for args, rc, text in ((["--help"], 0, "rtctld [OPTIONS]"), (["--version"], 0, "rtctld "),
                           (["--bogus"], 2, "unrecognized option '--bogus'"),
                           (["extra"], 2, "takes no positional arguments"),
                           (["--realtime-priority=0"], 2, "--realtime-priority=0: expected a SCHED_FIFO priority, 1 to 99."),
                           (["--realtime-priority=fifo"], 2, "--realtime-priority=fifo: expected")):
        p = subprocess.run([RTCTLD] + args, capture_output=True, text=True, timeout=30)
        assert p.returncode == rc and text in p.stdout + p.stderr, (args, p.returncode, p.stdout, p.stderr)


def test_the_daemon_runs_at_the_realtime_priority_it_is_given(env):
    # As rtctld.service starts it: SCHED_FIFO 1, with SCHED_RESET_ON_FORK so its children are ordinary.
    d = env.start("--realtime-priority=1")
    pid = d.proc.pid
    assert os.sched_getscheduler(pid) == os.SCHED_FIFO | os.SCHED_RESET_ON_FORK
    assert os.sched_getparam(pid).sched_priority == 1
    assert env.rtctl_json("status")["failures"] == []
    assert d.stop() == 0, d.output()


def test_without_the_right_to_realtime_the_daemon_says_so_and_runs(env):
    # Where SCHED_FIFO is refused (a kernel whose RT group scheduling gives the service's cgroup no
    # real-time time; here: CAP_SYS_NICE taken away), the daemon still starts and tunes, and says why.
    d = env.start("--realtime-priority=1", wrapper=["setpriv", "--inh-caps=-sys_nice", "--bounding-set=-sys_nice"])
    assert os.sched_getscheduler(d.proc.pid) == os.SCHED_OTHER
    assert "Cannot run at SCHED_FIFO 1 (Operation not permitted): running as an ordinary task" in d.output()
    assert env.rtctl_json("status")["profile"] == "off"
    assert d.stop() == 0, d.output()


STAT_INTERVAL = "/proc/sys/vm/stat_interval"


def test_stopping_refuses_every_change_until_the_restore_is_done(env):
    """From SIGTERM on, the daemon is stopping: every method that changes something is refused by name,
    and it exits with the snapshot restored, whatever was asked meanwhile. The restore is made to take a
    while: strace fails its write to vm.stat_interval with EBUSY five times (a busy setting is tried again
    five times, 100 ms after the first try and doubling: 3.1 s in all), and the last try succeeds."""
    with open(STAT_INTERVAL) as f:
        original = int(f.read())
    env.profile("p", "[Profile]\n[Sysctl]\nvm.stat_interval=%d\n" % (original + 1))
    env.profile("q", "[Profile]\nRank=20\n[Sysctl]\nvm.stat_interval=%d\n" % (original + 2))
    env.write("rtctl.conf", "[Daemon]\nDefaultProfile=p\nUevents=kernel\n")
    before = machine.snapshot()
    # Write 1 applies p; writes 2 to 6 are the restore's first try and four retries.
    slow_restore = ["strace", "-f", "-qq", "-o", "/dev/null", "-P", STAT_INTERVAL, "-e", "trace=write",
                    "-e", "inject=write:error=EBUSY:when=2..6"]
    # LeakSanitizer cannot run under ptrace and fails the exit (the ASan build); ASan itself still runs.
    env.extra["ASAN_OPTIONS"] = ":".join(filter(None, [os.environ.get("ASAN_OPTIONS"), "detect_leaks=0"]))
    d = env.start(wrapper=slow_restore)
    with open("/proc/%d/task/%d/children" % (d.proc.pid, d.proc.pid)) as f:
        rtctld = int(f.read().split()[0])  # strace's child: strace does not pass SIGTERM on
    victim = subprocess.Popen(["sleep", "600"])
    try:
        with open(STAT_INTERVAL) as f:
            assert int(f.read()) == original + 1
        conn = dbus.bus.BusConnection(env.bus.address)  # connected before the stop
        os.kill(rtctld, signal.SIGTERM)
        d.wait_notify("STOPPING=1")
        calls = [contract.sample_call(n, s, victim.pid, "q", 1) for n, s in contract.changing()]
        answers = call_each(conn, calls)
        assert d.running(), "the restore was over before the calls were answered:\n" + d.output()
        assert answers == ["org.rtctl.Error.ShuttingDown"] * len(calls), list(zip(calls, answers))
        assert d.proc.wait(60) == 0, d.output()
        assert "Restored every value" in d.output(), d.output()
        with open(STAT_INTERVAL) as f:
            assert int(f.read()) == original, "the daemon exited with a profile in force"
        assert machine.diff(before, machine.snapshot()) == []
        assert env.journal is None
    finally:
        victim.kill()
        victim.wait()
        if d.running():
            os.kill(rtctld, signal.SIGTERM)
            d.proc.wait(60)


def test_a_reload_is_bracketed_for_type_notify_reload(env):
    """SIGHUP: RELOADING=1 with MONOTONIC_USEC= (what systemd 253's Type=notify-reload matches the reload
    by), then READY=1 once the reload is done."""
    env.profile("t", "[Profile]\n[Sysctl]\nvm.stat_interval=2\n")
    d = env.start("--profile", "t")
    before = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    seen = len(d.messages)
    d.proc.send_signal(signal.SIGHUP)
    reloading = d.wait_notify("RELOADING=1")
    fields = dict(line.split("=", 1) for line in reloading.splitlines() if "=" in line)
    assert before <= int(fields["MONOTONIC_USEC"]) <= time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    assert wait_until(lambda: any("READY=1" in m for m in d.messages[d.messages.index(reloading) + 1:])), \
        d.messages[seen:]
    assert d.running()


def code_mappings(pid):
    """Each executable mapping of a file in the process: (path, VmFlags, Rss kB)."""
    out, cur = [], None
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            head = line.split()
            if "-" in head[0] and len(head) >= 5 and ":" not in head[0]:
                cur = None
                if head[1] == "r-xp" and len(head) >= 6 and head[5].startswith("/"):
                    cur = {"path": head[5]}
                    out.append(cur)
            elif cur is not None and head[0] == "VmFlags:":
                cur["flags"] = head[1:]
            elif cur is not None and head[0] == "Rss:":
                cur["rss_kb"] = int(head[1])
    return out


def code_rss_kb(pid):
    return sum(m.get("rss_kb", 0) for m in code_mappings(pid))


def test_code_pages_are_only_those_it_runs(env):
    """After its first pass rtctld drops the pages of its code mappings (each random-read from then on,
    "rr" in smaps' VmFlags: no readahead), so what is mapped is what it ran since. A burst of work that
    runs other paths (here: profile switches, the restore path among them) maps more; once no pass ran
    for 10 s it is dropped again. It keeps working throughout: the switches, then stop restores
    everything."""
    env.profile("iso", "[Profile]\nDescription=test: isolate\n[CPU]\nIsolate=1\n")
    d = env.start("--profile", "iso")
    # The first pass's end comes just after the readiness the start waited for.
    assert wait_until(lambda: all("rr" in m.get("flags", []) for m in code_mappings(d.proc.pid)), timeout=5), \
        code_mappings(d.proc.pid)
    assert any("libglib" in m["path"] for m in code_mappings(d.proc.pid))
    released = code_rss_kb(d.proc.pid)
    for _ in range(3):
        env.rtctl("profile", "off", check=True)
        env.rtctl("profile", "iso", check=True)
    assert env.rtctl_json("status")["failures"] == []
    burst = code_rss_kb(d.proc.pid)
    assert burst >= released + 64, (released, burst)
    # released again after the quiet spell: back near where the first release left it
    assert wait_until(lambda: code_rss_kb(d.proc.pid) < burst - 64, timeout=20), \
        (released, burst, code_rss_kb(d.proc.pid))
    env.rtctl("profile", "off", check=True)
    env.rtctl("profile", "iso", check=True)
    assert env.rtctl_json("status")["failures"] == []
    assert d.stop() == 0, d.output()
