"""subjects/health/gpu_state_check.py: gpu_clock_throttle, gpu_power_capped and gpu_persistence_off
from
nvidia-smi -q -x (real logs in tests/fixtures/nvidia, which name their source)."""

from fixtures import nvhealth as health

from auditcase import health_findings, ids, judge

COLUMNS = ("gpu_state",)


def audit_health(root):
    return health_findings(root, COLUMNS)


def test_sw_power_cap_under_load_is_low_and_idle_reasons_are_none(tmp_path):
    xml_text = health.smi_xml(health.B200_580, edits={"0000:1b:00.0": {
        "clocks_event_reasons/clocks_event_reason_gpu_idle": "Not Active",
        "clocks_event_reasons/clocks_event_reason_applications_clocks_setting": "Active",
        "clocks_event_reasons/clocks_event_reason_sw_power_cap": "Active"}})
    health.write_smi(tmp_path, xml_text)
    _facts, found = audit_health(tmp_path)
    assert ids(found) == [("gpu_clock_throttle", "0000:1b:00.0", "low")]
    assert "sw_power_cap" in found[0]["current"] and "applications" not in found[0]["current"]


def test_the_old_drivers_state_findings(tmp_path):
    health.write_smi(tmp_path, health.read(health.OLD_470))
    _facts, found = audit_health(tmp_path)
    assert ids(found) == [("gpu_clock_throttle", "0000:3b:00.0", "high"),
                          ("gpu_persistence_off", "0000:3b:00.0", "medium"),
                          ("gpu_power_capped", "0000:3b:00.0", "medium")]
    capped = [f for f in found if f["id"] == "gpu_power_capped"][0]
    assert capped["current"] == "power limit 200 W" and "nvidia-smi -pl 250" in capped["remedy"]


def test_a_healthy_layout_gives_none(tmp_path):
    health.write_smi(tmp_path, health.read(health.B200_580))
    facts, found = audit_health(tmp_path)
    assert facts["nvidia_smi"]["available"] and found == []


def test_na_without_nvidia_smi_data(audited):
    reason = judge("gpu_persistence_off", audited("seed_host"))
    assert reason.startswith("no nvidia-smi data")
