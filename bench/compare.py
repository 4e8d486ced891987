#!/usr/bin/python3
"""rtctld beside Debian's tuned 2.20 and irqbalance 1.9, measured in one run on this machine's real
kernel so the ratios hold on a noisy machine. Prints a table and writes JSON.

    bench/compare.py [--runs 20] [--apply-runs 20] [--hotplug-runs 5] [--idle 60] [--json FILE]
                     [--no-lock] [--no-systemctl-shim] [SECTION...]

Sections (all by default, in this order):
  apply    profile apply time, rtctl and tuned alternated run by run: the CLI's wall time (`rtctl
           profile X`, `tuned-adm profile X`), the time from its start until the values are really in
           the kernel, and the same two from a direct D-Bus call (SetProfile / switch_profile), which
           leaves out the CLI's own start-up. Same work for both: one loop device's scheduler to bfq
           and one sysctl.
  uevent   loop device `add` uevent -> scheduler in place. Without udevd: the kernel's own elevator
           switch, rtctld (kernel uevents), and whether tuned reacts at all. With a hand-started
           systemd-udevd: the same plus rtctld in udev mode and tuned, alternated run by run.
  idle     RSS/PSS and wakeups (context switches of all threads) over --idle seconds, for rtctld,
           tuned and irqbalance side by side in the same window.
  hotplug  irqbalance: cpu1 offline, wait, online; time from the online write until irqbalance
           changes an IRQ affinity, and until it stops changing them.
  irqs     how many IRQs irqbalance leaves unmanaged (from its --debug placement tree).

Needs root, the packages tuned irqbalance udev (and dbus), and a build tree (RTCTL_BUILD_DIR, default
build/). Takes the shared kernel lock /run/rtctl-kernel.lock for the whole run (or uses the one an
enclosing `flock /run/rtctl-kernel.lock` holds). Leaves the machine as it found it and proves it with
a before/after snapshot (bench/rivals.py): loop devices 300-399 only, IRQ affinities written back,
every daemon it started stopped, /run/udev removed."""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import rivals  # noqa: E402  (puts tests/integration on sys.path)
from rivals import log, stats  # noqa: E402
import bench  # noqa: E402  (the lead's harness: kernel_elevator_write, uevent_to_scheduler)
import machine  # noqa: E402
from harness import RTCTL, Env  # noqa: E402

SYSCTL = ("kernel.sched_rt_runtime_us", "/proc/sys/kernel/sched_rt_runtime_us", "950001")

RTCTL_APPLY = """[Profile]
Description=compare: one loop device's scheduler and one sysctl
[Block apply]
Match=name:loop30[0-9]
Scheduler=bfq
[Sysctl]
%s=%s
""" % (SYSCTL[0], SYSCTL[2])

TUNED_APPLY = """[main]
summary=compare: one loop device's scheduler and one sysctl
[disk]
devices=loop30*
elevator=bfq
[sysctl]
%s=%s
""" % (SYSCTL[0], SYSCTL[2])


def rtctl_uevent_profile(glob):
    return "[Profile]\nDescription=compare: new loop devices\n[Block new]\nMatch=name:%s\nScheduler=bfq\n" % glob


TUNED_UEVENT = "[main]\nsummary=compare: new loop devices\n[disk]\ndevices=loop33*\nelevator=bfq\n"

# Loop numbers (all in the bench range 300-399).
APPLY_LOOP = 300          # rtctl and tuned apply profiles: loop30[0-9]
RTCTL_K_LOOP = 310        # rtctld with kernel uevents: loop31[0-9]
RTCTL_U_LOOP = 320        # rtctld with udev events: loop32[0-9]
TUNED_LOOP = 330          # tuned: loop33*
KERNEL_LOOP = 390         # no profile matches: the kernel's own elevator switch


# ----------------------------------------------------------------------------------------- apply

class Poller:
    """Runs an action (in a thread, or as a process) and polls the kernel until the wanted values are
    in place: returns (ms until the action returned, ms until the values were in place)."""

    @staticmethod
    def run(start, finished, in_place, timeout=30.0, interval=0.0005):
        t0 = time.monotonic()
        handle = start()
        t_done = t_in = None
        while t_done is None or t_in is None:
            now = time.monotonic()
            if t_in is None and in_place():
                t_in = now
            if t_done is None and finished(handle):
                t_done = time.monotonic()
            if now - t0 > timeout:
                break
            time.sleep(interval)
        ms = lambda t: None if t is None else (t - t0) * 1000  # noqa: E731
        return ms(t_done), ms(t_in), handle


def run_process(cmd, env):
    return lambda: subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def process_finished(p):
    return p.poll() is not None


def run_call(fn):
    def start():
        box = {}

        def target():
            try:
                box["result"] = fn()
            except Exception as e:  # reported by the caller
                box["error"] = e
            box["done"] = True

        t = threading.Thread(target=target, daemon=True)
        box["thread"] = t
        t.start()
        return box
    return start


def call_finished(box):
    return "done" in box


class Apply:
    def __init__(self, env, tuned, bus, disks):
        import dbus
        self.env = env
        self.tuned = tuned
        self.bus = bus
        self.devices = [rivals.bench_loop(APPLY_LOOP + i) for i in range(disks)]
        self.orig = {d: rivals.sched(d) for d in self.devices}
        self.orig_sysctl = machine.read(SYSCTL[1])
        conn = dbus.bus.BusConnection(bus.address)
        self.rtctl_dbus = dbus.Interface(conn.get_object("org.rtctl.Manager1", "/org/rtctl/Manager1"),
                                         "org.rtctl.Manager1")
        self.tuned_dbus = dbus.Interface(conn.get_object("com.redhat.tuned", "/Tuned"),
                                         "com.redhat.tuned.control")

    def in_place(self):
        return (machine.read(SYSCTL[1]) == SYSCTL[2]
                and all(rivals.sched(d) == "bfq" for d in self.devices))

    def restored(self):
        return (machine.read(SYSCTL[1]) == self.orig_sysctl
                and all(rivals.sched(d) == self.orig[d] for d in self.devices))

    def wait_restored(self, what):
        if not machine_wait(self.restored, 10):
            raise RuntimeError("%s did not put the values back" % what)
        time.sleep(0.1)

    def rtctl_cli(self):
        wall, inp, p = Poller.run(run_process([RTCTL, "profile", "cmp-apply"], self.env.environ),
                                  process_finished, self.in_place)
        if p.returncode != 0:
            raise RuntimeError("rtctl profile cmp-apply: rc=%s %s" % (p.returncode, p.stderr.read()))
        self.env.rtctl("profile", "off", check=True)
        self.wait_restored("rtctl profile off")
        return wall, inp

    def tuned_cli(self):
        wall, inp, p = Poller.run(run_process([rivals.TUNED_ADM, "profile", "cmp-apply"], self.bus.env()),
                                  process_finished, self.in_place)
        if p.returncode != 0:
            raise RuntimeError("tuned-adm profile cmp-apply: rc=%s %s" % (p.returncode, p.stderr.read()))
        self.tuned.adm("profile", "rtctl-bench-empty")
        self.wait_restored("tuned-adm profile rtctl-bench-empty")
        return wall, inp

    def rtctl_call(self):
        ret, inp, box = Poller.run(run_call(lambda: self.rtctl_dbus.SetProfile("cmp-apply", timeout=60)),
                                   call_finished, self.in_place)
        if "error" in box:
            raise box["error"]
        self.rtctl_dbus.SetProfile("off", timeout=60)
        self.wait_restored("SetProfile(off)")
        return ret, inp

    def tuned_call(self):
        ret, inp, box = Poller.run(run_call(lambda: self.tuned_dbus.switch_profile("cmp-apply", timeout=60)),
                                   call_finished, self.in_place)
        if "error" in box:
            raise box["error"]
        if not box["result"][0]:
            raise RuntimeError("tuned switch_profile: %s" % (box["result"],))
        self.tuned_dbus.switch_profile("rtctl-bench-empty", timeout=60)
        self.wait_restored("tuned switch_profile(rtctl-bench-empty)")
        return ret, inp

    def close(self):
        for d in self.devices:
            machine.remove_loop(d)


def machine_wait(pred, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.002)
    return pred()


def bench_apply(env, tuned, bus, runs, disks):
    a = Apply(env, tuned, bus, disks)
    kinds = [("rtctl", "cli", a.rtctl_cli), ("tuned", "cli", a.tuned_cli),
             ("rtctl", "dbus", a.rtctl_call), ("tuned", "dbus", a.tuned_call)]
    raw = {"%s_%s" % (t, k): {"returned": [], "in_place": []} for t, k, _ in kinds}
    try:
        for i in range(runs):
            # Rotate the order run by run so neither tool always goes first.
            for t, k, fn in kinds[i % 4:] + kinds[:i % 4]:
                ret, inp = fn()
                raw["%s_%s" % (t, k)]["returned"].append(ret)
                raw["%s_%s" % (t, k)]["in_place"].append(inp)
            log("apply: run %d/%d done" % (i + 1, runs))
    finally:
        a.close()
    out = {}
    for key, v in raw.items():
        out[key + "_returned_ms"] = stats(v["returned"])
        out[key + "_in_place_ms"] = stats(v["in_place"])
    out["disks"] = disks
    out["sysctl"] = SYSCTL[0]
    return out, raw


# ----------------------------------------------------------------------------------------- uevent

def try_uevent(listener, n, timeout=5.0, linger=0.1):
    """bench.uevent_to_scheduler, but a device never tuned counts as None rather than an error, and the
    device stays `linger` seconds after its scheduler shows the choice: the kernel shows the new
    elevator some milliseconds before the write returns, and a device removed under the daemon's write
    fails its read-back (a failure in rtctld's status) and delays the next run's remove."""
    name = rivals.bench_loop(n)
    try:
        t_event = listener.wait_for("add", "/" + name)
        while rivals.sched(name) != "bfq":
            if time.monotonic() - t_event > timeout:
                return None
            time.sleep(0.0002)
        return (time.monotonic() - t_event) * 1000
    finally:
        time.sleep(linger)
        machine.remove_loop(name)


def bench_uevent(tmp, rtctl_k, tuned, runs, tuned_tries_without_udev=3):
    out = {}
    raw = {}
    tuned.adm("profile", "cmp-uevent")

    # Without udevd.
    listener = machine.UeventListener()
    try:
        kernel, rk, tn = [], [], []
        for i in range(runs):
            order = [0, 1] if i % 2 == 0 else [1, 0]
            for o in order:
                if o == 0:
                    kernel.append(bench.kernel_elevator_write(KERNEL_LOOP + i % 10))
                else:
                    rk.append(try_uevent(listener, RTCTL_K_LOOP + i % 10))
            time.sleep(0.02)
        for i in range(tuned_tries_without_udev):
            tn.append(try_uevent(listener, TUNED_LOOP + i % 10, timeout=3.0))
        raw["no_udevd"] = {"kernel": kernel, "rtctld_kernel": rk, "tuned": tn}
        out["no_udevd"] = {
            "kernel_elevator_write_ms": stats(kernel),
            "rtctld_kernel_uevents_ms": stats(rk),
            "rtctld_share_ms": stats([d - k for d, k in zip(rk, kernel) if d is not None]),
            "tuned": {"tries": len(tn), "tuned_within_3s": sum(1 for v in tn if v is not None)},
        }
        log("uevent: without udevd done")
    finally:
        listener.close()

    # With a hand-started systemd-udevd.
    udevd = rivals.Udevd(tmp)
    bus2 = None
    try:
        bus2 = rivals.SystemBus(tmp)
        env_u = Env(tmp, bus2)
        env_u.write("rtctl.conf", "[Daemon]\nDefaultProfile=off\nUevents=udev\n")
        env_u.profile("cmp-uevent-u", rtctl_uevent_profile("loop32[0-9]"))
        rtctl_u = rivals.start_rtctld(env_u, "--profile", "cmp-uevent-u")
        listener = machine.UeventListener()
        try:
            kinds = [("kernel", lambda i: bench.kernel_elevator_write(KERNEL_LOOP + i % 10)),
                     ("rtctld_kernel", lambda i: try_uevent(listener, RTCTL_K_LOOP + i % 10)),
                     ("rtctld_udev", lambda i: try_uevent(listener, RTCTL_U_LOOP + i % 10)),
                     ("tuned", lambda i: try_uevent(listener, TUNED_LOOP + i % 10))]
            vals = {k: [] for k, _ in kinds}
            for i in range(runs):
                for k, fn in kinds[i % 4:] + kinds[:i % 4]:
                    vals[k].append(fn(i))
                    time.sleep(0.02)
            raw["udevd"] = vals
            kern = vals["kernel"]
            out["udevd"] = {
                "kernel_elevator_write_ms": stats(kern),
                "rtctld_kernel_uevents_ms": stats(vals["rtctld_kernel"]),
                "rtctld_udev_ms": stats(vals["rtctld_udev"]),
                "tuned_ms": stats(vals["tuned"]),
                "tuned_missed": sum(1 for v in vals["tuned"] if v is None),
                "rtctld_udev_missed": sum(1 for v in vals["rtctld_udev"] if v is None),
                "rtctld_udev_share_ms": stats([d - k for d, k in zip(vals["rtctld_udev"], kern)
                                               if d is not None]),
                "tuned_share_ms": stats([d - k for d, k in zip(vals["tuned"], kern) if d is not None]),
            }
        finally:
            listener.close()
            rtctl_u.stop_if_running()
            env_u.cleanup()
        log("uevent: with udevd done")
    finally:
        if bus2:
            bus2.stop()
        udevd.stop()
    return out, raw


# ----------------------------------------------------------------------------------------- idle

def bench_idle(daemons, seconds):
    """daemons: name -> pid. All in one window, so the same machine noise reaches each."""
    time.sleep(5)
    before = {n: rivals.ctxt_switches(p) for n, p in daemons.items()}
    t0 = time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - t0
    out = {}
    for n, p in daemons.items():
        w = rivals.ctxt_switches(p) - before[n]
        out[n] = {"seconds": round(elapsed, 1), "wakeups": w, "per_minute": w * 60.0 / elapsed,
                  "memory": rivals.memory(p)}
    return out


# ----------------------------------------------------------------------------------------- hotplug

def bench_hotplug(runs, offline_wait, window, quiet):
    """irqbalance must be running. Offline cpu1, give irqbalance offline_wait seconds to notice, then
    online it; from the start of the online write: first IRQ affinity change after the write returned
    (the kernel and virtio drivers reset some during the write itself), and the last change before
    `quiet` seconds passed without one."""
    first, last, on_cpu1 = [], [], []
    for i in range(runs):
        with machine.cpu1_hotplug_guard():
            machine.set_cpu1(False)
            time.sleep(offline_wait)
            t0 = time.monotonic()
            machine.set_cpu1(True)
            write_ms = (time.monotonic() - t0) * 1000
            prev = rivals.irq_affinities()
            t_first = t_last = None
            while True:
                now = time.monotonic()
                cur = rivals.irq_affinities()
                if cur != prev:
                    t_last = now
                    if t_first is None:
                        t_first = now
                    prev = cur
                if now - t0 > window or (t_last is not None and now - t_last > quiet):
                    break
                time.sleep(0.01)
        first.append(None if t_first is None else (t_first - t0))
        last.append(None if t_last is None else (t_last - t0))
        on_cpu1.append(sum(1 for v in prev.values() if v == "1"))
        log("hotplug: run %d/%d: online write %.1f ms, first change %s s, last %s s" % (
            i + 1, runs, write_ms, first[-1] and round(first[-1], 2), last[-1] and round(last[-1], 2)))
        time.sleep(1)
    return {"irqbalance_first_change_s": stats(first), "irqbalance_settled_s": stats(last),
            "no_change": sum(1 for v in first if v is None), "irqs_only_on_cpu1_after": on_cpu1,
            "offline_wait_s": offline_wait, "window_s": window}, {"first": first, "last": last}


# ----------------------------------------------------------------------------------------- irqs

def interrupts_with_handlers():
    irqs = {}
    with open("/proc/interrupts") as f:
        ncpu = len(f.readline().split())
        for line in f:
            head, _, rest = line.partition(":")
            if head.strip().isdigit():
                irqs[int(head)] = " ".join(rest.split()[ncpu:])
    return irqs


def bench_irqs(tmp):
    """irqbalance --oneshot --debug: its placement tree names every IRQ it manages."""
    with rivals.irqs_restored():
        had = os.path.exists("/run/irqbalance")
        p = subprocess.run(["irqbalance", "--oneshot", "--debug", "--foreground"], capture_output=True,
                           text=True, timeout=120)
        if not had:
            shutil.rmtree("/run/irqbalance", ignore_errors=True)
    text = p.stdout + p.stderr
    with open(os.path.join(tmp, "irqbalance-oneshot.out"), "w") as f:
        f.write(text)
    # The last tree: "---" separator, then lines "Interrupt N node_num ... (class/load:count)". IRQs
    # indented under a CPU are placed on it; at two spaces they stay at package level (all CPUs).
    tree = text.rsplit("-" * 20, 1)[-1]
    placed, package = [], []
    for m in re.finditer(r"^( *)Interrupt (\d+) node_num is \S+ \((\w+)", tree, re.M):
        (placed if len(m.group(1)) > 4 else package).append(int(m.group(2)))
    handlers = interrupts_with_handlers()
    all_irqs = sorted(int(d) for d in os.listdir("/proc/irq") if d.isdigit())
    managed = set(placed) | set(package)
    unmanaged = sorted(i for i in handlers if i not in managed)
    read_only = sorted(i for i in placed if not os.access("/proc/irq/%d/smp_affinity" % i, os.W_OK)
                       or (os.stat("/proc/irq/%d/smp_affinity" % i).st_mode & 0o222) == 0)
    return {"irqs_with_handlers": len(handlers), "proc_irq_dirs": len(all_irqs),
            "placed_on_a_cpu": sorted(placed), "left_at_package_level": sorted(package),
            "unmanaged": unmanaged, "unmanaged_count": len(unmanaged),
            "placed_but_kernel_managed": read_only,
            "unmanaged_names": {i: handlers[i] for i in unmanaged}}


# ----------------------------------------------------------------------------------------- main

def fmt(v):
    return "-" if v is None else ("%.2f" % v if isinstance(v, float) else str(v))


def print_table(results):
    rows = []

    def add(name, s, unit=""):
        if isinstance(s, dict) and s.get("n"):
            rows.append((name + unit, s["median"], s["p95"], s["n"]))

    ap = results.get("apply")
    if ap:
        for tool in ("rtctl", "tuned"):
            for kind, label in (("cli", "CLI"), ("dbus", "D-Bus call")):
                add("apply %s %s returned" % (tool, label), ap["%s_%s_returned_ms" % (tool, kind)], " ms")
                add("apply %s %s in place" % (tool, label), ap["%s_%s_in_place_ms" % (tool, kind)], " ms")
    ue = results.get("uevent")
    if ue:
        nu = ue["no_udevd"]
        add("no udevd: kernel elevator write", nu["kernel_elevator_write_ms"], " ms")
        add("no udevd: rtctld (kernel) add->sched", nu["rtctld_kernel_uevents_ms"], " ms")
        add("no udevd: rtctld share", nu["rtctld_share_ms"], " ms")
        if "udevd" in ue:
            u = ue["udevd"]
            add("udevd: kernel elevator write", u["kernel_elevator_write_ms"], " ms")
            add("udevd: rtctld (kernel) add->sched", u["rtctld_kernel_uevents_ms"], " ms")
            add("udevd: rtctld (udev) add->sched", u["rtctld_udev_ms"], " ms")
            add("udevd: tuned add->sched", u["tuned_ms"], " ms")
            add("udevd: rtctld (udev) share", u["rtctld_udev_share_ms"], " ms")
            add("udevd: tuned share", u["tuned_share_ms"], " ms")
    hp = results.get("hotplug")
    if hp:
        add("irqbalance cpu1 online -> first change", hp["irqbalance_first_change_s"], " s")
        add("irqbalance cpu1 online -> settled", hp["irqbalance_settled_s"], " s")
    print("%-44s %10s %10s %4s" % ("figure", "median", "p95", "n"))
    for name, med, p95, n in rows:
        print("%-44s %10.2f %10.2f %4d" % (name, med, p95, n))
    if ue:
        t = ue["no_udevd"]["tuned"]
        print("tuned without udevd: tuned %d of %d new devices within 3 s" % (t["tuned_within_3s"], t["tries"]))
        if "udevd" in ue:
            print("with udevd: tuned missed %d, rtctld (udev) missed %d" % (
                ue["udevd"]["tuned_missed"], ue["udevd"]["rtctld_udev_missed"]))
    idle = results.get("idle")
    if idle:
        print("\n%-12s %10s %10s %10s %10s %8s" % ("daemon", "RSS kB", "PSS kB", "private kB", "wakeups/min", "threads"))
        for n, v in idle.items():
            m = v["memory"]
            print("%-12s %10d %10d %10d %10.1f %8d" % (n, m["rss_kb"], m["pss_kb"], m["private_kb"],
                                                      v["per_minute"], m["threads"]))
    ir = results.get("irqs")
    if ir:
        print("\nirqbalance: %d of %d IRQs with handlers unmanaged %s; placed on a CPU %s (kernel-managed, "
              "not writable: %s); left on all CPUs %s" % (
                  ir["unmanaged_count"], ir["irqs_with_handlers"], ir["unmanaged"], ir["placed_on_a_cpu"],
                  ir["placed_but_kernel_managed"], ir["left_at_package_level"]))
    if hp:
        print("irqbalance hotplug: %d run(s) without any change in %d s" % (hp["no_change"], hp["window_s"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=20, help="uevent runs per kind (default 20)")
    ap.add_argument("--apply-runs", type=int, default=20, help="apply runs per kind (default 20)")
    ap.add_argument("--apply-disks", type=int, default=1, help="loop devices the apply profiles switch")
    ap.add_argument("--hotplug-runs", type=int, default=5, help="cpu1 offline/online runs (default 5)")
    ap.add_argument("--offline-wait", type=float, default=12.0, help="seconds cpu1 stays offline")
    ap.add_argument("--hotplug-window", type=float, default=30.0, help="seconds watched after online")
    ap.add_argument("--idle", type=int, default=60, help="idle window in seconds (default 60)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--no-lock", action="store_true", help="do not take /run/rtctl-kernel.lock")
    ap.add_argument("--no-systemctl-shim", action="store_true",
                    help="run tuned without the systemctl stand-in (a stop then skips its full rollback)")
    ap.add_argument("sections", nargs="*", default=["apply", "uevent", "idle", "hotplug", "irqs"])
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("compare needs root: it changes real kernel settings")
    for tool in ("tuned", "irqbalance", "dbus-daemon", "tuned-adm"):
        if not any(os.access(os.path.join(d, tool), os.X_OK) for d in ("/usr/sbin", "/usr/bin", "/sbin")):
            sys.exit("%s is missing: apt-get install tuned irqbalance udev dbus" % tool)
    if not os.access(rivals.UDEVD, os.X_OK):
        sys.exit("systemd-udevd is missing: apt-get install udev")

    t_start = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="rtctl-compare-")
    os.chmod(tmp, 0o755)
    results = {"sections": args.sections}
    raw = {}
    with rivals.kernel_lock(not args.no_lock):
        before = rivals.snapshot()
        guarded = rivals.guarded_state()
        bus = env = rtctl_k = tuned = ib = None
        try:
            with rivals.irqs_restored():
                bus = rivals.SystemBus(tmp)
                env = Env(tmp, bus)
                env.profile("cmp-apply", RTCTL_APPLY)
                env.profile("cmp-uevent-k", rtctl_uevent_profile("loop31[0-9]"))
                tuned = rivals.Tuned(tmp, bus, {"cmp-apply": TUNED_APPLY, "cmp-uevent": TUNED_UEVENT},
                                     shim=not args.no_systemctl_shim)
                results["tuned_start_to_ready_s"] = round(tuned.t_ready - tuned.t_spawn, 3)
                if "apply" in args.sections:
                    rtctl_k = rivals.start_rtctld(env, "--profile", "off")
                    results["apply"], raw["apply"] = bench_apply(env, tuned, bus, args.apply_runs,
                                                                 args.apply_disks)
                    rtctl_k.stop()
                if set(args.sections) & {"uevent", "idle", "hotplug"}:
                    rtctl_k = rivals.start_rtctld(env, "--profile", "cmp-uevent-k")
                if "uevent" in args.sections:
                    results["uevent"], raw["uevent"] = bench_uevent(tmp, rtctl_k, tuned, args.runs)
                if set(args.sections) & {"idle", "hotplug"}:
                    tuned.adm("profile", "cmp-uevent")
                    ib = rivals.Irqbalance(tmp)
                if "idle" in args.sections:
                    log("idle: %d s window" % args.idle)
                    results["idle"] = bench_idle({"rtctld": rtctl_k.proc.pid, "tuned": tuned.pid,
                                                  "irqbalance": ib.pid}, args.idle)
                if "hotplug" in args.sections:
                    results["hotplug"], raw["hotplug"] = bench_hotplug(
                        args.hotplug_runs, args.offline_wait, args.hotplug_window, quiet=11.0)
                if ib:
                    ib.stop()
                    ib = None
                if "irqs" in args.sections:
                    results["irqs"] = bench_irqs(tmp)
        finally:
            for step in (ib and ib.stop, tuned and tuned.cleanup, env and env.cleanup, bus and bus.stop,
                         rivals.remove_bench_loops):
                if step:
                    try:
                        step()
                    except Exception as e:
                        log("cleanup step %s failed: %r" % (getattr(step, "__qualname__", step), e))
            if os.path.exists("/run/udev"):
                log("WARNING: /run/udev left behind; removing")
            # What the kernel itself moves along (IRQ threads follow their IRQ's mask when irqbalance
            # writes it and irqs_restored() writes it back) goes back too. Nothing else: this script
            # writes no workqueue cpumask, and IRQ affinities went back with irqs_restored().
            results["repaired"] = rivals.repair(guarded, files=False, irqs=False)
            if results["repaired"]:
                log("repaired: " + "; ".join(results["repaired"]))
        after = rivals.snapshot()
    left = rivals.diff(before, after)
    results["machine_unchanged"] = not left
    results["machine_diff"] = left
    results["runtime_s"] = round(time.monotonic() - t_start, 1)
    results["raw"] = raw
    print_table(results)
    print("\nruntime %.0f s; machine unchanged: %s" % (results["runtime_s"], "yes" if not left else "NO"))
    if left:
        print("WARNING: the machine changed:", *left, sep="\n  ")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2, default=str)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0 if not left else 1


if __name__ == "__main__":
    machine.interruptible()
    sys.exit(main())
