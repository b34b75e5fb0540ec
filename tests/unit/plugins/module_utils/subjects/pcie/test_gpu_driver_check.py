"""subjects/pcie/gpu_driver_check.py: gpu_no_driver, a host GPU without a driver bound."""

from auditcase import judge


def test_fires_for_a_gpu_without_a_driver(audited):
    facts = audited("tuned_host")
    facts["gpus"][2]["driver"] = None
    (item,) = judge("gpu_no_driver", facts)
    assert (item["subject"], item["severity"], item["current"]) == (
        facts["gpus"][2]["address"], "high", "no driver bound")
    assert "dkms status for kernel 6.14.11-5-bpo12-pve" in item["remedy"]


def test_does_not_fire_when_every_gpu_has_its_driver(audited):
    assert judge("gpu_no_driver", audited("seed_host")) == []
    assert judge("gpu_no_driver", audited("vm_host")) == []


def test_a_gpu_passed_to_a_vm_is_not_the_hosts(audited):
    facts = audited("tuned_host")
    for gpu in facts["gpus"]:
        gpu.update(driver="vfio-pci", owner="vm")
    assert judge("gpu_no_driver", facts) == "no GPU of the host's (all passed to VMs or " \
        "split for vGPU)"


def test_na_without_a_gpu(audited):
    facts = audited("tuned_host")
    facts["gpus"] = []
    assert judge("gpu_no_driver", facts) == "no NVIDIA GPU"
