"""host_tune's opt-in device_nodes part: the unit before pve-guests.service, on a seed tree
whose container starts at boot and binds /dev/nvidia-uvm."""

import os

import pytest
from fixtures import devnodes as dn
from fixtures import hosts
from fixtures import lxc as lxcfix
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.device_nodes import (
    device_nodes_part,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import snapshot, tune
from ansible_collections.gpuhost.tuning.plugins.modules import host_tune

WANTED = hosts.common_wanted()
UNIT = device_nodes_part.UNIT_PATH.lstrip("/")
LINK = device_nodes_part.WANTS_LINK.lstrip("/")


@pytest.fixture
def seed(tmp_path):
    root = str(tmp_path / "seed")
    hosts.seed_host(root)
    text = lxcfix.container_129_text("before").replace(
        "ostype: ubuntu\n", "onboot: 1\nostype: ubuntu\n", 1)
    lxcfix.write_config(root, 129, text)
    dn.write_listing(root, dn.clean_nodes(uvm=504))
    return root


def run(root, parts, check_mode=False, diff=False):
    return run_module(host_tune, hosts.as_wanted({"root": root, "host": "gpu01", "parts": parts,
                                                  "sysctl": WANTED["sysctl"]}),
                      check_mode=check_mode, diff=diff)


def unit_findings(root):
    return [f for f in audit.audit(root, WANTED)["findings"]
            if f["id"] == "device_nodes_unit_missing"]


def test_off_by_default():
    assert "device_nodes" in tune.PARTS and "device_nodes" not in tune.DEFAULT_PARTS
    assert tune.MANAGED["device_nodes_unit_missing"] == "device_nodes"


def test_installs_the_unit_the_audit_accepts_and_a_second_run_changes_nothing(seed):
    assert len(unit_findings(seed)) == 1
    first = run(seed, ["device_nodes", "verify"])
    assert first.get("failed") is not True, first.get("msg")
    assert first["changed"] is True
    with open(os.path.join(seed, UNIT)) as handle:
        text = handle.read()
    assert "Before=pve-guests.service" in text and "nvidia-modprobe -u -c=0" in text
    assert os.readlink(os.path.join(seed, LINK)) == device_nodes_part.UNIT_PATH
    assert unit_findings(seed) == []
    row = [r for r in first["rows"] if r["part"] == "device_nodes"][0]
    assert row["status"] == "changed" and "systemctl not run" in row["note"]
    second = run(seed, ["device_nodes", "verify"])
    assert second["changed"] is False
    assert [r for r in second["rows"] if r["part"] == "device_nodes"][0]["status"] == "ok"


def test_check_mode_shows_the_unit_and_writes_nothing(seed):
    result = run(seed, ["device_nodes"], check_mode=True, diff=True)
    assert result["changed"] is True
    assert not os.path.lexists(os.path.join(seed, UNIT))
    assert not os.path.lexists(os.path.join(seed, LINK))
    diffs = result["diff"] if isinstance(result["diff"], list) else [result["diff"]]
    assert any("Before=pve-guests.service" in d.get("after", "") for d in diffs)


def test_a_changed_unit_is_rewritten_and_revert_removes_both_files(seed):
    os.makedirs(os.path.dirname(os.path.join(seed, UNIT)))
    with open(os.path.join(seed, UNIT), "w") as handle:
        handle.write("[Unit]\n")           # an older or edited copy of ours
    result = run(seed, ["snapshot", "device_nodes"])
    assert result.get("failed") is not True, result.get("msg")
    with open(os.path.join(seed, UNIT)) as handle:
        assert handle.read() == device_nodes_part.UNIT_TEXT
    restored = snapshot.restore(seed, "original")
    assert restored["failures"] == []
    with open(os.path.join(seed, UNIT)) as handle:
        assert handle.read() == "[Unit]\n"
    assert not os.path.lexists(os.path.join(seed, LINK))


def test_a_unit_folder_linked_out_of_the_root_is_refused(seed, tmp_path):
    decoy = tmp_path / "decoy-systemd"
    decoy.mkdir()
    os.makedirs(os.path.join(seed, "etc"), exist_ok=True)
    os.symlink(str(decoy), os.path.join(seed, "etc/systemd"))
    result = run(seed, ["device_nodes"])
    assert result.get("failed") is True
    assert any("device_nodes" in f and "out of root" in f for f in result["failures"])
    assert os.listdir(str(decoy)) == []
