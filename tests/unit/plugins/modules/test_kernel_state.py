"""Module kernel_state on the seed host (tests/fixtures/hosts.py): read-only, the same in
check mode, bad options refused before anything is read (what it returns is
kernelstate.kernel_state's, tested in test_kernelstate.py)."""

import pytest
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.modules import kernel_state
from fixtures import hosts


@pytest.fixture
def seed(tmp_path):
    root = str(tmp_path / "host")
    hosts.seed_host(root)
    return root


def test_the_seed_host_and_its_next_kernel(seed, snapshot_tree):
    before = snapshot_tree(seed)
    args = {"root": seed, "kernel": hosts.SEED_NEW, "params": {"amd_pstate": "active"}}
    res = run_module(kernel_state, args)
    assert not res.get("failed") and res["changed"] is False, res
    assert res["running"]["kernel"] == hosts.SEED_RUNNING
    assert res["running"]["missing"] == ["amd_pstate=active"]
    assert res["kernels"]["newest"] == hosts.SEED_NEW
    assert res["target"]["installed"] is True and res["target"]["headers"] is False
    assert res["dkms_needed"] == ["nvidia"]
    checked = run_module(kernel_state, args, check_mode=True)
    assert dict(checked, invocation=None) == dict(res, invocation=None)
    assert snapshot_tree(seed) == before


def test_next_boot_names_the_kernels_whose_initramfs_counts(seed):
    res = run_module(kernel_state, {"root": seed, "next_boot": hosts.SEED_NEW})
    assert res["target"] is None
    assert res["initramfs_kernels"] == [hosts.SEED_RUNNING, hosts.SEED_NEW]


@pytest.mark.parametrize("args,text", [
    ({"kernel": "../../etc"}, "kernel: '../../etc' is not allowed: a kernel release like"),
    ({"params": {"bad\nkey": "1"}}, "params"),
])
def test_bad_options_are_refused(seed, args, text):
    res = run_module(kernel_state, dict(args, root=seed))
    assert res["failed"] and text in res["msg"], res
    assert res["msg"].endswith("(nothing was read or written)")
