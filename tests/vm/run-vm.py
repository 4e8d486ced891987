#!/usr/bin/python3
"""Boot the rtctl VM test image under qemu (TCG) and report its tests.

    tests/vm/run-vm.py [--image-dir DIR] [--timeout SEC] [--only GLOB,...]
                       [--console-log FILE] [--verbose] [--keep]

The image (rootfs.ext4, vmlinuz, initrd.img) comes from build-image.sh. The
root disk is opened with snapshot=on: the image is never written, every run
starts from the same state.

The guest prints `VMTEST <name> PASS|FAIL|SKIP <reason>` on the serial
console (ttyS0); this prints one line per test as it arrives and a final
`N passed, N failed, N skipped`. Exit 1 on any failure, on a timeout, when the
runner in the guest did not finish, or when no test ran.

A guest that stops giving results does not cost the tests after it. Each test
announces itself (`VMTEST-START <name> <timeout>`); when no result comes within
its timeout and a margin (HANG_MARGIN), or the guest kernel panics, or the whole
boot's --timeout runs out, the test in progress is reported FAIL with what was
seen (the first oops), and a new boot from the same clean image runs the rest of
the plan (up to MAX_BOOTS boots in all, each with its own console log). When
QEMU itself ended with no panic in the console (QEMU 7.2 under TCG does that now
and then on device hotplug), the emulator is at fault, not the test: the next
boot runs that test again, once. So too when a guest's reboot never brings the
runner back (RESET_GRACE after the kernel's "reboot: Restarting system"), and
when QEMU ends by itself before the runner started (the boot, once).

Hotplug from outside: the guest sends `VMHOST <seq> <command>` lines on the
`vmhost` virtio-serial port; this runs the command through QMP and answers
`VMHOSTACK <seq> OK|ERR <text>` on the same port. Commands:

    ping                      -> OK pong
    hotplug-disk NAME [MB] [intx]
                              blockdev-add (raw file, MB MiB, default 32) +
                              device_add virtio-blk-pci id=NAME serial=NAME; with
                              intx, vectors=0: no MSI-X, a legacy IRQ line that
                              can be moved (an MSI-X queue IRQ is kernel-managed)
    unplug-disk NAME          device_del NAME, wait DEVICE_DELETED, blockdev-del
                              (NAME may also be disk1/disk2, the boot-time disks)
    hotplug-cpu               device_add the first free slot of
                              query-hotpluggable-cpus (-smp 4,maxcpus=7); refused
                              after an unplug-cpu (QEMU 7.2 TCG aborts, see there)
    unplug-cpu ID             device_del ID (an id hotplug-cpu answered); done when the
                              guest's ACPI eject went through (see unplug_cpu)
    qmp JSON                  any QMP command {"execute":...}; OK <return JSON>

Only stdlib; qemu is always killed at the end (and dies with this process:
PR_SET_PDEATHSIG).
"""

import argparse
import ctypes
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.environ.get("RTCTL_VM_CACHE", "/var/tmp/rtctl-vm")
DEFAULT_IMAGE_DIR = os.environ.get("RTCTL_VM_OUT", os.path.join(CACHE, "out"))

RE_TEST = re.compile(r"VMTEST (\S+) (PASS|FAIL|SKIP)(?: (.*))?$")
RE_PLAN = re.compile(r"VMTEST-PLAN ?(.*)$")
RE_START = re.compile(r"VMTEST-START (\S+) (\d+)")
RE_END = re.compile(r"VMTEST-END (\d+)")
RE_INFO = re.compile(r"VMINFO (.*)$")
RE_LOG = re.compile(r"VMLOG (\S+) ?(.*)$")
RE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,24}$")
# How long past a test's own timeout the guest may take to say so (its SIGALRM, the FAIL line through a
# loaded TCG guest) before it counts as hung; and how many boots one run may take.
HANG_MARGIN = int(os.environ.get("RTCTL_VM_HANG_MARGIN", 90))
# How long a guest's own reboot (the kernel's "reboot: Restarting system") may take to bring the runner
# back up: a whole boot under TCG, with room (a first boot reaches the runner in 40-90 s here).
RESET_GRACE = int(os.environ.get("RTCTL_VM_RESET_GRACE", 240))
MAX_BOOTS = 5
# Run again at the start of a boot that continues a plan, where an earlier boot passed them: what the
# tests after them need (rtctld running, the snapshot from before it started).
SETUP_TESTS = ("rtctld-start",)
# 6.1 prints "int3: 0000 [#1] ...", 6.12 "Oops: int3: 0000 [#1] ...".
RE_TCG_FAULT = re.compile(r"\] (?:watchdog: )?BUG: soft lockup|\] (?:Oops: )?int3: ")
RE_OOPS = re.compile(r"\] (Oops:|(?:watchdog: )?BUG:|kernel BUG at|general protection fault|int3: |invalid opcode: |"
                     r"Kernel panic)")


def log(msg):
    sys.stdout.write("[run-vm %s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stdout.flush()


def pdeathsig():
    """In the qemu child: die with SIGKILL when run-vm.py dies, however it dies."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass
    os.setpgrp()


class QMP:
    def __init__(self, sock, pump):
        self.sock = sock
        self.buf = b""
        self.events = []
        self.pump = pump  # called while waiting: keeps the console drained
        greeting = self._read_msg(30)
        if "QMP" not in greeting:
            raise RuntimeError("no QMP greeting: %r" % greeting)
        self.execute("qmp_capabilities")

    def _read_msg(self, timeout):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("QMP: no answer in %d s" % timeout)
            r, _, _ = select.select([self.sock], [], [], min(left, 0.2))
            if r:
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise ConnectionError("QMP socket closed")
                self.buf += chunk
            self.pump()
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def execute(self, cmd, timeout=30, **args):
        msg = {"execute": cmd}
        if args:
            msg["arguments"] = args
        return self.raw(msg, timeout)

    def raw(self, msg, timeout=30):
        self.sock.sendall(json.dumps(msg).encode() + b"\n")
        deadline = time.monotonic() + timeout
        while True:
            m = self._read_msg(max(0.1, deadline - time.monotonic()))
            if "event" in m:
                self.events.append(m)
                continue
            if "error" in m:
                raise QMPError("%s: %s" % (m["error"].get("class"), m["error"].get("desc")))
            return m.get("return")

    def wait_event(self, name, pred, timeout):
        deadline = time.monotonic() + timeout
        while True:
            for i, e in enumerate(self.events):
                if e.get("event") == name and pred(e.get("data", {})):
                    del self.events[i]
                    return e
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no %s event in %d s" % (name, timeout))
            try:
                m = self._read_msg(left)
            except TimeoutError:
                continue
            if "event" in m:
                self.events.append(m)


class QMPError(Exception):
    pass


def remove_stale_tmpdirs():
    """Temp dirs of runs that were SIGKILLed (their owner pid is gone)."""
    for d in os.listdir("/tmp"):
        if not d.startswith("rtctl-vm-"):
            continue
        path = os.path.join("/tmp", d)
        try:
            with open(os.path.join(path, "owner.pid")) as f:
                pid = int(f.read())
            os.kill(pid, 0)
            continue  # still running
        except ProcessLookupError:
            pass
        except (OSError, ValueError):
            continue  # not ours, or mid-creation: leave it
        shutil.rmtree(path, ignore_errors=True)


class VM:
    def __init__(self, args, only=None, console_log=None):
        self.args = args
        self.only = only if only is not None else args.only
        remove_stale_tmpdirs()
        self.tmp = tempfile.mkdtemp(prefix="rtctl-vm-", dir="/tmp")  # short: unix socket paths
        with open(os.path.join(self.tmp, "owner.pid"), "w") as f:
            f.write(str(os.getpid()))
        self.proc = None
        self.qmp = None
        self.con = None
        self.vmhost = None
        self.con_buf = b""
        self.host_buf = b""
        self.console_log = console_log or args.console_log
        self.con_log = open(self.console_log, "wb")
        self.results = {}  # name -> (status, reason)
        self.order = []
        self.plan = None
        self.logs = {}
        self.ended = None
        self.current = None  # (name, host deadline) of the test running now
        self.restart_at = None  # when the guest kernel said it restarts, until the runner is back
        self.reset_diag = None  # what QEMU showed of a reset that never came back
        self.hang_diag = None  # where a hung guest's CPUs were
        self.stext = None  # the guest kernel's _stext this boot (KASLR), from the runner's VMINFO
        self.t_start = None
        self.t_runner = None
        self.hotplugged_cpus = []
        self.cpu_seq = 0  # ids are never reused: hcpu0, hcpu1, ...
        self.cpu_unplugged = False  # refuse hotplug-cpu after unplug-cpu (see there)
        self.disks = {}

    # --- qemu --------------------------------------------------------------
    def disk_file(self, name, mb):
        path = os.path.join(self.tmp, name + ".raw")
        with open(path, "wb") as f:
            f.truncate(mb * 1024 * 1024)
        return path

    def command(self):
        a = self.args
        img = a.image_dir
        for f in ("rootfs.ext4", "vmlinuz", "initrd.img"):
            if not os.path.exists(os.path.join(img, f)):
                raise SystemExit("run-vm.py: %s missing: build the image first (tests/vm/build-image.sh)" % os.path.join(img, f))
        append = ["root=/dev/vda", "rw", "console=ttyS0"] + ([] if a.no_threadirqs else ["threadirqs"]) + \
            ["panic=-1", "rootwait", "systemd.show_status=error",
             # A CPU stuck in the kernel ends the boot at once, its stack printed (the panic makes the
             # console verbose), instead of a silent hang that costs the test's timeout and more.
             "softlockup_panic=1"]
        append += [] if a.verbose else ["quiet", "loglevel=3"]
        if self.only:
            append.append("rtctl_vmtest.only=" + self.only)
        if a.skip:
            append.append("rtctl_vmtest.skip=" + a.skip)
        append += a.append
        t = self.tmp
        accel = a.accel
        if accel == "tcg":
            # QEMU 7.2 aborts a CPU hot-add when every region of the TCG translation buffer is taken
            # (tcg_region_initial_alloc__locked: assertion failed); the default 1 GiB buffer was 92-96%
            # full, never flushed, when the tier's CPU hotplug tests ran. 3 GiB keeps a whole run in it:
            # virtual memory, only what is translated is touched.
            accel = "tcg,tb-size=3072"
        cmd = [a.qemu, "-accel", accel, "-machine", "pc", "-cpu", a.cpu,
               "-smp", "4,maxcpus=7", "-m", "1536",
               "-nodefaults", "-no-user-config", "-display", "none", "-vga", "none", "-nic", "none",
               "-no-reboot",
               "-kernel", os.path.join(img, "vmlinuz"), "-initrd", os.path.join(img, "initrd.img"),
               "-append", " ".join(append),
               # root disk: never written (snapshot=on), every run starts clean
               "-drive", "file=%s,if=none,id=root,format=raw,snapshot=on,cache=unsafe" % os.path.join(img, "rootfs.ext4"),
               "-device", "virtio-blk-pci,drive=root,serial=root"]
        for i, name in enumerate(("disk1", "disk2")):  # vdb, vdc
            path = self.disk_file(name, 64)
            cmd += ["-blockdev", "driver=raw,node-name=hp-%s,file.driver=file,file.filename=%s" % (name, path),
                    "-device", "virtio-blk-pci,drive=hp-%s,id=%s,serial=%s" % (name, name, name)]
            self.disks[name] = path
        cmd += ["-audiodev", "none,id=snd0", "-device", "ich9-intel-hda", "-device", "hda-duplex,audiodev=snd0",
                "-device", "virtio-rng-pci",
                # vmhost channel and QMP first: the console chardev below waits
                # (wait=on) for us to connect, nothing of the boot is lost
                "-chardev", "socket,id=vmhost,path=%s/vmhost.sock,server=on,wait=off" % t,
                "-device", "virtio-serial-pci,id=vser0",
                "-device", "virtserialport,bus=vser0.0,chardev=vmhost,name=vmhost",
                "-chardev", "socket,id=qmp,path=%s/qmp.sock,server=on,wait=off" % t,
                "-mon", "chardev=qmp,mode=control",
                "-chardev", "socket,id=con0,path=%s/console.sock,server=on,wait=on" % t,
                "-serial", "chardev:con0"]
        return cmd

    def connect(self, name, timeout=20):
        path = os.path.join(self.tmp, name)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("qemu exited (%d) before %s was up: %s" % (
                    self.proc.returncode, name, self.stderr_tail()))
            if os.path.exists(path):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    s.connect(path)
                    return s
                except OSError:
                    s.close()
            if time.monotonic() > deadline:
                raise RuntimeError("qemu did not create %s in %d s" % (path, timeout))
            time.sleep(0.05)

    def stderr_tail(self):
        try:
            with open(os.path.join(self.tmp, "qemu.stderr"), "rb") as f:
                return f.read()[-600:].decode("utf-8", "replace").strip()
        except OSError:
            return ""

    def start(self):
        cmd = self.command()
        if self.args.verbose:
            log("qemu: " + " ".join(cmd))
        self.t_start = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=open(os.path.join(self.tmp, "qemu.stderr"), "wb"),
                                     preexec_fn=pdeathsig)
        self.vmhost = self.connect("vmhost.sock")
        self.con = self.connect("console.sock")
        self.con.setblocking(False)
        self.vmhost.setblocking(False)
        self.qmp = QMP(self.connect("qmp.sock"), self.pump_console)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            try:
                if self.qmp:
                    self.qmp.execute("quit", timeout=5)
            except Exception:
                pass
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        for s in (self.con, self.vmhost):
            if s:
                s.close()
        self.con_log.close()
        if not self.args.keep:
            shutil.rmtree(self.tmp, ignore_errors=True)
        else:
            log("kept %s" % self.tmp)

    # --- console -----------------------------------------------------------
    def pump_console(self):
        while True:
            try:
                chunk = self.con.recv(65536)
            except BlockingIOError:
                return
            except OSError:
                return
            if not chunk:
                return
            self.con_log.write(chunk)
            self.con_log.flush()
            self.con_buf += chunk
            while b"\n" in self.con_buf:
                line, self.con_buf = self.con_buf.split(b"\n", 1)
                self.console_line(line.decode("utf-8", "replace").replace("\r", "").rstrip())

    def console_line(self, line):
        if self.args.verbose:
            sys.stdout.write("  | " + line + "\n")
        m = RE_TEST.search(line)
        if m:
            name, status, reason = m.group(1), m.group(2), (m.group(3) or "").strip()
            if name in self.results:
                log("warning: %s reported twice; the last result counts" % name)
            else:
                self.order.append(name)
            self.results[name] = (status, reason)
            if self.current and self.current[0] == name:
                self.current = None
            print("%-4s %s%s" % (status, name, (" - " + reason) if reason else ""))
            if status == "FAIL" and not self.args.verbose:
                for l in self.logs.get(name, [])[-20:]:
                    print("       | " + l)
            sys.stdout.flush()
            return
        m = RE_LOG.search(line)
        if m:
            self.logs.setdefault(m.group(1), []).append(m.group(2))
            # a test's journal is printed after its FAIL line: show it then
            if m.group(1) in self.results and self.results[m.group(1)][0] == "FAIL" and not self.args.verbose:
                print("       | " + m.group(2))
            return
        m = RE_START.search(line)
        if m:
            self.current = (m.group(1), time.monotonic() + int(m.group(2)) + HANG_MARGIN)
            return
        m = RE_PLAN.search(line)
        if m:
            self.plan = m.group(1).split()
            log("guest runner: %d tests planned" % len(self.plan))
            return
        m = RE_END.search(line)
        if m:
            self.ended = int(m.group(1))
            return
        m = RE_INFO.search(line)
        if m:
            if "runner-start" in line:
                st = re.search(r"stext=([0-9a-f]+)", line)
                self.stext = int(st.group(1), 16) if st else None
                if self.restart_at is not None:
                    log("guest back from its reboot in %.1f s" % (time.monotonic() - self.restart_at))
                    self.restart_at = None
            if "runner-start" in line and self.t_runner is None:
                self.t_runner = time.monotonic() - self.t_start
                log("boot to test unit: %.1f s wall (%s)" % (self.t_runner, m.group(1)))
            else:
                log("guest: " + m.group(1))
            return
        if "Kernel panic" in line or "end Kernel panic" in line:
            log("guest: " + line.strip())
        if "reboot: Restarting system" in line:
            self.restart_at = time.monotonic()

    def diagnose_cpus(self, samples=3):
        """Where a hung guest's CPUs are: each one's RIP, sampled a few times, as an offset from the _stext
        the runner announced; user mode, halted and SMM said as such."""
        try:
            seen = {}
            for _ in range(samples):
                # Stopped while read: a running vCPU's RIP may be from its last exit from translated code.
                self.qmp.execute("stop", timeout=10)
                try:
                    regs = self.qmp.execute("human-monitor-command", timeout=10,
                                            **{"command-line": "info registers -a"})
                finally:
                    self.qmp.execute("cont", timeout=10)
                for cpu, block in re.findall(r"CPU#(\d+)\s*\n(.*?)(?=\nCPU#|\Z)", regs or "", re.S):
                    rip = re.search(r"RIP=([0-9a-f]+)", block)
                    if not rip:
                        continue
                    cpl = re.search(r"CPL=(\d)", block)
                    where = "user" if cpl and cpl.group(1) == "3" else name_address(self.stext, int(rip.group(1), 16))
                    where += "".join(" (%s)" % w for f, w in (("HLT", "halted"), ("SMM", "in SMM"))
                                     if re.search(r"\b%s=1" % f, block))
                    seen.setdefault(int(cpu), []).append(where)
                time.sleep(1)
            return "; ".join("cpu%d: %s" % (c, w[0] + " each time" if len(set(w)) == 1 and len(w) > 1 else " / ".join(w))
                             for c, w in sorted(seen.items())) or "no registers"
        except Exception as e:
            return "QMP: %s: %s" % (type(e).__name__, e)

    def diagnose_reset(self):
        """What QEMU shows of a guest whose reboot never came back: did QEMU reset it (its RESET
        event), is it running, and where are its CPUs (the same RIP twice: stuck)."""
        seen = []
        try:
            status = self.qmp.execute("query-status", timeout=10)
            seen.append("status %s" % (status or {}).get("status", "?"))
            resets = [e for e in self.qmp.events if e.get("event") == "RESET"]
            seen.append("QEMU's RESET event %s" % ("seen" if resets else "never came"))
            rips = []
            for _ in range(2):
                regs = self.qmp.execute("human-monitor-command", timeout=10, **{"command-line": "info registers -a"})
                rips.append(",".join(re.findall(r"RIP=([0-9a-f]+)", regs or "")) or "?")
                time.sleep(2)
            seen.append("RIP %s then %s" % (rips[0], rips[1]))
        except Exception as e:
            seen.append("QMP: %s: %s" % (type(e).__name__, e))
        return "; ".join(seen)

    # --- vmhost channel ----------------------------------------------------
    def pump_vmhost(self):
        while True:
            try:
                chunk = self.vmhost.recv(65536)
            except (BlockingIOError, OSError):
                return
            if not chunk:
                return
            self.host_buf += chunk
            while b"\n" in self.host_buf:
                line, self.host_buf = self.host_buf.split(b"\n", 1)
                self.host_request(line.decode("utf-8", "replace").strip())

    def reply(self, seq, ok, text):
        msg = "VMHOSTACK %s %s %s\n" % (seq, "OK" if ok else "ERR", text.replace("\n", " "))
        self.vmhost.setblocking(True)
        try:
            self.vmhost.sendall(msg.encode())
        finally:
            self.vmhost.setblocking(False)

    def host_request(self, line):
        m = re.match(r"VMHOST (\d+) (\S+) ?(.*)$", line)
        if not m:
            if line:
                log("vmhost: ignoring %r" % line)
            return
        seq, cmd, rest = m.group(1), m.group(2), m.group(3).strip()
        t0 = time.monotonic()
        try:
            text = self.host_command(cmd, rest)
            ok = True
        except Exception as e:  # every failure goes back to the guest as ERR
            ok, text = False, "%s: %s" % (type(e).__name__, e)
        if self.args.verbose or not ok:
            log("vmhost %s %s -> %s %s (%.2f s)" % (cmd, rest, "OK" if ok else "ERR", text, time.monotonic() - t0))
        self.reply(seq, ok, text)

    def host_command(self, cmd, rest):
        args = rest.split()
        q = self.qmp
        if cmd == "ping":
            return "pong"
        if cmd == "hotplug-disk":
            intx = args[-1:] == ["intx"]
            if intx:
                args = args[:-1]
            if not args or not RE_NAME.match(args[0]) or len(args) > 2:
                raise ValueError("usage: hotplug-disk NAME [MB] [intx]")
            name = args[0]
            mb = int(args[1]) if len(args) > 1 else 32
            extra = {"vectors": 0} if intx else {}
            if name in self.disks:
                raise ValueError("disk %s already exists" % name)
            path = self.disk_file(name, mb)
            q.execute("blockdev-add", driver="raw", **{"node-name": "hp-" + name,
                                                       "file": {"driver": "file", "filename": path}})
            try:
                q.execute("device_add", driver="virtio-blk-pci", id=name, drive="hp-" + name, serial=name,
                          **extra)
            except Exception:
                q.execute("blockdev-del", **{"node-name": "hp-" + name})
                raise
            self.disks[name] = path
            return "serial=%s size=%dMiB%s" % (name, mb, " intx" if intx else "")
        if cmd == "unplug-disk":
            if not args or args[0] not in self.disks:
                raise ValueError("no such disk %r (have %s)" % (rest, ", ".join(sorted(self.disks))))
            name = args[0]
            q.execute("device_del", id=name)
            q.wait_event("DEVICE_DELETED", lambda d: d.get("device") == name, 60)
            q.execute("blockdev-del", **{"node-name": "hp-" + name})
            os.unlink(self.disks.pop(name))
            return "removed %s" % name
        if cmd == "hotplug-cpu":
            if self.cpu_unplugged:
                raise RuntimeError("no CPU hot-add after a CPU unplug: QEMU 7.2 under TCG aborts in "
                                   "tcg_cpu_realizefn (double free), run the unplug last")
            cpus = q.execute("query-hotpluggable-cpus")
            free = [c for c in cpus if not c.get("qom-path")]
            if not free:
                raise RuntimeError("no free CPU slot (maxcpus reached)")
            key = lambda c: tuple(c["props"].get(k, 0) for k in ("socket-id", "die-id", "core-id", "thread-id"))
            c = sorted(free, key=key)[0]
            cid = "hcpu%d" % self.cpu_seq
            self.cpu_seq += 1
            q.execute("device_add", driver=c["type"], id=cid, **c["props"])
            self.hotplugged_cpus.append(cid)
            return "id=%s %s" % (cid, " ".join("%s=%s" % kv for kv in sorted(c["props"].items())))
        if cmd == "unplug-cpu":
            if not args or args[0] not in self.hotplugged_cpus:
                raise ValueError("no hot-plugged cpu %r (have %s)" % (rest, self.hotplugged_cpus))
            self.cpu_unplugged = True
            text = self.unplug_cpu(args[0])
            self.hotplugged_cpus.remove(args[0])
            return text
        if cmd == "qmp":
            return json.dumps(q.raw(json.loads(rest), timeout=60))
        raise ValueError("unknown command %r" % cmd)

    def unplug_cpu(self, cid, timeout=120):
        """device_del of a hot-added CPU; returns once QEMU has removed it.

        QEMU asks the guest through ACPI (Notify "eject request"); the guest kernel offlines the
        CPU by itself and calls _EJ0, and QEMU then unplugs the CPU: it leaves /machine/peripheral
        and its slot of query-hotpluggable-cpus is free again. DEVICE_DELETED is sent when a
        device is finalized, and QEMU 7.2 under TCG never finalizes an unplugged x86 CPU: only
        DEVICE_DELETED for its lapic child (no "device" key, path .../ID/lapic) arrives. So the
        CPU's id gone from /machine/peripheral is what counts (DEVICE_DELETED of the id, should a
        QEMU send it, too). The guest's _OST answers (ACPI_DEVICE_OST) go into the reply."""
        q = self.qmp
        t0 = time.monotonic()
        q.execute("device_del", id=cid)
        ost = []
        slot = None

        def take_ost():
            nonlocal slot
            keep = []
            for e in q.events:
                info = e.get("data", {}).get("info", {}) if e.get("event") == "ACPI_DEVICE_OST" else {}
                if info.get("device") == cid or (slot is not None and info.get("slot") == slot):
                    slot = info.get("slot")
                    if info.get("source") == 3:  # the eject's answers: 0x84 in progress, 0 done, 0x8x refused
                        ost.append("%#x" % info.get("status", 0))
                else:
                    keep.append(e)
            q.events[:] = keep

        while True:
            try:
                q.wait_event("DEVICE_DELETED", lambda d: d.get("device") == cid, 0.2)
                break
            except TimeoutError:
                pass
            if cid not in {p["name"] for p in q.execute("qom-list", path="/machine/peripheral")}:
                break
            take_ost()
            if time.monotonic() - t0 > timeout:
                raise TimeoutError("%s not removed %d s after device_del (the guest did not eject it); "
                                   "eject _OST: %s" % (cid, timeout, " ".join(ost) or "none"))
        take_ost()
        return "%s gone %.2f s after device_del, eject _OST %s" % (cid, time.monotonic() - t0, " ".join(ost) or "none yet")

    # --- main loop ---------------------------------------------------------
    def run(self):
        deadline = self.t_start + self.args.timeout
        end_deadline = None
        while True:
            now = time.monotonic()
            if now > deadline:
                return "timeout"
            if self.current and now > self.current[1]:
                self.hang_diag = self.diagnose_cpus()
                log("%s hung; its CPUs: %s" % (self.current[0], self.hang_diag))
                return "hung"
            if self.restart_at is not None and now > self.restart_at + RESET_GRACE:
                self.reset_diag = self.diagnose_reset()
                log("the guest said it restarts, and no runner came back in %d s: %s" % (RESET_GRACE, self.reset_diag))
                return "reset-hung"
            if self.proc.poll() is not None:
                self.pump_console()
                return "exited"
            if self.ended is not None:
                if end_deadline is None:
                    end_deadline = now + 30  # time to power off by itself
                elif now > end_deadline:
                    return "ended"
            r, _, _ = select.select([self.con, self.vmhost], [], [], 0.5)
            if self.con in r:
                self.pump_console()
            if self.vmhost in r:
                self.pump_vmhost()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--image-dir", default=DEFAULT_IMAGE_DIR, help="rootfs.ext4, vmlinuz, initrd.img (default %(default)s)")
    ap.add_argument("--timeout", type=float, default=float(os.environ.get("RTCTL_VM_TIMEOUT", 900)),
                    help="hard limit for the whole run, seconds (default %(default)s)")
    ap.add_argument("--only", help="comma-separated globs of guest test names (harness-boot always runs)")
    ap.add_argument("--skip", help="comma-separated globs of guest test names this run leaves out")
    ap.add_argument("--console-log", help="where the serial console goes (default IMAGE_DIR/console.log)")
    ap.add_argument("--accel", default=os.environ.get("RTCTL_VM_ACCEL", "tcg"))
    ap.add_argument("--cpu", default=os.environ.get("RTCTL_VM_CPU", "qemu64"))
    ap.add_argument("--qemu", default="qemu-system-x86_64")
    ap.add_argument("--append", action="append", default=[], help="extra kernel command line word")
    ap.add_argument("--no-threadirqs", action="store_true",
                    help="boot without threadirqs (the PREEMPT_RT run: that kernel threads every IRQ itself)")
    ap.add_argument("--verbose", "-v", action="store_true", help="echo the console; kernel not quiet")
    ap.add_argument("--keep", action="store_true", help="keep the temporary dir (disks, sockets)")
    args = ap.parse_args()
    args.console_log = args.console_log or os.path.join(args.image_dir, "console.log")
    if not shutil.which(args.qemu):
        raise SystemExit("run-vm.py: %s not found (apt-get install qemu-system-x86, or run tests/vm/build-image.sh)" % args.qemu)
    version = qemu_version(args.qemu)
    # Before 8.1, multi-threaded TCG runs stale translations of code the guest kernel patches (run.sh
    # fetches a newer QEMU; tests/vm/README.md): only there is a hang or a patching oops retried.
    stale_tcg = args.accel.startswith("tcg") and version < (8, 1)
    log("QEMU %d.%d, accel %s: %s" % (version + (args.accel, (
        "before 8.1, a guest that hangs or oopses in TCG's live code patching runs its test once more"
        if stale_tcg else "no retry of a hung guest"),)))

    def on_signal(signum, frame):
        raise KeyboardInterrupt("signal %d" % signum)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    results, order, plan = {}, [], None
    problems, hows, elapsed, only, retried, tcg_retried = [], [], 0.0, None, set(), []
    t_runner = None
    for boot in range(1, MAX_BOOTS + 1):
        console_log = args.console_log if boot == 1 else "%s.boot%d" % (args.console_log, boot)
        vm, how, boot_problems = boot_once(args, only, console_log)
        hows.append(how)
        elapsed += vm.elapsed
        t_runner = t_runner or vm.t_runner
        plan = plan or vm.plan
        for name in vm.order:
            if name not in results:
                order.append(name)
            results[name] = vm.results[name]
        finished = vm.ended is not None and not boot_problems
        panicked = console_oops(console_log) is not None
        if not finished and not plan and how == "exited" and not panicked and "(boot)" not in retried:
            # QEMU ended by itself before the runner started, with no oops (seen once on Debian 13: exit 0
            # 7.4 s in, a reset in early boot with -no-reboot): the emulator, not a test. Boot once more.
            log("qemu ended (exit %s) %.1f s in, before the guest runner started, no oops in the console: "
                "booting again" % (vm.proc.returncode if vm.proc else "?", vm.elapsed))
            show_console(console_log)
            retried.add("(boot)")
            continue
        if finished or how in ("interrupted", "error") or not plan:
            problems += boot_problems
            if not finished and not plan:
                show_console(console_log)
            break
        # The boot stopped short: name the test it stopped in, then boot again for the rest.
        stuck = vm.current[0] if vm.current else None
        patch_fault = tcg_patch_fault(console_log) if panicked else None
        if stuck and how == "exited" and not panicked and stuck not in retried:
            # QEMU went away by itself: the emulator, not the test. It runs again in the next boot.
            log("qemu went away (exit %s) during %s, no oops in the console: the next boot runs it again"
                % (vm.proc.returncode if vm.proc else "?", stuck))
            retried.add(stuck)
        elif stuck and stuck not in retried and boot < MAX_BOOTS and stale_tcg and (
                (how == "hung" and not panicked) or (how == "exited" and patch_fault)):
            # What TCG makes of the kernel patching its own text while other vCPUs run it (a CPU running
            # a breakpoint already taken back, or stuck at a patched site; tests/vm/README.md): the
            # emulator, not the test, as the host tier's real CPUs show. Once more, in a fresh boot.
            what = patch_fault if how == "exited" else "hung (its CPUs: %s)" % vm.hang_diag
            log("%s: the guest %s, as TCG's live code patching leaves one: the next boot runs it again" % (
                stuck, what))
            print("RETRIED %s - the guest %s (console: %s)" % (stuck, what, console_log))
            tcg_retried.append(stuck)
            show_console(console_log)
            retried.add(stuck)
        elif stuck and how == "reset-hung" and not panicked and stuck not in retried:
            # The guest's kernel reached its last word ("Restarting system") and nothing booted after it
            # (seen once on Debian 12 in boot-audio under TCG): the reset, not the test. Once more, fresh.
            log("%s: the guest's reboot never came back (%s): the next boot runs it again" % (stuck, vm.reset_diag))
            show_console(console_log)
            retried.add(stuck)
        elif stuck:
            why = {"hung": "no result within its timeout and %d s more: the guest hung (its CPUs: %s)" % (
                       HANG_MARGIN, vm.hang_diag),
                   "reset-hung": "the guest's reboot did not come back in %d s (%s)" % (RESET_GRACE, vm.reset_diag),
                   "timeout": "the boot's %d s ran out during it" % args.timeout,
                   "exited": "the guest %s during it" % ("kernel panicked" if panicked else "went away")}.get(how, how)
            results[stuck] = ("FAIL", "%s (console: %s)" % (why, console_log))
            if stuck not in order:
                order.append(stuck)
            print("FAIL %s - %s" % (stuck, results[stuck][1]))
            show_console(console_log)
        else:
            # Between two tests (or before the first): nothing to name but the boot itself.
            problems += boot_problems or ["the guest runner did not finish (qemu %s)" % how]
            show_console(console_log)
        left = [n for n in plan if n not in results and n != "harness-boot"]
        if not left:
            break
        if boot == MAX_BOOTS:
            problems.append("%d boots, and still %d tests without a result" % (boot, len(left)))
            break
        # What the tests after it stand on runs again first: rtctld started, and the snapshot from before
        # it that stop-restores compares with (it runs in plan order, before them).
        setup = [n for n in SETUP_TESTS if n in plan and n not in left and results.get(n, ("",))[0] == "PASS"]
        only = ",".join(setup + left)
        log("boot %d for the %d tests left%s: %s" % (
            boot + 1, len(left), " and %s again" % ", ".join(setup) if setup else "", ",".join(left)))
    if plan:
        for name in plan:
            if name not in results:
                results[name] = ("FAIL", "no result (runner died or timed out during the run)")
                order.append(name)
                print("FAIL %s - no result" % name)
    for p in problems:
        print("FAIL harness - %s" % p)
    passed = sum(1 for s, _ in results.values() if s == "PASS")
    failed = sum(1 for s, _ in results.values() if s == "FAIL") + (1 if problems else 0)
    skipped = sum(1 for s, _ in results.values() if s == "SKIP")
    boot = " boot to test unit %.1f s," % t_runner if t_runner else ""
    log("VM run took %.1f s in %d boot(s),%s qemu ended: %s" % (elapsed, len(hows), boot, ", ".join(hows)))
    if tcg_retried:
        # Their results above are the second boot's: a fault that comes back only now and then can pass
        # this way, so they are said once more here, where the totals are read.
        print("RETRIED after a TCG fault of the guest, the result above from the boot after it: %s" % ", ".join(
            "%s (%s)" % (n, results.get(n, ("?",))[0]) for n in tcg_retried))
    print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
    if passed + failed == 0:
        print("run-vm.py: no test ran")
        return 1
    return 1 if failed else 0


def boot_once(args, only, console_log):
    """One boot of the image running the tests only names (None: the run's own selection)."""
    vm = VM(args, only=only, console_log=console_log)
    vm.elapsed = 0.0
    how = "error"
    problems = []
    try:
        log("booting %s (accel %s, timeout %d s, console %s)" % (args.image_dir, args.accel, args.timeout, console_log))
        vm.start()
        how = vm.run()
    except KeyboardInterrupt as e:
        how = "interrupted"
        problems.append("interrupted (%s)" % (e or "SIGINT"))
    except OSError as e:
        # QEMU dying under a QMP or vmhost request shows here first, as a reset or broken socket: that is
        # QEMU exiting (the caller decides), not a harness fault. Anything else is one. The socket can
        # break a moment before the process is gone (an abort() writing its core): wait for that.
        try:
            if vm.proc:
                vm.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass
        if vm.proc and vm.proc.poll() is not None:
            how = "exited"
            log("qemu went away (exit %s) under the harness (%s: %s): %s" % (
                vm.proc.returncode, type(e).__name__, e, vm.stderr_tail()))
        else:
            problems.append("harness error: %s: %s" % (type(e).__name__, e))
    except Exception as e:
        problems.append("harness error: %s: %s" % (type(e).__name__, e))
    finally:
        vm.elapsed = time.monotonic() - vm.t_start if vm.t_start else 0
        vm.stop()
    if how == "timeout":
        problems.append("timeout: the VM did not finish in %d s" % args.timeout)
    if how == "hung":
        problems.append("hung: no result from %s" % (vm.current[0] if vm.current else "?"))
    if how == "reset-hung":
        problems.append("reset: the guest's reboot during %s never came back" % (vm.current[0] if vm.current else "?"))
    if vm.ended is None and how != "error" and not problems:
        problems.append("the guest runner did not finish (qemu %s%s)" % (
            how, ", exit %s" % vm.proc.returncode if vm.proc and vm.proc.returncode is not None else ""))
    log("boot took %.1f s, qemu ended: %s" % (vm.elapsed, how))
    return vm, how, problems


def qemu_version(qemu):
    """(major, minor) of a qemu-system binary, from its --version line; (0, 0) when it gives none."""
    try:
        out = subprocess.run([qemu, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return (0, 0)
    m = re.match(r"QEMU emulator version (\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def name_address(stext, addr):
    """A kernel address as _stext+offset, which this kernel's /proc/kallsyms in any boot resolves (KASLR
    moves _stext, not the distances from it; Debian ships no System.map to do it here)."""
    if not stext or not stext <= addr < min(stext + (1 << 30), 0xffffffffc0000000):  # not modules, BPF
        return "%x" % addr
    return "_stext+0x%x" % (addr - stext)


def tcg_patch_fault(path):
    """The console's first oops where it is one of the two that TCG's live code patching was seen to
    leave (a soft lockup, softlockup_panic making it a panic; an int3 no patch explains), else None."""
    first = console_oops(path)
    if first is None:
        return None
    with open(path, "rb") as f:
        line = f.read().decode("utf-8", "replace").replace("\r", "").splitlines()[first]
    m = RE_TCG_FAULT.search(line)
    return line.split("] ", 1)[-1].strip() if m else None


def console_oops(path):
    """The console's lines and the index of the guest kernel's first oops in them (None: none)."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", "replace").replace("\r", "").splitlines()
    except OSError:
        return None
    return next((i for i, l in enumerate(text) if RE_OOPS.search(l)), None)


def show_console(path):
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", "replace").replace("\r", "").splitlines()
    except OSError:
        return
    tail = text[-25:]
    # The guest kernel's first oops says what went wrong; the tail shows only the last one (the panic).
    first = console_oops(path)
    if first is not None and first < len(text) - 25:
        print("--- the guest kernel's first oops (%s, line %d) ---" % (path, first + 1))
        for l in text[max(0, first - 2):first + 40]:
            print("  | " + l)
    print("--- last console lines (%s) ---" % path)
    for l in tail:
        print("  | " + l)


if __name__ == "__main__":
    sys.exit(main())
