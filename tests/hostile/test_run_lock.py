"""The run lock: a second run is refused naming the holder and changes nothing; release
needs the token; a stale lock is called stale; check mode writes no lock."""

import json
import os
import subprocess

from digest import changed, digest
from fixtures import hosts
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import run_lock as runlock
from ansible_collections.gpuhost.tuning.plugins.modules import (
    dkms_build,
    host_tune,
    run_lock,
    sysctl_settings,
    tuning_snapshot,
)

SYSCTL = {"kernel.numa_balancing": "0", "vm.swappiness": "10"}
HOLDER = {"controller": "ctl1", "user": "alice", "play": "Revert the tuning",
          "purpose": "gpuhost.tuning.tune revert"}
LOCK = "run/gpuhost-tuning.run.lock"


def _take(root, **extra):
    args = dict(HOLDER, root=root, **extra)
    result = run_module(run_lock, args)
    assert not result.get("failed"), result.get("msg")
    return result


def test_a_second_revert_or_tune_is_refused_naming_the_holder(seed, monkeypatch):
    monkeypatch.delenv(runlock.ENV_TOKEN, raising=False)
    taken = _take(seed)
    assert taken["changed"] is True and taken["held"] is True
    before = digest(os.path.dirname(seed))
    for module, args in ((tuning_snapshot, {"state": "restore"}),
                         (sysctl_settings, {"state": "absent"}),
                         (host_tune, {"sysctl": SYSCTL}),
                         (dkms_build, {"name": "nvidia", "executable": "/bin/true"}),
                         (run_lock, HOLDER)):
        result = run_module(module, dict(args, root=seed))
        assert result.get("failed") is True, result
        for word in ("alice", "ctl1", "Revert the tuning", "gpuhost.tuning.tune revert",
                     "remove %s by hand" % os.path.join(seed, LOCK)):
            assert word in result["msg"], result["msg"]
        assert "probably stale" not in result["msg"]
    assert changed(before, digest(os.path.dirname(seed))) == []
    # the holder's own steps go on (token in the environment), then it releases
    monkeypatch.setenv(runlock.ENV_TOKEN, taken["token"])
    tuned = run_module(host_tune, hosts.as_wanted({"sysctl": SYSCTL, "root": seed}))
    assert not tuned.get("failed"), tuned.get("msg")
    again = _take(seed, token=taken["token"])
    assert again["changed"] is False and again["held"] is True
    gone = run_module(run_lock, {"state": "released", "token": taken["token"], "root": seed})
    assert gone["changed"] is True and not os.path.exists(os.path.join(seed, LOCK))


def test_release_with_a_wrong_token_refuses(seed):
    taken = _take(seed)
    before = digest(seed)
    result = run_module(run_lock, {"state": "released", "token": "0" * 32, "root": seed})
    assert result["failed"] and "the token does not match" in result["msg"]
    assert "alice" in result["msg"]
    assert changed(before, digest(seed)) == []
    right = run_module(run_lock, {"state": "released", "token": taken["token"], "root": seed})
    assert right["changed"] is True
    # a lock already gone (a reboot empties /run) is nothing to release
    after = run_module(run_lock, {"state": "released", "token": taken["token"], "root": seed})
    assert after["changed"] is False and not after.get("failed")


def test_a_stale_lock_is_named_stale_and_kept(seed, monkeypatch):
    monkeypatch.delenv(runlock.ENV_TOKEN, raising=False)
    _take(seed)
    path = os.path.join(seed, LOCK)
    with open(path) as handle:
        record = json.load(handle)
    record["since_epoch"] -= runlock.STALE_AFTER_S + 600
    with open(path, "w") as handle:
        json.dump(record, handle)
    before = digest(seed)
    result = run_module(sysctl_settings, {"values": SYSCTL, "root": seed})
    assert result["failed"] and "older than 6 h and probably stale" in result["msg"]
    assert "remove %s by hand" % path in result["msg"]
    assert changed(before, digest(seed)) == []


def test_an_unreadable_lock_still_refuses(seed):
    os.makedirs(os.path.join(seed, "run"), exist_ok=True)
    with open(os.path.join(seed, LOCK), "w") as handle:
        handle.write("garbage")
    result = run_module(run_lock, dict(HOLDER, root=seed))
    assert result["failed"] and "an unknown run (the file reads 'garbage')" in result["msg"]


def test_check_mode_writes_no_lock(tmp_path):
    root = str(tmp_path / "host")
    os.makedirs(root)
    hosts.seed_host(root)
    before = digest(str(tmp_path))
    taken = run_module(run_lock, dict(HOLDER, root=root), check_mode=True)
    assert taken["changed"] is True and taken["held"] is False
    gone = run_module(run_lock, {"state": "released", "token": taken["token"], "root": root},
                      check_mode=True)
    assert gone["changed"] is False
    assert changed(before, digest(str(tmp_path))) == []


def test_release_needs_a_token(shared_seed):
    result = run_module(run_lock, {"state": "released", "root": shared_seed})
    assert result["failed"] and "token" in result["msg"]


def test_revert_playbook_refused_while_another_run_holds_the_lock(seed):
    """ansible-playbook gpuhost.tuning.revert, for real, while another run's lock is held:
    the host fails at the lock naming the holder and the tree is left as it was."""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    _take(seed)
    before = digest(os.path.dirname(seed))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(repo, "collections"),
               ANSIBLE_CONFIG=os.path.join(repo, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    env.pop(runlock.ENV_TOKEN, None)
    proc = subprocess.run(
        [os.path.join(repo, ".venv/bin/ansible-playbook"), "gpuhost.tuning.revert",
         "-c", "local", "-i", "localhost,",
         "-e", "ansible_python_interpreter=%s" % os.path.join(repo, ".venv/bin/python"),
         "-e", "gpuhost_root=%s" % seed],
        cwd=repo, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert "Take the run lock" in proc.stdout
    for word in ("held by gpuhost.tuning.tune revert (play 'Revert the tuning') run by alice "
                 "from controller ctl1", "remove %s by hand" % os.path.join(seed, LOCK)):
        assert word in proc.stdout, proc.stdout[-3000:]
    assert changed(before, digest(os.path.dirname(seed))) == []
