"""audit_recovery: the recovery subject's declaration: its fact is read after every fact it
derives from (nvidia-smi, the kernel log, the GPU processes, the passthrough devices)."""

from auditcase import declared_facts

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import check_registry
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.recovery import (
    audit_recovery,
    gpu_recovery_check,
)


def test_it_reads_after_what_it_derives_from():
    order = dict((f.name, f.order) for f in check_registry.FACTS)
    [fact] = audit_recovery.FACTS
    for name in ("nvidia_smi", "kernel_log", "gpu_processes", "passthrough"):
        assert order[name] < fact.order
    assert audit_recovery.CHECKS == (gpu_recovery_check,)


def test_a_gpu_named_only_by_the_driver_is_listed(tmp_path):
    known = {"nvidia_smi": {"available": True, "gpus": [
        {"address": "0000:18:00.0", "recovery_action": "Reboot"}]},
        "kernel_log": {"available": False, "devices": []}, "gpu_processes": [],
        "passthrough": {}}
    got, errors = declared_facts(audit_recovery, tmp_path, known=known)
    assert errors == [] and [g["need"] for g in got["gpu_recovery"]] == ["reboot"]
