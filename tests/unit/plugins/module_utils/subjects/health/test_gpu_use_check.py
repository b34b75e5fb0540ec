"""subjects/health/gpu_use_check.py: gpu_held_unbound, gpu_memory_no_process and gpu_held, which
process
of which container holds a GPU (moved from test_host_health.py; nvidia-smi's processes from
the real H200 log, fixtures/nvidia/h200-580-process.xml)."""

import shutil

from fixtures import hosts, nvhealth

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit

from auditcase import judge

MINE = ("gpu_held_unbound", "gpu_memory_no_process", "gpu_held")


def _ids(result, only=MINE):
    return sorted((f["id"], f["severity"], f["subject"]) for f in result["findings"]
                  if f["id"] in only)


def test_memory_used_with_no_process_is_a_finding(tmp_path):
    built = hosts.lost_gpu_host(str(tmp_path))
    smi = str(tmp_path / ".gpuhost-capture/nvidia-smi-q-x.xml")
    with open(smi) as handle:
        text = handle.read()
    with open(smi, "w") as handle:
        handle.write(nvhealth.keep_processes(text, "0000:ff:00.0", 1))  # nobody's process
    assert _ids(audit.audit(str(tmp_path), hosts.common_wanted()), (
        "gpu_memory_no_process", "gpu_held")) == [
        ("gpu_memory_no_process", "medium", built["held"])]


def test_process_of_a_host_cgroup_or_gone_is_the_hosts(tmp_path):
    hosts.lost_gpu_host(str(tmp_path), unbound=True, cgroup="0::/system.slice/ollama.service")
    result = audit.audit(str(tmp_path), hosts.common_wanted())
    assert _ids(result, ("gpu_held_unbound",)) == []
    held = [f for f in result["findings"] if f["id"] == "gpu_held"]
    assert held[0]["current"] == "host pid 4242 python3 (1030 MiB)"
    shutil.rmtree(str(tmp_path / "proc/4242"))
    procs = audit.audit(str(tmp_path), hosts.common_wanted())["gpu_processes"][3]["processes"]
    assert procs[0]["container"] is None and "not in /proc" in procs[0]["how"]


def test_the_held_gpu_of_container_129(audited):
    result = audited("lost_gpu_host")
    (held,) = judge("gpu_held", result)
    assert held["severity"] == "info" and "lxc 129" in held["current"]
    assert judge("gpu_held_unbound", result) == []
    assert judge("gpu_memory_no_process", result) == []


def test_the_unbound_gpu_is_high(tmp_path):
    built = hosts.lost_gpu_host(str(tmp_path), unbound=True)
    result = audit.audit(str(tmp_path), hosts.common_wanted())
    assert _ids(result, ("gpu_held_unbound",)) == [
        ("gpu_held_unbound", "high", built["held"])]


def test_na_without_nvidia_smi_data(audited):
    assert judge("gpu_held", audited("seed_host")).startswith("no nvidia-smi data")
