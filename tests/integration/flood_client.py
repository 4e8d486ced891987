"""One D-Bus connection that floods rtctld with read calls; run as any user (tests and bench/ run it as
nobody). Prints "started" once the first call was answered, then, when done, one JSON line of counts
(calls, ok, errors by D-Bus error name, seconds).

  flood_client.py ADDRESS flood SECONDS INFLIGHT METHOD[:ARG]...   keeps INFLIGHT calls under way (the
                     next one sent as soon as one is answered), the methods in turn, until SECONDS pass
                     or the file named by $FLOOD_STOP exists
  flood_client.py ADDRESS pipeline N METHOD[:ARG]                  N calls sent at once, every answer awaited
  flood_client.py ADDRESS count N INFLIGHT METHOD[:ARG]...         as flood, until N calls were answered
  flood_client.py ADDRESS hoard CONNECTIONS CALLS FDS EXPECT METHOD SIGNATURE JSON
                     CALLS calls of METHOD with the arguments JSON (a list) sent at once over each of
                     CONNECTIONS connections, each carrying FDS descriptors (of /dev/null) whatever the
                     method takes (GDBus sends them as the wire allows; dbus-python only with "h" in the
                     signature); prints the answers by error name ("" for a reply) once EXPECT of them
                     arrived, or 60 s passed, then exits (closing the connections) once stdin closes

METHOD is one of Manager1's (Plan and SetProfile take ARG, the others nothing) or GetAll, which reads
every property through org.freedesktop.DBus.Properties.
"""
import json
import os
import sys
import time

import dbus
import dbus.mainloop.glib
from gi.repository import GLib

IFACE = "org.rtctl.Manager1"
PATH = "/org/rtctl/Manager1"


def method_of(obj, spec):
    name, _, arg = spec.partition(":")
    if name == "GetAll":
        return obj.get_dbus_method(name, "org.freedesktop.DBus.Properties"), [IFACE]
    return obj.get_dbus_method(name, IFACE), ([arg] if name in ("Plan", "SetProfile") else [])


def run(address, specs, total, seconds, inflight):
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    conn = dbus.bus.BusConnection(address)
    obj = conn.get_object(IFACE, PATH)
    methods = [method_of(obj, s) for s in specs]
    stop = os.environ.get("FLOOD_STOP")
    counts = {"calls": 0, "ok": 0, "errors": {}}
    state = {"answered": 0, "stopping": False}
    start = time.monotonic()
    loop = GLib.MainLoop()

    def send():
        method, args = methods[counts["calls"] % len(methods)]
        counts["calls"] += 1
        method(*args, reply_handler=ok, error_handler=err, timeout=600)

    def answered():
        state["answered"] += 1
        if state["answered"] == 1:
            print("started", flush=True)
        if not state["stopping"]:
            state["stopping"] = (counts["calls"] >= total or time.monotonic() - start >= seconds or
                                 (stop and state["answered"] % 8 == 0 and os.path.exists(stop)))
        if not state["stopping"]:
            send()
        elif state["answered"] == counts["calls"]:
            loop.quit()

    def ok(*_):
        counts["ok"] += 1
        answered()

    def err(e):
        name = e.get_dbus_name()
        counts["errors"][name] = counts["errors"].get(name, 0) + 1
        answered()

    for _ in range(min(inflight, total)):
        send()
    if inflight >= total:
        state["stopping"] = True
    loop.run()
    counts["seconds"] = time.monotonic() - start
    print(json.dumps(counts), flush=True)


def hoard(address, connections, calls, fds, expect, method, signature, args):
    from gi.repository import Gio

    flags = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION
    conns = [Gio.DBusConnection.new_for_address_sync(address, flags, None, None) for _ in range(connections)]
    null = os.open("/dev/null", os.O_RDONLY)
    answers = {}
    loop = GLib.MainLoop()

    def done(conn, result, _):
        try:
            reply = conn.send_message_with_reply_finish(result)
            name = reply.get_error_name() or ""
        except GLib.Error as e:
            name = "local: " + e.message
        answers[name] = answers.get(name, 0) + 1
        if sum(answers.values()) >= expect:
            loop.quit()

    for conn in conns:
        for _ in range(calls):
            msg = Gio.DBusMessage.new_method_call(IFACE, PATH, IFACE, method)
            msg.set_body(GLib.Variant("(%s)" % signature, args))
            fdlist = Gio.UnixFDList.new()
            for _ in range(fds):
                fdlist.append(null)
            msg.set_unix_fd_list(fdlist)
            conn.send_message_with_reply(msg, Gio.DBusSendMessageFlags.NONE, 600 * 1000, None, done, None)
    os.close(null)
    GLib.timeout_add_seconds(60, loop.quit)
    loop.run()
    print(json.dumps(answers), flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    if sys.argv[2] == "hoard":
        hoard(sys.argv[1], *map(int, sys.argv[3:7]), sys.argv[7], sys.argv[8], json.loads(sys.argv[9]))
    elif sys.argv[2] == "flood":
        run(sys.argv[1], sys.argv[5:], 10 ** 9, float(sys.argv[3]), int(sys.argv[4]))
    elif sys.argv[2] == "count":
        run(sys.argv[1], sys.argv[5:], int(sys.argv[3]), 10 ** 9, int(sys.argv[4]))
    else:
        run(sys.argv[1], [sys.argv[4]], int(sys.argv[3]), 10 ** 9, int(sys.argv[3]))
