"""Module host_audit run as Ansible runs it, on the seed host (tests/fixtures/hosts.py)
with the options role audit passes (``hosts.common_wanted``)."""

import pytest
from fixtures import hosts
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.modules import host_audit

WANTED = hosts.common_wanted()


def test_host_audit_module(tmp_path):
    hosts.seed_host(tmp_path)
    args = hosts.as_wanted(dict(WANTED, root=str(tmp_path)))
    result = run_module(host_audit, args, check_mode=True)
    assert result["changed"] is False and "failed" not in result
    assert result["worst"] == "critical"
    assert result["counts"]["high"] == len([f for f in result["audit"]["findings"]
                                            if f["severity"] == "high"])
    assert result["headline"].startswith("worst critical")
    assert "files_read" not in result
    recorded = run_module(host_audit, dict(args, record_files=True))
    assert recorded["files_read"]["/proc/sys/kernel/numa_balancing"] == "read"
    assert recorded["files_read"]["/var/lib/dkms"] == "list"


def test_the_audit_writes_nothing_in_either_mode(tmp_path, snapshot_tree):
    root = str(tmp_path / "host")
    hosts.seed_host(root)
    before = snapshot_tree(root)
    args = hosts.as_wanted(dict(WANTED, root=root))
    normal = run_module(host_audit, args)
    checked = run_module(host_audit, args, check_mode=True)
    assert normal["changed"] is False and checked["changed"] is False
    assert normal["counts"] == checked["counts"] and normal["worst"] == checked["worst"]
    assert snapshot_tree(root) == before


@pytest.mark.parametrize("args,text", [
    ({"capture": "rel.tar.gz"}, "capture: 'rel.tar.gz' is not allowed: a capture tarball "
                                "audited instead of root"),
    ({"bandwidth_min_pct": 0}, "bandwidth_min_pct: 0 is not allowed: an integer from 1 to 100"),
    ({"sysctl": {"vm.swappiness": "10\nvm.x = 1"}}, "sysctl.vm.swappiness: "),
    ({"lxc_config_dir": "/../etc"}, "outside root"),
])
def test_bad_options_are_refused_before_anything_is_read(tmp_path, args, text):
    res = run_module(host_audit, dict(args, root=str(tmp_path)))
    assert res["failed"] and res["msg"].startswith("host_audit: ") and text in res["msg"], res
    assert res["msg"].endswith("(nothing was read or written)")
