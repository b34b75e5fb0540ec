"""Module run_lock: acquire and release the run lock by token, check mode writing nothing,
a second run and a wrong token refused with ``(nothing was changed)``, bad tokens refused
before anything is read (the library: test_runlock.py; playbooks holding it:
tests/hostile/test_run_lock.py)."""

import os

import pytest
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import run_lock as runlock
from ansible_collections.gpuhost.tuning.plugins.modules import run_lock


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.delenv(runlock.ENV_TOKEN, raising=False)
    return str(tmp_path)


def _lock(root):
    return os.path.join(root, "run", "gpuhost-tuning.run.lock")


def test_acquire_then_release(root):
    got = run_module(run_lock, {"root": root, "play": "Tune", "purpose": "tune"})
    assert not got.get("failed") and got["changed"] and got["held"], got
    assert os.path.exists(_lock(root)) and got["holder"]["play"] == "Tune"
    again = run_module(run_lock, {"root": root, "token": got["token"]})
    assert again["changed"] is False and again["held"]
    gone = run_module(run_lock, {"root": root, "state": "released", "token": got["token"]})
    assert gone["changed"] and not os.path.exists(_lock(root))


def test_check_mode_writes_no_lock(root):
    res = run_module(run_lock, {"root": root}, check_mode=True)
    assert res["changed"] and not os.path.exists(os.path.join(root, "run"))


def test_another_run_and_a_wrong_token_are_refused(root):
    run_module(run_lock, {"root": root, "play": "Tune"})
    other = run_module(run_lock, {"root": root, "play": "Revert"})
    assert other["failed"] and other["changed"] is False
    assert other["msg"].startswith("run_lock: the run lock ")
    assert other["msg"].endswith("(nothing was changed)")
    wrong = run_module(run_lock, {"root": root, "state": "released", "token": "0" * 32})
    assert wrong["failed"] and "the token does not match" in wrong["msg"]
    assert os.path.exists(_lock(root))


@pytest.mark.parametrize("args,text", [
    ({"token": "XYZ"}, "token: 'XYZ' is not allowed: the 32 hex digits"),
    ({"state": "released"}, "token"),
])
def test_bad_tokens_are_refused_before_anything_is_read(root, args, text):
    res = run_module(run_lock, dict(args, root=root))
    assert res["failed"] and text in res["msg"], res
    assert res["msg"].endswith("(nothing was read or written)")
