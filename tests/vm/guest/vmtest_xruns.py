"""The VM tier: `rtctl xruns` (issue 24) where the CI host cannot make the disturbance.

- xruns-device-irq: a device IRQ driven hard on the audio CPU. The host's disk IRQ is kernel-managed and
  the IRQs that can move cannot be driven (tests/integration/test_xruns.py says how that was checked);
  here a virtio disk hot-added without MSI-X has a legacy IO-APIC line that moves, and the guest boots
  with `threadirqs`, so its handler runs in the kernel thread irq/N-virtioM as on an audio distribution.
- xruns-smi: SMIs counted. QEMU's TCG keeps MSR_SMI_COUNT, and a write to the APM control port 0xb2
  makes the firmware (SeaBIOS) take an SMI; no host CPU here offers either.

Both run jackd's dummy driver as root with bench/xrun-client (at half its period; over it for the SMIs, so
that there are xruns to carry them), their real-time threads on the audio CPU. Run before vmtest_isolation: QEMU 7.2 under TCG aborted (double free) on this INTx
device_add once the CPU hot-add/unplug tests had run.
"""

import glob
import json
import os
import signal
import subprocess
import time

from vmtest_common import check, con, disk_by_serial, Fail, host, read, RTCTL, run, settle, test, wait_for, write

CLIENT = "/usr/lib/rtctl-vmtest/xrun-client"  # bench/xrun-client, installed by build-image.sh
SERVER = "rtctl-vmxruns"
FRAMES, RATE = 1024, 48000  # TCG: a shorter period xruns all the time on its own
PERIOD_NS = FRAMES * 1e9 / RATE


def rt_threads(pid):
    out = []
    for d in glob.glob("/proc/%d/task/[0-9]*" % pid):
        try:
            if os.sched_getscheduler(int(d.split("/")[-1])) & ~os.SCHED_RESET_ON_FORK in (os.SCHED_FIFO,
                                                                                           os.SCHED_RR):
                out.append(int(d.split("/")[-1]))
        except OSError:
            pass
    return out


class Graph:
    """jackd (dummy driver) and a fixed-work client at `load` of the period, their real-time threads on
    `audio`, everything else on `housekeeping` (a CPU list)."""

    def __init__(self, audio, housekeeping, load=0.5):
        check(os.access(CLIENT, os.X_OK), "no %s in the image (build-image.sh installs bench/xrun-client)" % CLIENT)
        self.audio = audio
        self.env = dict(os.environ, JACK_NO_AUDIO_RESERVATION="1", JACK_DEFAULT_SERVER=SERVER)
        self.shm = set(os.listdir("/dev/shm"))
        self.log = "/tmp/rtctl-vmxruns-jackd.log"
        self.procs = []
        hk = ["taskset", "-c", housekeeping]
        with open(self.log, "w") as log:
            self.procs.append(subprocess.Popen(hk + ["jackd", "-n", SERVER, "-R", "-P", "10", "-d", "dummy", "-r",
                                                     str(RATE), "-p", str(FRAMES)],
                                               stdout=log, stderr=subprocess.STDOUT, env=self.env))
        # Its driver's real-time thread runs once the server is up (jack_wait is in Debian 13's
        # jack-example-tools, not in jackd2).
        check(wait_for(lambda: rt_threads(self.procs[0].pid) or self.procs[0].poll() is not None, 30, 0.1)
              and self.procs[0].poll() is None, "jackd did not start: %s" % read(self.log, "")[-300:])
        cal = run([CLIENT, "--calibrate", "--cpu", str(audio)], env=self.env, timeout=60)
        check(cal.returncode == 0, "xrun-client --calibrate: %s" % cal.stderr[-300:])
        units = max(1, int(load * PERIOD_NS / json.loads(cal.stdout)["ns_per_unit_median"]))
        self.procs.append(subprocess.Popen(hk + [CLIENT, "--units", str(units), "--warmup", "0", "--seconds", "900",
                                                 "--name", "xrun-client"],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=self.env))
        check(wait_for(lambda: rt_threads(self.procs[0].pid) and rt_threads(self.procs[1].pid), 30, 0.25),
              "no real-time threads in jackd or the client after 30 s: %s" % read(self.log, "")[-300:])
        for p in self.procs:
            for t in rt_threads(p.pid):
                run(["taskset", "-p", "-c", str(audio), str(t)], check_rc=True)
        time.sleep(1)

    def xruns(self, *command, timeout=120):
        """rtctl --json xruns on the audio CPU around command; its report."""
        p = run([RTCTL, "--json", "xruns", "--server", "jack", "--cpus", str(self.audio), "--"] + list(command),
                env=self.env, timeout=timeout)
        check(p.returncode == 0, "rtctl xruns: rc=%d %s" % (p.returncode, (p.stderr or p.stdout)[-500:]))
        try:
            return json.loads(p.stdout)
        except ValueError:
            raise Fail("rtctl xruns printed no JSON: %s" % p.stdout[-300:])

    def close(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        for f in set(os.listdir("/dev/shm")) - self.shm:
            if f.startswith("jack"):
                run(["rm", "-rf", os.path.join("/dev/shm", f)])


def first_causes(report):
    return [x["causes"][0] if x["causes"] else None for x in report["xruns"]]


def irq_of_disk(dev):
    """The IRQ line of a virtio disk's PCI function (legacy INTx: one line for all its queues)."""
    pci = os.path.dirname(os.path.realpath("/sys/block/%s/device" % dev))
    irq = read(pci + "/irq")
    check(irq and irq.isdigit() and int(irq) > 0, "%s: no IRQ line in %s/irq (%r)" % (dev, pci, irq))
    return int(irq)


def affinities():
    return {int(os.path.basename(d)): read(d + "/smp_affinity_list")
            for d in glob.glob("/proc/irq/[0-9]*") if read(d + "/smp_affinity_list") is not None}


def irq_count(irq, cpu):
    for line in (read("/proc/interrupts") or "").splitlines():
        f = line.split()
        if f and f[0] == "%d:" % irq:
            return int(f[1 + cpu])
    return 0


def reader(dev, seconds):
    """Direct 4 KiB reads of dev from cpu0 for seconds: one interrupt each, no page cache. Exits 0 (rtctl
    xruns exits with its command's status)."""
    loop = "while :; do dd if=/dev/%s of=/dev/null bs=4k count=4096 iflag=direct 2>/dev/null; done" % dev
    return ["taskset", "-c", "0", "sh", "-c", "timeout %d sh -c '%s'; exit 0" % (seconds, loop)]


@test("xruns-device-irq", timeout=420)
def t_xruns_device_irq():
    """A virtio disk's legacy IRQ moved onto the audio CPU (cpu3) and driven by direct reads from cpu0:
    rtctl xruns names the IRQ, with its device, its thread irq/N-... and the IRQ's fix, as the first cause
    of most xruns; with the same reads and the IRQ on cpu0 it names it for none."""
    from vmtest_session import ensure_rtctld_base  # here: importing it at the top would reorder the tests
    ensure_rtctld_base()
    audio, serial = 3, "xirq"
    before = affinities()
    host.call("hotplug-disk %s 64 intx" % serial)
    g = None
    irq = None
    steps = []
    try:
        dev = wait_for(lambda: disk_by_serial(serial), 30)
        check(dev, "the hot-added disk (serial %s) did not show up" % serial)
        settle()
        irq = irq_of_disk(dev)
        check(not glob.glob("/sys/block/%s/device/../msi_irqs/*" % dev),
              "%s uses MSI-X although added with vectors=0" % dev)
        threads = [c for c in (read(p) for p in glob.glob("/proc/[0-9]*/comm")) if c and c.startswith("irq/%d-" % irq)]
        check(threads, "no thread irq/%d-* (the guest boots with threadirqs)" % irq)
        g = Graph(audio, "0-2")

        # control: the IRQ on cpu0, the same reads
        write("/proc/irq/%d/smp_affinity_list" % irq, "0")
        report = g.xruns(*reader(dev, 6))
        named = [c for x in report["xruns"] for c in x["causes"] if c["kind"] == "irq" and c["id"] == irq]
        check(not named, "with IRQ %d on cpu0, %d causes name it: %s" % (irq, len(named), named[:2]))
        steps.append("IRQ %d on cpu0: %d xruns, none naming it" % (irq, len(report["xruns"])))

        # moved onto the audio CPU: an IO-APIC line moves at its next interrupt
        write("/proc/irq/%d/smp_affinity_list" % irq, str(audio))
        c0 = irq_count(irq, audio)
        run(["taskset", "-c", "0", "dd", "if=/dev/" + dev, "of=/dev/null", "bs=4k", "count=64", "iflag=direct"])
        check(irq_count(irq, audio) > c0, "IRQ %d does not arrive on cpu%d after the move (effective %s)" % (
            irq, audio, read("/proc/irq/%d/effective_affinity_list" % irq)))
        t0 = irq_count(irq, audio)
        report = g.xruns(*reader(dev, 6))
        rate = (irq_count(irq, audio) - t0) / 6.0
        xr = report["xruns"]
        first = [c for c in first_causes(report) if c and c["kind"] == "irq" and c["id"] == irq]
        check(len(xr) >= 5, "IRQ %d on cpu%d at %.0f/s: only %d xruns" % (irq, audio, rate, len(xr)))
        check(len(first) >= 0.6 * len(xr), "IRQ %d on cpu%d at %.0f/s: %d of %d xruns name it first; the first "
              "causes: %s" % (irq, audio, rate, len(first), len(xr),
                              json.dumps([c and c["what"] for c in first_causes(report)][:5])))
        c = first[0]
        check("its thread `irq/%d-" % irq in c["what"] and c.get("comm", "").startswith("irq/%d-" % irq),
              "the IRQ's thread is not told: %s" % c)
        check("Balance=housekeeping" in c["fix"] and "(its affinity now: %d)" % audio in c["fix"],
              "the fix is not the IRQ's: %s" % c["fix"])
        check(report["summary"].get("IRQ %d %s" % (irq, c["name"]), 0) == len(first),
              "the summary does not count them: %s" % report["summary"])
        steps.append("moved to cpu%d (%.0f IRQs/s): %d xruns, %d name it first: \"%s\" fix \"%s\"" % (
            audio, rate, len(xr), len(first), c["what"], c["fix"]))
        return "; ".join(steps)
    finally:
        if g:
            g.close()
        try:
            host.call("unplug-disk %s" % serial)
            wait_for(lambda: disk_by_serial(serial) is None, 30)
            settle()
        except Fail as e:
            con.line("VMLOG xruns-device-irq cleanup: %s" % e)
        # The line as it was before the disk came (a driver's request narrows a line's mask to the online
        # CPUs, and a written mask stays): stop-restores compares every IRQ's affinity with the start.
        if irq is not None and before.get(irq) is not None and read("/proc/irq/%d/smp_affinity_list" % irq):
            try:
                write("/proc/irq/%d/smp_affinity_list" % irq, before[irq])
            except OSError as e:
                con.line("VMLOG xruns-device-irq: IRQ %d back to %s: %s" % (irq, before[irq], e))


MSR_SMI_COUNT = 0x34


def smi_counts():
    """MSR_SMI_COUNT of each CPU, through the msr driver."""
    out = {}
    for p in glob.glob("/dev/cpu/[0-9]*/msr"):
        fd = os.open(p, os.O_RDONLY)
        try:
            out[int(p.split("/")[3])] = int.from_bytes(os.pread(fd, 8, MSR_SMI_COUNT), "little") & 0xffffffff
        finally:
            os.close(fd)
    return out


def make_smi():
    """A write to the APM control port: the chipset raises an SMI, which SeaBIOS handles."""
    fd = os.open("/dev/port", os.O_WRONLY)
    try:
        os.pwrite(fd, b"\x00", 0xb2)
    finally:
        os.close(fd)


SMI_MAKER = ("import os, time\n"
             "for i in range(%d):\n"
             "    time.sleep(0.4)\n"
             "    fd = os.open('/dev/port', os.O_WRONLY); os.pwrite(fd, b'\\x00', 0xb2); os.close(fd)\n")


@test("xruns-smi", timeout=300)
def t_xruns_smi():
    """SMIs made through the APM port while rtctl xruns records the CPU that takes them: the summary counts
    every one, xruns carry them as notes after their timed causes, never as a cause."""
    from vmtest_session import ensure_rtctld_base
    ensure_rtctld_base()
    loaded = False
    g = None
    try:
        if not os.path.exists("/dev/cpu/0/msr"):
            check(run(["modprobe", "msr"]).returncode == 0, "modprobe msr failed")
            loaded = True
        before = smi_counts()
        make_smi()
        after = smi_counts()
        rose = [cpu for cpu in sorted(after) if after[cpu] != before.get(cpu)]
        check(len(rose) == 1 and after[rose[0]] - before[rose[0]] == 1,
              "one SMI through port 0xb2: counts %s -> %s" % (before, after))
        cpu = rose[0]
        others = ",".join(str(c) for c in sorted(after) if c != cpu)
        # Over its budget, so that xruns come for sure (TCG's own come and go: none in a run on Debian 13).
        g = Graph(cpu, others, load=1.2)
        made = 10
        report = g.xruns("python3", "-c", SMI_MAKER % made)
        check(report.get("smis") is not None, "no SMI count: %s" % report.get("smis_missing"))
        counted = report["smis"].get(str(cpu), 0)
        check(counted >= made, "%d SMIs made on cpu%d, %d counted: %s" % (made, cpu, counted, report["smis"]))
        told = 0
        for x in report["xruns"]:
            kinds = [c["kind"] for c in x["causes"]]
            if "smi" in kinds:
                first = kinds.index("smi")
                check(all(k == "smi" for k in kinds[first:]), "an SMI note before a timed cause: %s" % kinds)
                told += sum(c["count"] for c in x["causes"] if c["kind"] == "smi")
        check(report["xruns"], "no xrun in the recording, with a client over its budget: nothing told SMIs")
        check(told > 0, "%d xruns, none told an SMI" % len(report["xruns"]))
        check(not [k for k in report["summary"] if "smi" in k.lower()],
              "SMIs counted as a cause in the summary: %s" % report["summary"])
        return "cpu%d takes the SMIs: %d made, %d counted; %d xruns told %d" % (
            cpu, made, counted, len([x for x in report["xruns"] if any(c["kind"] == "smi" for c in x["causes"])]),
            told)
    finally:
        if g:
            g.close()
        if loaded:
            run(["rmmod", "msr"])
