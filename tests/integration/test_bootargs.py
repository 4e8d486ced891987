"""rtctl bootargs on this host: what the real kernel booted with against what a profile wants, and
RebootPending. apply and revert run only on a tree under RTCTL_SYSROOT (a Debian GRUB layout with a
recording update-grub), never on this host's own boot configuration."""
import hashlib
import os
import re
import stat

import dbus

from conftest import ROOT  # noqa: F401

ISO_PRIO = ("[Profile]\nDescription=iso\n[CPU]\nIsolate=1\n"
            "[IRQ audio]\nMatch=class:audio\nThreadPriority=90\n")


def running_cmdline():
    with open("/proc/cmdline") as f:
        return f.read().strip()


def kernel_version():
    with open("/proc/sys/kernel/version") as f:
        return f.read()


def expected_args():
    """What the profile ISO_PRIO wants on this 2-CPU host, by the rules rtctl(1) gives."""
    rt = os.path.exists("/sys/kernel/realtime") or "PREEMPT_RT" in kernel_version()
    want = ["isolcpus=managed_irq,1"]
    if os.path.exists("/sys/devices/system/cpu/nohz_full"):
        want.append("nohz_full=1")
    want += ["rcu_nocbs=1", "irqaffinity=0"]
    if not rt:
        want.append("threadirqs")
        if "PREEMPT_DYNAMIC" in kernel_version() or os.path.exists("/sys/kernel/debug/sched/preempt"):
            want.append("preempt=full")
    return want


def test_show_compares_with_this_kernels_cmdline(env):
    env.profile("iso", ISO_PRIO)
    out = env.rtctl_json("bootargs", "show", "--profile", "iso")  # no daemon: computed here
    assert out["profile"] == "iso"
    assert [a["argument"] for a in out["arguments"]] == expected_args()
    assert all(a["reason"] for a in out["arguments"])
    assert out["running"] == running_cmdline()
    words = running_cmdline().split(" -- ")[0].split()
    missing = [a for a in expected_args() if a not in words]
    assert out["missing"] == missing
    assert out["reboot_pending"] == bool(missing)
    # A kernel without NO_HZ_FULL would ignore nohz_full: left out, and said so.
    assert (out["left_out"] is None) == os.path.exists("/sys/devices/system/cpu/nohz_full")
    text = env.rtctl("bootargs", "--profile", "iso", check=True).stdout
    assert "Running kernel: " + running_cmdline() in text
    for a in expected_args():
        assert a in text


def test_a_profile_without_isolation_needs_nothing(env):
    env.profile("plain", "[Profile]\nDescription=plain\n")
    out = env.rtctl_json("bootargs", "--profile", "plain")
    assert out["arguments"] == [] and out["missing"] == [] and out["reboot_pending"] is False


def test_reboot_pending_follows_the_profile_in_force(env):
    env.profile("iso", ISO_PRIO)
    env.profile("plain", "[Profile]\nDescription=plain\n")
    env.start("--profile", "iso")
    conn = dbus.bus.BusConnection(env.bus.address)
    obj = conn.get_object("org.rtctl.Manager1", "/org/rtctl/Manager1")
    get = lambda: obj.Get("org.rtctl.Manager1", "RebootPending",  # noqa: E731
                          dbus_interface="org.freedesktop.DBus.Properties")
    # This host boots without any of them.
    assert get() is not None and bool(get()) is True
    status = env.rtctl_json("status")
    assert status["reboot_pending"] is True
    note = [u for u in status["unsupported"] if u["object"] == "/proc/cmdline"]
    assert note and "isolcpus=managed_irq,1" in note[0]["message"]
    assert "Reboot pending:" in env.rtctl("status").stdout
    # bootargs shows the daemon's profile by default.
    assert env.rtctl_json("bootargs")["profile"] == "iso"
    env.rtctl("profile", "plain", check=True)
    assert bool(get()) is False
    status = env.rtctl_json("status")
    assert status["reboot_pending"] is False
    assert not [u for u in status["unsupported"] if u["object"] == "/proc/cmdline"]
    conn.close()


def tree_digest(root, skip):
    """Every file and directory under root with its content and mode, but the paths in skip."""
    out = {}
    for d, dirs, files in os.walk(root):
        rel = os.path.relpath(d, root)
        if any(rel == s or rel.startswith(s + "/") for s in skip):
            continue
        out[rel + "/"] = stat.S_IMODE(os.stat(d).st_mode)
        for f in files:
            p = os.path.join(d, f)
            r = os.path.relpath(p, root)
            if r in skip:
                continue
            with open(p, "rb") as fh:
                out[r] = (hashlib.sha256(fh.read()).hexdigest(), stat.S_IMODE(os.stat(p).st_mode))
    return out


def debian_tree(base):
    root = os.path.join(base, "debian")
    files = {
        "sys/devices/system/cpu/possible": "0-3\n",
        "sys/devices/system/cpu/online": "0-3\n",
        "sys/devices/system/cpu/nohz_full": "(null)\n",
        "proc/sys/kernel/version": "#1 SMP PREEMPT_DYNAMIC Debian 6.1.115-1 (2024-11-01)\n",
        "proc/cmdline": "BOOT_IMAGE=/boot/vmlinuz-6.1.0-27-amd64 root=UUID=42 ro quiet\n",
        "etc/default/grub": 'GRUB_DEFAULT=0\nGRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\n',
        "etc/default/grub.d/init-select.cfg": "# Debian's own drop-in\n",
        "usr/sbin/update-grub": '#!/bin/sh\necho "update-grub $*" >>"$RTCTL_SYSROOT/commands.log"\n',
    }
    for rel, text in files.items():
        p = os.path.join(root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)
    os.chmod(os.path.join(root, "usr/sbin/update-grub"), 0o755)
    return root


def test_apply_and_revert_on_a_debian_tree(env, tmp_path):
    root = debian_tree(str(tmp_path))
    env.profile("iso", "[Profile]\nDescription=iso\n[CPU]\nIsolate=2-3\n"
                "[IRQ audio]\nMatch=class:audio\nThreadPriority=90\n")
    env.extra["RTCTL_SYSROOT"] = root
    state = os.path.relpath(env.state, "/")
    # The state directory is made under the tree on the first apply, as /var/lib/rtctl would be.
    skip = {"commands.log", state.split("/")[0]}
    before = tree_digest(root, skip)

    out = env.rtctl_json("bootargs", "apply", "--profile", "iso")
    assert out["boot_loader"] == "grub"
    assert out["changed"] == ["/etc/default/grub.d/rtctl.cfg"]
    with open(os.path.join(root, "etc/default/grub.d/rtctl.cfg")) as f:
        dropin = f.read()
    assert ('GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT isolcpus=managed_irq,2-3 '
            'nohz_full=2-3 rcu_nocbs=2-3 irqaffinity=0-1 threadirqs preempt=full"\n') in dropin
    with open(os.path.join(root, "commands.log")) as f:
        assert f.read() == "update-grub \n"
    # The journal sits in the state directory under the tree, and outlives reboots there.
    assert os.path.exists(os.path.join(root, state, "bootargs.json"))
    shown = env.rtctl_json("bootargs", "--profile", "iso")
    assert shown["applied"] is True and shown["reboot_pending"] is True

    out = env.rtctl_json("bootargs", "revert")
    assert out["changed"] == ["/etc/default/grub.d/rtctl.cfg"]
    with open(os.path.join(root, "commands.log")) as f:
        assert f.read() == "update-grub \nupdate-grub \n"
    assert tree_digest(root, skip) == before
    assert not os.path.exists(os.path.join(root, state, "bootargs.json"))
    p = env.rtctl("bootargs", "revert", check=True)
    assert "Nothing to revert" in p.stdout


def test_no_boot_tooling_is_a_clear_error(env, tmp_path):
    root = debian_tree(str(tmp_path))
    os.unlink(os.path.join(root, "usr/sbin/update-grub"))
    env.profile("iso", ISO_PRIO)
    env.extra["RTCTL_SYSROOT"] = root
    p = env.rtctl("bootargs", "apply", "--profile", "iso")
    assert p.returncode == 1
    assert re.search(r"cannot tell how this machine boots under \S+: looked for grubby", p.stderr), p.stderr
    assert "/etc/default/grub with update-grub" in p.stderr
    assert not os.path.exists(os.path.join(root, "etc/default/grub.d/rtctl.cfg"))
