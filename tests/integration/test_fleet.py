"""docs/fleet/rtctl.yml, the fleet example of docs/fleet.md, run by ansible-playbook (Debian's
ansible-core) on this machine against the harness's rtctld: its configuration directory stands for
/etc/rtctl, its private bus for the system bus. The profile puts a loop device the test makes on bfq."""
import json
import os
import re
import shutil
import subprocess

import machine
from conftest import ROOT, wait_until
from harness import HANG_SECONDS, RTCTL

PLAYBOOK = os.path.join(ROOT, "docs", "fleet", "rtctl.yml")
TEMPLATE = os.path.join(ROOT, "docs", "fleet", "templates", "studio.conf.j2")
SWITCH = "The profile is in force"
VERIFY = "Everything the profile sets is in place (rtctl verify)"
TASK = re.compile(r"^(?:TASK|RUNNING HANDLER) \[(.*)\] \*+$")
RESULT = re.compile(r"^(ok|changed|fatal|skipping|failed): \[localhost\]")
RECAP = re.compile(r"^localhost\s*: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


class Play:
    """One ansible-playbook run as its user sees it: exit status, output, each task's outcome
    (ok, changed, fatal, skipping) and the recap's counts."""

    def __init__(self, p):
        self.rc = p.returncode
        self.output = p.stdout + p.stderr
        self.tasks = {}
        task = None
        for line in p.stdout.splitlines():
            m = TASK.match(line)
            if m:
                task = m.group(1)
                continue
            m = RESULT.match(line)
            if m and task is not None:
                self.tasks.setdefault(task, m.group(1))
        m = RECAP.search(p.stdout)
        assert m, "no play recap:\n" + self.output
        self.ok, self.changed, self.unreachable, self.failed = (int(x) for x in m.groups())


def play(env, daemon, loop, **extra):
    """Runs the playbook with its defaults replaced only where this machine is not a fleet machine: the
    configuration directory, the bus, the reload (SIGHUP to the harness's rtctld), no systemd unit, and a
    profile that tunes nothing but the test's loop device."""
    tmp = os.path.join(env.dir, "ansible")
    os.makedirs(tmp, exist_ok=True)
    variables = {
        "rtctl_confdir": env.conf,
        "rtctl_bin": RTCTL,
        "rtctl_environment": {"DBUS_SYSTEM_BUS_ADDRESS": env.bus.address},
        "rtctl_reload_command": "kill -HUP %d" % daemon.proc.pid,
        "rtctl_manage_service": False,
        "rtctl_profile_include": "",
        "rtctl_scratch_match": "name:" + loop,
        "rtctl_scratch_scheduler": "bfq",
        "ansible_python_interpreter": "/usr/bin/python3",
    }
    variables.update(extra)
    with open(os.path.join(tmp, "vars.json"), "w") as f:
        json.dump(variables, f)
    e = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "DBUS_"))}
    # Ansible's own files stay in the test's directory; output without colour, as a log shows it.
    e.update(ANSIBLE_HOME=tmp, ANSIBLE_LOCAL_TEMP=tmp, ANSIBLE_REMOTE_TEMP=tmp, ANSIBLE_NOCOLOR="1",
             LC_ALL="C.UTF-8")  # ansible refuses to run in a locale that is not UTF-8
    p = subprocess.run(["ansible-playbook", "--connection=local", "-i", "localhost,", PLAYBOOK,
                        "-e", "@" + os.path.join(tmp, "vars.json")],
                       env=e, capture_output=True, text=True, timeout=HANG_SECONDS)
    return Play(p)


def sched(name):
    return machine.active_choice(machine.read("/sys/block/%s/queue/scheduler" % name))


def test_play_puts_the_profile_in_force_verified_and_a_second_run_changes_nothing(env):
    with machine.loop_devices(1) as (loop,):
        original = sched(loop)
        assert original != "bfq"
        d = env.start()
        assert env.rtctl_json("status")["profile"] == "off"

        first = play(env, d, loop)
        assert first.rc == 0 and first.failed == 0, first.output
        assert first.tasks[SWITCH] == "changed", first.output
        assert first.tasks[VERIFY] == "ok", first.output
        assert first.tasks["Reload rtctld"] == "changed", first.output
        status = env.rtctl_json("status")
        assert (status["profile"], status["base_profile"], status["state"]) == ("studio", "studio", "applied")
        assert status["failures"] == []
        assert sched(loop) == "bfq"
        # The files are rtctl's own, where an admin's go.
        with open(os.path.join(env.conf, "rtctl.conf.d", "50-fleet.conf")) as f:
            assert "DefaultProfile=studio" in f.read().splitlines()
        assert os.path.exists(os.path.join(env.conf, "profiles", "studio.conf"))

        second = play(env, d, loop)
        assert second.rc == 0 and second.changed == 0, second.output
        assert second.tasks[SWITCH] == "ok" and second.tasks[VERIFY] == "ok", second.output
        assert "Reload rtctld" not in second.tasks, second.output

        # Drift: someone sets the disk by hand. verify sees it; the next run puts it back and says so.
        with open("/sys/block/%s/queue/scheduler" % loop, "w") as f:
            f.write(original)
        assert env.rtctl("verify").returncode == 1
        third = play(env, d, loop)
        assert third.rc == 0 and third.changed == 1, third.output
        assert third.tasks[SWITCH] == "changed" and third.tasks[VERIFY] == "ok", third.output
        assert sched(loop) == "bfq"

        # At the next start with nothing remembered, DefaultProfile from the drop-in is what applies.
        d.stop()
        assert sched(loop) == original
        os.unlink(os.path.join(env.state, "active-profile"))
        env.start()
        assert env.rtctl_json("status")["profile"] == "studio"
        assert sched(loop) == "bfq"


def test_broken_profile_fails_the_play_with_file_line_key_and_the_last_good_stays(env):
    broken = os.path.join(env.dir, "studio-broken.conf.j2")
    shutil.copy(TEMPLATE, broken)
    with open(broken, "a") as f:
        f.write("ReadAheadKb=128\n")  # the key is ReadAheadKB
    with machine.loop_devices(1) as (loop,):
        d = env.start()
        good = play(env, d, loop)
        assert good.rc == 0, good.output
        assert sched(loop) == "bfq"

        bad = play(env, d, loop, rtctl_profile_template=broken)
        assert bad.rc != 0 and bad.failed == 1, bad.output
        assert bad.tasks[SWITCH] == "fatal", bad.output
        assert VERIFY not in bad.tasks, bad.output
        with open(os.path.join(env.conf, "profiles", "studio.conf")) as f:
            line = f.read().splitlines().index("ReadAheadKb=128") + 1
        where = "studio.conf:%d: ReadAheadKb=128: unknown key in [Block scratch]" % line
        assert where in bad.output, bad.output
        # The reload the handler asked for failed too, and said so in the daemon's log.
        assert wait_until(lambda: "Reload failed" in d.output()), d.output()
        assert d.running()
        status = env.rtctl_json("status")
        assert (status["profile"], status["state"]) == ("studio", "applied")
        assert sched(loop) == "bfq"
        assert env.rtctl("verify").returncode == 0

        # Run again unchanged: the broken file is still there, so the play still fails.
        again = play(env, d, loop, rtctl_profile_template=broken)
        assert again.rc != 0 and again.tasks[SWITCH] == "fatal" and where in again.output, again.output

        fixed = play(env, d, loop)
        assert fixed.rc == 0 and fixed.tasks[VERIFY] == "ok", fixed.output
        assert env.rtctl_json("status")["profile"] == "studio"


def test_fleet_md_shows_the_playbook_and_profile_that_are_tested():
    with open(os.path.join(ROOT, "docs", "fleet.md")) as f:
        doc = f.read()
    with open(PLAYBOOK) as f:
        assert "```yaml\n" + f.read() + "```\n" in doc
    with open(TEMPLATE) as f:
        assert "```jinja\n" + f.read() + "```\n" in doc
