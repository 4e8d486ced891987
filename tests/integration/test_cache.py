"""[CPU] CacheWays= on the real kernel. This host's kernel has no resctrl (no /sys/fs/resctrl): a profile
asking for cache ways is applied with the rest, the cache partition reported as not supported with the
way to mount resctrl, and the daemon keeps running. The partition itself (group, schemata, restore from
the journal, hotplug) is tested on fixture trees in tests/unit/test-cache.c."""
import os

import pytest

import machine

RESCTRL = "/sys/fs/resctrl"
PROFILE = """[Profile]
Description=test: cache ways for the isolated CPU
[CPU]
Isolate=1
CacheWays=2
"""


@pytest.fixture(autouse=True)
def cpu1_back_online():
    with machine.cpu1_hotplug_guard():
        yield


def resctrl_notes(status):
    return [u for u in status["unsupported"] if u["object"] == RESCTRL]


def test_cache_ways_not_supported_without_resctrl(env):
    if os.path.exists(RESCTRL + "/info"):
        pytest.skip("resctrl is mounted on this host: this test is for kernels without it")
    env.profile("cw", PROFILE)
    d = env.start("--profile", "cw")
    status = env.rtctl_json("status")
    assert status["state"] == "applied"
    assert status["isolated_cpus"] == "1"
    assert [f for f in status["failures"] if "resctrl" in f["object"]] == []
    notes = resctrl_notes(status)
    assert len(notes) == 1, status["unsupported"]
    why = "is absent" if not os.path.exists(RESCTRL) else "resctrl is not mounted"
    assert why in notes[0]["message"]
    assert "mount -t resctrl resctrl /sys/fs/resctrl" in notes[0]["message"]
    # Nothing was made or journalled for it, and the daemon is still there to answer and to restore.
    assert not os.path.exists(RESCTRL + "/rtctl-isolated")
    assert [e for e in env.journal["entries"] if e["object"].startswith(RESCTRL)] == []
    assert d.running()
    assert env.rtctl_json("status")["state"] == "applied"
    d.stop()
    assert not os.path.exists(RESCTRL + "/rtctl-isolated")
