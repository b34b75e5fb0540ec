"""Module tuning_snapshot's own code: its option spec (snapshot.snapshot_spec, the parts
from the snapshot registry), the diff kept only with --diff, and a failed restore that
fails the task after trying every item. What is recorded and restored is snapshot.py's,
tested in test_snapshot.py (through this module)."""

import pytest
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import snapshot
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.sysctl import sysctl_settings
from ansible_collections.gpuhost.tuning.plugins.modules import tuning_snapshot
from fixtures import procsys

KEYS = ["vm.swappiness", "kernel.numa_balancing"]


@pytest.fixture
def host(tmp_path):
    root = str(tmp_path / "host")
    procsys.sysctls(root, procsys.DESKTOP_SYSCTLS)
    return root


def run(root, check_mode=False, diff=False, **args):
    args.setdefault("root", root)
    args.setdefault("sysctl_keys", KEYS)
    return run_module(tuning_snapshot, args, check_mode=check_mode, diff=diff)


def test_the_parts_option_offers_the_snapshot_parts_in_their_order():
    spec = snapshot.snapshot_spec()
    assert spec["parts"]["choices"] == spec["parts"]["default"]
    assert spec["parts"]["default"][-1] == "files"


def test_an_unknown_part_is_refused(host):
    res = run(host, state="restore", parts=["nope"])
    assert res["failed"] and "nope" in res["msg"]


def test_query_on_a_host_without_snapshots_lists_none(host):
    res = run(host, state="query")
    assert res == dict(res, changed=False, snapshots=[])


def test_check_mode_records_nothing(host, snapshot_tree):
    before = snapshot_tree(host)
    res = run(host, check_mode=True)
    assert res["changed"] is True and res["snapshots"] == []
    assert snapshot_tree(host) == before


@pytest.mark.parametrize("diff", [False, True])
def test_the_diff_is_returned_only_with_diff(host, diff):
    run(host)
    sysctl_settings.write_sysctl(host, "vm.swappiness", "10")
    res = run(host, diff=diff, state="restore", parts=["sysctl"], check_mode=True)
    assert not res.get("failed"), res
    assert res["differs"] == ["sysctl vm.swappiness"]
    assert ("diff" in res) is diff


def test_a_restore_that_does_not_take_fails_the_task(host, monkeypatch):
    run(host)
    sysctl_settings.write_sysctl(host, "vm.swappiness", "10")

    def refuse(root, key, value):
        raise sysctl_settings.SysctlWriteError("%s: value did not read back" % key, "mismatch", key)

    monkeypatch.setattr(sysctl_settings, "write_sysctl", refuse)
    res = run(host, state="restore", parts=["sysctl"])
    assert res.get("failed") and res.get("failures"), res
    assert res["msg"].startswith("restore of /var/lib/gpuhost/original.json incomplete: 1 item")
    assert "vm.swappiness" in res["msg"]
