"""subjects/cpu/cpuidle_check.py: cpuidle_deep_state, idle states deeper than the wanted one
enabled."""

from auditcase import judge


def test_fires_for_c2_enabled_everywhere(audited):
    (item,) = judge("cpuidle_deep_state", audited("seed_host"))
    assert (item["subject"], item["severity"]) == ("C2", "high")
    assert item["current"] == "enabled on 128 of 128 CPUs (exit latency 800 us)"
    assert item["expected"] == "disabled (no idle state deeper than C1)"
    assert "gpuhost.tuning.tune -l pve-gpu01" in item["remedy"]
    assert item["detail"] == "driver acpi_idle; enabled on CPUs 0-127"


def test_fires_for_the_cpus_left_enabled(audited):
    facts = audited("tuned_host")
    (c2,) = [s for s in facts["cpu"]["cpuidle"]["states"] if s["name"] == "C2"]
    c2.update(cpus_disabled=120, cpus_enabled_list="120-127")
    (item,) = judge("cpuidle_deep_state", facts)
    assert item["current"].startswith("enabled on 8 of 128 CPUs")


def test_does_not_fire_when_disabled_or_when_c2_is_allowed(audited):
    assert judge("cpuidle_deep_state", audited("tuned_host")) == []
    assert judge("cpuidle_deep_state", audited("seed_host"), cpuidle_deeper_than="C2") == []


def test_na_without_cpuidle_or_without_the_reference_state(audited):
    assert judge("cpuidle_deep_state", audited("vm_host")) == "no cpuidle in sysfs (VM?)"
    assert judge("cpuidle_deep_state", audited("seed_host"), cpuidle_deeper_than="C6") == (
        "driver acpi_idle has no state C6 (states: POLL, C1, C2)")
    facts = audited("seed_host")
    facts["cpu"]["cpuidle"]["states"] = []
    assert judge("cpuidle_deep_state", facts) == "cpuidle driver acpi_idle has no states"
