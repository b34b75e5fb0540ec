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
