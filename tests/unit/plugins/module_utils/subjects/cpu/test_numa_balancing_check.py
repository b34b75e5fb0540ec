"""subjects/cpu/numa_balancing_check.py: kernel.numa_balancing on, a finding id of its own."""

from auditcase import judge


def test_fires_on_the_seed_host(audited):
    (item,) = judge("numa_balancing", audited("seed_host"))
    assert (item["subject"], item["current"], item["expected"], item["severity"]) == (
        "kernel.numa_balancing", "1", "0", "high")
    assert "sysctl -w kernel.numa_balancing=0" in item["remedy"]


def test_does_not_fire_when_off(audited):
    assert judge("numa_balancing", audited("tuned_host")) == []


def test_na_where_the_key_does_not_exist(audited):
    assert judge("numa_balancing", audited("vm_host")) == "kernel.numa_balancing not present"
    assert audited("vm_host")["checks"]["numa_balancing"]["status"] == "n/a"


def test_other_sysctls_are_not_its_findings(audited):
    assert {f["subject"] for f in judge("numa_balancing", audited("seed_host"))} == {
        "kernel.numa_balancing"}
