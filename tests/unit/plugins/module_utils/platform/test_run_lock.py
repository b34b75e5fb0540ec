"""runlock: the run lock one gpuhost.tuning run holds on a host across its tasks
(``<root>/run/gpuhost-tuning.run.lock``, a JSON object), read without ever blocking or
following a link, bounded in size (READ_MAX, FIELD_MAX), and taken, joined and released by
token. The module's side and whole playbooks: tests/hostile/test_run_lock.py."""

import json
import os

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import run_lock
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    LockError,
    PathError,
)

HOLDER = {"controller": "ctl01", "user": "ops", "play": "Tune GPU hosts", "purpose": "tune"}


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.delenv(run_lock.ENV_TOKEN, raising=False)
    return str(tmp_path)


def _path(root):
    return os.path.join(root, "run", "gpuhost-tuning.run.lock")


def test_acquire_writes_the_holder_and_release_removes_it_and_its_folder(root):
    got = run_lock.acquire(root, HOLDER)
    assert got["changed"] and got["held"] and not got["inherited"]
    assert len(got["token"]) == 32 and got["path"] == _path(root)
    with open(_path(root)) as handle:
        doc = json.load(handle)
    assert doc["token"] == got["token"] and doc["play"] == "Tune GPU hosts"
    assert doc["made_run_dir"] is True and isinstance(doc["since_epoch"], int)
    assert run_lock.read(root)["token"] == got["token"]
    gone = run_lock.release(root, got["token"])
    assert gone["changed"] and not os.path.exists(os.path.join(root, "run"))
    again = run_lock.release(root, got["token"])
    assert again["changed"] is False and again["msg"].startswith("no run lock at ")


def test_a_second_run_is_refused_naming_the_first(root):
    first = run_lock.acquire(root, HOLDER)
    with pytest.raises(LockError) as err:
        run_lock.acquire(root, dict(HOLDER, play="Revert"))
    text = str(err.value)
    assert text.startswith("the run lock %s is held by tune (play 'Tune GPU hosts') run by ops"
                           " from controller ctl01" % _path(root))
    assert "wait for that run to finish" in text
    # the holder's own token keeps it, unchanged
    kept = run_lock.acquire(root, HOLDER, token=first["token"])
    assert kept["held"] and kept["changed"] is False
    with pytest.raises(LockError, match="the token does not match"):
        run_lock.release(root, "0" * 32)


def test_a_task_of_the_holding_run_joins_it_through_the_environment(root, monkeypatch):
    first = run_lock.acquire(root, HOLDER)
    monkeypatch.setenv(run_lock.ENV_TOKEN, first["token"])
    joined = run_lock.acquire(root, dict(HOLDER, purpose="reboot_verify"))
    assert joined["inherited"] and joined["held"] and joined["changed"] is False
    assert run_lock.refuse_foreign(root) is None
    monkeypatch.setenv(run_lock.ENV_TOKEN, "not-a-token")
    assert run_lock.inherited_token() is None
    assert run_lock.refuse_foreign(root).startswith("the run lock ")


def test_check_mode_reads_only(root):
    got = run_lock.acquire(root, HOLDER, check_mode=True)
    assert got["changed"] and not got["held"] and not os.path.exists(os.path.join(root, "run"))


def test_a_stale_lock_is_named_stale(root):
    got = run_lock.acquire(root, HOLDER)
    holder = run_lock.read(root)
    late = holder["since_epoch"] + run_lock.STALE_AFTER_S + 60
    text = run_lock.describe(holder, root, now=late)
    assert "probably stale" in text and "remove %s by hand" % _path(root) in text
    assert "probably stale" not in run_lock.describe(holder, root, now=holder["since_epoch"])
    run_lock.release(root, got["token"])


def test_a_damaged_lock_still_locks(root):
    os.makedirs(os.path.join(root, "run"))
    with open(_path(root), "w") as handle:
        handle.write("garbage\n")
    assert run_lock.read(root) == {"unreadable": "garbage"}
    with pytest.raises(LockError, match="an unknown run"):
        run_lock.acquire(root, HOLDER)


def test_a_link_or_fifo_in_its_place_is_never_followed_or_opened(root):
    os.makedirs(os.path.join(root, "run"))
    os.symlink("/etc/passwd", _path(root))
    assert run_lock.read(root) == {"unreadable": "a symbolic link to /etc/passwd, not a "
                                   "regular file"}
    os.unlink(_path(root))
    os.mkfifo(_path(root))
    assert run_lock.read(root) == {"unreadable": "a special file, not a regular file"}


def test_an_oversized_lock_keeps_its_token_and_cuts_every_field(root):
    token = "ab" * 16
    os.makedirs(os.path.join(root, "run"))
    filler = "x" * (run_lock.READ_MAX + 10)
    with open(_path(root), "w") as handle:
        handle.write('{"play": "%s", "token": "%s", "pid": 42, "junk": "%s"}\n'
                     % ("p" * 1000, token, filler))
    holder = run_lock.read(root)
    assert holder["token"] == token and holder["pid"] == 42
    assert len(holder["play"]) == run_lock.FIELD_MAX and holder["play"].endswith("...")
    # the run holding it is not locked out, another one is
    assert run_lock.acquire(root, HOLDER, token=token)["held"]
    with pytest.raises(LockError):
        run_lock.acquire(root, HOLDER)


def test_long_fields_of_a_whole_lock_are_cut(root):
    os.makedirs(os.path.join(root, "run"))
    with open(_path(root), "w") as handle:
        json.dump({"token": "cd" * 16, "user": "u" * 5000}, handle)
    assert len(run_lock.read(root)["user"]) == run_lock.FIELD_MAX


def test_a_run_folder_leading_out_of_the_root_is_refused(tmp_path):
    root, outside = tmp_path / "host", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    os.symlink(str(outside), str(root / "run"))
    with pytest.raises(PathError, match="out of root"):
        run_lock.acquire(str(root), HOLDER)
    assert os.listdir(str(outside)) == []
