"""nvsmi: ``nvidia-smi -q -x`` parsed (the real H200 log with a process,
tests/fixtures/nvidia/h200-580-process.xml; moved from test_host_health.py)."""


from fixtures import nvhealth

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import nvsmi


# ---- nvidia-smi processes and their containers ---------------------------------------


def test_real_h200_log_with_a_process_reads_it():
    gpu = nvsmi.parse(nvhealth.read(nvhealth.H200_REAL_PROCESS))["gpus"][0]
    assert gpu["memory_used_mib"] == 1039 and gpu["minor"] == 0
    assert gpu["processes"] == [{"pid": 440, "type": "C", "name": "python3", "used_mib": 1030}]
    idle = nvsmi.parse(nvhealth.read(nvhealth.H200_XML))["gpus"][0]
    assert idle["processes"] == [] and idle["memory_used_mib"] == 0


def test_the_real_h200_gives_its_temperature_margin_and_clock_event_counters():
    """The real H200 log (580.159.04): T.Limit 49 C of margin, GPU 38 C, memory 40 C, every
    clocks_event_reasons_counters_* at 0 us, recovery action None."""
    gpu = nvsmi.parse(nvhealth.read(nvhealth.H200_REAL_PROCESS))["gpus"][0]
    assert (gpu["temperature_c"], gpu["temperature_margin_c"], gpu["memory_temperature_c"]) \
        == (38, 49, 40)
    assert gpu["clock_event_counters_us"] == {
        "sw_power_cap": 0, "sync_boost": 0, "sw_therm_slowdown": 0, "hw_therm_slowdown": 0,
        "hw_power_brake": 0}
    assert gpu["recovery_action"] == "None"


def test_an_old_driver_has_no_counters_and_no_recovery_action():
    gpu = nvsmi.parse(nvhealth.read(nvhealth.OLD_470))["gpus"][0]
    assert gpu["clock_event_counters_us"] is None and gpu["recovery_action"] is None
