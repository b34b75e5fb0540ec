"""devnodes_write: the unit that creates the NVIDIA device nodes at boot (before
pve-guests starts the containers), installed on a tree: planned, written with read-back,
linked as ``systemctl enable`` links it, idempotent, nothing in check mode, a unit folder
leading out of the root refused; systemctl only on the live host. The module:
tests/unit/plugins/modules/test_tune_device_nodes.py."""

import os

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.device_nodes import (
    device_nodes_part,
)


def _full(root, path):
    return os.path.join(root, path.lstrip("/"))


def test_install_on_a_tree_writes_unit_and_link_once(tmp_path):
    root = str(tmp_path)
    assert device_nodes_part.plan(root) == {"unit": "create", "link": "create", "old_unit": None}
    out = device_nodes_part.install(root)
    assert out["changed"] and not out["failed"] and out["commands"] == []
    assert out["msg"] == "files written; systemctl not run (root is %s, not the live host)" % (
        root)
    with open(_full(root, device_nodes_part.UNIT_PATH)) as handle:
        assert handle.read() == device_nodes_part.UNIT_TEXT
    assert os.readlink(_full(root, device_nodes_part.WANTS_LINK)) == device_nodes_part.UNIT_PATH
    assert out["diffs"][0]["before_header"] == "/dev/null"
    again = device_nodes_part.install(root)
    assert again["changed"] is False and again["plan"] == {"unit": "ok", "link": "ok"}


def test_an_edited_unit_is_updated_with_its_diff(tmp_path):
    root = str(tmp_path)
    device_nodes_part.install(root)
    with open(_full(root, device_nodes_part.UNIT_PATH), "w") as handle:
        handle.write("[Unit]\nDescription=edited\n")
    out = device_nodes_part.install(root)
    assert out["plan"]["unit"] == "update" and out["diffs"][0]["before"].endswith("edited\n")
    with open(_full(root, device_nodes_part.UNIT_PATH)) as handle:
        assert handle.read() == device_nodes_part.UNIT_TEXT


def test_check_mode_writes_nothing(tmp_path):
    root = str(tmp_path)
    out = device_nodes_part.install(root, check_mode=True)
    assert out["changed"] and out["msg"] == "check mode: nothing written"
    assert os.listdir(root) == []


def test_a_unit_folder_leading_out_of_the_root_is_refused(tmp_path):
    root, outside = tmp_path / "host", tmp_path / "outside"
    (root / "etc").mkdir(parents=True)
    outside.mkdir()
    os.symlink(str(outside), str(root / "etc" / "systemd"))
    out = device_nodes_part.install(str(root))
    assert out["failed"] and out["msg"].startswith("installing %s failed: " % device_nodes_part.UNIT_NAME)  # noqa: E501
    assert os.listdir(str(outside)) == []
