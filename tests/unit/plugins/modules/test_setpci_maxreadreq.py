"""The setpci_maxreadreq module's main(): what a user sees in the result."""

import errno
import os

import pytest
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import setpci_maxreadreq
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import Runner
from ansible_collections.gpuhost.tuning.plugins.modules import setpci_maxreadreq as module
from modrun import run_module

from fixtures import pci as fx


@pytest.fixture
def seed(tmp_path):
    return str(tmp_path), fx.seed_gpus(tmp_path)


def _by_address(result):
    return dict((d["address"], d) for d in result["devices"])


def test_sets_gpus_and_root_ports_only(seed):
    root, info = seed
    untouched = [info["nvme"], info["nvme_root_port"]] + info["audio"]
    before = dict((a, fx.read_config(root, a)) for a in untouched)
    result = run_module(module, {"root": root})
    assert result["changed"] is True and not result.get("failed")
    devices = result["devices"]
    assert [d["address"] for d in devices] == info["gpus"] + info["root_ports"]
    assert [d["role"] for d in devices] == ["endpoint"] * 8 + ["upstream"] * 8
    for entry in devices:
        assert (entry["before"], entry["after"]) == (512, 4096)
        assert fx.devctl_of(root, entry["address"]) == int(entry["devctl_after"], 16)
    gpu = _by_address(result)["0000:01:00.0"]
    assert gpu == {"address": "0000:01:00.0", "role": "endpoint", "vendor": "10de",
                   "device": "2bb5", "before": 512, "after": 4096,
                   "devctl_before": "0x2936", "devctl_after": "0x5936"}
    assert _by_address(result)["0000:00:01.1"]["devctl_after"] == "0x593f"
    for address in untouched:
        assert fx.read_config(root, address) == before[address], address
    assert result["failed_devices"] == []


def test_idempotent(seed):
    root, _info = seed
    assert run_module(module, {"root": root})["changed"] is True
    again = run_module(module, {"root": root})
    assert again["changed"] is False
    assert all(d["before"] == d["after"] == 4096 for d in again["devices"])


def test_check_mode_writes_nothing(seed, snapshot_tree):
    root, _info = seed
    before = snapshot_tree(root)
    result = run_module(module, {"root": root, "mrrs_size": 2048}, check_mode=True)
    assert result["changed"] is True
    assert all(d["after"] == 2048 for d in result["devices"])
    assert _by_address(result)["0000:81:00.0"]["devctl_after"] == "0x4936"
    assert snapshot_tree(root) == before


def test_check_mode_warns_about_lockdown(seed):
    root, _info = seed
    fx.set_lockdown(root, "integrity")
    result = run_module(module, {"root": root}, check_mode=True)
    assert result["changed"] is True
    assert "lockdown mode 'integrity'" in str(result.get("warnings"))


def test_query_reports_and_writes_nothing(seed, snapshot_tree):
    root, _info = seed
    before = snapshot_tree(root)
    result = run_module(module, {"root": root, "state": "query", "mrrs_size": 128})
    assert result["changed"] is False
    assert len(result["devices"]) == 16
    assert all(d["before"] == d["after"] == 512 for d in result["devices"])
    assert snapshot_tree(root) == before


def test_diff_mode(seed):
    root, _info = seed
    result = run_module(module, {"root": root, "devices": ["01:00.0"]}, diff=True)
    assert result["diff"]["before"] == ("0000:01:00.0 endpoint: 512\n"
                                        "0000:00:01.1 upstream: 512\n")
    assert result["diff"]["after"] == ("0000:01:00.0 endpoint: 4096\n"
                                       "0000:00:01.1 upstream: 4096\n")


@pytest.mark.parametrize("size", [3000, 8192, 64])
def test_bad_size_refused(seed, snapshot_tree, size):
    root, _info = seed
    before = snapshot_tree(root)
    result = run_module(module, {"root": root, "mrrs_size": size})
    assert result["failed"] is True
    assert "size" in result["msg"] and "4096" in result["msg"]
    assert snapshot_tree(root) == before


def test_unknown_device_fails_before_any_write(seed, snapshot_tree):
    root, _info = seed
    before = snapshot_tree(root)
    result = run_module(module, {"root": root, "devices": ["0000:01:00.0", "0000:09:00.0"]})
    assert result["failed"] is True
    assert "0000:09:00.0" in result["msg"] and "nothing was written" in result["msg"]
    assert snapshot_tree(root) == before


def test_malformed_address(seed):
    root, _info = seed
    result = run_module(module, {"root": root, "devices": ["gpu0"]})
    assert result["failed"] is True and "invalid PCI address 'gpu0'" in result["msg"]


def test_unquoted_yaml_class(seed):
    root, _info = seed
    result = run_module(module, {"root": root, "classes": [300]})
    assert result["failed"] is True and "quote it in YAML" in result["msg"]


def test_explicit_devices_without_upstream(seed):
    root, info = seed
    result = run_module(module, {"root": root, "devices": ["81:00.0", "0000:84:00.0"],
                                 "include_upstream": False})
    assert [d["address"] for d in result["devices"]] == ["0000:81:00.0", "0000:84:00.0"]
    assert fx.devctl_of(root, "0000:80:01.1") == 0x293F  # root port left alone
    assert fx.devctl_of(root, "0000:81:00.0") == 0x5936


def test_shared_bridges_appear_once(tmp_path):
    root = str(tmp_path)
    info = fx.switch_gpus(root)
    result = run_module(module, {"root": root})
    addresses = [d["address"] for d in result["devices"]]
    assert addresses == ["0000:03:00.0", "0000:04:00.0", "0000:02:00.0", "0000:01:00.0",
                         "0000:00:01.1", "0000:02:01.0"]
    for bridge in info["shared"]:
        assert addresses.count(bridge) == 1
        assert fx.devctl_of(root, bridge) >> 12 & 7 == 5


def test_listed_bridge_keeps_role_endpoint(seed):
    root, _info = seed
    result = run_module(module, {"root": root, "devices": ["01:00.0", "00:01.1"]})
    assert [(d["address"], d["role"]) for d in result["devices"]] == [
        ("0000:01:00.0", "endpoint"), ("0000:00:01.1", "endpoint")]


def test_vm_gpu_on_host_bridge(tmp_path):
    root = str(tmp_path)
    fx.vm_gpu(root)
    result = run_module(module, {"root": root})
    assert result["changed"] is False
    assert result["devices"] == [{
        "address": "0000:00:10.0", "role": "endpoint", "vendor": "10de", "device": "2335",
        "before": 4096, "after": 4096, "devctl_before": "0x5134", "devctl_after": "0x5134"}]
    result = run_module(module, {"root": root, "mrrs_size": 512})
    assert result["changed"] is True and fx.devctl_of(root, "0000:00:10.0") == 0x2134


def test_device_without_pcie_is_skipped_not_failed(seed):
    root, info = seed
    fx.no_pcie_device(root, "0000:00:07.0")
    result = run_module(module, {"root": root})
    assert not result.get("failed")
    entry = _by_address(result)["0000:00:07.0"]
    assert "no PCI Express capability" in entry["skipped_reason"]
    assert entry["before"] is None and entry["after"] is None
    assert all(fx.devctl_of(root, g) == 0x5936 for g in info["gpus"])


def test_no_match_warns(tmp_path):
    root = str(tmp_path)
    fx.vm_gpu(root)
    result = run_module(module, {"root": root, "vendor": "1002"})
    assert result["changed"] is False and result["devices"] == []
    # ansible-core 2.19 returns warnings as structured events
    assert "no PCI device matched vendor 1002" in str(result.get("warnings"))


def test_one_device_drops_the_write_others_still_done(seed, monkeypatch):
    root, info = seed
    real_write = setpci_maxreadreq._write_config
    bad = fx.device_dir(root, "0000:03:00.0")

    def drop_one(path, offset, data):
        if os.path.dirname(path) == bad:
            return  # the device ignores the write (as QEMU's emulated devices do)
        real_write(path, offset, data)

    monkeypatch.setattr(setpci_maxreadreq, "_write_config", drop_one)
    result = run_module(module, {"root": root})
    assert result["failed"] is True
    assert result["changed"] is True
    assert result["failed_devices"] == ["0000:03:00.0"]
    assert "not set on 1 of 16 devices: 0000:03:00.0" in result["msg"]
    assert "wanted 4096 bytes, read back 512" in result["msg"]
    entries = _by_address(result)
    assert entries["0000:03:00.0"]["after"] == 512
    assert "did not take" in entries["0000:03:00.0"]["error"]
    done = [a for a in info["gpus"] + info["root_ports"] if a != "0000:03:00.0"]
    assert len(done) == 15
    for address in done:
        assert fx.devctl_of(root, address) >> 12 & 7 == 5, address
        assert entries[address]["after"] == 4096


def test_lockdown_eperm(seed, monkeypatch):
    root, _info = seed
    fx.set_lockdown(root, "integrity")

    def refuse(path, offset, data):
        raise OSError(errno.EPERM, os.strerror(errno.EPERM), path)

    monkeypatch.setattr(setpci_maxreadreq, "_write_config", refuse)
    result = run_module(module, {"root": root})
    assert result["failed"] is True and result["changed"] is False
    assert len(result["failed_devices"]) == 16
    assert "lockdown mode 'integrity'" in result["msg"]
    assert "/sys/kernel/security/lockdown" in result["msg"]
    assert "need root" in result["msg"]


@pytest.mark.skipif(Runner().which("setpci") is None, reason="pciutils not installed")
def test_setpci_method(seed):
    root, info = seed
    before = dict((a, fx.read_config(root, a)) for a in info["gpus"] + info["root_ports"])
    result = run_module(module, {"root": root, "method": "setpci"})
    assert result["changed"] is True and not result.get("failed")
    for address, old in before.items():
        new = fx.read_config(root, address)
        changed = [i for i in range(4096) if old[i] != new[i]]
        assert len(changed) == 1 and (old[changed[0]] ^ new[changed[0]]) & ~0x70 == 0
        assert fx.devctl_of(root, address) >> 12 & 7 == 5
    assert run_module(module, {"root": root, "method": "setpci"})["changed"] is False


def test_the_old_option_name_size_still_works_deprecated(seed):
    root, _info = seed
    result = run_module(module, {"root": root, "size": 1024}, check_mode=True,
                        allow_deprecations=True)
    assert all(d["after"] == 1024 for d in result["devices"])
    assert "size" in str(result["deprecations"]) and "0.3.0" in str(result["deprecations"])
