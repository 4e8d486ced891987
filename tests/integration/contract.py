"""The D-Bus contract, dbus/org.rtctl.Manager1.xml, as the tests walk it: every method, and which of
them only read. A method not named in READS is taken to change something, so a new method is held to
every rule for changes (polkit asks, refused while stopping) until it is listed here."""
import os
import xml.etree.ElementTree as ET

from harness import ROOT

CONTRACT = os.path.join(ROOT, "dbus", "org.rtctl.Manager1.xml")
IFACE = "org.rtctl.Manager1"
READS = {"Plan", "PlanWithNotes", "ListIrqs", "Verify", "Check"}


def _inputs(method):
    return [a for a in method.findall("arg") if a.get("direction") == "in"]


def _methods():
    return ET.parse(CONTRACT).getroot().find("interface[@name='%s']" % IFACE).findall("method")


def methods():
    """(name, input signature) of every method of the interface, in the contract's order."""
    found = [(m.get("name"), "".join(a.get("type") for a in _inputs(m))) for m in _methods()]
    names = {n for n, _ in found}
    assert READS <= names, "READS names methods the contract lacks: %s" % (READS - names)
    return found


def string_args():
    """(method, argument name, input signature, position) for every string a caller passes."""
    out = []
    for m in _methods():
        args = _inputs(m)
        sig = "".join(a.get("type") for a in args)
        out += [(m.get("name"), a.get("name"), sig, i) for i, a in enumerate(args) if a.get("type") == "s"]
    return out


def changing():
    return [(n, s) for n, s in methods() if n not in READS]


def sample_call(name, signature, pid, profile, cookie):
    """[method, signature, args] that gets past a method's argument checks to its authorization: pid a
    process of the caller's ("h" takes it too, as a pidfd: polkit_client.py opens one), profile a
    profile's name, cookie another connection's hold. Arguments of a method not listed are made up from
    its signature."""
    known = {
        "SetProfile": [profile],
        "AttachProcess": [pid],
        "AttachProcessByPIDFD": [pid],
        "DetachProcess": [pid],
        "HoldProfile": [profile, "contract test", "org.rtctl.test"],
        "ReleaseProfile": [cookie],
        "PinIrq": [0, "0"],
        "PinIrqWithFlags": [0, "0", 0],
    }
    by_type = {"s": profile, "u": pid, "h": pid, "t": 0, "i": 0, "b": False, "d": 0.0}
    return [name, signature, known.get(name, [by_type[t] for t in signature])]
