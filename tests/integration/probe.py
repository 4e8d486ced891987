"""A process with named threads for the [Attach] tests and the attach bench, driven over stdin.

    probe.py PROCESS-NAME THREADS [ROLE=NAME...]

The main thread takes PROCESS-NAME with prctl(PR_SET_NAME) (the process's comm), then starts THREADS
worker threads named "idle-N", and prints one JSON line: {"pid": ..., "tids": [...]} (worker TIDs in
order). Commands, one per line, each answered with "ok" once done:

    rename N NAME      worker N renames itself with prctl(PR_SET_NAME), as an audio server's thread does;
                       answered "ok T" with T the CLOCK_MONOTONIC ns taken just before the prctl call
    pin N CPUS         worker N sets its own affinity (comma-separated CPUs)
    sched N POLICY     worker N sets its own scheduling policy (fifo, rr, other) with
                       sched_setscheduler(2), as rtkit or pthread_setschedparam do; answered "ok T"
                       with T the CLOCK_MONOTONIC ns taken just before the call
    spawn N NAME       worker N starts a thread named NAME (it inherits N's policy) that sleeps;
                       answered "ok TID"
    memfd N NAME       worker N maps a memfd named NAME (as PipeWire's "pipewire-memfd:..." buffers
                       are), kept for the probe's life: what graph: conditions see in /proc/PID/maps
    exit
"""
import ctypes
import json
import mmap
import os
import queue
import sys
import threading
import time

PR_SET_NAME = 15
libc = ctypes.CDLL(None, use_errno=True)
maps = []


def set_name(name):
    if libc.prctl(PR_SET_NAME, ctypes.c_char_p(name.encode()), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl")


def worker(inbox, tids, index, ready):
    tids[index] = threading.get_native_id()
    set_name("idle-%d" % index)
    ready.release()
    while True:
        cmd, arg, done = inbox.get()
        if cmd == "rename":
            done.t0 = time.monotonic_ns()
            set_name(arg)
        elif cmd == "pin":
            os.sched_setaffinity(0, {int(c) for c in arg.split(",")})
        elif cmd == "sched":
            policy = {"fifo": os.SCHED_FIFO, "rr": os.SCHED_RR, "other": os.SCHED_OTHER}[arg]
            param = os.sched_param(10 if policy != os.SCHED_OTHER else 0)
            done.t0 = time.monotonic_ns()
            os.sched_setscheduler(0, policy, param)
        elif cmd == "spawn":
            born = threading.Semaphore(0)
            box = []

            def child(name=arg):
                box.append(threading.get_native_id())
                set_name(name)
                born.release()
                threading.Event().wait()
            threading.Thread(target=child, daemon=True).start()
            born.acquire()
            done.t0 = box[0]
        elif cmd == "memfd":
            fd = os.memfd_create(arg)
            os.ftruncate(fd, mmap.PAGESIZE)
            maps.append(mmap.mmap(fd, mmap.PAGESIZE))
        elif cmd == "exit":
            done.set()
            return
        done.set()


def main():
    set_name(sys.argv[1])
    n = int(sys.argv[2])
    tids = [0] * n
    ready = threading.Semaphore(0)
    inboxes = [queue.Queue() for _ in range(n)]
    for i in range(n):
        threading.Thread(target=worker, args=(inboxes[i], tids, i, ready), daemon=True).start()
    for _ in range(n):
        ready.acquire()
    print(json.dumps({"pid": os.getpid(), "tids": tids}), flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "exit":
            break
        done = threading.Event()
        done.t0 = None
        inboxes[int(words[1])].put((words[0], words[2], done))
        done.wait()
        print("ok" if done.t0 is None else "ok %d" % done.t0, flush=True)


if __name__ == "__main__":
    main()
