#!/usr/bin/python3
"""Write the seed corpora of the fuzzers, tests/fuzz/corpus/NAME/, from the test fixtures.

    gen-corpus.py --build BUILD_DIR [--out DIR]

BUILD_DIR is a normal build (meson setup build && ninja -C build): its rtctl computes boot arguments
on the fixture machines, and its unit tests leave the journals they wrote (RTCTL_TEST_KEEP=1). The
machines are generated afresh with tests/fixtures/gen-machine.py. Each seed file is named by its
SHA-1, as libFuzzer names what it adds; the corpora are checked in, so they stay small: a few
kilobytes a seed, a few dozen seeds a fuzzer.
"""

import argparse
import glob
import hashlib
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SHAPES = ["vm2", "smp2x8", "holes", "laptop-intel", "amd-workstation", "server-2x32"]
MAX_SEED = 16 * 1024


class Corpus:
    def __init__(self, out):
        self.out = out
        self.counts = {}

    def add(self, name, data):
        if isinstance(data, str):
            data = data.encode()
        data = data[:MAX_SEED]
        d = os.path.join(self.out, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, hashlib.sha1(data).hexdigest()), "wb") as f:
            f.write(data)
        self.counts[name] = self.counts.get(name, 0) + 1


def read(path):
    with open(path, "rb") as f:
        return f.read()


def head_lines(data, n):
    """The first n lines: a 3,000-IRQ file says no more to a fuzzer than its first screen."""
    return b"".join(data.splitlines(keepends=True)[:n])


def cpu_sets(corpus, machine):
    """cpulist and mask files as sysfs and procfs give them, after two bytes giving the set's size."""
    possible = read(os.path.join(machine, "sys/devices/system/cpu/possible")).decode().strip()
    size = int(possible.split("-")[-1].split(",")[-1]) + 1
    prefix = struct.pack("<H", size - 1)  # the harness's size is 1 + this
    seen = set()
    patterns = ["sys/devices/system/cpu/*", "sys/devices/system/cpu/cpu*/topology/*_list",
                "sys/devices/system/node/node*/cpulist", "proc/irq/*/smp_affinity*",
                "proc/irq/*/effective_affinity*", "proc/sys/kernel/watchdog_cpumask"]
    for pattern in patterns:
        for path in sorted(glob.glob(os.path.join(machine, pattern))):
            if not os.path.isfile(path) or os.path.getsize(path) > 4096:
                continue
            value = read(path).strip()
            if not value or not all(c in b"0123456789abcdef,-" for c in value) or value in seen:
                continue
            if len(seen) == 8:  # a machine's lists look much alike
                return
            seen.add(value)
            corpus.add("cpulist", prefix + value)


def profiles(corpus):
    """Each shipped profile followed by what it includes, or by a drop-in: NAME\\nTEXT, form feeds between."""
    texts = {os.path.basename(p)[:-5]: read(p) for p in glob.glob(os.path.join(ROOT, "conf.d/profiles/*.conf"))}
    for name in sorted(texts):
        order, todo = [], [name]
        while todo:
            n = todo.pop(0)
            if n in order or n not in texts:
                continue
            order.append(n)
            for line in texts[n].decode().splitlines():
                if line.strip().startswith("Include="):
                    todo += line.split("=", 1)[1].replace(",", " ").split()
        corpus.add("profile", b"\f".join(n.encode() + b"\n" + texts[n] for n in order))
        # An admin's drop-in over it, as /etc/rtctl/profiles/NAME.conf.d/ holds.
        dropin = b"[Profile]\nDescription=local\n[CPU]\nIsolate=auto:1\n"
        corpus.add("profile", b"\f".join([name.encode() + b"\n" + texts[name], name.encode() + b".d/50-local.conf\n" + dropin]))
    # The first file is read as rtctl.conf as well.
    corpus.add("profile", b"rtctl\n" + read(os.path.join(ROOT, "conf.d/rtctl.conf")))


def boot_args(corpus, build, machine):
    """The running command line with and without the arguments rtctl computes for this machine."""
    base = "BOOT_IMAGE=/boot/vmlinuz-6.1.0-rt ro root=UUID=0b1c quiet"
    env = dict(os.environ, RTCTL_SYSROOT=machine, RTCTL_CONF_PATH=os.path.join(ROOT, "conf.d"))
    for profile in ["audio", "realtime", "desktop"]:
        out = subprocess.run([os.path.join(build, "src/rtctl"), "bootargs", "show", "--profile", profile],
                             env=env, capture_output=True, text=True).stdout
        args = [line.split()[0] for line in out.splitlines() if "=" in line.split(" ")[0] or
                line.startswith(("threadirqs", "preempt", "nohz"))]
        if args:
            corpus.add("cmdline", "nohz_full\n" + base + " " + " ".join(args) + "\n")
            corpus.add("cmdline", "isolcpus\n" + base + " " + " ".join(reversed(args)) + " -- single\n")
    corpus.add("cmdline", "threadirqs\n" + base + "\n")


def uevents(corpus, machine):
    """The datagrams the kernel sends for the machine's disks and CPUs: each field NUL-terminated."""
    def datagram(action, devpath, fields):
        body = [f"{action}@{devpath}", f"ACTION={action}", f"DEVPATH={devpath}"] + fields + ["SEQNUM=4711"]
        return b"".join(f.encode() + b"\0" for f in body)

    for disk in sorted(os.listdir(os.path.join(machine, "sys/block")))[:2]:
        target = os.readlink(os.path.join(machine, "sys/block", disk))
        devpath = "/" + target.split("../", )[-1] if target.startswith("..") else "/devices/virtual/block/" + disk
        for action in ["add", "change", "remove"]:
            corpus.add("uevent", datagram(action, devpath, ["SUBSYSTEM=block", "DEVTYPE=disk",
                                                            f"DEVNAME={disk}", "MAJOR=259", "MINOR=0"]))
    for action in ["online", "offline"]:
        corpus.add("uevent", datagram(action, "/devices/system/cpu/cpu1", ["SUBSYSTEM=cpu"]))


PROC_EVENT_FORK, PROC_EVENT_EXEC, PROC_EVENT_COMM, PROC_EVENT_EXIT = 1, 2, 0x200, 0x80000000


def proc_events(corpus):
    """netlink header, cn_msg (CN_IDX_PROC), proc_event: fork, exec, comm and exit of a JACK client."""
    def message(what, data):
        event = struct.pack("<IIQ", what, 1, 123456789) + data.ljust(24, b"\0")
        cn = struct.pack("<IIIIHH", 1, 1, 7, 0, len(event), 0) + event
        return struct.pack("<IHHII", 16 + len(cn), 3, 0, 7, 0) + cn  # NLMSG_DONE

    fork = message(PROC_EVENT_FORK, struct.pack("<IIII", 100, 100, 101, 101))
    thread = message(PROC_EVENT_FORK, struct.pack("<IIII", 101, 101, 102, 101))
    exec_ = message(PROC_EVENT_EXEC, struct.pack("<II", 101, 101))
    comm = message(PROC_EVENT_COMM, struct.pack("<II", 102, 101) + b"jackd\0".ljust(16, b"\0"))
    exit_ = message(PROC_EVENT_EXIT, struct.pack("<IIIIII", 102, 101, 0, 17, 101, 101))
    for m in [fork, thread, exec_, comm, exit_, fork + exec_ + thread + comm + exit_]:
        corpus.add("proc-events", m)


def sched_trace(corpus):
    """trace_pipe of rtctld's tracefs instance: sched_setscheduler/sched_setattr enter and exit lines as
    6.18 prints them (decimal arguments) and as older kernels do (hex), a failed call, a forged comm."""
    lines = [
        "         python3-21737   [000] ..... 25399.540319: sys_sched_setscheduler(pid: 0, policy: 1, "
        "param: 0x7ffd597068a4)\n",
        "         python3-21737   [000] .N... 25399.540329: sys_sched_setscheduler -> 0x0\n",
        " rtkit-daemon-800     [001] ..... 100.000002: sys_sched_setscheduler(pid: 0x00001389, policy: "
        "0x40000002, param: 0x7ffc)\n",
        " rtkit-daemon-800     [001] ..... 100.000004: sys_sched_setscheduler -> 0xffffffffffffffff\n",
        "  a- b [1] -77   [003] d..1.  100.000005: sys_sched_setattr(pid: 77, uattr: 0x1, flags: 0)\n",
        "  a- b [1] -77   [003] d..1.  100.000006: sys_sched_setattr -> 0x0\n",
    ]
    for i in range(0, len(lines), 2):
        corpus.add("sched-trace", lines[i] + lines[i + 1])
    corpus.add("sched-trace", "".join(lines))
    corpus.add("sched-trace", "7 (a) (b) S" + " 1" * 37 + " 1 0 0\n")
    corpus.add("sched-trace", "7f00-7f10 rw-s 00000000 00:01 5 /memfd:pipewire-memfd:flags=0x0000000f,type=2,"
               "size=16384 (deleted)\n"
               "7f00-7f10 rw-s 00000000 00:19 9 /dev/shm/jack-shm-registry\n")


def xrun_trace(corpus):
    """trace_pipe's lines as rtctl xruns reads them: every event it knows, as 6.18 prints them, a lost-events
    line, a forged comm, a switch the trace leaves out (lines logged in a task no switch brought)."""
    lines = [
        "          <idle>-0       [001] d..1.   99.999000: cpu_idle: state=3 cpu_id=1\n",
        "          <idle>-0       [001] dNh4.   100.000000: sched_wakeup: comm=jackd pid=601 prio=89 target_cpu=001\n",
        "          <idle>-0       [001] d..1.   100.000050: cpu_idle: state=4294967295 cpu_id=1\n",
        "           <...>-601     [001] d.h1.   100.000500: irq_handler_entry: irq=45 name=xhci_hcd\n",
        "           <...>-601     [001] d.h1.   100.000810: irq_handler_exit: irq=45 ret=handled\n",
        "           <...>-601     [001] ..s1.   100.000810: softirq_entry: vec=4 [action=BLOCK]\n",
        "           <...>-601     [001] ..s1.   100.000900: softirq_exit: vec=4 [action=BLOCK]\n",
        "           <...>-601     [001] d.h..   100.001000: hrtimer_expire_entry: hrtimer=00000000a7286c0a "
        "function=tick_nohz_handler now=100001000000\n",
        "           <...>-601     [001] d.h..   100.001005: hrtimer_expire_exit: hrtimer=00000000a7286c0a\n",
        "           jackd-601     [001] d..2.   100.002000: sched_switch: prev_comm=jackd prev_pid=601 prev_prio=89 "
        "prev_state=R ==> next_comm=kworker/1:1 next_pid=900 next_prio=120\n",
        "     kworker/1:1-900     [001] ...1.   100.002100: workqueue_execute_start: work struct 00000000a1b2c3d4: "
        "function vmstat_update\n",
        "     kworker/1:1-900     [001] ...1.   100.002400: workqueue_execute_end: work struct 00000000a1b2c3d4: "
        "function vmstat_update\n",
        "     kworker/1:1-900     [001] d..2.   100.002500: sched_switch: prev_comm=kworker/1:1 prev_pid=900 "
        "prev_prio=120 prev_state=I ==> next_comm=x [000] d 1.0: next_pid=7 next_prio=4\n",
        "           <...>-600     [000] d..2.   100.003000: cpu_frequency: state=2000000 cpu_id=1\n",
        "CPU:1 [LOST 17 EVENTS]\n",
    ]
    for i in range(0, len(lines), 3):
        corpus.add("xrun-trace", "".join(lines[i:i + 3]))
    corpus.add("xrun-trace", "".join(lines))


def journals(corpus, build):
    """What the unit tests leave in their scratch directories, and a journal of every shape rtctl writes."""
    fixtures = os.path.join(build, "tests/unit/fixtures")
    env = dict(os.environ, RTCTL_TEST_KEEP="1", RTCTL_FIXTURES=fixtures,
               RTCTL_BIN=os.path.join(build, "src/rtctl"))
    for test in sorted(glob.glob(os.path.join(build, "tests/unit/test-*"))):
        if not os.access(test, os.X_OK) or os.path.isdir(test):
            continue
        out = subprocess.run([test], env=env, capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("# scratch directory kept: "):
                kept = line.split(": ", 1)[1]
                for d, _, files in os.walk(kept):  # not through the fixtures' symlinks
                    for f in files:
                        if "journal" in f and os.path.isfile(os.path.join(d, f)):
                            corpus.add("journal", read(os.path.join(d, f)))
                shutil.rmtree(kept, ignore_errors=True)
    entries = [("cpulist", "cpuset", "/sys/fs/cgroup/system.slice/cpuset.cpus", "0-3"),
               ("irq-affinity", "irq", "/proc/irq/16/smp_affinity_list", "0-7"),
               ("sched", "irqthread", "/proc/301/sched", "fifo:50"),
               ("unit-cpus", "cpuset", "systemd:user.slice", ""),
               ("grubby-arg", "bootargs", "grubby:isolcpus", "absent")]
    body = ",\n".join('    {\n      "kind":"%s",\n      "tuner":"%s",\n      "object":"%s",\n      "original":"%s"\n    }'
                      % e for e in entries)
    whole = '{\n  "version":1,\n  "entries":[\n%s\n  ]\n}' % body
    corpus.add("journal", whole)
    corpus.add("journal", whole[: len(whole) * 2 // 3])  # cut off by a crash
    corpus.add("journal", '{\n  "version":1,\n  "damaged":"/run/rtctl/journal.json.damaged",\n  "lost":[\n'
               '    {\n      "object":"/proc/irq/9/smp_affinity_list",\n      "reason":"original lost"\n    }\n'
               '  ],\n  "entries":[\n  ]\n}')


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", required=True, help="a normal build directory (for rtctl and the unit tests)")
    ap.add_argument("--out", default=os.path.join(HERE, "corpus"))
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    if not os.access(os.path.join(build, "src/rtctl"), os.X_OK):
        sys.exit(f"{build}/src/rtctl: not built (ninja -C {args.build})")

    shutil.rmtree(args.out, ignore_errors=True)
    corpus = Corpus(args.out)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, os.path.join(ROOT, "tests/fixtures/gen-machine.py"), "--out", tmp] + SHAPES,
                       check=True, stdout=subprocess.DEVNULL)
        for shape in SHAPES:
            machine = os.path.join(tmp, shape)
            corpus.add("interrupts", head_lines(read(os.path.join(machine, "proc/interrupts")), 60))
            cpu_sets(corpus, machine)
            boot_args(corpus, build, machine)
            uevents(corpus, machine)
    profiles(corpus)
    proc_events(corpus)
    sched_trace(corpus)
    xrun_trace(corpus)
    journals(corpus, build)
    for name in sorted(corpus.counts):
        print(f"{name}: {len(os.listdir(os.path.join(args.out, name)))} seeds")


if __name__ == "__main__":
    main()
