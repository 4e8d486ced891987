"""The VM tier's emulator: tests/vm/qemu.sh gives run.sh a QEMU of 8.1 or later.

Debian 12's QEMU 7.2 runs stale translations of code the guest kernel patches (tests/vm/README.md, "The
emulator"). Where the host's qemu-system-x86_64 says it is older, qemu.sh fetches bookworm-backports'
into the tier's cache, once, behind a wrapper that finds its own firmware; one of 8.1 or later on the
host, or RTCTL_VM_QEMU, is taken as it is. Each test has a cache of its own and a stub host QEMU first
on PATH that only prints a version line; the fetch is real (the mirror the tier uses).
"""

import os
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
QEMU_SH = os.path.join(HERE, "..", "vm", "qemu.sh")


def stub_host_qemu(tmp_path, version):
    """A directory holding a qemu-system-x86_64 that says it is version and does nothing else."""
    d = tmp_path / "bin"
    d.mkdir(exist_ok=True)
    q = d / "qemu-system-x86_64"
    q.write_text("#!/bin/sh\necho 'QEMU emulator version %s (stub)'\n" % version)
    q.chmod(0o755)
    return d


def qemu_sh(tmp_path, bindir, **env):
    e = dict(os.environ, RTCTL_VM_CACHE=str(tmp_path / "cache"), PATH="%s:%s" % (bindir, os.environ["PATH"]))
    e.pop("RTCTL_VM_QEMU", None)
    e.update(env)
    return subprocess.run(["bash", QEMU_SH], capture_output=True, text=True, timeout=600, env=e)


def version(qemu):
    out = subprocess.run([qemu, "--version"], capture_output=True, text=True, timeout=60).stdout
    major, minor = out.split("version ", 1)[1].split(".")[:2]
    return int(major), int(minor)


@pytest.mark.skipif(os.geteuid() != 0, reason="qemu.sh fetches as root")
def test_an_older_host_qemu_gets_the_backport_once(tmp_path):
    bindir = stub_host_qemu(tmp_path, "7.2.22")
    p = qemu_sh(tmp_path, bindir)
    assert p.returncode == 0, p.stderr
    qemu = p.stdout.strip()
    assert qemu.startswith(str(tmp_path / "cache" / "qemu")) and "older than 8.1" in p.stderr, (qemu, p.stderr)
    assert version(qemu) >= (8, 1)
    # It looks for firmware in its own tree first (the host's seabios, 7.2's, is in the built-in path
    # too), and what a -kernel boot of -machine pc reads is there.
    dirs = subprocess.run([qemu, "-L", "help"], capture_output=True, text=True, timeout=60).stdout.split()
    root = os.path.join(os.path.dirname(qemu), "root", "usr", "share")
    assert dirs[:2] == [os.path.join(root, "qemu"), os.path.join(root, "seabios")], dirs
    for f in ("seabios/bios-256k.bin", "qemu/linuxboot_dma.bin", "qemu/kvmvapic.bin"):
        assert os.path.isfile(os.path.join(root, f)), f
    # And it runs: a PC with no disk sits in SeaBIOS until it is stopped, where a QEMU without its
    # firmware says "could not load PC BIOS" and exits at once.
    run = subprocess.run(["timeout", "5", qemu, "-machine", "pc", "-accel", "tcg", "-nodefaults",
                          "-display", "none", "-serial", "none", "-monitor", "none"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 124, (run.returncode, run.stderr)
    # The second time it is the cached one, with no mirror to be reached.
    again = qemu_sh(tmp_path, bindir, RTCTL_VM_MIRROR="http://127.0.0.1:9/debian")
    assert again.returncode == 0 and again.stdout.strip() == qemu and "fetching" not in again.stderr, again


@pytest.mark.skipif(os.geteuid() != 0, reason="qemu.sh fetches as root")
def test_with_no_mirror_and_nothing_cached_it_fails_saying_why(tmp_path):
    p = qemu_sh(tmp_path, stub_host_qemu(tmp_path, "7.2.22"), RTCTL_VM_MIRROR="http://127.0.0.1:9/debian")
    assert p.returncode != 0 and p.stdout == "", p
    assert "qemu.sh: error: apt-get update of bookworm-backports failed (http://127.0.0.1:9/debian)" in p.stderr, p.stderr


@pytest.mark.parametrize("host", ["8.1.0", "9.2.3", "10.0.2", "11.0.0"])
def test_a_host_qemu_of_8_1_or_later_is_taken_as_it_is(tmp_path, host):
    bindir = stub_host_qemu(tmp_path, host)
    p = qemu_sh(tmp_path, bindir)
    assert p.returncode == 0 and p.stdout.strip() == str(bindir / "qemu-system-x86_64"), p
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize("host", ["7.2.22", "8.0.4"])
def test_an_older_host_qemu_is_not_taken(tmp_path, host):
    # No mirror to reach: it refuses instead of handing back the old one.
    p = qemu_sh(tmp_path, stub_host_qemu(tmp_path, host), RTCTL_VM_MIRROR="http://127.0.0.1:9/debian")
    assert p.returncode != 0 and p.stdout == "" and "(%s) is older than 8.1" % host.rsplit(".", 1)[0] in p.stderr, p


def test_rtctl_vm_qemu_names_the_one_to_use(tmp_path):
    p = qemu_sh(tmp_path, stub_host_qemu(tmp_path, "7.2.22"), RTCTL_VM_QEMU="/opt/qemu/bin/qemu-system-x86_64")
    assert p.returncode == 0 and p.stdout.strip() == "/opt/qemu/bin/qemu-system-x86_64", p
    assert not (tmp_path / "cache").exists()
