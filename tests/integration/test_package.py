"""The Debian package (debian/, tools/build-deb), built once from HEAD: its contents against what meson
installs, lintian, its relationships, and its maintainer scripts, run in a private mount namespace (a
tmpfs on /run, overlays on /etc and /var/lib) with systemd's tools and rtctl replaced by recorders.
Nothing here touches a kernel setting, and nothing is installed."""
import json
import os
import subprocess

import pytest

from harness import ROOT

BUILD_TIMEOUT = 1800


@pytest.fixture(autouse=True, scope="module")
def machine_unchanged():
    """Replaces conftest's snapshot of the kernel for this module, which changes no kernel setting and
    so need not hold /run/rtctl-kernel.lock through a package build: a snapshot would only see what others
    change meanwhile."""
    yield


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT, **kw)
    assert p.returncode == 0, "%s: rc=%d\n%s%s" % (cmd, p.returncode, p.stdout, p.stderr[-4000:])
    return p.stdout


@pytest.fixture(scope="module")
def deb(tmp_path_factory):
    out = tmp_path_factory.mktemp("deb")
    path = run([os.path.join(ROOT, "tools", "build-deb"), str(out)]).strip().splitlines()[-1]
    assert os.path.basename(path).startswith("rtctl_") and path.endswith(".deb") and os.path.isfile(path)
    return path


@pytest.fixture(scope="module")
def control(deb, tmp_path_factory):
    d = tmp_path_factory.mktemp("control")
    run(["dpkg-deb", "-e", deb, str(d)])
    return str(d)


def meson_installed(tmp):
    """Every file `meson install` installs for a --prefix=/usr build of HEAD, as the package ships it:
    units under /lib/systemd/system (debian/rules), man pages gzipped (dh_compress)."""
    src = os.path.join(tmp, "src")
    os.makedirs(src)
    archive = subprocess.Popen(["git", "-C", ROOT, "archive", "HEAD"], stdout=subprocess.PIPE)
    run(["tar", "-x", "-C", src], stdin=archive.stdout)
    assert archive.wait() == 0
    run(["meson", "setup", os.path.join(tmp, "b"), src, "--prefix=/usr"])
    installed = json.loads(run(["meson", "introspect", os.path.join(tmp, "b"), "--installed"]))
    files = set()
    for source, dest in installed.items():
        if os.path.isdir(source):  # install_subdir
            for d, _, names in os.walk(source):
                files.update(os.path.join(dest, os.path.relpath(os.path.join(d, n), source)) for n in names)
        else:
            files.add(dest)
    shipped = set()
    for f in files:
        if f.startswith("/usr/lib/systemd/system/"):
            f = f[len("/usr"):]
        if f.startswith("/usr/share/man/"):
            f += ".gz"
        shipped.add(f)
    return shipped


def test_the_package_ships_exactly_what_meson_installs(deb, tmp_path):
    listing = run(["dpkg-deb", "-c", deb]).splitlines()
    contents = {line.split()[-1][1:] for line in listing if not line.startswith("d")}
    expected = meson_installed(str(tmp_path))
    assert "/usr/sbin/rtctld" in expected and "/lib/systemd/system/rtctld.service" in expected
    assert sorted(expected - contents) == [], "meson installs these, the package lacks them"
    assert sorted(contents - expected) == ["/usr/share/doc/rtctl/changelog.gz",
                                           "/usr/share/doc/rtctl/copyright"]
    # /etc/rtctl is the admin's: an empty directory, no conffile.
    assert any(line.startswith("d") and line.split()[-1] == "./etc/rtctl/" for line in listing)
    assert not any(line.split()[-1].startswith("./etc/rtctl/") and not line.startswith("d")
                   for line in listing)


def test_lintian_finds_no_errors_or_warnings(deb):
    changes = deb.rsplit("/", 1)[0] + "/" + os.path.basename(deb).replace(".deb", ".changes")
    p = subprocess.run(["lintian", "--pedantic", "-I", changes], capture_output=True, text=True,
                       timeout=BUILD_TIMEOUT)
    tags = [line for line in p.stdout.splitlines() if line[:2] in ("E:", "W:")]
    assert tags == [], p.stdout
    assert p.returncode == 0, p.stdout + p.stderr


def test_relationships(deb):
    def field(name):
        return run(["dpkg-deb", "-f", deb, name]).strip()
    assert field("Package") == "rtctl"
    assert field("Recommends") == "polkitd"
    # rt-tests beside rtctl latency; the audio servers' client libraries, which rtctl xruns opens at run
    # time (never linked: rtctl runs without them).
    assert field("Suggests") == "rt-tests, libpipewire-0.3-0, libjack-jackd2-0 | pipewire-jack"
    assert "libjack" not in field("Depends") and "libpipewire" not in field("Depends")
    # irqbalance and tuned are detected at run time (OnConflict=), never excluded by the package.
    for name in ("Conflicts", "Breaks", "Replaces"):
        assert field(name) == ""
    assert "irqbalance" not in field("Depends") and "tuned" not in field("Depends")


RECORDER = """#!/bin/sh
# Records the call, with what the handover marker and the bus address say at that moment.
marker=$(cat /run/rtctl/handover 2>/dev/null || echo none)
echo "$(basename "$0") $* marker=$marker bus=${DBUS_SYSTEM_BUS_ADDRESS:-system}" >> %(log)s
[ "$(basename "$0") $1" = "systemctl show" ] && echo 4242
exit 0
"""


def maintainer_script(control, tmp, script, *args, setup=""):
    """Runs one maintainer script as dpkg would, on a machine with systemd as PID 1 and rtctld active
    (PID 4242), and returns the calls it made and which of rtctl's directories it left."""
    bindir = os.path.join(tmp, "bin")
    log = os.path.join(tmp, "log")
    os.makedirs(bindir)
    for tool in ("systemctl", "deb-systemd-helper", "deb-systemd-invoke", "rtctl"):
        with open(os.path.join(bindir, tool), "w") as f:
            f.write(RECORDER % {"log": log})
        os.chmod(os.path.join(bindir, tool), 0o755)
    inner = """set -e
mount -t tmpfs tmpfs /run
mkdir -p /run/systemd/system /run/rtctl
for dir in etc var/lib; do
  up=%(tmp)s/$(echo $dir | tr / -)
  mkdir -p $up.upper $up.work
  mount -t overlay overlay -o lowerdir=/$dir,upperdir=$up.upper,workdir=$up.work /$dir
done
%(setup)s
rc=0
PATH=%(bin)s:$PATH sh %(script)s %(args)s || rc=$?
echo "exit $rc" >> %(log)s
for f in /run/rtctl/handover /run/rtctl /var/lib/rtctl /etc/rtctl; do
  if [ -e $f ]; then echo "left $f" >> %(log)s; fi
done
""" % {"tmp": tmp, "setup": setup, "bin": bindir, "script": os.path.join(control, script),
       "args": " ".join(args), "log": log}
    run(["unshare", "--mount", "--propagation", "private", "sh", "-c", inner])
    with open(log) as f:
        return f.read().splitlines()


def test_install_enables_and_starts_the_unit(control, tmp_path):
    calls = maintainer_script(control, str(tmp_path), "postinst", "configure")
    assert "deb-systemd-helper enable rtctld.service marker=none bus=system" in calls
    assert "deb-systemd-invoke start rtctld.service marker=none bus=system" in calls
    assert not any(c.startswith("deb-systemd-invoke restart") for c in calls)
    assert "exit 0" in calls


def test_upgrade_restarts_with_the_handover_marker_for_the_running_daemon(control, tmp_path):
    calls = maintainer_script(control, str(tmp_path), "postinst", "configure", "0.0.9")
    # The marker names the running daemon at the moment of the restart, and is gone afterwards.
    assert "deb-systemd-invoke restart rtctld.service marker=4242 bus=system" in calls
    assert "exit 0" in calls
    assert "left /run/rtctl/handover" not in calls
    assert "left /run/rtctl" in calls


def test_remove_is_a_real_stop_even_with_a_marker_left(control, tmp_path):
    calls = maintainer_script(control, str(tmp_path), "prerm", "remove",
                              setup="echo 4242 > /run/rtctl/handover")
    assert "deb-systemd-invoke stop rtctld.service marker=none bus=system" in calls
    assert not any(c.startswith("rtctl ") for c in calls), "nothing was left to restore"
    assert "exit 0" in calls


def test_remove_restores_a_journal_left_behind_and_reverts_boot_arguments(control, tmp_path):
    setup = ("echo '{}' > /run/rtctl/journal.json; "
             "mkdir -p /var/lib/rtctl; echo '{}' > /var/lib/rtctl/bootargs.json")
    calls = maintainer_script(control, str(tmp_path), "prerm", "remove", setup=setup)
    # Not over the system bus, which would start rtctld again by activation.
    revert = calls.index("rtctl bootargs revert marker=none bus=unix:path=/nonexistent")
    stop = calls.index("deb-systemd-invoke stop rtctld.service marker=none bus=system")
    restore = calls.index("rtctl restore marker=none bus=unix:path=/nonexistent")
    assert revert < stop < restore
    assert "exit 0" in calls


def test_upgrade_leaves_the_daemon_running(control, tmp_path):
    calls = maintainer_script(control, str(tmp_path), "prerm", "upgrade", "0.1.0")
    assert not any(c.startswith("deb-systemd-invoke") or c.startswith("rtctl ") for c in calls)
    assert "exit 0" in calls


def test_purge_leaves_nothing_behind(control, tmp_path):
    setup = ("mkdir -p /var/lib/rtctl /etc/rtctl/profiles; echo audio > /var/lib/rtctl/active-profile; "
             "echo '{}' > /run/rtctl/journal.json")
    calls = maintainer_script(control, str(tmp_path), "postrm", "purge", setup=setup)
    assert "deb-systemd-helper purge rtctld.service marker=none bus=system" in calls
    assert "exit 0" in calls
    assert [c for c in calls if c.startswith("left ")] == []


def test_purge_keeps_what_the_admin_wrote_in_etc(control, tmp_path):
    # /etc/rtctl is left to the admin: the package never writes there, so its files are theirs.
    setup = ("mkdir -p /var/lib/rtctl /etc/rtctl/profiles /etc/rtctl/rtctl.conf.d; "
             "echo '[Daemon]' > /etc/rtctl/rtctl.conf; echo x > /etc/rtctl/profiles/mine.conf")
    calls = maintainer_script(control, str(tmp_path), "postrm", "purge", setup=setup)
    assert "exit 0" in calls
    assert [c for c in calls if c.startswith("left ")] == ["left /etc/rtctl"]
