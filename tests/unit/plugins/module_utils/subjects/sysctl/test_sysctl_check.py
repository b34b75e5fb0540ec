"""subjects/sysctl/sysctl_check.py: sysctl, each wanted key off its value (kernel.numa_balancing
aside)."""

from auditcase import WANTED, judge


def test_fires_once_per_key_with_its_severity(audited):
    found = dict((f["subject"], f) for f in judge("sysctl", audited("seed_host")))
    assert set(found) == set(WANTED["sysctl"]) - {"kernel.numa_balancing"}
    assert found["net.core.rmem_max"]["current"] == "212992"
    assert found["net.core.rmem_max"]["severity"] == "medium"
    assert found["vm.swappiness"]["severity"] == "low"
    assert "sysctl -w vm.swappiness=10" in found["vm.swappiness"]["remedy"]
    assert "gpuhost.tuning.tune -l pve-gpu01" in found["vm.swappiness"]["remedy"]


def test_an_unnamed_key_is_medium(audited):
    facts = audited("tuned_host")
    facts["sysctl"]["values"]["vm.max_map_count"] = "65530"
    wanted = dict(WANTED["sysctl"], **{"vm.max_map_count": 1048576})
    (item,) = judge("sysctl", facts, sysctl=wanted)
    assert (item["subject"], item["severity"]) == ("vm.max_map_count", "medium")


def test_does_not_fire_when_tuned_or_when_the_key_is_absent(audited):
    assert judge("sysctl", audited("tuned_host")) == []
    facts = audited("seed_host")
    facts["sysctl"]["values"] = dict((k, None) for k in facts["sysctl"]["values"])
    facts["sysctl"]["values"]["vm.swappiness"] = "10"
    assert judge("sysctl", facts) == []


def test_na_without_proc_sys(audited):
    facts = audited("seed_host")
    facts["sysctl"]["values"] = dict((k, None) for k in facts["sysctl"]["values"])
    assert judge("sysctl", facts) == "no /proc/sys"
