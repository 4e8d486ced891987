#!/usr/bin/python3
"""How long rtctl takes to load and plan a profile with many keys (issue 14: 80,000 keys took 20 s,
quadratic in the key count). No daemon, no kernel change: `rtctl --json plan --profile` against a
generated profile in a temporary directory, each size --runs times; prints the median wall time and
peak RSS per size.

    /usr/bin/python3 bench/profile-load.py [--build build] [--sizes 1000,10000,80000] [--runs 3]
"""
import argparse
import os
import resource
import statistics
import subprocess
import tempfile
import time

ap = argparse.ArgumentParser()
ap.add_argument("--build", default="build")
ap.add_argument("--sizes", default="1000,10000,80000")
ap.add_argument("--runs", type=int, default=3)
ap.add_argument("--section", default="Sysctl", help="the section the keys go in ([Scheduler]'s unknown keys took 62 s)")
a = ap.parse_args()
rtctl = os.path.join(a.build, "src", "rtctl")
print("%8s %10s %10s" % ("keys", "median s", "max RSS MB"))
with tempfile.TemporaryDirectory() as d:
    os.makedirs(os.path.join(d, "profiles"))
    for n in (int(x) for x in a.sizes.split(",")):
        with open(os.path.join(d, "profiles", "many.conf"), "w") as f:
            f.write("[Profile]\nDescription=%d keys\n[%s]\n" % (n, a.section))
            f.writelines("k%d=1\n" % i for i in range(n))
        times, rss = [], 0
        for _ in range(a.runs):
            t0 = time.monotonic()
            p = subprocess.run([rtctl, "--json", "plan", "--profile", "many"], env=dict(os.environ, RTCTL_CONF_PATH=d),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            times.append(time.monotonic() - t0)
            assert p.returncode == 0 or (a.section != "Sysctl" and "unknown key" in p.stderr), p.stderr
            rss = max(rss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)
        print("%8d %10.3f %10.1f" % (n, statistics.median(times), rss))
