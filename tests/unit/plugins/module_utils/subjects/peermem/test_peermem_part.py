"""peermem: what to do about nvidia_peermem (GPUDirect RDMA) from the audit's ``nvidia``
facts, and the modules-load.d file that loads it at boot (written atomically, 0644,
idempotent, nothing in check mode). host_tune's part through the module:
tests/unit/plugins/modules/test_host_tune.py."""

import os
import stat

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.peermem import peermem_part

IB = {"ib_core": {"loaded": True}, "nvidia_peermem": {"loaded": False, "available": True}}


@pytest.mark.parametrize("mode,nvidia,root,action,status", [
    ("skip", IB, "/", "none", "skipped"),
    ("auto", {"ib_core": {}}, "/", "none", "not applicable"),          # PCIe-only host
    ("auto", dict(IB, nvidia_peermem={"loaded": True}), "/", "persist", "ok"),
    ("auto", dict(IB, nvidia_peermem={"available": False}), "/", "none", "not applicable"),
    ("auto", IB, "/srv/tree", "persist", "skipped"),                    # not the live host
    ("auto", IB, "/", "load", "load"),
    ("load", {"ib_core": {}, "nvidia_peermem": {}}, "/", "load", "load"),  # forced
])
def test_decision(mode, nvidia, root, action, status):
    got = peermem_part.decision(mode, nvidia, root)
    assert (got["action"], got["status"]) == (action, status)


def test_is_live():
    assert peermem_part.is_live("/") and peermem_part.is_live(None) and peermem_part.is_live("//")
    assert not peermem_part.is_live("/srv/tree")


def test_persist_writes_the_file_once_and_check_mode_nothing(tmp_path):
    root = str(tmp_path)
    path = os.path.join(root, peermem_part.PEERMEM_CONF.lstrip("/"))
    steps = {}
    diffs = peermem_part.persist(root, True, steps)
    assert steps["nvidia_peermem_at_boot"]["changed"] and diffs[0]["before_header"] == "/dev/null"
    assert not os.path.exists(os.path.dirname(path))
    steps = {}
    peermem_part.persist(root, False, steps)
    assert steps["modules_load_dir"]["changed"] and steps["nvidia_peermem_at_boot"]["changed"]
    with open(path) as handle:
        assert handle.read() == peermem_part.PEERMEM_TEXT
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
    again = {}
    assert peermem_part.persist(root, False, again) == []
    assert not again["nvidia_peermem_at_boot"]["changed"]


def test_persist_fixes_a_wrong_mode(tmp_path):
    root = str(tmp_path)
    peermem_part.persist(root, False, {})
    path = os.path.join(root, peermem_part.PEERMEM_CONF.lstrip("/"))
    os.chmod(path, 0o600)
    steps = {}
    peermem_part.persist(root, False, steps)
    assert steps["nvidia_peermem_at_boot"]["changed"]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644


def test_a_folder_that_cannot_be_made_is_a_failed_step(tmp_path):
    root = str(tmp_path)
    os.makedirs(os.path.join(root, "etc"))
    open(os.path.join(root, "etc", "modules-load.d"), "w").close()  # a file in the way
    steps = {}
    peermem_part.persist(root, False, steps)
    assert steps["nvidia_peermem_at_boot"]["failed"]
    assert steps["nvidia_peermem_at_boot"]["msg"].startswith("writing ")
