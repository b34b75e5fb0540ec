"""subjects/peermem/nvidia_check.py: nvidia_uvm_hmm (uvm_disable_hmm loaded or configured),
nvidia_peermem_not_loaded and nvidia_peermem_unavailable."""

from auditcase import judge


def test_uvm_hmm_loaded_without_the_option(audited):
    (item,) = judge("nvidia_uvm_hmm", audited("seed_host"))
    assert (item["subject"], item["current"], item["severity"]) == (
        "nvidia_uvm", "uvm_disable_hmm=N", "medium")
    assert item["reboot_required"] is True
    assert "update-initramfs -u -k 6.14.11-5-bpo12-pve" in item["remedy"]
    assert "gpuhost_reboot_verify_reboot=true" in item["remedy"]
    assert "-e gpuhost_reboot=" not in item["remedy"]


def test_uvm_hmm_not_loaded_and_not_configured_names_modprobe_d(audited):
    facts = audited("seed_host")
    facts["nvidia"]["modules_loaded"].remove("nvidia_uvm")
    facts["nvidia"]["uvm_disable_hmm_configured"] = False
    (item,) = judge("nvidia_uvm_hmm", facts, nvidia_uvm_modprobe_file="/etc/modprobe.d/x.conf")
    assert item["subject"] == "modprobe.d"
    assert "> /etc/modprobe.d/x.conf" in item["remedy"]


def test_uvm_hmm_fine_when_set_or_not_wanted(audited):
    assert judge("nvidia_uvm_hmm", audited("tuned_host")) == []
    assert judge("nvidia_uvm_hmm", audited("seed_host"), nvidia_uvm_disable_hmm=False) == []


def test_peermem_without_infiniband_is_info_and_with_ib_core_low(audited):
    facts = audited("tuned_host")
    (info,) = judge("nvidia_peermem_unavailable", facts)
    assert info["severity"] == "info" and info["current"] == "not loaded; ib_core absent"
    assert judge("nvidia_peermem_not_loaded", facts) == []
    facts["nvidia"]["ib_core"] = {"loaded": True, "available": True}
    (low,) = judge("nvidia_peermem_not_loaded", facts)
    assert (low["severity"], low["current"]) == ("low", "not loaded (ib_core loaded)")
    assert judge("nvidia_peermem_unavailable", facts) == []
    facts["nvidia"]["nvidia_peermem"]["loaded"] = True
    assert judge("nvidia_peermem_not_loaded", facts) == []


def test_na_without_any_nvidia_driver(audited):
    facts = audited("tuned_host")
    facts.update(gpus=[], dkms=[])
    facts["nvidia"]["modules_loaded"] = []
    assert judge("nvidia_uvm_hmm", facts) == "no NVIDIA driver"
