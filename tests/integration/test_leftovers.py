"""A run killed before its cleanup (CI cancelled, a session ended) leaves its daemons' changes on the
machine. The next run puts them back first, with the product's own crash recovery (conftest.py)."""
import glob
import os
import pathlib
import re
import shutil
import signal
import subprocess
import tempfile

import machine
from harness import ROOT, RTCTL, Bus, Env, wait_until

SYSCTL = "/proc/sys/kernel/sched_rt_runtime_us"
TUNED = "[Profile]\nDescription=test\n[Sysctl]\nkernel.sched_rt_runtime_us=950001\n"


def killed_run(tmp_path, bus, name, kill):
    """A run's tmp root as a killed pytest leaves it: one env whose daemon applied TUNED. kill: the
    daemon was killed with the run, or it outlived it."""
    top = tmp_path / name
    top.mkdir()
    env = Env(str(top), bus)
    env.profile("t", TUNED)
    d = env.start("--profile", "t")
    assert machine.read(SYSCTL) == "950001"
    if kill:
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait()
    return env, d, str(top)


def test_changes_of_a_killed_run_are_put_back(tmp_path, bus):
    before = machine.read(SYSCTL)
    env, d, top = killed_run(tmp_path, bus, "rtctl-test-killed", kill=True)
    try:
        assert machine.read(SYSCTL) == "950001", "the crash left the value"
        report = machine.restore_leftovers(RTCTL, tmp=str(tmp_path))
        assert len(report) == 1 and report[0].startswith(env.run + ": "), report
        assert "restored from its journal" in report[0], report
        assert machine.read(SYSCTL) == before
        assert not os.path.exists(top), "a restored run's directory goes"
        assert machine.restore_leftovers(RTCTL, tmp=str(tmp_path)) == [], "nothing is left to do twice"
    finally:
        if os.path.exists(env.dir):  # the test failed before the recovery removed it
            env.cleanup()


def test_a_daemon_that_outlived_its_run_is_stopped_first(tmp_path, bus):
    before = machine.read(SYSCTL)
    env, d, top = killed_run(tmp_path, bus, "rtctl-bench-orphan", kill=False)
    try:
        report = machine.restore_leftovers(RTCTL, tmp=str(tmp_path))
        assert "killed PID %d, left running" % d.proc.pid in " ".join(report), report
        assert wait_until(lambda: d.proc.poll() is not None)
        assert d.proc.returncode == -signal.SIGKILL
        assert machine.read(SYSCTL) == before, report
        assert not os.path.exists(top)
    finally:
        if os.path.exists(env.dir):  # the test failed before the recovery removed it
            env.cleanup()


def test_a_leftover_without_its_environment_is_named_not_guessed(tmp_path, bus):
    """Without env.json the journal's paths may belong to a fixture tree: replaying it against the real
    kernel could write fixture values there, so it is reported and left alone."""
    env, d, top = killed_run(tmp_path, bus, "rtctl-test-old", kill=True)
    try:
        os.unlink(os.path.join(env.dir, "env.json"))
        report = machine.restore_leftovers(RTCTL, tmp=str(tmp_path))
        assert report == ["%s: not restored: no record of its environment (%s)" % (
            env.run, "[Errno 2] No such file or directory: '%s'" % os.path.join(env.dir, "env.json"))], report
        assert machine.read(SYSCTL) == "950001"
        assert os.path.exists(env.run + "/journal.json")
    finally:
        env.cleanup()  # the env's own restore, as a finished test does it


def run_prefixes():
    """The names the benches and tests give their runs' top directories where a killed run leaves them
    (the temporary directory, or /dev/shm through machine.run_tmp()), read from their source."""
    found = set()
    sources = glob.glob(os.path.join(ROOT, "bench", "*.py"))
    sources += glob.glob(os.path.join(ROOT, "tests", "integration", "*.py"))
    for f in sources:
        with open(f) as src:
            for m in re.finditer(r'mkdtemp\(prefix="([^"]+)"(, dir=(machine\.run_tmp\(\)|"/tmp"))?\)', src.read()):
                found.add(m.group(1))
    return sorted(found)


def test_every_run_directory_the_benches_and_tests_make_is_looked_in(tmp_path):
    """bench/xruns.py named its runs rtctl-xruns-*, which the leftover search did not know: a bench killed
    with cpu1 isolated left it so for the next CI run's whole host tier."""
    prefixes = run_prefixes()
    assert "rtctl-xruns-" in prefixes and "rtctl-test-" in prefixes, prefixes
    want = []
    for prefix in prefixes:
        run = tmp_path / (prefix + "x") / "env-y" / "run"
        run.mkdir(parents=True)
        (run / "journal.json").write_text("{}")
        want.append(str(run))
    assert machine.leftover_runs(tmp=str(tmp_path)) == sorted(want)


def test_a_bench_taking_the_kernel_lock_puts_back_a_killed_run_first(tmp_root, bus):
    """What bench/xruns.py leaves when killed mid-run, in the temporary directory where it leaves it; the
    next bench's kernel lock (machine.kernel_lock, as bench/rivals.py and harness.bench_env take it)
    puts it back before anything is measured."""
    before = machine.read(SYSCTL)
    name = os.path.basename(tempfile.mkdtemp(prefix="rtctl-xruns-"))
    os.rmdir(os.path.join(tempfile.gettempdir(), name))
    env, d, top = killed_run(pathlib.Path(tempfile.gettempdir()), bus, name, kill=True)
    try:
        said = []
        with machine.kernel_lock(rtctl=RTCTL, say=said.append, exclude=[tmp_root]):
            assert machine.read(SYSCTL) == before, said
        left = [line for line in said if "an interrupted earlier run left changes" in line]
        assert len(left) == 1 and (env.run + ": ") in left[0] and "restored from its journal" in left[0], said
        assert not os.path.exists(top), "a restored run's directory goes"
    finally:
        if os.path.exists(env.dir):  # the test failed before the recovery removed it
            env.cleanup()


def test_a_bench_killed_with_tuned_running_is_put_back(tmp_path):
    """tuned journals nothing, and its isolated_cores pins every task with sched_setaffinity: a bench
    killed with it running left PID 1 and everything after it on cpu0. The bench saves the machine
    before tuned starts (bench/rivals.py); the next run kills that tuned and puts the rest back."""
    d = tmp_path / "rtctl-xruns-killed" / "tuned-x"
    d.mkdir(parents=True)
    victim = subprocess.Popen(["sleep", "300"])
    tuned = subprocess.Popen(["/usr/bin/python3", "-c", "import time; time.sleep(300)",
                              "--pid=%s" % (d / "tuned.pid")])
    sysctl_before = machine.read(SYSCTL)
    try:
        cpus_before = machine.task_cpus(victim.pid)
        assert cpus_before == machine.read("/sys/devices/system/cpu/online") != "0", cpus_before
        machine.save_before_tuned(str(d))
        os.sched_setaffinity(victim.pid, {0})  # what tuned's scheduler plugin does to every task
        with open(SYSCTL, "w") as f:
            f.write("950001")
        report = machine.restore_tuned_leftovers(tmp=str(tmp_path))
        assert len(report) == 1 and report[0].startswith(str(d) + ": "), report
        assert "killed its tuned, PID %d, left running" % tuned.pid in report[0], report
        assert wait_until(lambda: tuned.poll() is not None) and tuned.returncode == -signal.SIGKILL
        assert machine.task_cpus(victim.pid) == cpus_before, report
        assert machine.read(SYSCTL) == sysctl_before, report
        assert not d.exists(), "a put-back leftover's directory goes"
        assert machine.restore_tuned_leftovers(tmp=str(tmp_path)) == [], "nothing is left to do twice"
    finally:
        for p in (victim, tuned):
            p.kill()
            p.wait()
        with open(SYSCTL, "w") as f:
            f.write(sysctl_before)


def test_the_bus_of_a_killed_run_is_stopped():
    """A killed run's private dbus-daemon outlives it (it is no child of rtctld's); the next run stops
    it, and only it: the bus of a directory that is not a run's stays."""
    tmp = tempfile.mkdtemp(prefix="rtctl-lo-")  # short: a bus socket's path has 108 bytes at most
    top = os.path.join(tmp, "rtctl-xruns-killed")
    other = os.path.join(tmp, "not-a-run")
    os.mkdir(top)
    os.mkdir(other)
    left, kept = Bus(top), Bus(other)
    try:
        report = machine.restore_leftovers(RTCTL, tmp=tmp)
        assert report == ["%s: stopped its bus, PID %d, left running" % (top, left.proc.pid)], report
        assert wait_until(lambda: left.proc.poll() is not None) and left.proc.returncode == -signal.SIGKILL
        assert kept.proc.poll() is None
    finally:
        left.stop()
        kept.stop()
        shutil.rmtree(tmp, ignore_errors=True)
