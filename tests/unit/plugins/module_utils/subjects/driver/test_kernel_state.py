"""kernelstate.kernel_state (module kernel_state's result) on the seed host
(tests/fixtures/hosts.py: running 6.8.12-9-pve with nvidia by DKMS, 6.14.11-5-bpo12-pve
installed as newest without headers or build, systemd-boot through proxmox-boot-tool)."""

import os

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import kernel_state
from fixtures import hosts

PARAMS = {"amd_pstate": "active", "boot": "zfs"}


@pytest.fixture
def seed(tmp_path):
    root = str(tmp_path / "host")
    hosts.seed_host(root)
    return root


def test_the_seed_host_running_installed_target_and_the_audits_rules(seed):
    out = kernel_state.kernel_state(seed, kernel=hosts.SEED_NEW, params=PARAMS,
                                    absent=["quiet", "boot"])
    assert out["running"] == {"kernel": hosts.SEED_RUNNING, "cmdline": hosts.PVE_CMDLINE,
                              # what the command line lacks, and still has of ``absent``
                              "missing": ["amd_pstate=active", "!boot"]}
    assert out["kernels"] == {"installed": [hosts.SEED_RUNNING, hosts.SEED_NEW],
                              "newest": hosts.SEED_NEW}
    target = out["target"]
    assert target["release"] == hosts.SEED_NEW and target["installed"] is True
    assert target["headers"] is False and target["flavour"] == "proxmox"
    assert target["headers_package"] == "proxmox-headers-%s" % hosts.SEED_NEW
    assert [(e["name"], e["kernel"], e["state"]) for e in out["dkms"]] == [
        ("nvidia", hosts.SEED_RUNNING, "installed")]
    assert out["configured_cmdline"] == hosts.PVE_CMDLINE
    assert out["initramfs_kernels"] == [hosts.SEED_RUNNING, hosts.SEED_NEW]
    assert out["dkms_needed"] == ["nvidia"]


def test_no_kernel_asked_no_target(seed):
    out = kernel_state.kernel_state(seed)
    assert out["target"] is None
    assert out["running"]["missing"] == []


def test_a_kernel_not_installed_is_a_target_not_installed(seed):
    out = kernel_state.kernel_state(seed, kernel="6.17.2-1-pve")
    assert out["target"]["installed"] is False
    assert out["target"]["flavour"] == "proxmox"


def test_without_proc_cmdline_nothing_is_missing_and_cmdline_is_none(seed):
    os.unlink(os.path.join(seed, "proc/cmdline"))
    out = kernel_state.kernel_state(seed, params=PARAMS)
    assert out["running"]["cmdline"] is None and out["running"]["missing"] == []


def test_an_unreadable_dkms_tree_or_boot_config_is_empty_not_a_crash(seed, monkeypatch):
    def boom(*args, **kwargs):
        raise OSError("Permission denied")

    def bad_config(*args, **kwargs):
        raise kernel_state.kernel_cmdline.BootConfigError("no boot configuration found")

    monkeypatch.setattr(kernel_state.dkms, "tree_status", boom)
    monkeypatch.setattr(kernel_state.kernel_cmdline, "configured_cmdline", bad_config)
    out = kernel_state.kernel_state(seed, kernel=hosts.SEED_NEW)
    assert out["dkms"] == [] and out["configured_cmdline"] is None
    # no DKMS entry known: no module is needed for the target
    assert out["dkms_needed"] == []


def test_an_empty_root_is_all_unknown(tmp_path):
    out = kernel_state.kernel_state(str(tmp_path))
    assert out["kernels"] == {"installed": [], "newest": None}
    assert out["running"]["cmdline"] is None
