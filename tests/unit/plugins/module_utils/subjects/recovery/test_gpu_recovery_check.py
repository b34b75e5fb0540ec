"""Column GPU recovery: one finding per GPU that needs something, critical for a reboot,
high otherwise, naming the evidence and the holders; the remedy resets that GPU alone after
stopping only its holders, and a GPU passed to a VM is the VM's to release."""

from auditcase import judge

GPU = "0000:18:00.0"
NONE = {"containers": [], "vms": [], "processes": []}


def _facts(*gpus):
    return {"nvidia_smi": {"available": True, "gpus": [{}]}, "kernel_log": {"available": True},
            "gpu_recovery": list(gpus)}


def _gpu(need, holders=None, evidence=("driver recovery action Reset",)):
    return {"address": GPU, "need": need, "driver_action": "Reset", "evidence": list(evidence),
            "holders": dict(holders or NONE)}


def test_nothing_needed_is_no_finding():
    assert judge("gpu_recovery_needed", _facts(_gpu("none"))) == []


def test_a_reset_stops_only_the_gpus_holders():
    held = {"containers": ["129"], "vms": [], "processes": [{"pid": 77, "name": "x"}]}
    [item] = judge("gpu_recovery_needed", _facts(_gpu("reset", held)))
    assert item["severity"] == "high" and item["subject"] == GPU
    assert item["current"] == "driver recovery action Reset"
    assert item["remedy"].startswith("stop container 129 (pct shutdown); stop host process 77; "
                                     "nvidia-smi -r -i 0000:18:00.0")
    assert "containers 129; host processes x (pid 77)" in item["detail"]


def test_a_reboot_is_critical_and_gated():
    [item] = judge("gpu_recovery_needed", _facts(_gpu("reboot")))
    assert item["severity"] == "critical" and item["reboot_required"] is True
    assert "gpuhost_reboot_verify_reboot=true" in item["remedy"]


def test_a_gpu_passed_to_a_vm_is_the_vms_to_release():
    held = {"containers": [], "vms": ["200"], "processes": []}
    [item] = judge("gpu_recovery_needed", _facts(_gpu("drain_and_reset", held)))
    assert item["remedy"].startswith("the GPU is passed to VM 200: shut the VM down")


def test_without_nvidia_smi_or_a_kernel_log_the_column_does_not_apply():
    facts = {"nvidia_smi": {"available": False}, "kernel_log": {"available": False},
             "gpu_recovery": [_gpu("reset")]}
    assert judge("gpu_recovery_needed", facts) == \
        "neither nvidia-smi data nor a kernel log"
