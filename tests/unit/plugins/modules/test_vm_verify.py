"""Module vm_verify, the VMs' side of a reboot after it: the GPUs on vfio-pci, the VMs that
ran or are onboot started, through the qm double, on the mixed host of
tests/fixtures/passthrough.py. (The gate before it, vfio_initramfs_check, is
test_vfio_initramfs_check.py.)"""

import json
import os

import pytest
from conftest import TESTS
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.modules import vm_verify
from fixtures import passthrough as ptfix

DOUBLES = os.path.join(TESTS, "doubles")


@pytest.fixture
def mixed(tmp_path, monkeypatch):
    root = str(tmp_path / "host")
    ptfix.mixed_host(root)
    monkeypatch.setenv("PATH", DOUBLES + os.pathsep + os.environ.get("PATH", ""))
    monkeypatch.setenv("GPUHOST_DOUBLES_ROOT", root)
    monkeypatch.setenv("GPUHOST_DOUBLES_LOG", str(tmp_path / "calls.jsonl"))
    return root


def _calls(tmp_path):
    path = tmp_path / "calls.jsonl"
    if not path.exists():
        return []
    return [json.loads(x)["argv"] for x in path.read_text().splitlines() if x.strip()]


def _qm_state(root, state):
    folder = os.path.join(root, "var/lib/gpuhost-doubles")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "qm.json"), "w") as handle:
        json.dump(state, handle)


def test_onboot_vm_is_started_and_its_gpus_reported_bound(mixed, tmp_path):
    res = run_module(vm_verify, {"root": mixed})
    assert not res.get("failed") and res["changed"] is True, res
    assert res["problems"] == []
    assert [v["vmid"] for v in res["vms"]] == [201]
    vm = res["vms"][0]
    assert vm["name"] == "train-201" and vm["onboot"] and vm["started"]
    assert vm["status_before"] == "stopped" and vm["status"] == "running"
    assert [(g["address"], g["driver"], g["bound"]) for g in vm["gpus"]] == [
        (ptfix.VM_BY_ADDRESS, "vfio-pci", True), (ptfix.VM_BY_MAPPING, "vfio-pci", True)]
    assert _calls(tmp_path) == [["qm", "status", "201"], ["qm", "start", "201"],
                                ["qm", "status", "201"]]
    # second run: it runs, nothing to start
    again = run_module(vm_verify, {"root": mixed})
    assert again["changed"] is False and again["vms"][0]["started"] is False
    assert ["qm", "start", "201"] not in _calls(tmp_path)[3:]


def test_a_vm_that_fails_to_start_is_reported_with_its_name(mixed, tmp_path):
    _qm_state(mixed, {"start_fail": {"202": "kvm: -device vfio-pci,sysfsdev=/sys/bus/mdev/"
                                            "devices/00000000-0000-0000-0000-000000000202: "
                                            "vfio: error getting device\n"
                                            "start failed: QEMU exited with code 1"}})
    res = run_module(vm_verify, {"root": mixed, "running_before": [202]})
    assert not res.get("failed")
    vm202 = [v for v in res["vms"] if v["vmid"] == 202][0]
    assert vm202["started"] is False and vm202["status"] == "stopped"
    assert res["problems"] == [
        "vm 202 (vdi-202): qm start 202 exited 255: kvm: -device vfio-pci,sysfsdev=/sys/bus/"
        "mdev/devices/00000000-0000-0000-0000-000000000202: vfio: error getting device / "
        "start failed: QEMU exited with code 1",
        "vm 202 (vdi-202): status stopped after qm start, expected running"]
    assert [v["vmid"] for v in res["vms"] if v["started"]] == [201]


def test_a_gpu_the_host_driver_took_at_boot_is_a_problem(mixed, tmp_path):
    ptfix.rebind(mixed, ptfix.VM_BY_MAPPING, "nvidia")
    _qm_state(mixed, {"start_fail": {"201": "start failed: QEMU exited with code 1"}})
    res = run_module(vm_verify, {"root": mixed})
    assert "vm 201 (train-201): hostpci1 %s was on nvidia before qm start, not vfio-pci: the " \
        "host driver took it at boot (add 'options vfio-pci ids=10de:2bb5' and 'softdep " \
        "nvidia pre: vfio-pci' to /etc/modprobe.d/vfio.conf, then update-initramfs -u)" \
        % ptfix.VM_BY_MAPPING in res["problems"]


def test_check_mode_and_no_qm_start_nothing(mixed, tmp_path, snapshot_tree):
    before = snapshot_tree(mixed)
    res = run_module(vm_verify, {"root": mixed}, check_mode=True)
    assert res["changed"] is False and res["vms"][0]["skipped"] == ["qm start 201 (check mode)"]
    assert _calls(tmp_path) == [["qm", "status", "201"]]
    res = run_module(vm_verify, {"root": mixed, "qm": False})
    assert res["changed"] is False and res["vms"][0]["status"] is None
    assert all(g["bound"] for g in res["vms"][0]["gpus"])
    assert len(_calls(tmp_path)) == 1
    assert snapshot_tree(mixed) == before


def test_a_hanging_start_is_killed_and_named(mixed, tmp_path):
    _qm_state(mixed, {"start_hang": ["201"]})
    res = run_module(vm_verify, {"root": mixed, "start_timeout": 1})
    assert res["problems"][0].startswith("vm 201 (train-201): qm start 201 timed out: "
                                         "qm start 201 did not return in 1 s")


def test_the_qm_double_prints_qm_list_as_qm_pm_does(mixed, tmp_path):
    import subprocess

    env = dict(os.environ, GPUHOST_DOUBLES_ROOT=mixed)
    _qm_state(mixed, {"vms": {"201": {"status": "running", "pid": 48213}}})
    out = subprocess.run([os.path.join(DOUBLES, "qm"), "list"], env=env, check=True,
                         capture_output=True, text=True).stdout
    assert out.splitlines() == [
        "      VMID NAME                 STATUS     MEM(MB)    BOOTDISK(GB) PID       ",
        "       201 train-201            running    262144           500.00 48213     ",
        "       202 vdi-202              stopped    32768            120.00 0         "]
