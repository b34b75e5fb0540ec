"""subjects/cpu/cpufreq_check.py: cpufreq_driver, acpi-cpufreq where a pstate driver is possible."""

from auditcase import judge


def test_fires_for_acpi_cpufreq_on_amd(audited):
    (item,) = judge("cpufreq_driver", audited("seed_host"))
    assert (item["current"], item["severity"], item["reboot_required"]) == (
        "acpi-cpufreq", "medium", True)
    assert item["expected"] == "amd-pstate-epp (amd_pstate=active)"
    assert "gpuhost.tuning.reboot_verify -l pve-gpu01" in item["remedy"]
    assert item["detail"] == "amd_pstate not active (no /sys/devices/system/cpu/amd_pstate)"


def test_fires_for_acpi_cpufreq_on_intel(audited):
    facts = audited("seed_host")
    facts["cpu"]["vendor"] = "GenuineIntel"
    (item,) = judge("cpufreq_driver", facts)
    assert item["expected"] == "intel_pstate" and "intel_pstate=disable" in item["remedy"]


def test_does_not_fire_for_a_wanted_driver(audited):
    assert judge("cpufreq_driver", audited("tuned_host")) == []
    facts = audited("seed_host")
    assert judge("cpufreq_driver", facts, cpufreq_drivers_wanted=["acpi-cpufreq"]) == []


def test_na_without_cpufreq(audited):
    assert judge("cpufreq_driver", audited("vm_host")) == "no cpufreq driver (VM?)"
