"""The VM tier's apt sources still work once the mirror's Release files expire.

A Debian mirror's -updates and -security Release files carry a Valid-Until about a week after they were
signed (Debian 13's run out on 2026-12-07; testing's are past theirs as served here). A machine without
the VM caches, CI's on a fresh machine, must still build every image and chroot. These tests take the
very lines tests/vm/mirrors.sh writes into the images and the build chroot: each carries
`check-valid-until=no`, and `apt-get update` of them, with the check forced on (this host's own apt
configuration turns it off) and the clock two months ahead, succeeds against the mirror the tier uses.
(Bookworm's apt here did not call a Release file expired even without the option, so no control run
shows the check biting; the guests' apt has no such host setting.)
"""

import os
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
MIRRORS = os.path.join(HERE, "..", "vm", "mirrors.sh")
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
AHEAD = "+60d"


def sources(suite):
    """Every sources.list line the tier writes for suite: the image's and the build chroot's."""
    script = ('SUITE=%s; . "%s"; MIRROR=$(detect_mirror); SECURITY_MIRROR=$(detect_security_mirror); '
              'apt_sources; build_sources' % (suite, MIRRORS))
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout
    return list(dict.fromkeys(l for l in out.splitlines() if l.strip()))


def apt_update(tmp_path, lines):
    """apt-get update of lines with a private state, the clock AHEAD: (exit status, output)."""
    for d in ("parts", "state/lists/partial", "cache/archives/partial"):
        (tmp_path / d).mkdir(parents=True, exist_ok=True)
    (tmp_path / "status").write_text("")
    signed = ["deb [signed-by=%s %s" % (KEYRING, l[5:]) if l.startswith("deb [") else
              "deb [signed-by=%s] %s" % (KEYRING, l[4:]) for l in lines]
    (tmp_path / "sources.list").write_text("".join(l + "\n" for l in signed))
    opts = ["Dir::Etc::SourceList=%s/sources.list" % tmp_path, "Dir::Etc::SourceParts=%s/parts" % tmp_path,
            "Dir::State=%s/state" % tmp_path, "Dir::State::status=%s/status" % tmp_path,
            "Dir::Cache=%s/cache" % tmp_path, "Debug::NoLocking=true", "Acquire::Retries=3",
            "APT::Sandbox::User=root", "Acquire::Check-Valid-Until=true"]
    cmd = ["faketime", "-f", AHEAD, "apt-get", "-q"] + [a for o in opts for a in ("-o", o)] + ["update"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout + p.stderr


@pytest.mark.parametrize("suite", ["bookworm", "trixie"])
def test_the_tier_sources_update_past_their_valid_until(tmp_path, suite):
    lines = sources(suite)
    assert lines and all("check-valid-until=no" in l for l in lines), lines
    rc, out = apt_update(tmp_path, lines)
    assert rc == 0 and "expired" not in out.lower(), out[-3000:]
