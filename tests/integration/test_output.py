"""How rtctl's output meets the terminal: colour only for a person at a terminal that shows it (and never
under NO_COLOR), --no-legend, a pager only when asked for, --version's feature line. The table verbs run
without rtctld (check --local), except verify's summary line, which needs the daemon."""
import json
import os
import pty
import re
import select
import subprocess

from harness import BUILD, HANG_SECONDS, RTCTL, ROOT

ESC = "\x1b["
# No daemon on this address: check --local never asks one, and nothing here reaches the system's.
NO_BUS = "unix:path=/nonexistent/rtctl-test-bus"


def run_env(**extra):
    e = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "PAGER", "RTCTL_PAGER", "LESS")}
    e.update({"DBUS_SYSTEM_BUS_ADDRESS": NO_BUS, "TERM": "xterm-256color"})
    e.update(extra)
    return e


def on_tty(*args, **extra):
    """rtctl with stdout (and stdin) on a pseudo-terminal, as in a terminal emulator: what it printed,
    with the terminal's \\r\\n turned back into \\n, and its exit status."""
    master, slave = pty.openpty()
    p = subprocess.Popen([RTCTL] + list(args), stdin=slave, stdout=slave, stderr=subprocess.PIPE,
                         env=run_env(**extra))
    os.close(slave)
    out = b""
    while True:
        ready, _, _ = select.select([master], [], [], HANG_SECONDS)
        assert ready, "rtctl %s hung on the terminal" % (args,)
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every writer of the terminal has closed it
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    rc = p.wait(timeout=HANG_SECONDS)
    p.stderr.close()
    return out.decode().replace("\r\n", "\n"), rc


def piped(*args, **extra):
    p = subprocess.run([RTCTL] + list(args), capture_output=True, text=True, env=run_env(**extra),
                       timeout=HANG_SECONDS)
    return p.stdout, p.returncode


def test_colour_on_a_terminal():
    out, rc = on_tty("check", "--local")
    assert rc in (0, 1), out
    first = out.splitlines()[0]
    assert first.startswith(ESC + "1mCHECK" + ESC + "0m"), repr(first)
    # check's STATUS column: ok in green, warn in yellow, and the padding outside the escapes.
    rows = out.splitlines()[1:]
    assert any(ESC + "32mok" + ESC + "0m" in r for r in rows), out
    for r in rows:
        if ESC + "33mwarn" + ESC + "0m" in r:
            assert re.match(r"^\S+ +\x1b\[33mwarn\x1b\[0m {4}\S", r), repr(r)


def test_no_colour_when_no_color_is_set():
    out, rc = on_tty("check", "--local", NO_COLOR="1")
    assert out.startswith("CHECK "), repr(out[:80])
    assert ESC not in out
    # no-color.org: an empty NO_COLOR is as if it were unset.
    out, rc = on_tty("check", "--local", NO_COLOR="")
    assert ESC in out


def test_no_colour_on_a_dumb_terminal_or_without_term():
    out, rc = on_tty("check", "--local", TERM="dumb")
    assert out.startswith("CHECK ") and ESC not in out
    env = run_env()
    del env["TERM"]
    master, slave = pty.openpty()
    p = subprocess.run([RTCTL, "check", "--local"], stdout=slave, env=env, timeout=HANG_SECONDS)
    os.close(slave)
    out = os.read(master, 65536).decode()
    os.close(master)
    assert p.returncode in (0, 1)
    assert out.startswith("CHECK ") and ESC not in out


def test_no_colour_when_piped():
    out, rc = piped("check", "--local")
    assert rc in (0, 1)
    assert out.startswith("CHECK ")
    assert ESC not in out


def test_no_legend_leaves_out_the_header():
    with_header, _ = piped("check", "--local")
    for args in (["--no-legend", "check", "--local"], ["check", "--no-legend", "--local"]):
        out, rc = piped(*args)
        assert rc in (0, 1)
        assert [line.split()[:2] for line in out.splitlines()] == \
            [line.split()[:2] for line in with_header.splitlines()[1:]], out
    # On a terminal too, and no escape code is left where the header was.
    out, rc = on_tty("--no-legend", "check", "--local")
    assert not out.startswith(ESC + "1m") and "CHECK" not in out.splitlines()[0]


def test_json_is_plain_and_takes_no_header():
    out, rc = on_tty("--json", "check", "--local")
    assert ESC not in out
    checks = json.loads(out)
    assert {"check", "status", "detail", "fix"} <= set(checks[0])


PAGER = "sed 's/^/PAGED:/'"
# These tests run as root, who gets less and nothing else unless RTCTL_PAGERSECURE=0 (rtctl(1)); they are
# about which pager is chosen, so they say it.
SECURE_OFF = {"RTCTL_PAGERSECURE": "0"}


def test_pager_only_when_asked_and_on_a_terminal():
    out, rc = on_tty("--pager", "check", "--local", RTCTL_PAGER=PAGER, **SECURE_OFF, NO_COLOR="1")
    assert rc in (0, 1)
    lines = out.splitlines()
    assert lines and all(line.startswith("PAGED:") for line in lines), out
    assert lines[0].startswith("PAGED:CHECK")
    # Without --pager, $PAGER and $RTCTL_PAGER are not even read.
    out, rc = on_tty("check", "--local", RTCTL_PAGER=PAGER, **SECURE_OFF, PAGER=PAGER, NO_COLOR="1")
    assert out.startswith("CHECK ") and "PAGED:" not in out
    # --no-pager after it wins, as the last word does.
    out, rc = on_tty("--pager", "check", "--local", "--no-pager", RTCTL_PAGER=PAGER, **SECURE_OFF)
    assert "PAGED:" not in out
    # Piped: no pager, even when asked.
    out, rc = piped("--pager", "check", "--local", RTCTL_PAGER=PAGER, **SECURE_OFF)
    assert out.startswith("CHECK ") and "PAGED:" not in out


def test_pager_falls_back_to_pager_then_less_defaults():
    out, rc = on_tty("--pager", "check", "--local", PAGER=PAGER, NO_COLOR="1", **SECURE_OFF)
    assert out.splitlines()[0].startswith("PAGED:CHECK"), out
    # less gets -FRX unless the user set LESS: the pager sees it in its environment.
    show_less = "echo \"LESS=$LESS\"; cat >/dev/null"
    out, rc = on_tty("--pager", "check", "--local", RTCTL_PAGER=show_less, **SECURE_OFF)
    assert out.splitlines() == ["LESS=FRX"], out
    out, rc = on_tty("--pager", "check", "--local", RTCTL_PAGER=show_less, **SECURE_OFF, LESS="S")
    assert out.splitlines() == ["LESS=S"], out
    # "cat" or an empty pager means none.
    out, rc = on_tty("--pager", "check", "--local", RTCTL_PAGER="", PAGER=PAGER, NO_COLOR="1")
    assert out.startswith("CHECK ")


def test_verify_summary_is_legend_and_hold_keeps_its_commands_options(env):
    env.start()
    # The global options are rtctl's only before the "--" of run and hold; after it they are CMD's.
    p = env.rtctl("hold", "off", "--", "echo", "--json", "--no-legend", "--pager")
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout == "--json --no-legend --pager\n", p.stdout
    p = env.rtctl("verify")
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.startswith("OBJECT ") and "settings in force" in p.stdout
    p = env.rtctl("verify", "--no-legend")
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout == "", p.stdout


def meson_version():
    with open(os.path.join(ROOT, "meson.build")) as f:
        return re.search(r"version : '([^']+)'", f.read()).group(1)


def build_option(name):
    with open(os.path.join(BUILD, "meson-info", "intro-buildoptions.json")) as f:
        return next(o["value"] for o in json.load(f) if o["name"] == name)


def test_version_names_features_compiled_in():
    out, rc = piped("--version")
    assert rc == 0
    lines = out.splitlines()
    assert lines[0] == "rtctl " + meson_version()
    words = lines[1].split()
    assert all(re.fullmatch(r"[+-][A-Z0-9_]+", w) for w in words), lines[1]
    for lib in ("SD_BUS", "GLIB", "JSON_C", "LIBNL", "ZLIB"):
        assert "+" + lib in words, lines[1]
    sanitize = build_option("b_sanitize")
    sanitize = sanitize if isinstance(sanitize, list) else sanitize.split(",")
    assert ("+ASAN" if "address" in sanitize else "-ASAN") in words, (sanitize, lines[1])
    assert ("+UBSAN" if "undefined" in sanitize else "-UBSAN") in words, (sanitize, lines[1])
    assert len(lines) == 2


def test_daemon_version_names_the_same_features():
    from harness import RTCTLD
    out, _ = piped("--version")
    d = subprocess.run([RTCTLD, "--version"], capture_output=True, text=True, timeout=30)
    assert d.returncode == 0 and d.stderr == ""
    assert d.stdout.splitlines() == ["rtctld " + meson_version(), out.splitlines()[1]], d.stdout
