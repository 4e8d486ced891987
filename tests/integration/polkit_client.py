"""A client of rtctld and of python-dbusmock's polkitd on the tests' private bus, run as any user (the
polkit tests run it as nobody). Prints one JSON line.

  polkit_client.py ADDRESS answered ROUNDS BATCH
      Calls whose polkit question is answered after the reason for the call went away, BATCH of each
      kind per round: AttachProcessByPIDFD of a process that exits while polkit thinks, and
      ReleaseProfile of another connection's hold that ends meanwhile. The test has polkitd hang on
      org.rtctl.attach-own-process and org.rtctl.release-other-hold, and say yes to org.rtctl.hold-profile.
      Prints the answers' error names and counts.
  polkit_client.py ADDRESS fill N
      N AttachProcessByPIDFD calls, each with a pidfd, left waiting for polkit (the test has polkitd hang
      on org.rtctl.attach-own-process), then one more. Prints the error name the last got ("" for a
      reply) and exits, closing the connection, once stdin closes.
  polkit_client.py ADDRESS call JSON
      JSON is a list of [method, signature, args], called one after the other; an "h" argument is a
      PID, sent as a pidfd of it. Prints a list of the error name each call got ("" for a reply).
  polkit_client.py ADDRESS spread N JSON
      The same, the calls sent over N connections in turn, and "name: message" for each error. The
      connections stay open (and their holds held) until standard input closes.
"""
import json
import os
import subprocess
import sys

import dbus
import dbus.mainloop.glib
from gi.repository import GLib

IFACE = "org.rtctl.Manager1"
PATH = "/org/rtctl/Manager1"
POLKIT = "org.freedesktop.PolicyKit1"
AUTHORITY = "/org/freedesktop/PolicyKit1/Authority"
TIMEOUT = 300


class Calls:
    """Asynchronous calls, their answers counted by error name ("" for a reply)."""

    def __init__(self):
        self.loop = GLib.MainLoop()
        self.outstanding = 0
        self.answers = []

    def send(self, method, *args, **kw):
        self.outstanding += 1
        method(*args, **kw, reply_handler=lambda *_: self._done(""),
               error_handler=lambda e: self._done(e.get_dbus_name()), timeout=TIMEOUT)

    def _done(self, name):
        self.answers.append(name)
        self.outstanding -= 1
        if self.outstanding == 0:
            self.loop.quit()

    def wait(self):
        if self.outstanding:
            self.loop.run()
        answers, self.answers = self.answers, []
        return answers


def asked(conn, manager):
    """Once rtctld answered a call sent after the batch, it has asked polkit about every call of the
    batch, and those questions reached polkitd before this one does."""
    manager.get_dbus_method("Get", "org.freedesktop.DBus.Properties")(IFACE, "Version")
    mock = dbus.Interface(conn.get_object(POLKIT, AUTHORITY), "org.freedesktop.DBus.Mock")
    assert mock.HaveHangingCalls(), "rtctld did not ask polkit"
    return mock


def answered(address, rounds, batch):
    conn = dbus.bus.BusConnection(address)
    holder = dbus.bus.BusConnection(address)
    manager = conn.get_object(IFACE, PATH)
    held = holder.get_object(IFACE, PATH)
    calls = Calls()
    counts = {}
    for _ in range(rounds):
        # A process that exits after rtctld asked polkit about it, before polkit answers.
        child = subprocess.Popen(["sleep", "600"])
        pidfd = os.pidfd_open(child.pid)
        for _ in range(batch):
            calls.send(manager.get_dbus_method("AttachProcessByPIDFD", IFACE), dbus.types.UnixFd(pidfd))
        os.close(pidfd)
        mock = asked(conn, manager)
        child.kill()
        child.wait()
        mock.ReleaseHangingCalls()
        answers = calls.wait()
        # Another connection's hold that ends after rtctld asked polkit whether this one may end it.
        cookie = held.get_dbus_method("HoldProfile", IFACE)("hi", "answered", "org.rtctl.test", timeout=TIMEOUT)
        for _ in range(batch):
            calls.send(manager.get_dbus_method("ReleaseProfile", IFACE), dbus.UInt32(cookie))
        mock = asked(conn, manager)
        held.get_dbus_method("ReleaseProfile", IFACE)(dbus.UInt32(cookie), timeout=TIMEOUT)
        mock.ReleaseHangingCalls()
        answers += calls.wait()
        for a in answers:
            counts[a] = counts.get(a, 0) + 1
    print(json.dumps(counts), flush=True)


def fill(address, n):
    conn = dbus.bus.BusConnection(address)
    manager = conn.get_object(IFACE, PATH)
    attach = manager.get_dbus_method("AttachProcessByPIDFD", IFACE)
    child = subprocess.Popen(["sleep", "600"])
    pidfd = os.pidfd_open(child.pid)
    calls = Calls()
    for _ in range(n):
        calls.send(attach, dbus.types.UnixFd(pidfd))
    asked(conn, manager)
    try:
        attach(dbus.types.UnixFd(pidfd), timeout=10)  # with no limit, it would wait for polkit too
        name = ""
    except dbus.exceptions.DBusException as e:
        name = e.get_dbus_name()
    os.close(pidfd)
    child.kill()
    child.wait()
    print(json.dumps(name), flush=True)
    sys.stdin.read()


def call_each(conn, spec, conns=None, messages=False):
    """Calls each [method, signature, args] in turn (over conns in turn, when given); the error name each
    got ("" for a reply), with its message when asked."""
    managers = [c.get_object(IFACE, PATH) for c in (conns or [conn])]
    names = []
    for i, (method, signature, args) in enumerate(spec):
        manager = managers[i % len(managers)]
        sent = []
        for t, a in zip(signature, args):
            if t == "h":
                fd = os.pidfd_open(a)
                sent.append(dbus.types.UnixFd(fd))
                os.close(fd)
            else:
                sent.append(a)
        try:
            manager.get_dbus_method(method, IFACE)(*sent, signature=signature, timeout=TIMEOUT)
            names.append("")
        except dbus.exceptions.DBusException as e:
            names.append(e.get_dbus_name() + (": " + e.get_dbus_message() if messages else ""))
    return names


if __name__ == "__main__":
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    if sys.argv[2] == "answered":
        answered(sys.argv[1], int(sys.argv[3]), int(sys.argv[4]))
    elif sys.argv[2] == "fill":
        fill(sys.argv[1], int(sys.argv[3]))
    elif sys.argv[2] == "spread":
        conns = [dbus.bus.BusConnection(sys.argv[1]) for _ in range(int(sys.argv[3]))]
        print(json.dumps(call_each(None, json.loads(sys.argv[4]), conns, messages=True)), flush=True)
        sys.stdin.read()
    else:
        print(json.dumps(call_each(dbus.bus.BusConnection(sys.argv[1]), json.loads(sys.argv[3]))), flush=True)
