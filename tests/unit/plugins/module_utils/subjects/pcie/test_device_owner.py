"""Ownership of GPUs on a host that shares them with VMs and vGPU (subjects/pcie/device_owner.py),
and what
the audit, the tune and the boot-time program do with a GPU that is not the host's."""

import json


from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import boot_program
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import (
    device_owner,
    setpci_maxreadreq,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import audit_pcie
from fixtures import hosts
from fixtures import passthrough as ptfix
from fixtures import pci as pcifix


def _mixed(tmp_path):
    root = str(tmp_path / "host")
    return root, ptfix.mixed_host(root)


def test_parses_hostpci_by_address_list_and_mapping():
    conf = device_owner.parse_vm_config(
        "hostpci1: mapping=someGpu,mdev=some-model\nhostpci0: 00:ff.1;d0:13.0,pcie=1\n"
        "onboot: 1\nhookscript: local:snippets/h.pl\n[snap]\nhostpci5: 01:00.0\n")
    assert [d["key"] for d in conf["hostpci"]] == ["hostpci0", "hostpci1"]
    assert conf["hostpci"][0]["host"] == ["00:ff.1", "d0:13.0"]
    assert conf["hostpci"][1]["mapping"] == "someGpu"
    assert conf["hostpci"][1]["mdev"] == "some-model"
    assert conf["onboot"] and conf["hookscript"] == "local:snippets/h.pl"


def test_parses_the_mapping_section_config():
    maps = device_owner.parse_mapping(
        "someGpu\n\tmdev 1\n\tmap node=a,path=0000:01:00.4;0000:01:00.5,id=10DE:2231,"
        "iommugroup=1\n\nnic\n\tmap node=b,path=0000:07:10.0,id=8086:1520\n")
    assert maps["someGpu"]["mdev"] is True
    assert maps["someGpu"]["maps"][0]["path"] == ["0000:01:00.4", "0000:01:00.5"]
    assert maps["someGpu"]["maps"][0]["id"] == "10de:2231"
    assert maps["someGpu"]["maps"][0]["iommugroup"] == 1
    assert maps["nic"]["maps"][0]["iommugroup"] is None


def test_each_gpu_has_its_owner_in_the_facts(tmp_path):
    root, built = _mixed(tmp_path)
    gpus = audit_pcie.gpu_facts(root, "10de", ["0300", "0302"])
    owner = dict((g["address"], g["owner"]) for g in gpus)
    assert owner[ptfix.VM_BY_ADDRESS] == "vm 201"
    assert owner[ptfix.VM_BY_MAPPING] == "vm 201"
    for address in ptfix.VGPU_VFS + (ptfix.VGPU_PARENT,):
        assert owner[address] == "vgpu"
    for address in built["host_gpus"]:
        assert owner[address] == "host"


def test_audit_judges_only_the_hosts_gpus(tmp_path):
    root, built = _mixed(tmp_path)
    pcifix.degrade_link(root, ptfix.VM_BY_MAPPING, speed=2.5, width=16)
    result = audit.audit(root, hosts.common_wanted())
    subjects = set(f["subject"] for f in result["findings"]
                   if f["id"] in ("pcie_mrrs", "pcie_link_degraded", "gpu_no_driver"))
    not_host = set(built["vm_gpus"] + built["vgpu"])
    assert not subjects & not_host
    # the host's GPUs and their root ports are still judged
    assert set(built["host_gpus"]) <= subjects


def test_tune_writes_nothing_on_a_vms_or_vgpu_gpu(tmp_path):
    root, built = _mixed(tmp_path)
    others = built["vm_gpus"] + built["vgpu"]
    before = dict((a, pcifix.read_config(root, a)) for a in others)
    rps = dict((a, pcifix.read_config(root, built["upstream"][a][0]))
               for a in built["vm_gpus"] + [ptfix.VGPU_PARENT])
    result = setpci_maxreadreq.tune_mrrs(root, size=4096)
    for address in others:
        assert pcifix.read_config(root, address) == before[address], address
    for address, data in rps.items():  # the root port above only a VM's GPU: left alone
        assert pcifix.read_config(root, built["upstream"][address][0]) == data
    entries = dict((d["address"], d) for d in result["devices"])
    assert "owner vm 201 (driver vfio-pci)" in entries[ptfix.VM_BY_ADDRESS]["skipped_reason"]
    for address in built["host_gpus"]:
        assert pcifix.devctl_of(root, address) & 0x7000 == 0x5000, address


def test_boot_program_decides_ownership_at_boot(tmp_path, capsys):
    root, built = _mixed(tmp_path)
    config = tmp_path / "boot.json"
    config.write_text(json.dumps({"mrrs": {"size": 4096}, "cpuidle": None}))
    # a GPU bound to vfio-pci after the service was installed, no VM config naming it
    late = built["host_gpus"][0]
    ptfix.rebind(root, late, "vfio-pci")
    data = pcifix.read_config(root, late)
    assert boot_program.main(["--config", str(config), "--root", root]) == 0
    assert pcifix.read_config(root, late) == data
    out = capsys.readouterr().out
    assert "MRRS %s (endpoint 10de:2bb5): skipped: owner vfio (driver vfio-pci)" % late in out
    assert pcifix.devctl_of(root, built["host_gpus"][1]) & 0x7000 == 0x5000
