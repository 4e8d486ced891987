#!/usr/bin/python3
"""In-VM test runner of rtctl's VM tier (tests/vm/README.md).

Started by rtctl-vmtest.service once the system is up. Prints on the serial
console (/dev/ttyS0), one line each:

    VMINFO <text>                      facts about the run (kernel, boot time)
    VMTEST-PLAN <name> <name> ...      the tests about to run, in order
    VMTEST-START <name> <timeout>      a test starts; its result is due within timeout seconds
    VMTEST <name> PASS|FAIL|SKIP <reason>
    VMLOG <name> <text>                diagnostics of a failed test
    VMTEST-END <n>                     the runner finished n tests

and drives the host through the vmhost virtio-serial port:

    guest -> host   VMHOST <seq> <command> [args]
    host -> guest   VMHOSTACK <seq> OK|ERR <text>

Commands: ping, hotplug-disk NAME [MB] [intx], unplug-disk NAME, hotplug-cpu,
unplug-cpu ID, qmp JSON. Every VMHOST request is echoed on the console.

Kernel command line: rtctl_vmtest.only=GLOB[,GLOB...] runs only matching tests,
rtctl_vmtest.skip=GLOB[,GLOB...] leaves matching ones out
(harness-boot always runs); rtctl_vmtest.debug dumps the boot's journal
as VMLOG lines first.

Run as `rtctl-vmtest.py --call-as-user-helper METHOD [ARG...]` (under setpriv,
as the test user, or in alice's session) it makes one D-Bus call and prints the
outcome as JSON. `--hold-helper PROFILE REASON APP_ID` holds a profile until
it is killed; `--session-agent` is alice's login shell on tty1 (README: the
session user).
"""
import fnmatch
import importlib
import json
import os
import re
import signal
import sys
import time
import traceback

# the runner's own modules lie beside it: nothing is written into the image (no __pycache__)
sys.dont_write_bytecode = True

from vmtest_common import (agent_main, con, cpu_ids, Fail, helper_main, hold_main, host, journal, read,
    rtctld_installed, run, Skip, STATE, TESTS, TestTimeout, UNIT)

# the test modules, in the order their tests run: importing one registers its tests (@test)
TEST_MODULES = ("vmtest_daemon", "vmtest_xruns", "vmtest_isolation", "vmtest_session", "vmtest_power",
                "vmtest_attach", "vmtest_audio", "vmtest_system", "vmtest_package", "vmtest_boot", "vmtest_bench", "vmtest_rt")
for _m in TEST_MODULES:
    importlib.import_module(_m)
from vmtest_boot import Reboot, RESUME


# --------------------------------------------------------------------------


def selected():
    cmdline = read("/proc/cmdline", "")
    m = re.search(r"(?:^|\s)rtctl_vmtest\.only=(\S+)", cmdline)
    skip = re.search(r"(?:^|\s)rtctl_vmtest\.skip=(\S+)", cmdline)
    skip = skip.group(1).split(",") if skip else []
    if not m:
        # bootargs-booted needs a boot with the arguments bootargs-grub computed: run.sh's second boot;
        # own_run tests get a VM run of their own from run.sh.
        tests = [(n, f) for n, f in TESTS if n != "bootargs-booted" and not f.own_run]
    else:
        pats = m.group(1).split(",")
        tests = [(n, f) for n, f in TESTS if n == "harness-boot" or any(fnmatch.fnmatch(n, p) for p in pats)]
    # rtctl_vmtest.skip=GLOB[,GLOB...]: tests a run leaves out (run.sh says which and why); not counted
    return [(n, f) for n, f in tests if n == "harness-boot" or not any(fnmatch.fnmatch(n, p) for p in skip)]


def reboot_for(left, done):
    """Reboot the guest within this run: QEMU is told to reset rather than exit on the guest's reboot
    (run-vm.py starts it with -no-reboot), the root disk's snapshot overlay lives as long as QEMU, and
    the next boot's runner resumes with left[0].after_reboot(). Never returns."""
    os.makedirs(os.path.dirname(RESUME), exist_ok=True)
    with open(RESUME, "w") as f:
        json.dump({"left": left, "done": done}, f)
    host.call('qmp {"execute": "set-action", "arguments": {"reboot": "reset"}}', timeout=30)
    con.line("VMINFO reboot for %s" % left[0])
    os.sync()
    # --force: straight to the kernel's reboot, without stopping units, so this runner's own stop
    # never triggers its unit's SuccessAction=/FailureAction=poweroff-force
    run(["systemctl", "--force", "reboot"], timeout=60)
    while True:
        time.sleep(60)


def on_alarm(signum, frame):
    raise TestTimeout()


def main():
    STATE["uptime_at_start"] = float(read("/proc/uptime", "0").split()[0])
    img = dict(l.split("=", 1) for l in read("/etc/rtctl-vmtest-image", "").splitlines() if "=" in l)
    # _stext as this boot placed it (KASLR): run-vm.py tells where a hung guest's CPUs are from it.
    stext = "?"
    try:
        with open("/proc/kallsyms") as f:  # near its start: read no further
            stext = next((l.split()[0] for l in f if l.rstrip().endswith(" _stext")), "?")
        stext = "?" if stext.strip("0") == "" else stext  # zeros: kptr_restrict hid it
    except OSError:
        pass
    con.line("VMINFO runner-start uptime=%.2f kernel=%s cpus=%d image=%s rtctl=%s stext=%s" % (
        STATE["uptime_at_start"], os.uname().release, len(cpu_ids()), img.get("BASE_KEY", "?"), img.get("RTCTL_GIT", "?"),
        stext))
    if re.search(r"(?:^|\s)rtctl_vmtest\.debug(?:=1)?(?:\s|$)", read("/proc/cmdline", "")):
        # where the boot went: every unit start with its monotonic time
        for l in run(["journalctl", "-b", "-o", "short-monotonic", "--no-pager"], timeout=30).stdout.splitlines():
            con.line("VMLOG boot " + l)
        for l in run(["lsmod"]).stdout.splitlines():
            con.line("VMLOG lsmod " + l)
    tests = selected()
    n, resumed = 0, None
    if os.path.exists(RESUME):
        # the second boot of a run: the test that rebooted goes on, then the tests after it
        with open(RESUME) as f:
            resumed = json.load(f)
        os.unlink(RESUME)
        n = resumed["done"]
        tests = [(name, fn) for name, fn in tests if name in resumed["left"]]
        con.line("VMINFO reboot-resume test=%s uptime=%.2f" % (resumed["left"][0], STATE["uptime_at_start"]))
    else:
        con.line("VMTEST-PLAN " + " ".join(n for n, _ in tests))
    signal.signal(signal.SIGALRM, on_alarm)
    for i, (name, fn) in enumerate(tests):
        t0, wall0 = time.monotonic(), time.time()
        status, reason = "PASS", ""
        # the host's watchdog: a guest that gives no result within the timeout and a margin is hung
        con.line("VMTEST-START %s %d" % (name, fn.timeout))
        signal.alarm(fn.timeout)
        try:
            if resumed and i == 0:
                reason = fn.after_reboot() or ""
            else:
                reason = fn() or ""
        except Reboot:
            signal.alarm(0)
            reboot_for([name for name, _ in tests[i:]], n)
        except Fail as e:
            status, reason = "FAIL", str(e)
        except Skip as e:
            status, reason = "SKIP", str(e)
        except TestTimeout:
            status, reason = "FAIL", "timed out after %d s" % fn.timeout
        except Exception as e:
            status, reason = "FAIL", "%s: %s" % (type(e).__name__, e)
            for l in traceback.format_exc().splitlines()[-8:]:
                con.line("VMLOG %s %s" % (name, l))
        finally:
            signal.alarm(0)
        n += 1
        con.line("VMTEST %s %s %s(%.1f s)" % (name, status, (reason + " ") if reason else "", time.monotonic() - t0))
        if status == "FAIL" and name not in ("harness-boot",) and rtctld_installed() and not name.startswith("harness-"):
            try:
                # What rtctld said while the test ran: enough to tell a slow call's wait from a failure.
                for l in journal(UNIT, 60, since=wall0 - 1):
                    con.line("VMLOG %s %s" % (name, l))
            except Exception:
                pass
    con.line("VMTEST-END %d" % n)
    return 0


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--call-as-user-helper":
        sys.exit(helper_main(sys.argv[2], sys.argv[3:]))
    if len(sys.argv) == 5 and sys.argv[1] == "--hold-helper":
        sys.exit(hold_main(*sys.argv[2:5]))
    if len(sys.argv) == 2 and sys.argv[1] == "--session-agent":
        sys.exit(agent_main())
    try:
        sys.exit(main())
    except Exception as e:
        con.line("VMLOG runner crashed: %s: %s" % (type(e).__name__, e))
        for l in traceback.format_exc().splitlines():
            con.line("VMLOG runner " + l)
        con.line("VMTEST-END 0")
        sys.exit(1)
