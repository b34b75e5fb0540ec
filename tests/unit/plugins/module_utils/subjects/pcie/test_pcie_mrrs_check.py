"""subjects/pcie/pcie_mrrs_check.py: pcie_mrrs (Max Read Request Size below the wanted one on a GPU
or a
bridge above it) and pcie_unreadable (config space not readable)."""

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import pcie_mrrs_check

from auditcase import judge


def test_fires_on_every_gpu_and_root_port_of_the_seed(audited):
    result = audited("seed_host")
    found = judge("pcie_mrrs", result)
    gpus = [g["address"] for g in result["gpus"]]
    ports = set(b["address"] for g in result["gpus"] for b in g["upstream"])
    assert len(found) == 16 and {f["subject"] for f in found} == set(gpus) | ports
    first = [f for f in found if f["subject"] == gpus[0]][0]
    assert (first["current"], first["expected"], first["severity"]) == (
        "512 bytes", "4096 bytes", "high")
    assert "setpci -s %s CAP_EXP+8.w=5000:7000" % gpus[0] in first["remedy"]
    assert "gpuhost.tuning.tune -l pve-gpu01" in first["remedy"]
    assert first["detail"] == "GPU 10de:2bb5"


def test_does_not_fire_when_tuned_or_when_512_is_wanted(audited):
    assert judge("pcie_mrrs", audited("tuned_host")) == []
    assert judge("pcie_mrrs", audited("seed_host"), mrrs_size=512) == []


@pytest.mark.parametrize("size, value", [(128, "0000:7000"), (512, "2000:7000"),
                                         (4096, "5000:7000")])
def test_setpci_value_sets_bits_14_to_12(size, value):
    assert pcie_mrrs_check.mrrs_setpci_value(size) == value


def test_an_unreadable_device_is_info_and_not_judged_for_mrrs(audited):
    facts = audited("seed_host")
    gpu = facts["gpus"][0]
    gpu["error"] = "config space: 64 bytes (not root)"
    assert gpu["address"] not in {f["subject"] for f in judge("pcie_mrrs", facts)}
    (item,) = judge("pcie_unreadable", facts)
    assert (item["subject"], item["severity"], item["detail"]) == (
        gpu["address"], "info", "config space: 64 bytes (not root)")
    assert judge("pcie_unreadable", audited("seed_host")) == []


def test_na_without_a_gpu_and_note_on_the_host_bridge(audited):
    facts = audited("seed_host")
    facts["gpus"] = []
    assert judge("pcie_mrrs", facts) == "no NVIDIA GPU"
    vm = audited("vm_host")
    assert vm["checks"]["pcie_mrrs"]["note"] == (
        "GPUs sit on the host bridge (VM passthrough): no bridge to check")
