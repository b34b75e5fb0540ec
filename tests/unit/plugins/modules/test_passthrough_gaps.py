"""Issue 27's gaps: the boot-time unit waits for /etc/pve (pve-cluster.service) where
Proxmox is installed, so it decides GPU ownership from the VM configs; the DKMS gate covers
the vGPU host driver's module, whatever its DKMS name (``nvidia`` from NVIDIA's
``NVIDIA-Linux-x86_64-<v>-vgpu-kvm.run --dkms``, ``nvidia-vgpu`` in some packagings)."""

import os
import shutil

import pytest
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
from ansible_collections.gpuhost.tuning.plugins.modules import boot_service, kernel_state
from fixtures import dkms, hosts

UNIT = "etc/systemd/system/gpuhost-tuning.service"
OLD, NEW = dkms.SEED_RUNNING, dkms.SEED_NEW
VGPU_VERSION = "580.95.02"  # vGPU 19 host driver (its base driver series, 580)


def _unit(root):
    with open(os.path.join(str(root), UNIT)) as handle:
        return handle.read().splitlines()


@pytest.mark.parametrize("folder", ["lib/systemd/system", "usr/lib/systemd/system"])
def test_the_boot_unit_waits_for_pve_cluster_where_it_is_installed(tmp_path, folder):
    root = tmp_path / "host"
    unit = root / folder / "pve-cluster.service"
    unit.parent.mkdir(parents=True)
    unit.write_text("[Unit]\nDescription=The Proxmox VE cluster filesystem\n")  # a decoy
    res = run_module(boot_service, {"root": str(root)})
    assert not res.get("failed"), res
    lines = _unit(root)
    assert "Wants=pve-cluster.service" in lines
    assert "After=nvidia-persistenced.service pve-cluster.service" in lines
    assert "Before=pve-guests.service" in lines
    assert run_module(boot_service, {"root": str(root)})["changed"] is False


def test_the_boot_unit_names_no_pve_unit_on_a_host_without_proxmox(tmp_path):
    root = tmp_path / "host"
    root.mkdir()
    assert not run_module(boot_service, {"root": str(root)}).get("failed")
    lines = _unit(root)
    assert not [x for x in lines if "pve-cluster" in x]
    assert "After=nvidia-persistenced.service" in lines


@pytest.mark.parametrize("name", ["nvidia", "nvidia-vgpu"])
def test_the_dkms_gate_covers_the_vgpu_host_driver(tmp_path, name):
    root = str(tmp_path / "host")
    hosts.seed_host(root)
    dkms.kernel_tree(root, NEW, headers=True)
    shutil.rmtree(os.path.join(root, "var/lib/dkms/nvidia"))
    if name == "nvidia":  # the vGPU host driver registered as nvidia, in place of the plain one
        dkms.dkms_tree(root, "nvidia", VGPU_VERSION, installed=[OLD])
    else:  # the plain driver's build is right; the vGPU module is the gap
        dkms.dkms_tree(root, "nvidia", hosts.SEED_NVIDIA, installed=[OLD, NEW])
        dkms.dkms_tree(root, name, VGPU_VERSION, installed=[OLD],
                       modules=("nvidia-vgpu-vfio",))
    result = audit.audit(root, hosts.common_wanted())
    gaps = [f for f in result["findings"] if f["id"] == "dkms_missing_for_kernel"]
    assert [(f["subject"], f["severity"]) for f in gaps] == [(NEW, "critical")], gaps
    assert "%s/%s" % (name, VGPU_VERSION) in gaps[0]["current"]
    assert "dkms install %s/%s -k %s" % (name, VGPU_VERSION, NEW) in gaps[0]["remedy"]
    # kernel_upgrade's gate builds exactly what kernel_state says the target needs
    res = run_module(kernel_state, {"root": root, "kernel": NEW})
    assert name in res["dkms_needed"], res["dkms_needed"]
