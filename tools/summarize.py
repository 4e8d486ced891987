#!/usr/bin/python3
"""Adds up every tier's results for tools/test and prints 'N passed, N failed' last.
A skipped test counts as failed: nothing is expected to skip on the machines this runs on."""
import glob
import json
import os
import re
import sys
import xml.etree.ElementTree as ET

out = sys.argv[1]
passed = failed = 0
lines = []
# What failed, by name, printed just above the totals: the tiers' own output is cut to its tail, and
# a CI reader who sees only the end of the log must still learn which test it was.
failures = []


def tally(name, p, f, note=""):
    global passed, failed
    passed += p
    failed += f
    lines.append("%-22s %4d passed, %4d failed%s" % (name, p, f, note))


for path in sorted(glob.glob(os.path.join(out, "unit-*.json"))):
    p = f = 0
    with open(path) as fh:
        for line in fh:
            t = json.loads(line)
            ok = len(re.findall(r"^ok \d+", t.get("stdout", ""), re.M))
            bad = len(re.findall(r"^not ok \d+", t.get("stdout", ""), re.M))
            p += ok
            f += bad
            if t["result"] != "OK" and bad == 0:
                f += 1  # crashed or failed outside any case
    tally(os.path.basename(path)[:-5], p, f)

for path in sorted(glob.glob(os.path.join(out, "*.xml"))):
    p = f = s = 0
    root = ET.parse(path).getroot()
    for case in root.iter("testcase"):
        if case.find("skipped") is not None:
            s += 1
        elif case.find("failure") is not None or case.find("error") is not None:
            f += 1
            failures.append("%s: %s::%s" % (os.path.basename(path)[:-4], case.get("classname", ""),
                                            case.get("name", "")))
        else:
            p += 1
    tally(os.path.basename(path)[:-4], p, f + s, " (%d skipped, counted as failed)" % s if s else "")

# the VM tier's runs: Debian 12 (vm.log), Debian 13 (vm-trixie.log) and Debian 12 with its PREEMPT_RT
# kernel (vm-rt.log); each ends in its totals line
for name in ("vm", "vm-trixie", "vm-rt"):
    vm = os.path.join(out, name + ".log")
    if not os.path.exists(vm):
        continue
    m = None
    for line in open(vm, errors="replace"):
        if line.startswith("FAIL "):
            failures.append("%s: %s" % (name, line.strip()[:600]))
        m = re.match(r"^(\d+) passed, (\d+) failed(?:, (\d+) skipped)?", line.strip()) or m
    if m:
        skipped = int(m.group(3) or 0)
        tally(name, int(m.group(1)), int(m.group(2)) + skipped,
              " (%d skipped, counted as failed)" % skipped if skipped else "")
    else:
        tally(name, 0, 1, " (no result line)")

steps = os.path.join(out, "steps")
if os.path.exists(steps):
    for line in open(steps):
        name, _, result = line.strip().partition(": ")
        tally(name, 1 if result == "ok" else 0, 0 if result == "ok" else 1,
              "" if result == "ok" else "  " + result)

print()
if failures:
    print("failed:")
    print("\n".join("  " + f for f in failures))
    print()
print("\n".join(lines))
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed or passed == 0 else 0)
