"""Host tier: rtctld from the build tree on this machine's real kernel (see harness.py)."""
import os
import shutil
import tempfile

import pytest

import machine
from harness import NOBODY, ROOT, RTCTL, Bus, Env, wait_until  # noqa: F401 (tests import them from here)


def pytest_collection_modifyitems(config, items):
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="the host tier changes the real kernel and needs root")
        for item in items:
            item.add_marker(skip)


def pytest_sessionstart(session):
    # Listing the tests (--collect-only) must not touch the machine: it takes no kernel lock, and a host
    # run that holds it may be using those loop devices right now.
    if os.geteuid() == 0 and not session.config.option.collectonly:
        # A run killed before its cleanup (a CI job cancelled, a session ended) leaves its daemons'
        # changes on the machine: the product's own crash recovery puts them back before anything is
        # measured against this machine.
        for line in machine.restore_leftovers(RTCTL):
            print("\nhost tier: an interrupted earlier run left changes: %s" % line)
        if machine.online_cpu1_left_offline():
            print("\nhost tier: cpu1 was offline, as an interrupted hotplug test leaves it: put online")
        stale = machine.remove_stale_test_loops()
        if stale:
            print("\nhost tier: removed loop devices an interrupted earlier run left: %s" % " ".join(stale))
        # Start where a freshly booted machine starts, not where earlier runs left the IRQs: a test that
        # passes only after others have moved every IRQ to cpu0 then fails on every run, not only on CI.
        moved = machine.spread_irqs_like_boot()
        print("\nhost tier: IRQs spread as at boot (effective affinity moved: %s)" % (" ".join(moved) or "none"))


@pytest.fixture(autouse=True, scope="module")
def machine_unchanged():
    """Every module leaves the machine as it found it, proven by a snapshot."""
    before = machine.snapshot()
    yield
    after = machine.snapshot()
    assert machine.diff(before, after) == [], "the module left the machine changed"


@pytest.fixture(scope="session")
def tmp_root():
    d = tempfile.mkdtemp(prefix="rtctl-test-")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def bus(tmp_root):
    b = Bus(tmp_root)
    yield b
    b.stop()


@pytest.fixture
def env(tmp_root, bus):
    e = Env(tmp_root, bus)
    yield e
    e.cleanup()




def pytest_configure(config):
    config.addinivalue_line("markers", "ppd_names(*names): the names power-profiles-daemon's D-Bus activation "
                                       "files name, for test_power_profiles.py's sdenv")
