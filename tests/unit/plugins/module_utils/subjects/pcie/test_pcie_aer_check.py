"""subjects/pcie/pcie_aer_check.py: pcie_aer_errors from the AER counters in sysfs
(fixtures/health.py
writes the kernel's aer_dev_* format)."""

from auditcase import judge


def test_fires_on_the_health_hosts_gpus(audited):
    found = dict((f["subject"], f) for f in judge("pcie_aer_errors", audited("health.gpu_host")))
    assert sorted(found) == ["0000:02:00.0", "0000:83:00.0"]
    assert found["0000:83:00.0"]["severity"] == "high"
    assert "1 fatal (CmpltTO 1)" in found["0000:83:00.0"]["current"]
    assert found["0000:02:00.0"]["severity"] == "low"


def test_many_correctable_errors_are_medium(audited):
    facts = audited("health.gpu_host")
    (entry,) = [e for e in facts["pcie_aer"] if e["address"] == "0000:02:00.0"]
    entry["correctable"] = {"total": 400, "counters": {"RxErr": 400}}
    (item,) = [f for f in judge("pcie_aer_errors", facts) if f["subject"] == "0000:02:00.0"]
    assert item["severity"] == "medium"


def test_zero_counters_give_none(audited):
    facts = audited("health.gpu_host")
    for entry in facts["pcie_aer"]:
        for kind in ("fatal", "nonfatal", "correctable"):
            if entry.get(kind):
                entry[kind] = {"total": 0, "counters": dict(
                    (k, 0) for k in entry[kind]["counters"])}
        entry["rootport_total"] = None
    assert judge("pcie_aer_errors", facts) == []


def test_na_without_counters_or_without_gpus(audited):
    assert judge("pcie_aer_errors", audited("seed_host")) == (
        "no AER counters in sysfs (no AER capability or reporting, e.g. a VM)")
    facts = audited("seed_host")
    facts["pcie_aer"] = []
    assert judge("pcie_aer_errors", facts) == "no NVIDIA GPU"
