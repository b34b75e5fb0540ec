"""subjects/dkms/dkms_check.py: dkms_missing_for_kernel, the next boot's kernel without the DKMS
modules
the running one has."""

from auditcase import judge


def test_fires_for_the_next_kernel_on_the_seed(audited):
    (item,) = judge("dkms_missing_for_kernel", audited("seed_host"))
    assert (item["subject"], item["severity"]) == ("6.14.11-5-bpo12-pve", "critical")
    assert item["current"] == "nvidia/590.48.01 not built (headers missing)"
    assert item["expected"] == "nvidia/590.48.01 installed for 6.14.11-5-bpo12-pve"
    assert "apt-get install proxmox-headers-6.14.11-5-bpo12-pve" in item["remedy"]
    assert "dkms install nvidia/590.48.01 -k 6.14.11-5-bpo12-pve" in item["remedy"]
    assert "gpuhost.tuning.reboot_verify -l pve-gpu01" in item["remedy"]
    assert item["detail"].startswith("6.8.12-9-pve runs with nvidia 590.48.01")


def test_built_not_installed_with_headers_present(audited):
    facts = audited("seed_host")
    facts["kernel"]["headers"]["6.14.11-5-bpo12-pve"] = True
    facts["dkms"].append({"name": "nvidia", "version": "590.48.01",
                          "kernel": "6.14.11-5-bpo12-pve", "arch": "x86_64",
                          "state": "built", "warning": None})
    (item,) = judge("dkms_missing_for_kernel", facts)
    assert item["current"] == "nvidia/590.48.01 built, not installed"
    assert "apt-get install" not in item["remedy"]


def test_does_not_fire_when_installed_or_when_no_other_kernel_boots(audited):
    assert judge("dkms_missing_for_kernel", audited("tuned_host")) == []
    facts = audited("seed_host")
    facts["kernel"]["next_boot"] = facts["kernel"]["running"]
    assert judge("dkms_missing_for_kernel", facts) == []


def test_na_without_dkms_modules(audited):
    facts = audited("seed_host")
    facts["dkms"] = []
    assert judge("dkms_missing_for_kernel", facts) == "no DKMS modules"
