"""Logging: failures as journal entries with fields of their own, logged once while they stand; the plain
stderr lines when there is no journal; the STATUS= line systemd shows.

The host has no journald, and libsystemd sends to /run/systemd/journal/socket, a path no environment
variable changes (journal-send.c in systemd 252). So rtctld runs in a mount namespace of its own, where
/run/systemd is a tmpfs holding the host's entries again plus journal/, the test's directory with the
test's datagram socket in it; $JOURNAL_STREAM names the daemon's stderr, as systemd sets it. The test
decodes the journal's native protocol."""
import array
import os
import signal
import socket
import struct
import threading
import time

import dbus

import machine
from conftest import wait_until
from harness import HANG_SECONDS

# Runs "$@" with /run/systemd replaced, for this process only, by a tmpfs with the host's entries bound
# back and journal/ bound to the test's directory $1. Nothing on the host changes.
NAMESPACE = r"""set -e
t=$1; shift
mkdir "$t/host"
mount --bind /run/systemd "$t/host"
mount -t tmpfs -o mode=0755 tmpfs /run/systemd
for e in "$t"/host/*; do
    [ -e "$e" ] || continue
    n=${e##*/}
    [ "$n" = journal ] && continue
    if [ -d "$e" ]; then mkdir "/run/systemd/$n"; else touch "/run/systemd/$n"; fi
    mount --bind "$e" "/run/systemd/$n"
done
mkdir /run/systemd/journal
mount --bind "$t/journal" /run/systemd/journal
exec "$@"
"""

RULE = "[Profile]\nDescription=test: logging\n[Block t]\nMatch=name:loop2[0-9][0-9]\nNrRequests=%s\n"


def parse_native(data):
    """One datagram of journald's native protocol: FIELD=value lines, or FIELD, a newline, the value's
    size as 64-bit little endian, the value and a newline (for values with newlines)."""
    fields = {}
    i = 0
    while i < len(data):
        nl = data.index(b"\n", i)
        line = data[i:nl]
        if b"=" in line:
            k, v = line.split(b"=", 1)
            i = nl + 1
        else:
            k = line
            (size,) = struct.unpack("<Q", data[nl + 1:nl + 9])
            v = data[nl + 9:nl + 9 + size]
            assert data[nl + 9 + size:nl + 10 + size] == b"\n", data
            i = nl + 10 + size
        fields[k.decode()] = v.decode()
    return fields


class Journal:
    """The journal's socket, bound by the test: every entry rtctld sends, decoded."""

    def __init__(self, directory):
        self.dir = directory
        os.makedirs(os.path.join(directory, "journal"))
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.sock.bind(os.path.join(directory, "journal", "socket"))
        os.chmod(os.path.join(directory, "journal", "socket"), 0o666)
        self.entries = []
        self.closed = False
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        self.sock.settimeout(0.1)
        while not self.closed:
            try:
                data, fds, _, _ = socket.recv_fds(self.sock, 1 << 20, 4)
            except socket.timeout:
                continue
            except OSError:
                return
            # A message too big for a datagram comes as a sealed memfd holding the same bytes.
            for fd in fds:
                with os.fdopen(fd, "rb") as f:
                    data += f.read()
            self.entries.append(parse_native(data))

    def wrapper(self):
        return ["unshare", "-m", "--propagation", "private", "--", "/bin/sh", "-c", NAMESPACE, "sh", self.dir]

    def find(self, **want):
        return [e for e in list(self.entries) if all(e.get(k) == v for k, v in want.items())]

    def wait(self, what, **want):
        assert wait_until(lambda: any(what in e.get("MESSAGE", "") for e in self.find(**want))), \
            [e.get("MESSAGE") for e in self.entries]
        return [e for e in self.find(**want) if what in e.get("MESSAGE", "")]

    def close(self):
        self.closed = True
        self.reader.join(1)
        self.sock.close()


def reload_and_wait(d, seen):
    """SIGHUP: rtctld rereads the profile and replans everything. Returns once that pass is over (with
    --verbose every pass is logged); seen() counts the pass lines so far."""
    n = seen()
    d.proc.send_signal(signal.SIGHUP)
    assert wait_until(lambda: seen() > n), "no pass after the reload"


def wait_status(d, line, since=0):
    """Until rtctld told systemd STATUS=line, in a message after the first `since`."""
    assert wait_until(lambda: any("STATUS=" + line in m.split("\n") for m in list(d.messages)[since:])), \
        d.messages


def test_failures_are_journal_entries_with_fields_logged_once(env, tmp_path):
    journal = Journal(str(tmp_path))
    env.profile("t", RULE % "1")
    try:
        with machine.loop_devices(1) as (name,):
            nr = "/sys/block/%s/queue/nr_requests" % name
            # The kernel takes no fewer than 4 requests: writing 1 leaves 4, a failure rtctld sees.
            d = env.start("--profile", "t", "--verbose", wrapper=journal.wrapper(), journal_stream=True)
            passes = lambda: len([e for e in journal.entries if e.get("MESSAGE", "").startswith("Pass (")])
            first = journal.wait("wrote '1', but the kernel kept '4'", RTCTL_OBJECT=nr)
            assert len(first) == 1, first
            e = first[0]
            assert e["RTCTL_TUNER"] == "block" and e["ERRNO"] == "5" and e["PRIORITY"] == "4", e
            assert e["SYSLOG_IDENTIFIER"] == "rtctld", e
            assert e["CODE_FILE"].endswith(".c") and int(e["CODE_LINE"]) > 0 and e["CODE_FUNC"], e
            assert e["MESSAGE"] == "block: %s: wrote '1', but the kernel kept '4'" % nr, e
            # Nothing went to stderr: the journal had it all.
            assert nr not in d.output(), d.output()
            wait_status(d, "Profile t; 1 failure (block)")
            # `journalctl RTCTL_TUNER=block` would find it, and nothing of the daemon's own life.
            assert all("RTCTL_OBJECT" in x for x in journal.find(RTCTL_TUNER="block")), journal.entries

            # The same failure on the next two passes: not logged again.
            for _ in range(2):
                reload_and_wait(d, passes)
            assert len(journal.find(RTCTL_OBJECT=nr)) == 1, journal.find(RTCTL_OBJECT=nr)
            assert d.running()

            # It changes (another message): logged again, once.
            env.profile("t", RULE % "2")
            reload_and_wait(d, passes)
            journal.wait("wrote '2', but the kernel kept '4'", RTCTL_OBJECT=nr, ERRNO="5")
            reload_and_wait(d, passes)
            assert len(journal.find(RTCTL_OBJECT=nr)) == 2, journal.find(RTCTL_OBJECT=nr)

            # Fixed: said once, at info, without ERRNO=.
            env.profile("t", RULE % "32")
            sent = len(d.messages)
            reload_and_wait(d, passes)
            fixed = journal.wait("now in place", RTCTL_OBJECT=nr, RTCTL_TUNER="block", PRIORITY="6")
            assert len(fixed) == 1 and "ERRNO" not in fixed[0], fixed
            wait_status(d, "Profile t; applied", sent)
            reload_and_wait(d, passes)
            assert len(journal.find(RTCTL_OBJECT=nr)) == 3, journal.find(RTCTL_OBJECT=nr)
            assert d.stop() == 0
    finally:
        journal.close()


def test_without_a_journal_failures_are_plain_lines_once(env):
    env.profile("t", RULE % "1")
    with machine.loop_devices(1) as (name,):
        nr = "/sys/block/%s/queue/nr_requests" % name
        d = env.start("--profile", "t", "--verbose")
        line = "warning: block: %s: wrote '1', but the kernel kept '4'" % nr
        assert wait_until(lambda: line in d.output().splitlines()), d.output()
        passes = lambda: d.output().count("Pass (")
        for _ in range(2):
            reload_and_wait(d, passes)
        assert d.output().splitlines().count(line) == 1, d.output()
        assert d.stop() == 0


def test_status_line_names_profile_holds_and_failures(env):
    env.profile("lo", "[Profile]\nRank=5\n[Sysctl]\nvm.stat_interval=2\n")
    env.profile("hi", "[Profile]\nRank=15\n[Sysctl]\nvm.stat_interval=3\n" + RULE.split("\n", 2)[2] % "1")
    env.write("rtctl.conf", "[Daemon]\nDefaultProfile=lo\nUevents=kernel\n")
    with machine.loop_devices(1):
        d = env.start()
        wait_status(d, "Profile lo; applied")
        sent = len(d.messages)
        conn = dbus.bus.BusConnection(env.bus.address)
        try:
            api = dbus.Interface(conn.get_object("org.rtctl.Manager1", "/org/rtctl/Manager1"),
                                 "org.rtctl.Manager1")
            api.HoldProfile("hi", "mixing", "org.example.Daw", timeout=HANG_SECONDS)
            # The hold wins, and its profile's NrRequests=1 fails on the loop device.
            wait_status(d, "Profile hi; 1 hold (org.example.Daw); 1 failure (block)", sent)
            sent = len(d.messages)
        finally:
            conn.close()
        # The holder left the bus: its hold ends, and the failure with it.
        wait_status(d, "Profile lo; applied", sent)
        assert d.stop() == 0
