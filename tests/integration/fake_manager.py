"""A stand-in for rtctld on a private bus, for what the client shows of text the daemon would never pass
on: it owns org.rtctl.Manager1 and answers property reads from the JSON object given as its argument
(name -> [D-Bus signature, value]). Prints "ready" once it owns the name.

  fake_manager.py ADDRESS JSON
"""
import json
import sys

import dbus
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

IFACE = "org.rtctl.Manager1"
PATH = "/org/rtctl/Manager1"


class Manager(dbus.service.Object):
    def __init__(self, conn, props):
        super().__init__(conn, PATH)
        self.props = props

    def value(self, name):
        sig, v = self.props[name]
        if sig == "aa{sv}":
            return dbus.Array([dbus.Dictionary({k: (dbus.UInt32(x) if k == "Cookie" else
                                                    dbus.UInt64(x) if k == "Since" else dbus.String(x))
                                                for k, x in h.items()}, signature="sv") for h in v],
                              signature="a{sv}")
        return {"s": dbus.String, "u": dbus.UInt32, "b": dbus.Boolean, "i": dbus.Int32}[sig](v)

    @dbus.service.method("org.freedesktop.DBus.Properties", in_signature="ss", out_signature="v")
    def Get(self, iface, name):
        if name not in self.props:
            raise dbus.exceptions.DBusException("no property " + name,
                                                name="org.freedesktop.DBus.Error.UnknownProperty")
        return self.value(name)

    @dbus.service.method("org.freedesktop.DBus.Properties", in_signature="s", out_signature="a{sv}")
    def GetAll(self, iface):
        return {k: self.value(k) for k in self.props}


def main():
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    conn = dbus.bus.BusConnection(sys.argv[1])
    Manager(conn, json.loads(sys.argv[2]))
    conn.request_name(IFACE)
    print("ready", flush=True)
    GLib.MainLoop().run()


if __name__ == "__main__":
    main()
