"""vmgpu: the audit's ``passthrough`` facts, read from the mixed Proxmox host of
tests/fixtures/passthrough.py (VM configs and ``mapping/pci.cfg`` as qemu-server and
pve-guest-common write them, ``storage.cfg`` as a SectionConfig, modprobe.d(5) lines, the
sysfs IOMMU groups and mdev ABI) and its planted problems (``passthrough.BROKEN``)."""

import os

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.passthrough import vmgpu
from fixtures import passthrough as ptfix


def _write(root, path, text, mode=0o644):
    full = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as handle:
        handle.write(text)
    os.chmod(full, mode)


@pytest.fixture
def mixed(tmp_path):
    root = str(tmp_path / "host")
    built = ptfix.mixed_host(root)
    return root, built


def _broken(tmp_path, name):
    root = str(tmp_path / "host")
    built = ptfix.broken_host(root, [name])
    return root, built


def _by_address(facts):
    return dict((d["address"], d) for d in facts["devices"])


def test_the_mixed_host_vms_devices_and_boot_binding(mixed):
    root, built = mixed
    facts = vmgpu.collect(root)
    assert facts["node"] == ptfix.NODE
    vms = dict((vm["vmid"], vm) for vm in facts["vms"])
    assert sorted(vms) == [201, 202]
    assert vms[201]["running"] and vms[201]["onboot"] and not vms[202]["running"]
    assert vms[201]["hookscript"] == {"volume": "local:snippets/gpu-hook.sh",
                                      "path": "/var/lib/vz/snippets/gpu-hook.sh",
                                      "state": "ok"}
    devs = _by_address(facts)
    # the whole slot 83:00 by address: both functions; 84:00 through mapping gpu84
    assert sorted(devs) == sorted([ptfix.VM_BY_ADDRESS, ptfix.VM_BY_ADDRESS[:-1] + "1",
                                   ptfix.VM_BY_MAPPING, ptfix.VM_BY_MAPPING[:-1] + "1",
                                   ptfix.VGPU_VFS[0]])
    gpu = devs[ptfix.VM_BY_MAPPING]
    assert gpu["via"] == "mapping gpu84" and gpu["driver"] == "vfio-pci"
    assert gpu["id"] == "10de:2bb5" and gpu["subsystem"] == ptfix.SUBSYSTEM
    assert gpu["expected_group"] == gpu["iommu_group"] == built["groups"][ptfix.VM_BY_MAPPING]
    assert gpu["group_others"] == [] and gpu["reset_method"] == "flr bus"
    # only the mapping's first path is checked for its group
    assert "expected_id" not in devs[ptfix.VM_BY_ADDRESS]
    vf = devs[ptfix.VGPU_VFS[0]]
    assert vf["mdev"] == ptfix.MDEV_TYPE and vf["physfn"] == ptfix.VGPU_PARENT
    assert vf["mdev_type"] == {"offered": True, "available": 4}
    assert facts["mapping_problems"] == [] and facts["conflicts"] == []
    assert facts["vfio_boot"] == {"ids": [], "softdeps": ["nvidia"], "blacklist": [],
                                  "files": ["/etc/modprobe.d/vfio.conf"]}
    assert facts["vgpu_manager_active"] is True
    assert facts["iommu_groups"] == len(os.listdir(os.path.join(root, "sys/kernel/iommu_groups")))


def test_a_container_holding_a_vm_gpu_is_a_conflict(mixed):
    root, _built = mixed
    cts = [{"vmid": 129, "gpus": [{"address": ptfix.VM_BY_ADDRESS}]},
           {"vmid": 130, "gpus": [{"address": "0000:c1:00.0"}]}]
    assert vmgpu.collect(root, cts)["conflicts"] == [
        {"container": 129, "address": ptfix.VM_BY_ADDRESS, "vms": [201]}]


def test_a_missing_device_and_mapping_are_named(tmp_path):
    root, _built = _broken(tmp_path, "device_missing")
    facts = vmgpu.collect(root)
    problems = [p for p in facts["mapping_problems"] if p["vmid"] == 203]
    assert [p["key"] for p in problems] == ["hostpci1"]
    gone = [d for d in facts["devices"] if d["vmid"] == 203]
    assert [(d["address"], d["exists"]) for d in gone] == [("0000:c1:00.0", False)]


def test_a_group_shared_with_a_non_bridge_device_lists_it(tmp_path):
    root, built = _broken(tmp_path, "group_shared")
    dev = _by_address(vmgpu.collect(root))[ptfix.VM_BY_ADDRESS]
    assert dev["group_others"] == [built["nvme"]]


def test_hookscript_states(tmp_path):
    root, _built = _broken(tmp_path, "hookscript")
    paths = vmgpu.storage_paths(root)
    assert vmgpu.hookscript(root, "local:snippets/gpu-hook.sh", paths)["state"] == \
        "not executable"
    assert vmgpu.hookscript(root, "local:snippets/none.sh", paths)["state"] == "missing"
    assert vmgpu.hookscript(root, "cephfs:snippets/x.sh", paths) == {
        "volume": "cephfs:snippets/x.sh", "path": None, "state": "unknown storage"}
    assert vmgpu.hookscript(root, "local", paths)["state"] == "unknown storage"


def test_storage_paths_read_directory_storages_over_the_default(tmp_path):
    root = str(tmp_path)
    assert vmgpu.storage_paths(root) == {"local": "/var/lib/vz"}
    _write(root, vmgpu.STORAGE_CFG, ptfix.STORAGE + "dir: snip\n\tpath /mnt/snip/\n"
           "\tcontent snippets\n\nnfs: nas\n\tserver 10.0.0.5\n\tpath /mnt/pve/nas\n")
    paths = vmgpu.storage_paths(root)
    assert paths == {"local": "/var/lib/vz", "snip": "/mnt/snip/", "nas": "/mnt/pve/nas"}
    _write(root, "/mnt/snip/snippets/h.sh", "#!/bin/sh\n", 0o755)
    assert vmgpu.hookscript(root, "snip:snippets/h.sh", paths) == {
        "volume": "snip:snippets/h.sh", "path": "/mnt/snip/snippets/h.sh", "state": "ok"}


def test_modprobe_files_read_ids_softdeps_and_blacklists(tmp_path):
    root = str(tmp_path)
    _write(root, "/etc/modprobe.d/vfio.conf",
           "options vfio-pci ids=10DE:2BB5,10de:22e8:10de:204b disable_vga=1\n"
           "softdep nouveau pre: vfio-pci\n# blacklist nvidia\n")
    _write(root, "/etc/modprobe.d/blacklist-nouveau.conf", "blacklist nouveau\n")
    _write(root, "/etc/modprobe.d/other.conf", "options nvidia NVreg_X=1\n")
    _write(root, "/etc/modprobe.d/.hidden.conf", "blacklist nvidia\n")
    _write(root, "/etc/modprobe.d/notes.txt", "blacklist nvidia\n")
    assert vmgpu.modprobe_files(root) == [
        {"file": "/etc/modprobe.d/blacklist-nouveau.conf", "ids": [], "softdeps": [],
         "blacklist": ["nouveau"]},
        {"file": "/etc/modprobe.d/vfio.conf", "ids": ["10de:2bb5", "10de:22e8"],
         "softdeps": ["nouveau"], "blacklist": []}]
    assert vmgpu.vfio_boot(root) == {
        "ids": ["10de:2bb5", "10de:22e8"], "softdeps": ["nouveau"], "blacklist": ["nouveau"],
        "files": ["/etc/modprobe.d/blacklist-nouveau.conf", "/etc/modprobe.d/vfio.conf"]}
    assert vmgpu.modprobe_files(str(tmp_path / "none")) == []


@pytest.mark.parametrize("name,want", [("vgpu_type", {"offered": False, "available": None})])
def test_an_mdev_type_the_device_does_not_offer(tmp_path, name, want):
    root, _built = _broken(tmp_path, name)
    assert _by_address(vmgpu.collect(root))[ptfix.VGPU_VFS[0]]["mdev_type"] == want


def test_vgpu_manager_not_running_and_iommu_off(tmp_path):
    root, _built = _broken(tmp_path, "vgpu_manager")
    assert vmgpu.collect(root)["vgpu_manager_active"] is False
    root2 = str(tmp_path / "off")
    ptfix.iommu_off_host(root2)
    facts = vmgpu.collect(root2)
    assert facts["iommu_groups"] == 0


def test_a_host_without_vms_has_no_vfio_boot_facts(tmp_path):
    facts = vmgpu.collect(str(tmp_path))
    assert facts["vms"] == [] and facts["devices"] == [] and facts["vfio_boot"] is None
