"""rtctl latency on the real kernel: both methods on cpu1 give sane numbers, JSON and SVG; tracefs and
the mount table are as they were afterwards, also after a SIGINT mid-run; --compare through rtctld on a
private bus ends in the profile it started in. This host's kernel has no timerlat tracer: the timerlat
method also runs end to end on a fixture tracefs whose trace_pipe the test feeds. No latency value is asserted: this VM's are the
hypervisor's (bench/latency-check.py compares them with cyclictest)."""
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import xml.etree.ElementTree as ET

import pytest

import harness

TRACEFS_FILES = ["current_tracer", "tracing_on", "buffer_size_kb", "osnoise/cpus", "osnoise/timerlat_period_us",
                 "osnoise/stop_tracing_us", "osnoise/stop_tracing_total_us", "osnoise/options"]


def tracefs_mounts():
    with open("/proc/mounts") as f:
        return [line for line in f if line.split()[2:3] == ["tracefs"]]


def tracefs_state():
    """The mount table's tracefs lines and the tracer's files; tracefs read through a private mount when
    nothing mounted it, so that reading leaves the mounts as they are."""
    mounts = tracefs_mounts()
    dump = "cd %s && for f in " + " ".join(TRACEFS_FILES) + "; do echo \"$f=$(cat $f 2>/dev/null)\"; done"
    if mounts:
        cmd = ["sh", "-c", dump % mounts[0].split()[1]]
    else:
        cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c",
               "mount -t tracefs tracefs /sys/kernel/tracing && " + dump % "/sys/kernel/tracing"]
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return mounts, p.stdout


def timerlat_available():
    mounts = tracefs_mounts()
    d = mounts[0].split()[1] if mounts else "/sys/kernel/tracing"
    cmd = ["cat", d + "/available_tracers"] if mounts else \
        ["unshare", "-m", "--propagation", "private", "sh", "-c",
         "mount -t tracefs tracefs /sys/kernel/tracing && cat /sys/kernel/tracing/available_tracers"]
    return "timerlat" in subprocess.run(cmd, capture_output=True, text=True).stdout.split()


HAS_TIMERLAT = os.geteuid() == 0 and timerlat_available()


def fifo_processes():
    """PIDs of SCHED_FIFO processes named rtctl: measuring processes left behind."""
    left = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open("/proc/%s/comm" % pid) as f:
                comm = f.read().strip()
        except OSError:
            continue
        if comm == "rtctl" and fields[38] == "1":  # policy: SCHED_FIFO
            left.append(int(pid))
    return left


def check_sane(cpu):
    assert cpu["samples"] > 0
    assert cpu["max_us"] >= cpu["p99_9_us"] >= cpu["p99_us"] >= cpu["p50_us"] > 0
    assert cpu["max_us"] >= cpu["avg_us"] >= cpu["min_us"] > 0
    assert sum(c for _, c in cpu["histogram"]) + cpu["overflow"] == cpu["samples"]


def measure(env, method, tmp_path):
    svg = str(tmp_path / ("%s.svg" % method))
    before = tracefs_state()
    p = env.rtctl("--json", "latency", "--method", method, "--cpus", "1", "--duration", "2s", "--svg", svg)
    assert tracefs_state() == before
    assert fifo_processes() == []
    return p, svg


def test_timer_method(env, tmp_path):
    p, svg = measure(env, "timer", tmp_path)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["method"] == "timer" and out["cpus"] == "1"
    assert len(out["runs"]) == 1 and [c["cpu"] for c in out["runs"][0]["cpus"]] == [1]
    check_sane(out["runs"][0]["cpus"][0])
    # The verdict: per rate, the smallest power-of-two period (16-4096 frames) whose quarter holds the
    # worst wake-up, computed here from the measured maximum.
    worst = out["runs"][0]["cpus"][0]["max_us"]
    assert out["safe_share"] == 0.25
    verdict = out["runs"][0]["verdict"]
    assert [v["rate"] for v in verdict] == [44100, 48000, 96000]
    for v in verdict:
        assert v["worst_us"] == pytest.approx(worst, abs=0.01)
        fits = [f for f in (16 << k for k in range(9)) if worst <= 0.25 * 1e6 * f / v["rate"]]
        assert v["safe_frames"] == (fits[0] if fits else None), (v, worst)
    root = ET.parse(svg).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert len(root.findall("{http://www.w3.org/2000/svg}polyline")) == 1


def test_timer_method_table(env):
    p = env.rtctl("latency", "--method", "timer", "--cpus", "1", "--duration", "1s")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("CPU"))
    assert lines[header].split() == ["CPU", "SAMPLES", "AVG", "us", "P99", "us", "P99.9", "us", "MAX", "us"]
    assert lines[header + 1].split()[0] == "1" and int(lines[header + 1].split()[1]) > 0
    assert any(line.startswith("LATENCY us") for line in lines)
    # One verdict line per rate, in audio terms.
    v = lines.index("Verdict (a period is safe when the worst wake-up measured takes at most 25 % of it):")
    rates = [line.split(":")[0].strip() for line in lines[v + 1:v + 4]]
    assert rates == ["44.1 kHz", "48 kHz", "96 kHz"], lines[v:]
    assert all(re.search(r": (\d+ frames safe \(worst wake-up \d+ µs, \d+ % of [\d.]+ ms\)|no period up to 4096 "
                         r"frames is safe)", line) for line in lines[v + 1:v + 4]), lines[v:]


def test_timerlat_method(env, tmp_path):
    """Where the kernel has timerlat, the same checks as the timer's; where it has not (this host:
    CONFIG_TIMERLAT_TRACER is not set), the method says so and what to use instead, and auto falls back
    to the timer. Either way tracefs and the mounts are as they were."""
    p, svg = measure(env, "timerlat", tmp_path)
    if HAS_TIMERLAT:
        assert p.returncode == 0, p.stderr
        out = json.loads(p.stdout)
        assert out["method"] == "timerlat"
        check_sane(out["runs"][0]["cpus"][0])
        ET.parse(svg)
        return
    assert p.returncode == 1
    assert "no timerlat tracer" in p.stderr and "--method timer" in p.stderr, p.stderr
    p = env.rtctl("--json", "latency", "--cpus", "1", "--duration", "1s")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["method"] == "timer"


def test_not_root_says_what_is_missing(env):
    for method, words in [("timerlat", "needs root"), ("timer", "RLIMIT_RTPRIO")]:
        p = env.rtctl("latency", "--method", method, "--cpus", "1", "--duration", "1s", user=harness.NOBODY)
        assert p.returncode == 1
        assert words in p.stderr, p.stderr


def interrupt(env, args, after):
    """rtctl latency args, SIGINT after `after` seconds: its exit code and stderr."""
    before = tracefs_state()
    p = subprocess.Popen([harness.RTCTL, "latency"] + args, env=env.environ, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    time.sleep(after)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=harness.HANG_SECONDS)
    assert tracefs_state() == before
    assert fifo_processes() == []
    return p.returncode, err


def test_sigint_mid_run_puts_everything_back(env):
    """Each method the kernel has, interrupted 1.5 s into a 60 s run."""
    for method in ["timer"] + (["timerlat"] if HAS_TIMERLAT else []):
        rc, err = interrupt(env, ["--method", method, "--cpus", "1", "--duration", "60s"], 1.5)
        assert rc == 1
        assert "Interrupted" in err, err


def test_compare_ends_in_the_starting_profile(env):
    env.start("--profile", "off")
    p = env.rtctl("--json", "latency", "--method", "timer", "--cpus", "1", "--duration", "2s", "--slice", "1s",
                  "--compare", "audio")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert [r["profile"] for r in out["runs"]] == ["off", "audio"]
    for run in out["runs"]:
        check_sane(run["cpus"][0])
    assert env.rtctl_json("profile")["profile"] == "off"


def test_compare_interrupted_ends_in_the_starting_profile(env):
    env.start("--profile", "off")
    rc, err = interrupt(env, ["--method", "timer", "--cpus", "1", "--duration", "30s", "--slice", "1s",
                              "--compare", "audio"], 3.5)
    assert rc == 1 and "Interrupted" in err, err
    assert env.rtctl_json("profile")["profile"] == "off"


class BusWatch:
    """dbus-monitor on the test's bus: the calls seen (sender, serial, member, first string argument) and
    the serials replied to, as they pass."""

    def __init__(self, address):
        self.proc = subprocess.Popen(["dbus-monitor", "--address", address], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        self.calls, self.replies, self.lock = [], set(), threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        call = None
        for line in self.proc.stdout:
            m = re.match(r"method call .* sender=(\S+) -> .* serial=(\d+) .*member=(\w+)", line)
            if m:
                call = [m.group(1), int(m.group(2)), m.group(3), None]
                with self.lock:
                    self.calls.append(call)
                continue
            m = re.match(r"method return .* -> destination=(\S+) serial=\d+ reply_serial=(\d+)", line)
            if m:
                with self.lock:
                    self.replies.add((m.group(1), int(m.group(2))))
            elif call and call[3] is None and line.strip().startswith("string "):
                call[3] = line.strip()[len("string "):].strip('"')
            if not line.startswith("   "):
                call = None

    def wait(self, what, timeout=harness.HANG_SECONDS):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                found = what(self)
            if found:
                return found
            time.sleep(0.002)
        raise AssertionError("not seen on the bus: calls %s" % self.calls[-10:])

    def answered(self, member):
        """The last call of member, once answered."""
        c = [c for c in self.calls if c[2] == member]
        return c and (c[-1][0], c[-1][1]) in self.replies and c[-1]

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def test_compare_interrupted_while_the_way_back_is_under_way(env):
    """SIGINT while the call that switches back to the starting profile is on its way: rtctl says
    everything is put back only once rtctld has done it. rtctld is stopped (SIGSTOP) from the end of the
    audio slice's last call, so that the switch back waits in the bus, as it does behind a busy daemon."""
    d = env.start("--profile", "off")
    before = tracefs_state()
    watch = BusWatch(env.bus.address)
    p = subprocess.Popen([harness.RTCTL, "latency", "--method", "timer", "--cpus", "1", "--duration", "30s",
                          "--slice", "2s", "--compare", "audio"], env=env.environ, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        # In the audio slice the measuring process is attached to the isolated cpu1; the next call after
        # that answer is the switch back, 2 s later.
        watch.wait(lambda w: w.answered("AttachProcess"))
        os.kill(d.proc.pid, signal.SIGSTOP)
        try:
            watch.wait(lambda w: [c for c in w.calls if c[2] == "SetProfile" and c[3] == "off"])
            p.send_signal(signal.SIGINT)
            try:
                p.wait(1.0)
                state = tracefs_state()  # rtctl ended while the way back waits for rtctld
            except subprocess.TimeoutExpired:
                state = None
        finally:
            os.kill(d.proc.pid, signal.SIGCONT)
        out, err = p.communicate(timeout=harness.HANG_SECONDS)
    finally:
        watch.stop()
        if p.poll() is None:
            p.kill()
    assert p.returncode == 1 and "Interrupted" in err, err
    assert (state or tracefs_state()) == before
    assert env.rtctl_json("profile")["profile"] == "off"
    assert fifo_processes() == []


def test_isolated_cpus_from_the_profile_without_a_daemon(env):
    """No rtctld: isolated and housekeeping are the CPUs of the profile it would apply (audio: cpu1)."""
    env.write("rtctl.conf", "[Daemon]\nDefaultProfile=audio\nUevents=kernel\n")
    for word, cpus in [("isolated", "1"), ("housekeeping", "0")]:
        p = env.rtctl("--json", "latency", "--method", "timer", "--cpus", word, "--duration", "1s")
        assert p.returncode == 0, p.stderr
        out = json.loads(p.stdout)
        assert out["cpus"] == cpus
        assert out["runs"][0]["profile"] is None
        check_sane(out["runs"][0]["cpus"][0])


# A timerlat trace as the kernel prints it (Documentation/trace/timerlat-tracer.rst): IRQ and thread
# context per activation, here for cpu0 and cpu1.
TRACE_LINE = "          <...>-%d     [%03d] ....  %d.%06d: #%d     context %6s timer_latency %9d ns\n"


def fixture_tracefs(tmp_path):
    """The vm2 fixture machine with a tracefs that has timerlat, trace_pipe a FIFO the test writes."""
    src = os.path.join(harness.BUILD, "tests", "unit", "fixtures", "vm2")
    assert os.path.isdir(src), "fixtures are built with the tree (ninja -C %s)" % harness.BUILD
    root = str(tmp_path / "vm2")
    shutil.copytree(src, root, symlinks=True)
    t = os.path.join(root, "sys/kernel/tracing")
    os.makedirs(os.path.join(t, "osnoise"))
    files = {"available_tracers": "timerlat osnoise hwlat function nop\n", "current_tracer": "nop\n",
             "tracing_on": "0\n", "osnoise/cpus": "0-1\n", "osnoise/timerlat_period_us": "1000\n",
             "osnoise/stop_tracing_us": "0\n", "osnoise/stop_tracing_total_us": "0\n",
             "osnoise/options": "DEFAULTS OSNOISE_WORKLOAD NO_PANIC_ON_STOP\n",
             "osnoise/period_us": "1000000\n", "osnoise/runtime_us": "1000000\n", "tracing_cpumask": "3\n",
             "tracing_thresh": "0\n"}
    for rel, text in files.items():
        with open(os.path.join(t, rel), "w") as f:
            f.write(text)
    os.mkfifo(os.path.join(t, "trace_pipe"))
    return root, t, files


def feed(pipe, samples, hold):
    """Writes samples (cpu, ns) as trace lines once rtctl opened the pipe, then keeps it open for hold s."""
    lines = []
    for i, (cpu, ns) in enumerate(samples):
        lines.append(TRACE_LINE % (867 + cpu, cpu, 54, i, i + 1, "irq", ns // 10))
        lines.append(TRACE_LINE % (867 + cpu, cpu, 54, i, i + 1, "thread", ns))
    return feed_lines(pipe, lines, hold)


def feed_lines(pipe, lines, hold):
    """Writes trace lines once rtctl opened the pipe, then keeps it open for hold s."""
    def run():
        try:
            with open(pipe, "w") as f:
                f.writelines(lines)
                f.flush()
                time.sleep(hold)
        except (BrokenPipeError, OSError):
            pass
    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th


def fixture_files(t, files):
    out = {}
    for rel in files:
        with open(os.path.join(t, rel)) as f:
            out[rel] = f.read().strip()
    return out


def test_timerlat_method_on_a_fixture_tracefs(env, tmp_path):
    """What this host's kernel cannot show: the timerlat method end to end on a fixture tracefs (root
    prefix), its trace_pipe fed with the tracer's lines: only cpu1's thread samples count, and every
    file is as it was afterwards."""
    root, t, files = fixture_tracefs(tmp_path)
    before = fixture_files(t, files)
    env.extra["RTCTL_SYSROOT"] = root
    samples = [(1, 2000 + 37 * i) for i in range(500)] + [(0, 999000)] * 50 + [(1, 12000000)]
    th = feed(os.path.join(t, "trace_pipe"), samples, 3)
    p = env.rtctl("--json", "latency", "--method", "timerlat", "--cpus", "1", "--duration", "1s")
    th.join(5)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["method"] == "timerlat"
    cpu = out["runs"][0]["cpus"][0]
    assert cpu["cpu"] == 1 and cpu["samples"] == 501 and cpu["overflow"] == 1
    assert cpu["min_us"] == 2.0 and cpu["max_us"] == 12000.0
    assert abs(cpu["avg_us"] - (sum(2000 + 37 * i for i in range(500)) + 12000000) / 501 / 1000) < 0.001
    check_sane(cpu)
    assert fixture_files(t, files) == before


def test_timerlat_on_a_fixture_tracefs_interrupted(env, tmp_path):
    root, t, files = fixture_tracefs(tmp_path)
    before = fixture_files(t, files)
    env.extra["RTCTL_SYSROOT"] = root
    feed(os.path.join(t, "trace_pipe"), [(1, 5000)] * 10, 10)
    p = subprocess.Popen([harness.RTCTL, "latency", "--method", "timerlat", "--cpus", "1", "--duration", "60s"],
                         env=env.environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Until it runs: the tracer set in the fixture.
    assert harness.wait_until(lambda: fixture_files(t, files)["current_tracer"] == "timerlat", timeout=30)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=harness.HANG_SECONDS)
    assert p.returncode == 1 and "Interrupted" in err, err
    assert fixture_files(t, files) == before


def test_timerlat_killed_is_put_back_by_restore_and_by_the_next_run(env, tmp_path):
    """SIGKILL leaves no cleanup: what the run changed in tracefs was journalled before its first write
    (latency-tracefs.json in the runtime directory), and `rtctl restore` puts it back; so does the next
    `rtctl latency`, after a second kill."""
    root, t, files = fixture_tracefs(tmp_path)
    before = fixture_files(t, files)
    env.extra["RTCTL_SYSROOT"] = root
    journal = os.path.join(env.run, "latency-tracefs.json")

    def killed_run():
        feed(os.path.join(t, "trace_pipe"), [(1, 5000)] * 10, 10)
        p = subprocess.Popen([harness.RTCTL, "latency", "--method", "timerlat", "--cpus", "1", "--duration",
                              "60s"], env=env.environ, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert harness.wait_until(lambda: fixture_files(t, files)["current_tracer"] == "timerlat", timeout=30)
        assert os.path.exists(journal)
        p.kill()
        p.wait()
        assert fixture_files(t, files) != before  # the kill left the tracer on

    killed_run()
    r = env.rtctl("restore")
    assert "Put back what an interrupted rtctl latency left" in r.stderr, r.stderr
    assert fixture_files(t, files) == before
    assert not os.path.exists(journal)

    killed_run()
    th = feed(os.path.join(t, "trace_pipe"), [(1, 3000)] * 50, 2)
    p = env.rtctl("--json", "latency", "--method", "timerlat", "--cpus", "1", "--duration", "1s")
    th.join(5)
    assert p.returncode == 0, p.stderr
    assert "Put back what an interrupted rtctl latency left" in p.stderr, p.stderr
    assert fixture_files(t, files) == before
    assert not os.path.exists(journal)



# osnoise's line per window (Documentation/trace/osnoise-tracer.rst): runtime, noise, % available, max
# single noise, then the hw, nmi, irq, softirq and thread counts.
OSNOISE_LINE = "      osnoise/%d-%d  [%03d] .....  %d.%06d: %8d %10d  %9.5f %7d %6d %6d %6d %6d %6d\n"
HWLAT_LINE = "           <...>-1729  [%03d] d...   %d.%06d: #%-5d inner/outer(us): %4d/%-5d ts:1581527483.343962693 count:%d\n"


def test_osnoise_method_on_a_fixture_tracefs(env, tmp_path):
    """--method osnoise end to end on a fixture tracefs: each window's longest interruption is a sample,
    the interference counts add up per CPU, the verdict speaks of interruptions, and tracefs is as it was
    afterwards (the window of 100 ms put back to the kernel's 1 s)."""
    root, t, files = fixture_tracefs(tmp_path)
    before = fixture_files(t, files)
    env.extra["RTCTL_SYSROOT"] = root
    lines = [OSNOISE_LINE % (1, 900, 1, 81, i, 100000, 40 + i, 99.9, 10 + i, 0, 0, 100, 3, 1) for i in range(20)]
    lines += [OSNOISE_LINE % (0, 899, 0, 81, 0, 100000, 90000, 10.0, 9000, 5, 0, 1, 1, 1)]
    lines += [OSNOISE_LINE % (1, 900, 1, 82, 0, 100000, 700, 99.3, 620, 2, 0, 101, 4, 7)]
    th = feed_lines(os.path.join(t, "trace_pipe"), lines, 3)
    seen = {}

    def watch():
        seen["during"] = fixture_files(t, files)
    watcher = threading.Timer(0.5, watch)
    watcher.start()
    p = env.rtctl("--json", "latency", "--method", "osnoise", "--cpus", "1", "--duration", "1s")
    th.join(5)
    watcher.join()
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["method"] == "osnoise" and out["window_us"] == 100000 and out["threshold_us"] is None
    cpu = out["runs"][0]["cpus"][0]
    assert cpu["cpu"] == 1 and cpu["samples"] == 21 and cpu["max_us"] == 620.0, cpu
    noise = cpu["noise"]
    assert noise == {"runtime_us": 2100000, "noise_us": sum(40 + i for i in range(20)) + 700,
                     "max_single_us": 620, "hw": 2, "nmi": 0, "irq": 2101, "softirq": 64, "thread": 27}, noise
    v48 = next(v for v in out["runs"][0]["verdict"] if v["rate"] == 48000)
    assert v48["worst_us"] == 620.0 and v48["safe_frames"] == 128, v48
    assert seen["during"]["current_tracer"] == "osnoise" and seen["during"]["osnoise/period_us"] == "100000", seen
    assert seen["during"]["osnoise/cpus"] == "1" and seen["during"]["osnoise/runtime_us"] == "100000"
    assert fixture_files(t, files) == before

    th = feed_lines(os.path.join(t, "trace_pipe"), lines, 3)
    p = env.rtctl("latency", "--method", "osnoise", "--cpus", "1", "--duration", "1s")
    th.join(5)
    assert p.returncode == 0, p.stderr
    assert "osnoise method, busy in windows of 100 ms" in p.stdout, p.stdout
    assert "What took the CPU from a busy thread" in p.stdout and "2101" in p.stdout, p.stdout
    assert "48 kHz: 128 frames safe (worst interruption 620 µs" in p.stdout, p.stdout


def test_hwlat_method_on_a_fixture_tracefs(env, tmp_path):
    """--method hwlat: the gaps over the threshold make the hardware's floor, said as such, with no
    verdict of its own; none at all is a finding, not a failure; a killed run is put back by `rtctl
    restore` from its journal, which names hwlat as the tracer to take back."""
    root, t, files = fixture_tracefs(tmp_path)
    before = fixture_files(t, files)
    env.extra["RTCTL_SYSROOT"] = root
    lines = [HWLAT_LINE % (1, 678, i, i + 1, 11, 12 + i, 3) for i in range(4)]
    lines += [HWLAT_LINE % (0, 679, 0, 5, 400, 400, 1)]
    th = feed_lines(os.path.join(t, "trace_pipe"), lines, 3)
    p = env.rtctl("--json", "latency", "--method", "hwlat", "--cpus", "1", "--duration", "1s")
    th.join(5)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["method"] == "hwlat" and out["threshold_us"] == 10 and "verdict" not in out["runs"][0]
    assert out["runs"][0]["gaps"] == 4 and out["runs"][0]["floor_us"] == 15.0, out["runs"][0]
    assert fixture_files(t, files) == before

    th = feed_lines(os.path.join(t, "trace_pipe"), [], 2)
    p = env.rtctl("latency", "--method", "hwlat", "--cpus", "1", "--duration", "1s")
    th.join(5)
    assert p.returncode == 0, p.stderr
    assert "No gap of 10 µs or more in 1 s" in p.stdout and "Verdict" not in p.stdout, p.stdout

    feed_lines(os.path.join(t, "trace_pipe"), lines, 10)
    k = subprocess.Popen([harness.RTCTL, "latency", "--method", "hwlat", "--cpus", "1", "--duration", "60s"],
                         env=env.environ, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert harness.wait_until(lambda: fixture_files(t, files)["current_tracer"] == "hwlat", timeout=30)
    assert fixture_files(t, files)["tracing_cpumask"] == "2"
    k.kill()
    k.wait()
    r = env.rtctl("restore")
    assert "Put back what an interrupted rtctl latency left" in r.stderr, r.stderr
    assert fixture_files(t, files) == before
