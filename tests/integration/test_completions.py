"""Shell completion for rtctl, in each shell that ships one: bash (compgen, driven through COMP_WORDS),
zsh (compinit under zpty, see zsh-complete.zsh) and fish (complete -C). No daemon: profile names come
from rtctl's own reading of the profile files (RTCTL_CONF_PATH), as they do when rtctld is not
running. Nothing here touches the kernel; it sits in the host tier for the real /proc it reads."""
import os
import re
import shutil
import subprocess
import tempfile

import pytest

from harness import BUILD, HANG_SECONDS, ROOT

COMPLETIONS = os.path.join(ROOT, "completions")
NO_BUS = "unix:path=/nonexistent/rtctl-test-bus"
PROFILE = "zz-completion-test"


def shell_env(conf):
    e = {k: v for k, v in os.environ.items() if not k.startswith("RTCTL_")}
    e.update({
        "PATH": os.path.join(BUILD, "src") + ":" + os.environ["PATH"],
        "RTCTL_CONF_PATH": conf,
        "DBUS_SYSTEM_BUS_ADDRESS": NO_BUS,
        "TERM": "dumb",
    })
    return e


BASH_DRIVER = r"""
source /usr/share/bash-completion/bash_completion
source "$1/rtctl.bash"
read -ra COMP_WORDS <<<"$2"
[[ $2 == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
COMP_LINE=$2
COMP_POINT=${#COMP_LINE}
COMPREPLY=()
_rtctl rtctl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
printf '%s\n' "${COMPREPLY[@]}"
"""


def bash(line, env):
    return subprocess.run(["bash", "--norc", "--noprofile", "-c", BASH_DRIVER, "bash", COMPLETIONS, line],
                          capture_output=True, text=True, env=env, timeout=HANG_SECONDS)


def zsh(line, env):
    return subprocess.run(["zsh", "-f", os.path.join(ROOT, "tests", "integration", "zsh-complete.zsh"),
                           COMPLETIONS, line], capture_output=True, text=True, env=env, timeout=HANG_SECONDS)


def fish(line, env):
    # Loaded from fish_complete_path as an installed completion is; the user's configuration left out.
    fish_env = dict(env, XDG_CONFIG_HOME=os.path.join(env["RTCTL_CONF_PATH"], "xdg"))
    script = "set -p fish_complete_path %s; complete -C %s" % (fish_quote(COMPLETIONS), fish_quote(line))
    p = subprocess.run(["fish", "-c", script], capture_output=True, text=True, env=fish_env,
                       timeout=HANG_SECONDS)
    # fish prints "candidate<TAB>description".
    p.stdout = "\n".join(row.split("\t")[0] for row in p.stdout.splitlines())
    return p


def fish_quote(s):
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


SHELLS = {"bash": bash, "zsh": zsh, "fish": fish}


@pytest.fixture(scope="module")
def conf():
    d = tempfile.mkdtemp(prefix="rtctl-completion-")
    os.makedirs(os.path.join(d, "profiles"))
    with open(os.path.join(d, "profiles", PROFILE + ".conf"), "w") as f:
        f.write("[Profile]\nDescription=for the completion tests\n")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(params=sorted(SHELLS))
def complete(request, conf):
    """complete(line) -> the set of words the shell offers at the end of line, failing on anything the
    shell or rtctl printed on stderr (the terminal, in real use)."""
    run = SHELLS[request.param]

    def go(line, conf_path=conf):
        p = run(line, shell_env(conf_path))
        assert p.returncode == 0, "%s completing %r: rc=%d\n%s" % (request.param, line, p.returncode, p.stderr)
        assert p.stderr == "", "%s completing %r printed on the terminal:\n%s" % (request.param, line, p.stderr)
        return {w for w in p.stdout.splitlines() if w}

    return go


def cli_verbs():
    with open(os.path.join(ROOT, "src", "cli", "main.c")) as f:
        return set(re.findall(r'\{"([a-z]+)", verb_[a-z]+\}', f.read()))


def live_irqs():
    return {d for d in os.listdir("/proc/irq") if d.isdigit()}


def test_verbs_and_global_options(complete):
    verbs = cli_verbs()
    assert len(verbs) >= 15, verbs
    assert verbs <= complete("rtctl "), "a verb of src/cli/main.c is not completed"
    assert complete("rtctl hol") == {"hold", "holds"}
    assert complete("rtctl --no-l") == {"--no-legend"}
    assert {"--json", "--no-legend", "--pager", "--no-pager"} <= complete("rtctl status --")


def test_profile_names_from_the_profile_files(complete, conf):
    assert complete("rtctl profile ") == {PROFILE}
    assert complete("rtctl plan --profile ") == {PROFILE}
    assert complete("rtctl hold ") == {PROFILE}
    assert complete("rtctl run --profile zz") == {PROFILE}
    assert complete("rtctl latency --compare ") == {PROFILE}


def test_no_profiles_and_no_daemon_is_quiet(complete, conf):
    """Nowhere to read profiles from: nothing offered, and nothing on the terminal."""
    assert complete("rtctl profile ", conf_path=os.path.join(conf, "nonexistent")) == set()


def test_attach_offers_live_pids(complete):
    sleeper = subprocess.Popen(["sleep", "600"])
    try:
        pid = str(sleeper.pid)
        offered = complete("rtctl attach " + pid[:-1])
        assert pid in offered, offered
        assert all(w.isdigit() for w in offered), offered
        assert pid in complete("rtctl detach ")
    finally:
        sleeper.kill()
        sleeper.wait()


def test_irq_pin_offers_the_irqs_of_proc_irq(complete):
    irqs = live_irqs()
    assert irqs, "no IRQ in /proc/irq"
    assert complete("rtctl irq ") == {"pin", "unpin"}
    assert complete("rtctl irq pin ") == irqs
    assert complete("rtctl --json irq unpin ") == irqs
    assert complete("rtctl irq pin %s " % min(irqs, key=int)) == {"housekeeping", "isolated", "all"}


def test_subcommands_and_option_values(complete):
    assert complete("rtctl bootargs ") >= {"show", "apply", "revert"}
    assert complete("rtctl latency --method ") == {"auto", "timerlat", "osnoise", "hwlat", "timer"}
    assert complete("rtctl latency --cpus ") == {"isolated", "housekeeping", "all"}
    assert {"--local", "--user", "--profile"} <= complete("rtctl check --")
