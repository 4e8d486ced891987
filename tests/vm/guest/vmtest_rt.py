"""Tests that need Debian's PREEMPT_RT kernel (linux-image-rt-amd64): run by `tests/vm/run.sh --kernel
rt` in an image of their own. The generic kernels (Debian 12's 6.1, 13's 6.12) lack the timerlat tracer
and thread only the IRQs that ask for it; this one has both."""
import json
import os
import re
import subprocess
import time

from vmtest_common import call, check, read, run, RTCTL, Skip, test, TEST_PROFILE
from vmtest_session import ensure_rtctld_base, rtprops

TRACEFS = "/sys/kernel/tracing"
# What rtctl latency's tracer methods write or depend on (src/core/timerlat.h), and the tracer list.
TRACEFS_FILES = ("current_tracer", "tracing_on", "osnoise/cpus", "osnoise/timerlat_period_us",
                 "osnoise/stop_tracing_us", "osnoise/stop_tracing_total_us", "osnoise/options",
                 "osnoise/period_us", "osnoise/runtime_us", "tracing_cpumask", "tracing_thresh",
                 "hwlat_detector/width", "hwlat_detector/window")
BUFFER = "buffer_size_kb"


def preempt_rt():
    return read("/sys/kernel/realtime") == "1" or "PREEMPT_RT" in os.uname().version


def tracefs_state():
    return {f: read(os.path.join(TRACEFS, f)) for f in TRACEFS_FILES}


def irq_threads():
    """{irq: [(pid, comm, policy, rt_priority)]} of the irq/N-name kernel threads."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        comm = read("/proc/%s/comm" % pid) or ""
        m = re.match(r"irq/(\d+)-", comm)
        st = read("/proc/%s/stat" % pid)
        if not m or not st:
            continue
        f = st.rsplit(")", 1)[1].split()
        out.setdefault(int(m.group(1)), []).append((int(pid), comm, int(f[38]), int(f[37])))
    return out


def device_irqs(name_glob):
    """IRQ numbers of /proc/interrupts whose handler name matches name_glob (a regex here)."""
    irqs = []
    for line in (read("/proc/interrupts") or "").splitlines()[1:]:
        head = line.split(":", 1)[0].strip()
        if head.isdigit() and re.search(name_glob, line.split()[-1]):
            irqs.append(int(head))
    return irqs


@test("rt-kernel", own_run=True)
def t_rt_kernel():
    """The image boots Debian's PREEMPT_RT kernel, and it has the tracers issue 24 needs."""
    check(preempt_rt(), "not a PREEMPT_RT kernel: %s %s" % (os.uname().release, os.uname().version))
    tracers = (read(os.path.join(TRACEFS, "available_tracers")) or "").split()
    for t in ("timerlat", "osnoise", "hwlat"):
        check(t in tracers, "no %s tracer in %s" % (t, tracers))
    return "%s: %s; tracers %s" % (os.uname().release, "PREEMPT_RT", " ".join(sorted(tracers)))


@test("rt-timerlat", own_run=True)
def t_rt_timerlat():
    """rtctl latency --method timerlat on a real kernel's timerlat tracer: samples on the chosen CPU, sane
    statistics, the verdict, and tracefs exactly as it was afterwards (the tracer, its CPUs, period, stop
    thresholds and options), with no measuring thread left; a run killed with SIGKILL is put back by the
    next one, from its journal."""
    if not preempt_rt():
        raise Skip("not a PREEMPT_RT kernel")
    ensure_rtctld_base()
    before = tracefs_state()
    check(before["current_tracer"] == "nop" and before["osnoise/cpus"],
          "tracefs not readable or in use before the run: %s" % before)
    buffer_before = read(os.path.join(TRACEFS, BUFFER))
    r = run([RTCTL, "--json", "latency", "--method", "timerlat", "--cpus", "1", "--duration", "5s"], timeout=120)
    check(r.returncode == 0, "rtctl latency --method timerlat: rc %d %s" % (r.returncode, (r.stdout + r.stderr)[-600:]))
    out = json.loads(r.stdout)
    check(out["method"] == "timerlat" and out["cpus"] == "1", "method/cpus: %s %s" % (out["method"], out["cpus"]))
    cpu = out["runs"][0]["cpus"][0]
    # 5 s at one wake-up per 1000 µs: about 5,000; TCG is slow, so at least a fifth of it.
    check(cpu["cpu"] == 1 and cpu["samples"] >= 1000, "samples on cpu1: %s" % cpu["samples"])
    check(cpu["max_us"] >= cpu["p99_us"] >= cpu["p50_us"] > 0 and cpu["min_us"] > 0,
          "statistics: %s" % {k: cpu[k] for k in ("min_us", "p50_us", "p99_us", "max_us")})
    check(sum(c for _, c in cpu["histogram"]) + cpu["overflow"] == cpu["samples"], "histogram does not add up")
    verdict = out["runs"][0]["verdict"]
    check([v["rate"] for v in verdict] == [44100, 48000, 96000], "verdict: %s" % verdict)
    after = tracefs_state()
    check(after == before, "tracefs after the run: %s" % {k: (before[k], after[k]) for k in before
                                                          if before[k] != after[k]})
    # The kernel keeps its trace buffer small until a tracer is first used ("7 (expanded: 1408)") and then
    # grows it to the size it announced, for good: no write puts "not expanded yet" back (any write to
    # buffer_size_kb also counts as expanding). A size rtctl did not choose is left as the kernel made it.
    buffer_after = read(os.path.join(TRACEFS, BUFFER))
    m = re.match(r"(\d+) \(expanded: (\d+)\)$", buffer_before or "")
    check(buffer_after == buffer_before or (m and (buffer_after or "").isdigit() and
                                            abs(int(buffer_after) - int(m.group(2))) <= 8),
          "buffer_size_kb %r, was %r" % (buffer_after, buffer_before))
    timerlat_threads = [p for p in os.listdir("/proc") if p.isdigit() and
                        (read("/proc/%s/comm" % p) or "").startswith("timerlat/")]
    check(not timerlat_threads, "timerlat threads left: %s" % timerlat_threads)
    # Killed mid-run (no cleanup runs): the tracer stays on until the next rtctl latency puts back what
    # the killed one journalled before its first write.
    p = subprocess.Popen([RTCTL, "latency", "--method", "timerlat", "--cpus", "1", "--duration", "60s"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while read(os.path.join(TRACEFS, "current_tracer")) != "timerlat" and time.monotonic() < deadline:
        time.sleep(0.1)
    check(read(os.path.join(TRACEFS, "current_tracer")) == "timerlat", "the second run never started its tracer")
    p.kill()
    p.wait()
    check(read(os.path.join(TRACEFS, "current_tracer")) == "timerlat", "the tracer stopped with the kill")
    r2 = run([RTCTL, "latency", "--method", "timerlat", "--cpus", "1", "--duration", "2s"], timeout=120)
    check(r2.returncode == 0 and "Put back what an interrupted rtctl latency left" in r2.stderr,
          "the run after a SIGKILL: rc %d %s" % (r2.returncode, r2.stderr[-400:]))
    check(tracefs_state() == before, "tracefs after the kill and the next run: %s" % tracefs_state())
    v48 = next(v for v in verdict if v["rate"] == 48000)
    return "cpu1: %d samples, p50 %.1f, p99 %.1f, max %.1f µs; 48 kHz: %s frames safe; tracefs as before, " \
        "also after a SIGKILL and the next run " \
        "(buffer_size_kb %r -> %r, the kernel's first-use expansion)" % (
            cpu["samples"], cpu["p50_us"], cpu["p99_us"], cpu["max_us"], v48["safe_frames"], buffer_before,
            buffer_after)


def measure_json(method, duration):
    """tracefs before, and the JSON of rtctl latency --method METHOD on cpu1."""
    if not preempt_rt():
        raise Skip("not a PREEMPT_RT kernel")
    ensure_rtctld_base()
    before = tracefs_state()
    check(before["current_tracer"] == "nop", "tracefs in use before the run: %s" % before)
    r = run([RTCTL, "--json", "latency", "--method", method, "--cpus", "1", "--duration", duration], timeout=120)
    check(r.returncode == 0, "rtctl latency --method %s: rc %d %s" % (method, r.returncode, (r.stdout + r.stderr)[-600:]))
    return before, json.loads(r.stdout)


def tracer_threads(prefix):
    return [p for p in os.listdir("/proc") if p.isdigit() and (read("/proc/%s/comm" % p) or "").startswith(prefix)]


@test("rt-osnoise", own_run=True)
def t_rt_osnoise():
    """rtctl latency --method osnoise on the real osnoise tracer: windows of 100 ms on cpu1 (about 10 a
    second), each window's longest interruption and the interference counts per kind, a verdict, and
    tracefs as it was afterwards (the kernel's 1 s window back), with no osnoise thread left; killed, the
    next rtctl latency puts it back from the journal."""
    before, out = measure_json("osnoise", "5s")
    check(out["method"] == "osnoise" and out["window_us"] == 100000, "method/window: %s" % out)
    cpu = out["runs"][0]["cpus"][0]
    noise = cpu["noise"]
    # 5 s of 100 ms windows: 50; TCG is slow to schedule, so at least 20.
    check(cpu["cpu"] == 1 and cpu["samples"] >= 20, "windows on cpu1: %s" % cpu["samples"])
    check(noise["runtime_us"] >= 20 * 100000 * 0.9, "runtime: %s" % noise)
    check(noise["noise_us"] <= noise["runtime_us"] and noise["max_single_us"] == cpu["max_us"],
          "noise totals: %s, max %s" % (noise, cpu["max_us"]))
    # A busy cpu1 under TCG is interrupted at least by its timer tick's IRQ.
    check(noise["irq"] > 0, "no IRQ counted on cpu1 in %d windows: %s" % (cpu["samples"], noise))
    check([v["rate"] for v in out["runs"][0]["verdict"]] == [44100, 48000, 96000], "verdict: %s" % out["runs"][0])
    after = tracefs_state()
    check(after == before, "tracefs after the run: %s" % {k: (before[k], after[k]) for k in before
                                                          if before[k] != after[k]})
    check(not tracer_threads("osnoise/"), "osnoise threads left: %s" % tracer_threads("osnoise/"))
    p = subprocess.Popen([RTCTL, "latency", "--method", "osnoise", "--cpus", "1", "--duration", "60s"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while read(os.path.join(TRACEFS, "current_tracer")) != "osnoise" and time.monotonic() < deadline:
        time.sleep(0.1)
    check(read(os.path.join(TRACEFS, "osnoise/period_us")) == "100000", "the killed run's window: %s" %
          read(os.path.join(TRACEFS, "osnoise/period_us")))
    p.kill()
    p.wait()
    r2 = run([RTCTL, "latency", "--method", "osnoise", "--cpus", "1", "--duration", "2s"], timeout=120)
    check(r2.returncode == 0 and "Put back what an interrupted rtctl latency left" in r2.stderr,
          "the run after a SIGKILL: rc %d %s" % (r2.returncode, r2.stderr[-400:]))
    check(tracefs_state() == before, "tracefs after the kill and the next run: %s" % tracefs_state())
    return "cpu1: %d windows, %.3f %% available, longest interruption %d µs; hw %d nmi %d irq %d softirq %d " \
        "thread %d; tracefs as before, also after a SIGKILL" % (
            cpu["samples"], 100 - 100.0 * noise["noise_us"] / noise["runtime_us"], noise["max_single_us"],
            noise["hw"], noise["nmi"], noise["irq"], noise["softirq"], noise["thread"])


@test("rt-hwlat", own_run=True)
def t_rt_hwlat():
    """rtctl latency --method hwlat on the real hwlat tracer: cpu1 only (tracing_cpumask), the floor said
    as the hardware's (a TCG guest has gaps: the emulator's own), no verdict, tracefs and its threshold
    as they were, and no hwlat thread left."""
    before, out = measure_json("hwlat", "6s")
    run0 = out["runs"][0]
    check(out["method"] == "hwlat" and out["threshold_us"] >= 1 and "verdict" not in run0, "hwlat JSON: %s" % out)
    cpus = [c["cpu"] for c in run0["cpus"]]
    check(cpus == [1], "CPUs: %s" % cpus)
    check(run0["gaps"] == run0["cpus"][0]["samples"] and
          (run0["gaps"] == 0 or run0["floor_us"] >= out["threshold_us"]),
          "gaps %s, floor %s, threshold %s" % (run0["gaps"], run0["floor_us"], out["threshold_us"]))
    after = tracefs_state()
    check(after == before, "tracefs after the run: %s" % {k: (before[k], after[k]) for k in before
                                                          if before[k] != after[k]})
    check(not tracer_threads("hwlatd"), "hwlat threads left: %s" % tracer_threads("hwlatd"))
    t = run([RTCTL, "latency", "--method", "hwlat", "--cpus", "1", "--duration", "3s"], timeout=120)
    check(t.returncode == 0 and ("Hardware noise floor:" in t.stdout or "No gap of" in t.stdout),
          "text: %s" % (t.stdout + t.stderr)[-600:])
    return "cpu1: %d gaps of %d µs or more in 6 s, floor %.0f µs; tracefs as before; %s" % (
        run0["gaps"], out["threshold_us"], run0["floor_us"], [l for l in t.stdout.splitlines() if "floor" in l or "No gap" in l])


@test("rt-irq-threads", own_run=True)
def t_rt_irq_threads():
    """On PREEMPT_RT every device IRQ has its thread without threadirqs, at SCHED_FIFO 50; an [IRQ]
    rule's ThreadPriority= moves the matched ones and no other, and switching back puts 50 back."""
    if not preempt_rt():
        raise Skip("not a PREEMPT_RT kernel")
    ensure_rtctld_base()
    check("threadirqs" not in read("/proc/cmdline", "").split(),
          "booted with threadirqs (run-vm.py --no-threadirqs): this test is about the kernel")
    virtio = device_irqs(r"^virtio")
    check(virtio, "no virtio IRQ in /proc/interrupts")
    threads = irq_threads()
    missing = [i for i in virtio if i not in threads]
    check(not missing, "virtio IRQs without an irq/N thread: %s" % missing)
    before = {i: [(t[2], t[3]) for t in threads[i]] for i in threads}
    check(all(pp == (1, 50) for ts in before.values() for pp in ts),
          "IRQ threads not all SCHED_FIFO 50 at start: %s" % before)
    path = "/etc/rtctl/profiles/vmrtirq.conf"
    with open(path, "w") as f:
        f.write("[Profile]\nDescription=VM tier: IRQ thread priorities on PREEMPT_RT\n"
                "[IRQ virtio]\nMatch=name:virtio*\nThreadPriority=70\n")
    try:
        r, err, msg = call("SetProfile", "vmrtirq")
        check(err is None, "SetProfile(vmrtirq): %s %s" % (err, msg))
        now = irq_threads()
        moved = {i: [(t[2], t[3]) for t in now[i]] for i in virtio}
        check(all(pp == (1, 70) for ts in moved.values() for pp in ts), "virtio IRQ threads: %s" % moved)
        others = {i: [(t[2], t[3]) for t in now[i]] for i in now if i not in virtio}
        check(others == {i: before[i] for i in others}, "other IRQ threads moved: %s" % others)
        check(not rtprops()["Failures"], "failures: %s" % rtprops()["Failures"])
    finally:
        call("SetProfile", TEST_PROFILE)
        os.unlink(path)
    after = {i: [(t[2], t[3]) for t in ts] for i, ts in irq_threads().items()}
    check(after == before, "after switching back: %s" % {i: after.get(i) for i in before if after.get(i) != before[i]})
    return "%d IRQ threads without threadirqs; virtio IRQs %s: FIFO 50 -> 70 -> 50, the other %d unchanged" % (
        sum(len(v) for v in threads.values()), ",".join(map(str, virtio)), len(threads) - len(virtio))
