"""IRQ placement and IRQ thread priorities on the real kernel: this host's virtio MSI-X and IO-APIC
IRQs (one of them, virtio1-req.0, kernel-managed) and the ACPI:Ged IRQs, whose handlers always run in
threads (irq/24-ACPI:Ged), so thread priorities are real here even without threadirqs."""
import glob
import json
import os
import signal
import socket
import subprocess
import time

import dbus
import pytest

import machine
from conftest import wait_until
import harness
from harness import Env, LogindBus


@pytest.fixture(autouse=True)
def cpu1_back_online():
    with machine.cpu1_hotplug_guard():
        yield


def interrupts():
    """irq -> (per-CPU counts, handler names) from /proc/interrupts."""
    out = {}
    with open("/proc/interrupts") as f:
        ncpu = len(f.readline().split())
        for line in f:
            head, _, rest = line.partition(":")
            if not head.strip().isdigit():
                continue
            fields = rest.split()
            out[int(head)] = ([int(x) for x in fields[:ncpu]], " ".join(fields[ncpu + 2:]))
    return out


def managed(irq):
    return not os.stat("/proc/irq/%d/smp_affinity" % irq).st_mode & 0o222


def movable_irqs():
    return [n for n in interrupts() if not managed(n) and os.path.exists("/proc/irq/%d/smp_affinity" % n)]


def affinity(irq):
    return machine.read("/proc/irq/%d/smp_affinity_list" % irq)


def by_name(name):
    for n, (_, names) in interrupts().items():
        if name in names.split(", "):
            return n
    raise AssertionError("no IRQ named %s" % name)


def ged_threads():
    """pid -> comm of the irq/N-ACPI:Ged threads."""
    out = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        st = machine.read(stat) or ""
        if "(irq/" in st and "ACPI:Ged" in st:
            out[int(stat.split("/")[2])] = st[st.index("(") + 1:st.rindex(")")]
    return out


ALL_ON_CPU1 = """[Profile]
Description=test: every movable IRQ on cpu1
[IRQ]
Balance=all
CPUs=1
"""

HOUSEKEEPING = """[Profile]
Description=test: cpu1 isolated, IRQs on cpu0
[CPU]
Isolate=1
KernelThreads=leave
[IRQ]
Balance=housekeeping
"""


def test_only_allowed_target_takes_every_movable_irq(env):
    before = {n: affinity(n) for n in interrupts()}
    env.profile("irq1", ALL_ON_CPU1)
    d = env.start("--profile", "irq1")
    status = env.rtctl_json("status")
    assert status["failures"] == []
    for n in movable_irqs():
        assert affinity(n) == "1", "IRQ %d: %s" % (n, affinity(n))
    assert machine.read("/proc/irq/default_smp_affinity") == "2"
    # The managed one is left to the kernel and reported by number.
    managed_irqs = [n for n in interrupts() if managed(n)]
    assert managed_irqs, "this host has a managed virtio-blk IRQ"
    notes = " ".join(u["message"] for u in status["unsupported"])
    for n in managed_irqs:
        assert affinity(n) == before[n]
        assert "IRQ %d" % n in notes and "kernel-managed" in notes
    d.stop()
    assert {n: affinity(n) for n in interrupts()} == before
    assert machine.read("/proc/irq/default_smp_affinity") == "3"


def effective(irq):
    return machine.read("/proc/irq/%d/effective_affinity_list" % irq)


def traffic(datagrams):
    """Disk and network traffic: reads of the system disk (O_DIRECT, nothing written) and UDP datagrams
    to the discard port of the default gateway on the local network, 10 ms apart."""
    gw = subprocess.run(["ip", "-4", "route", "show", "default"], capture_output=True, text=True).stdout.split()
    dd = subprocess.Popen(["dd", "if=/dev/vda", "of=/dev/null", "bs=64k", "count=%d" % (datagrams * 10),
                           "iflag=direct"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if len(gw) > 2:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            for _ in range(datagrams):
                sock.sendto(b"rtctl test", (gw[2], 9))
                time.sleep(0.01)
    dd.wait(60)


def fired(start, end, irqs):
    return {n for n in irqs if n in start and n in end and sum(end[n][0]) > sum(start[n][0])}


def test_housekeeping_keeps_device_interrupts_off_the_isolated_cpu(env):
    env.profile("hk", HOUSEKEEPING)
    d = env.start("--profile", "hk")
    movable = set(movable_irqs())
    for n in movable:
        assert affinity(n) == "0", "IRQ %d: %s" % (n, affinity(n))
    # On x86 an MSI or IO-APIC IRQ moves at its next interrupt, which the old CPU still takes (or at the
    # one after, while the kernel still cleans up an earlier move of it): no write from user space
    # completes the move sooner. effective_affinity_list says where an IRQ really goes. Traffic until
    # every IRQ that fires has moved, in a bounded number of rounds.
    for _ in range(5):
        start = interrupts()
        traffic(100)
        waiting = {n: effective(n) for n in fired(start, interrupts(), movable) if effective(n) != "0"}
        if not waiting:
            break
    assert waiting == {}, "IRQs that fire and still go to cpu1 (effective CPUs): %s" % waiting
    # From then on no interrupt of a moved IRQ lands on cpu1. IRQs that have not fired since (their move
    # still waits for their next interrupt) are not among them.
    moved = {n for n in movable if effective(n) == "0"}
    start = interrupts()
    traffic(300)
    end = interrupts()
    assert fired(start, end, moved), "no device interrupts at all during the traffic"
    on_cpu1 = {n: end[n][0][1] - start[n][0][1] for n in moved if n in start and n in end}
    assert {n: c for n, c in on_cpu1.items() if c} == {}, "device interrupts on the isolated cpu1: %s" % on_cpu1
    assert {n for n in moved if effective(n) != "0"} == set()
    d.stop()


HOTPLUG = """[Profile]
Description=test: IRQs balanced, one pinned to cpu1
[IRQ]
Balance=all
[IRQ pinned]
Match=name:virtio0-config
CPUs=1
"""


def test_cpu1_offline_online_reestablishes_placement(env):
    env.profile("hp", HOTPLUG)
    d = env.start("--profile", "hp")
    pinned = by_name("virtio0-config")
    net = [n for n, (_, names) in interrupts().items() if names.startswith("virtio2-")]
    assert affinity(pinned) == "1"
    placed = {n: affinity(n) for n in movable_irqs()}
    assert all(len(v) == 1 for v in placed.values()), placed
    machine.set_cpu1(False)
    # While cpu1 is away the pinned IRQ is balanced on what is left.
    assert wait_until(lambda: affinity(pinned) == "0")
    machine.set_cpu1(True)
    # The kernel reset the pinned IRQ to every CPU at offline, and virtio-net resets its own IRQs when a
    # CPU comes back: the online pass puts everything back.
    assert wait_until(lambda: affinity(pinned) == "1")
    assert wait_until(lambda: all(len(affinity(n)) == 1 for n in net)), {n: affinity(n) for n in net}
    assert wait_until(lambda: all(len(affinity(n)) == 1 for n in movable_irqs()))
    assert env.rtctl_json("status")["failures"] == []
    d.stop()


GED = """[Profile]
Description=test: ACPI:Ged IRQ threads at fifo 60
[IRQ ged]
Match=name:ACPI:Ged
ThreadPriority=60
[IRQ net]
Match=class:network
ThreadPolicy=fifo
ThreadPriority=70
"""


def test_irq_thread_priority_set_and_restored(env):
    threads = ged_threads()
    assert threads, "this host has irq/N-ACPI:Ged threads"
    before = {p: (os.sched_getscheduler(p), os.sched_getparam(p).sched_priority) for p in threads}
    env.profile("ged", GED)
    d = env.start("--profile", "ged")
    for p in threads:
        assert os.sched_getscheduler(p) == os.SCHED_FIFO
        assert os.sched_getparam(p).sched_priority == 60
    # virtio-net's IRQs are not threaded without threadirqs: said so, not failed.
    status = env.rtctl_json("status")
    assert status["failures"] == []
    notes = " ".join(u["message"] for u in status["unsupported"])
    assert "IRQs are not threaded" in notes and "threadirqs" in notes
    listed = {i["irq"]: i for i in env.rtctl_json("irq")}
    for n, (_, names) in interrupts().items():
        if "ACPI:Ged" in names:
            assert (listed[n]["thread_policy"], listed[n]["thread_priority"]) == ("fifo", 60)
    d.stop()
    assert {p: (os.sched_getscheduler(p), os.sched_getparam(p).sched_priority) for p in threads} == before


def test_list_irqs_covers_every_line(env):
    env.profile("hk", HOUSEKEEPING)
    d = env.start("--profile", "hk")
    listed = {i["irq"]: i for i in env.rtctl_json("irq")}
    assert set(listed) == set(interrupts())
    blk = by_name("virtio1-req.0")
    assert listed[blk]["class"] == "storage" and "kernel-managed" in listed[blk]["unmovable"]
    assert listed[blk]["device"] == "0000:00:02.0" and listed[blk]["driver"] == "virtio-pci"
    rx = by_name("virtio2-input.0")
    assert listed[rx]["class"] == "network" and listed[rx]["unmovable"] == ""
    assert listed[rx]["cpus"] == "0"
    # The ttyS0 IRQ has no PCI device and is covered all the same.
    tty = by_name("ttyS0")
    assert listed[tty]["class"] == "other" and listed[tty]["cpus"] == "0"
    table = env.rtctl("irq", check=True).stdout
    assert "virtio2-input.0" in table and "RATE/S" in table
    d.stop()


def pin_error(mgr, *args):
    try:
        mgr.PinIrq(*args)
    except dbus.DBusException as e:
        return e.get_dbus_name()
    return None


def test_pin_irq_errors_and_override(env):
    env.profile("hk", HOUSEKEEPING)
    env.profile("hk2", HOUSEKEEPING)
    d = env.start("--profile", "hk", "--verbose")
    rx = by_name("virtio2-input.0")
    blk = by_name("virtio1-req.0")
    p = env.rtctl("irq", "pin", str(rx), "1")
    assert p.returncode == 1 and "isolated" in p.stderr
    assert affinity(rx) == "0"
    p = env.rtctl("irq", "pin", str(blk), "0")
    assert p.returncode == 1 and "kernel-managed" in p.stderr
    p = env.rtctl("irq", "pin", "9999", "0")
    assert p.returncode == 1 and "No IRQ 9999" in p.stderr
    p = env.rtctl("irq", "pin", str(rx), "0-x")
    assert p.returncode == 2, p.stderr
    # Named D-Bus errors for programs.
    conn = dbus.bus.BusConnection(env.bus.address)
    mgr = dbus.Interface(conn.get_object("org.rtctl.Manager1", "/org/rtctl/Manager1"), "org.rtctl.Manager1")
    assert pin_error(mgr, dbus.UInt32(rx), "1") == "org.rtctl.Error.IsolatedCPU"
    assert pin_error(mgr, dbus.UInt32(blk), "0") == "org.rtctl.Error.Unmovable"
    assert pin_error(mgr, dbus.UInt32(9999), "0") == "org.rtctl.Error.NoSuchIrq"
    assert pin_error(mgr, dbus.UInt32(rx), "7") == "org.rtctl.Error.InvalidArgument"
    # Unpinning what is not pinned is answered at once, with a named error (it used to get no reply).
    assert pin_error(mgr, dbus.UInt32(rx), "") == "org.rtctl.Error.NotPinned"
    conn.close()
    p = env.rtctl("irq", "unpin", str(rx))
    assert p.returncode == 1 and "is not pinned" in p.stderr, (p.returncode, p.stderr)
    env.rtctl("irq", "pin", str(rx), "1", "--isolated", check=True)
    assert affinity(rx) == "1"
    # The daemon's dry run knows the pin: nothing to change.
    planned = [e["object"] for e in env.rtctl_json("plan")]
    assert "/proc/irq/%d/smp_affinity_list" % rx not in planned, planned
    # ... while a dry run of another profile, which would drop the pin, shows the IRQ going back.
    planned = [e["object"] for e in env.rtctl_json("plan", "--profile", "hk2")]
    assert "/proc/irq/%d/smp_affinity_list" % rx in planned, planned
    # Kept when the same profile is applied again (SIGHUP reload), dropped by unpin.
    d.proc.send_signal(signal.SIGHUP)
    assert wait_until(lambda: "Pass (reload" in d.output()), d.output()
    assert affinity(rx) == "1"
    env.rtctl("irq", "unpin", str(rx), check=True)
    assert affinity(rx) == "0"
    env.rtctl("irq", "pin", str(rx), "isolated", check=True)
    assert affinity(rx) == "1"
    env.rtctl("profile", "hk2", check=True)  # a profile change drops pins
    assert affinity(rx) == "0"
    d.stop()


def test_irqbalance_running_is_reported(env, tmp_path):
    with machine.process_named("irqbalance", tmp_path) as proc:
        env.profile("hk", HOUSEKEEPING)
        d = env.start("--profile", "hk")
        notes = " ".join(u["message"] for u in env.rtctl_json("status")["unsupported"])
        assert "irqbalance runs (PID %d)" % proc.pid in notes and "OnConflict=stop" in notes
        d.stop()
        # stop without systemd: it cannot be stopped, and status says so.
        env.write("rtctl.conf", "[Daemon]\nDefaultProfile=off\nUevents=kernel\nOnConflict=stop\n")
        d = env.start("--profile", "hk")
        notes = " ".join(u["message"] for u in env.rtctl_json("status")["unsupported"])
        assert "outside systemd" in notes and "stop it by hand" in notes
        assert proc.poll() is None
        d.stop()


def test_resume_from_suspend_reapplies(tmp_root):
    """A fake logind on a private bus says PrepareForSleep(false); rtctld re-applies what firmware or a
    driver may have reset across suspend."""
    bus = LogindBus(tmp_root)
    env = Env(tmp_root, bus)
    try:
        env.profile("hk", HOUSEKEEPING)
        d = env.start("--profile", "hk")
        rx = by_name("virtio2-input.0")
        assert affinity(rx) == "0"
        with open("/proc/irq/%d/smp_affinity_list" % rx, "w") as f:
            f.write("0-1")  # what a reset across suspend looks like
        bus.resume()
        assert wait_until(lambda: affinity(rx) == "0")
        # Logged before the pass; the pass's own line may come after the write is visible.
        assert "Resumed from suspend" in d.output()
        d.stop()
    finally:
        env.cleanup()
        bus.stop()


def test_check_says_whether_irqs_are_threaded(env, tmp_path):
    p = env.rtctl("--json", "check")
    assert p.returncode == 1, p.stdout + p.stderr
    found = {c["check"]: c for c in json.loads(p.stdout)}
    cmdline = machine.read("/proc/cmdline")
    assert "threadirqs" not in cmdline, "this host boots without threadirqs"
    assert found["irq-threads"]["status"] == "warn"
    assert "needs boot parameters: threadirqs" in found["irq-threads"]["detail"]
    assert found["cpufreq"]["status"] == "info" and "no cpufreq driver" in found["cpufreq"]["detail"]
    # The same audit of a machine that boots a dynamically preemptible kernel with threadirqs and
    # preempt=full (a tree under a root prefix), judging root by name (root by default warns).
    (tmp_path / "proc" / "sys" / "kernel").mkdir(parents=True)
    (tmp_path / "proc" / "cmdline").write_text("root=/dev/sda2 threadirqs preempt=full\n")
    (tmp_path / "proc" / "sys" / "kernel" / "version").write_text("#1 SMP PREEMPT_DYNAMIC Debian\n")
    e = dict(env.environ, RTCTL_SYSROOT=str(tmp_path))
    p = subprocess.run([harness.RTCTL, "--json", "check", "--user", "root"], env=e, capture_output=True,
                       text=True)
    found = {c["check"]: c for c in json.loads(p.stdout)}
    assert found["irq-threads"]["status"] == "ok" and found["preemption"]["status"] == "ok"
    assert p.returncode == 0, p.stdout


def test_pin_refused_when_the_profile_places_no_irqs(env):
    env.profile("blk", "[Profile]\nDescription=test: no IRQ section\n[Sysctl]\nkernel.timer_migration=1\n")
    d = env.start("--profile", "blk")
    rx = by_name("virtio2-input.0")
    before = affinity(rx)
    p = env.rtctl("irq", "pin", str(rx), "0")
    assert p.returncode == 1 and "places no IRQs" in p.stderr, p.stderr
    assert affinity(rx) == before
    d.stop()


def test_unreadable_interrupts_keep_the_placement_and_show_in_status(env, tmp_path):
    """On a fixture workstation (RTCTL_SYSROOT): a pass that cannot read /proc/interrupts must not undo the
    IRQ placement (a failed plan is not a profile that wants nothing). The failure shows in status, and
    the next pass after the file is back is clean."""
    import shutil
    src = os.path.join(harness.BUILD, "tests", "unit", "fixtures", "amd-workstation")
    assert os.path.isdir(src), "fixtures are built with the tree (ninja -C %s)" % harness.BUILD
    root = str(tmp_path / "ws")
    shutil.copytree(src, root, symlinks=True)
    files = sorted(glob.glob(root + "/proc/irq/*/smp_affinity_list"))
    original = {f: machine.read(f) for f in files}
    env.extra["RTCTL_SYSROOT"] = root
    env.profile("ws", "[Profile]\nDescription=test: placement\n[CPU]\nIsolate=7,15\n[IRQ]\nBalance=housekeeping\n")
    d = env.start("--profile", "ws")
    status = lambda: json.loads(env.rtctl("--json", "status").stdout)  # exits 1 while degraded
    placed = {f: machine.read(f) for f in files}
    assert sum(placed[f] != original[f] for f in files) > 10, "the profile placed nothing"
    assert status()["state"] == "applied"

    os.rename(root + "/proc/interrupts", root + "/proc/interrupts.aside")
    d.proc.send_signal(signal.SIGHUP)  # a reload replans everything
    failed = lambda: [f for f in status()["failures"] if f["object"] == "/proc/interrupts"]
    assert wait_until(lambda: failed()), status()
    assert status()["state"] == "degraded"
    assert "cannot be read" in failed()[0]["message"], failed()
    assert {f: machine.read(f) for f in files} == placed, "a failed plan undid the placement"

    os.rename(root + "/proc/interrupts.aside", root + "/proc/interrupts")
    # The retry timer replans it too, but gives up after five tries (about 3 s): a loaded machine may take
    # longer to get here, so the next pass is asked for.
    d.proc.send_signal(signal.SIGHUP)
    assert wait_until(lambda: status()["state"] == "applied"), status()
    assert status()["failures"] == []
    assert {f: machine.read(f) for f in files} == placed
    assert d.running()
    d.stop()
    assert {f: machine.read(f) for f in files} == original, "restore did not put the fixture's files back"
