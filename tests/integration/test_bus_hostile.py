"""Hostile and careless D-Bus callers: every method of org.rtctl.Manager1 gets wrong signatures, huge
and odd strings, out-of-range numbers and unknown flags. Each call is answered, with a named error
(or sd-bus's InvalidArgs for a wrong signature) whose message echoes a bounded part of the input;
rtctld stays up and its state is unchanged."""

import dbus
import pytest

import contract
from harness import HANG_SECONDS, NOBODY, Hoard, fds_and_rss

IFACE = "org.rtctl.Manager1"
PATH = "/org/rtctl/Manager1"
HUGE = 100_000
# What an error message may carry: its own words plus echo_text()'s 64 bytes of the input, never the
# input whole.
MESSAGE_MAX = 2048


METHODS = dict(contract.methods())

# Strings no method may accept: huge, multi-byte at the cut point, paths, format directives, controls.
ODD_STRINGS = ["", "x" * HUGE, "\u00e9" * (HUGE // 2), "\U0001f3b9" * 1000, "../../../etc/passwd", "%s%n%x" * 50,
               "a\u2028b\tc\nd", "-1", "0-99999999999999999999", "all,,", "\ufeffdesktop", "desktop ", "."]
# Numbers no method may accept: PIDs, cookies and IRQs that do not exist (never PID 1: attaching init
# would be a valid request, not a hostile one).
ODD_NUMBERS = [0, 2**32 - 1, 2**31, 4_000_000]


def variants(sig):
    """Argument lists for a method whose in-signature is sig: each odd value in each position, the
    others a plain invalid value."""
    plain = {"s": "no-such-profile", "u": dbus.UInt32(4_000_000), "t": dbus.UInt64(0)}
    for i, t in enumerate(sig):
        odd = {"s": ODD_STRINGS, "u": [dbus.UInt32(n) for n in ODD_NUMBERS],
               "t": [dbus.UInt64(1 << 63), dbus.UInt64(2**64 - 1), dbus.UInt64(0xfe)]}.get(t, [])
        for v in odd:
            args = [plain.get(x) for x in sig]
            args[i] = v
            yield args


def call(bus, method, args, signature):
    msg = dbus.lowlevel.MethodCallMessage(IFACE, PATH, IFACE, method)
    if signature:
        msg.append(*args, signature=signature)
    reply = bus.send_message_with_reply_and_block(msg, 30000)
    return reply


def answered(bus, method, args, signature):
    """(error name, message) or (None, None) for a normal reply; a timeout fails the test."""
    try:
        call(bus, method, args, signature)
        return None, None
    except dbus.DBusException as e:
        name = e.get_dbus_name()
        assert name != "org.freedesktop.DBus.Error.NoReply", "%s%r: no answer" % (method, signature)
        return name, e.get_dbus_message() or ""


# Odd-looking but valid: Plan("") and PlanWithNotes("") plan the active profile (the contract says so).
VALID = {("Plan", ("",)), ("PlanWithNotes", ("",))}


def assert_named(method, sig, args, name, message):
    if (method, tuple(repr(a) if isinstance(a, (list, dict)) else a for a in args)) in VALID:
        assert name is None, "%s%r: %s %s" % (method, tuple(args), name, message)
        return
    shown = [a[:40] if isinstance(a, str) else a for a in args]
    assert name is not None, "%s(%s) %r succeeded" % (method, sig, shown)
    assert name.startswith("org.rtctl.Error.") or name == "org.freedesktop.DBus.Error.InvalidArgs", \
        "%s(%s) %r: unnamed error %s: %s" % (method, sig, shown, name, message[:200])
    assert len(message.encode()) <= MESSAGE_MAX, \
        "%s(%s) %r: a %d-byte error message" % (method, sig, shown, len(message.encode()))


def state(obj):
    p = obj.GetAll(IFACE, dbus_interface="org.freedesktop.DBus.Properties")
    return (str(p["ActiveProfile"]), str(p["IsolatedCPUs"]), len(p["ActiveProfileHolds"]), len(p["Failures"]))


@pytest.fixture
def manager_env(env):
    env.profile("t", "[Profile]\nDescription=t\n")
    daemon = env.start("--profile", "t")
    bus = dbus.bus.BusConnection(env.bus.address)
    return daemon, bus, bus.get_object(IFACE, PATH)


def test_contract_is_read(manager_env):
    # The list the other tests walk is the contract's, not a copy that could go stale.
    assert {"SetProfile", "HoldProfile", "PinIrqWithFlags", "AttachProcessByPIDFD", "Check"} <= set(METHODS)


@pytest.mark.parametrize("method", sorted(METHODS))
def test_wrong_signatures_get_invalid_args(manager_env, method):
    daemon, bus, obj = manager_env
    before = state(obj)
    sig = "".join(METHODS[method])
    wrong = {"", "s", "u", "ss", "uuuu", "as", "a{sv}", "t"} - {sig}
    samples = {"s": "desktop", "u": dbus.UInt32(1), "t": dbus.UInt64(1), "as": ["a"], "a{sv}": {"a": dbus.String("b", variant_level=1)}}
    for w in sorted(wrong):
        if w == "":
            args = []
        elif w in samples:
            args = [samples[w]]
        else:
            args = [samples[c] for c in w]
        name, message = answered(bus, method, args, w)
        assert_named(method, w, args, name, message)
        assert name == "org.freedesktop.DBus.Error.InvalidArgs", (method, w, name, message)
    assert state(obj) == before
    assert daemon.running()


@pytest.mark.parametrize("method", sorted(m for m, s in METHODS.items() if s and "h" not in s))
def test_odd_values_get_named_errors_with_bounded_messages(manager_env, method):
    daemon, bus, obj = manager_env
    before = state(obj)
    sig = "".join(METHODS[method])
    n = 0
    for args in variants(sig):
        name, message = answered(bus, method, args, sig)
        assert_named(method, sig, args, name, message)
        n += 1
    assert n > 0
    assert state(obj) == before, "%s changed the daemon's state" % method
    assert daemon.running()
    # Still serving: a plain read answers.
    assert str(obj.Get(IFACE, "ActiveProfile", dbus_interface="org.freedesktop.DBus.Properties")) == "t"


def test_pidfd_that_is_no_pidfd(manager_env):
    daemon, bus, obj = manager_env
    with open("/dev/null") as f:
        name, message = answered(bus, "AttachProcessByPIDFD", [dbus.types.UnixFd(f)], "h")
    assert name == "org.rtctl.Error.InvalidArgument", (name, message)
    assert "not a pidfd" in message


def test_hold_reason_and_application_are_bounded(manager_env):
    # HoldProfile stores its reason and application id for as long as the hold lasts and shows them to
    # everyone in ActiveProfileHolds: a 100 KB reason is refused, not kept.
    daemon, bus, obj = manager_env
    for args in (["desktop", "r" * HUGE, "app"], ["desktop", "reason", "a" * HUGE]):
        name, message = answered(bus, "HoldProfile", args, "sss")
        assert name == "org.rtctl.Error.InvalidArgument", (name, message[:200])
        assert len(message.encode()) <= MESSAGE_MAX
    assert state(obj)[2] == 0


def test_pin_irq_odd_cpu_lists(env):
    # PinIrq parses its CPU list only for a movable IRQ under a profile with [IRQ]: reach that parser.
    env.profile("hk", "[Profile]\nDescription=t\n[IRQ]\nBalance=housekeeping\n")
    daemon = env.start("--profile", "hk")
    bus = dbus.bus.BusConnection(env.bus.address)
    obj = bus.get_object(IFACE, PATH)
    movable = [i["irq"] for i in env.rtctl_json("irq") if not i["unmovable"]]
    assert movable, "no movable IRQ on this machine"
    before = state(obj)
    for cpus in ODD_STRINGS:
        for method, args, sig in (("PinIrq", [dbus.UInt32(movable[0]), cpus], "us"),
                                  ("PinIrqWithFlags", [dbus.UInt32(movable[0]), cpus, dbus.UInt64(1)], "ust")):
            name, message = answered(bus, method, args, sig)
            assert_named(method, sig, args, name, message)
            assert name.startswith("org.rtctl.Error."), (method, cpus[:40], name, message[:200])
    assert state(obj) == before
    assert daemon.running()


BUSY = "org.rtctl.Error.Busy"
BUS_LIMIT = "org.freedesktop.DBus.Error.LimitsExceeded"


def test_reads_carrying_descriptors_cannot_use_up_rtctlds(env):
    """A caller may attach descriptors to any call (the system bus lets a message carry 16), and a read
    waiting its turn used to keep them all: one user's 64 connections with 16 reads each would hand rtctld
    16,384 descriptors against its unit's LimitNOFILE=8192, after which every sysfs open and journal save
    failed. Every such call is answered (beyond one user's share of waiting reads, at once with Busy), and
    rtctld keeps serving others and switching profiles."""
    env.profile("lo", "[Profile]\nDescription=lo\n")
    env.profile("hi", "[Profile]\nDescription=hi\n[Sysctl]\nvm.stat_interval=3\n")
    daemon = env.start("--profile", "lo", wrapper=["prlimit", "--nofile=8192:8192"])
    bus = dbus.bus.BusConnection(env.bus.address)
    obj = bus.get_object(IFACE, PATH)
    fds, _ = fds_and_rss(daemon.proc.pid)
    # Check: a read slow enough (it audits the machine) that the calls pile up rather than being answered
    # as they come.
    connections, calls = 64, 16
    hoard = Hoard(env, NOBODY, connections, calls, 16, connections * calls, "Check", "", [])
    try:
        answers = hoard.answers()
        assert sum(answers.values()) == connections * calls, "calls left unanswered: %r" % answers
        # dbus-daemon refuses by itself what it cannot queue for rtctld (64 descriptors, its system-bus
        # max_outgoing_unix_fds): a named refusal all the same.
        assert set(answers) <= {"", BUSY, BUS_LIMIT}, "%r (rtctld exit %s)\n%s" % (
            answers, daemon.proc.poll(), daemon.output()[-1500:])
        assert daemon.running()
        assert fds_and_rss(daemon.proc.pid)[0] <= fds + 16, "rtctld kept descriptors of answered reads"
        # Another caller is served, and a switch opens its sysfs files and saves its journal.
        assert obj.Plan("", dbus_interface=IFACE) is not None
        changes, failures = obj.SetProfile("hi", dbus_interface=IFACE, timeout=HANG_SECONDS)
        assert (changes, failures) == (1, 0), daemon.output()[-2000:]
        with open("/proc/sys/vm/stat_interval") as f:
            assert f.read().strip() == "3"
    finally:
        hoard.end()
