"""What a journal may make `rtctl restore` do as root: only what the daemon itself journals."""
import json
import os


def test_restore_refuses_a_planted_boot_file_entry(env, tmp_path):
    # issue 20: one boot-file entry in the runtime journal made `rtctl restore` create any file.
    target = str(tmp_path / "planted")
    entries = [{"kind": "boot-file", "tuner": "bootargs", "object": target,
                "original": "content:planted by hand"}]
    os.makedirs(env.run)
    with open(os.path.join(env.run, "journal.json"), "w") as f:
        json.dump({"version": 1, "entries": entries}, f)
    p = env.rtctl("restore")
    assert p.returncode != 0, (p.returncode, p.stdout, p.stderr)
    assert "%s: original lost: kind 'boot-file' does not belong in the runtime journal" % target in p.stderr
    assert not os.path.exists(target)
