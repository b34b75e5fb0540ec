"""subjects/health/gpu_state_check.py: gpu_clock_throttle, gpu_power_capped, gpu_persistence_off,
gpu_slowdown_since_load and gpu_thermal_margin_low from
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


def _h200(tmp_path, edits):
    """The real H200 log with ``edits`` on its GPU, read as the audit reads it."""
    addr = "0000:18:00.0"
    health.write_smi(tmp_path, health.smi_xml(health.H200_REAL_PROCESS, gpus=[addr],
                                              edits={addr: edits}))
    facts, _found = audit_health(tmp_path)
    return facts


def test_the_real_h200_has_no_slowdown_and_its_margin(tmp_path):
    facts = _h200(tmp_path, {})
    assert judge("gpu_slowdown_since_load", facts) == []
    assert judge("gpu_thermal_margin_low", facts) == []      # 49 C of margin


def test_a_hardware_slowdown_since_the_driver_loaded_is_medium(tmp_path):
    counters = "clocks_event_reasons_counters/clocks_event_reasons_counters_"
    facts = _h200(tmp_path, {counters + "hw_therm_slowdown": "12500000 us",
                             counters + "sw_power_cap": "90000000 us"})
    [item] = judge("gpu_slowdown_since_load", facts)
    assert item["severity"] == "medium"
    assert item["current"] == "clocks held down since the driver loaded: hw_therm_slowdown 12.5 s"
    facts = _h200(tmp_path, {counters + "sw_therm_slowdown": "300000 us"})
    assert [f["severity"] for f in judge("gpu_slowdown_since_load", facts)] == ["low"]


def test_a_thin_thermal_margin_is_medium_and_past_the_limit_high(tmp_path):
    facts = _h200(tmp_path, {"temperature/gpu_temp_tlimit": "6 C"})
    [item] = judge("gpu_thermal_margin_low", facts)
    assert item["severity"] == "medium" and item["expected"] == "at least 10 C of margin"
    assert item["current"] == "6 C below the slowdown limit (GPU 38 C, memory 40 C)"
    facts = _h200(tmp_path, {"temperature/gpu_temp_tlimit": "-1 C"})
    assert [f["severity"] for f in judge("gpu_thermal_margin_low", facts)] == ["high"]
    assert judge("gpu_thermal_margin_low", facts, thermal_margin_min_c=0)[0]["severity"] == \
        "high"
    assert judge("gpu_thermal_margin_low", _h200(tmp_path, {}), thermal_margin_min_c=60)


def test_hot_memory_near_its_own_limit_is_a_thin_margin(tmp_path):
    """Drivers that print the memory's limit (``gpu_temp_max_mem_threshold``, 95 C in the
    470 driver's log of tests/fixtures/nvidia/old-driver-470.xml) get the memory judged too;
    the real H200's 580 driver prints only ``gpu_temp_max_mem_tlimit_threshold`` (0 C, a
    threshold on the T.Limit scale, which memory_temp is not on): no memory judgement."""
    facts = _h200(tmp_path, {"temperature/memory_temp": "94 C"})
    gpu = facts["nvidia_smi"]["gpus"][0]
    assert (gpu["memory_temperature_c"], gpu["memory_temperature_limit_c"]) == (94, None)
    assert judge("gpu_thermal_margin_low", facts) == []
    limit = "temperature/gpu_temp_max_mem_threshold"
    facts = _h200(tmp_path, {"temperature/memory_temp": "89 C", limit: "95 C"})
    [item] = judge("gpu_thermal_margin_low", facts)
    assert item["severity"] == "medium"
    assert item["current"] == "memory 6 C below its 95 C limit (GPU 38 C, memory 89 C)"
    facts = _h200(tmp_path, {"temperature/memory_temp": "96 C", limit: "95 C",
                             "temperature/gpu_temp_tlimit": "4 C"})
    [item] = judge("gpu_thermal_margin_low", facts)
    assert item["severity"] == "high"
    assert item["current"].startswith("4 C below the slowdown limit; memory -1 C below its")


def test_the_live_h100_after_the_ceiling_probe_has_no_health_finding(tmp_path):
    """The real H100's log (tests/fixtures/nvidia/h100-580-live.xml, issue 43's run): read as
    the audit reads it, recovery action None, 47 C of margin, memory 43 C with no limit
    printed, no slowdown counted; no finding of the GPU state column or of recovery."""
    with open(health.H100_LIVE) as handle:
        health.write_smi(tmp_path, handle.read())
    facts, found = audit_health(tmp_path)
    (gpu,) = facts["nvidia_smi"]["gpus"]
    assert (gpu["recovery_action"], gpu["temperature_margin_c"], gpu["memory_temperature_c"],
            gpu["memory_temperature_limit_c"]) == ("None", 47, 43, None)
    assert set(gpu["clock_event_counters_us"].values()) == {0}
    assert found == []
