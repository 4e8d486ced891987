"""One D-Bus connection that floods rtctld with read calls; run as any user (tests and bench/ run it as
nobody). Prints "started" once the first call was answered, then, when done, one JSON line of counts
(calls, ok, errors by D-Bus error name, seconds).

  flood_client.py ADDRESS flood SECONDS INFLIGHT METHOD[:ARG]...   keeps INFLIGHT calls under way (the
                     next one sent as soon as one is answered), the methods in turn, until SECONDS pass
                     or the file named by $FLOOD_STOP exists
  flood_client.py ADDRESS pipeline N METHOD[:ARG]                  N calls sent at once, every answer awaited
  flood_client.py ADDRESS count N INFLIGHT METHOD[:ARG]...         as flood, until N calls were answered

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


if __name__ == "__main__":
    if sys.argv[2] == "flood":
        run(sys.argv[1], sys.argv[5:], 10 ** 9, float(sys.argv[3]), int(sys.argv[4]))
    elif sys.argv[2] == "count":
        run(sys.argv[1], sys.argv[5:], int(sys.argv[3]), 10 ** 9, int(sys.argv[4]))
    else:
        run(sys.argv[1], [sys.argv[4]], int(sys.argv[3]), 10 ** 9, int(sys.argv[3]))
