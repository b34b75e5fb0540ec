"""subjects/driver/driver_drift.py: fleet_drift, the host whose driver, kernel, VBIOS, GPU count or
container
user space differs from the fleet's majority (moved from test_gpuhealth.py)."""

from fixtures import nvhealth as health

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import fleet_findings
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import driver_drift
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.fleet import fleet_run


def _audit(driver, kernel="6.8.12-9-pve", vbios="97.00.4B.00.01", gpus=8, containers=()):
    return {"nvidia": {"driver_version": driver}, "kernel": {"running": kernel},
            "gpus": [{"address": "0000:%02x:00.0" % (index + 1), "vendor": "10de",
                      "device": "2bb5", "upstream": []} for index in range(gpus)],
            "nvidia_smi": {"gpus": [{"name": health.SEED_NAME, "vbios": vbios}] * gpus},
            "containers_nvidia": list(containers)}


def test_fleet_drift_names_the_odd_host_out():
    audits = {"gpu01": _audit("590.48.01"), "gpu02": _audit("590.48.01"),
              "gpu03": _audit("580.95.05", gpus=7)}
    found = driver_drift.fleet_findings(audits)
    assert found["gpu01"] == [] and found["gpu02"] == []
    assert sorted((f["subject"], f["current"], f["expected"]) for f in found["gpu03"]) == [
        ("driver", "580.95.05", "590.48.01"), ("gpu count", "7", "8")]


def test_a_tie_names_no_odd_host_but_the_report_says_so():
    audits = {"gpu01": _audit("590.48.01", kernel="6.8.12-9-pve"),
              "gpu02": _audit("590.48.01", kernel="6.14.11-5-bpo12-pve")}
    assert driver_drift.fleet_findings(audits) == {"gpu01": [], "gpu02": []}
    docs = [{"host": h, "facts": audits[h], "findings": [], "checks": {}}
            for h in sorted(audits)]
    fleet_run.judge(docs, fleet_findings.Context())
    note = docs[0]["checks"]["fleet_drift"]["note"]
    assert docs[0]["checks"]["fleet_drift"]["status"] == "ok"
    assert "no majority for kernel (6.14.11-5-bpo12-pve, 6.8.12-9-pve)" in note
