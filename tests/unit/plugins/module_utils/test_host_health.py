"""Issue 25 items 1, 2 and 4: lost GPUs, host health from the kernel log and EDAC, and
held GPUs. Kernel messages in their real formats (fixtures/kernmsg.py names each source),
nvidia-smi's processes from the real H200 log (fixtures/nvidia/h200-580-process.xml).
The readers' own tests are their mirror files (test_hostlog, test_kernlog, test_nvsmi,
test_gpuuse)."""

import io
import json
import os
import tarfile

import pytest
from fixtures import hosts, kernmsg, nvhealth

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import cmdout
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import host_capture
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import kernel_log

NOW = hosts.SEED_CAPTURED_AT
MINE = ("gpu_lost", "gpu_count_expected", "host_hardware_error", "host_edac_errors",
        "host_fs_readonly", "host_kernel_oops", "host_kernel_hang", "host_nvme_errors",
        "host_oom_kill", "gpu_held_unbound", "gpu_memory_no_process", "gpu_held")


def _health(tmp_path, messages, boot_offset=86400, window=7):
    """host_health facts of a tree whose stored kernel log holds ``[(age_s, message)]``."""
    root = nvhealth.stored_kernel_log(tmp_path, messages, NOW, boot_offset, window)
    outputs = cmdout.CommandOutputs(root)
    return kernel_log.health_facts(root, outputs, window, boot_time=kernel_log.boot_time(root))


def _ids(result, only=MINE):
    return sorted((f["id"], f["severity"], f["subject"]) for f in result["findings"]
                  if f["id"] in only)


# ---- GPU count ------------------------------------------------------------------------


def test_lost_again_in_a_second_boot_is_hardware_service(tmp_path):
    lost = "0000:83:00.0"
    messages = [(3 * 86400, kernmsg.boot()), (2 * 86400, kernmsg.off_bus(lost)),
                (86400 - 1, kernmsg.boot()), (3600, kernmsg.off_bus(lost))]
    facts = _health(tmp_path, messages)
    assert facts["boots"] == 2
    assert facts["lost_gpus"] == [{"address": lost, "text": 2, "xid": 0,
                                   "boots": ["boot-1", "current"],
                                   "last": "2025-12-31T23:00:00Z"}]
    root = tmp_path / "host"
    hosts.lost_gpu_host(str(root))
    nvhealth.write_stored_log(str(root), [kernmsg.line(NOW - a, m) for a, m in messages], NOW)
    found = [f for f in audit.audit(str(root), hosts.common_wanted())["findings"]
             if f["id"] == "gpu_lost"]
    assert [(f["severity"], f["subject"]) for f in found] == [("critical", lost)]
    assert found[0]["remedy"].startswith("hardware service: the GPU was lost in 2 boots")


# ---- the issue's host -----------------------------------------------------------------


def _scenario_ids(root, unbound):
    base = str(root) + "-seed"
    os.makedirs(base)
    hosts.seed_host(base)
    wanted = hosts.common_wanted("pve-gpu01")
    before = set((f["id"], f["subject"]) for f in audit.audit(base, wanted)["findings"])
    built = hosts.lost_gpu_host(str(root), unbound=unbound)
    result = audit.audit(str(root), wanted)
    after = set((f["id"], f["subject"]) for f in result["findings"])
    assert before <= after  # the seed's own findings all still there
    assert result["errors"] == []
    return built, result, sorted((f["id"], f["severity"], f["subject"])
                                 for f in result["findings"] if (f["id"], f["subject"])
                                 not in before)


def test_the_issue_host_gives_exactly_these_findings(tmp_path):
    built, result, new = _scenario_ids(tmp_path / "host", unbound=False)
    assert new == [("gpu_held", "info", built["held"]),
                   ("gpu_lost", "high", built["lost"]),
                   ("host_edac_errors", "critical", "edac mc0"),
                   ("host_fs_readonly", "high", "sdb1"),
                   ("host_oom_kill", "medium", "lxc/129")]
    lost = [f for f in result["findings"] if f["id"] == "gpu_lost"][0]
    assert "7 of 8 GPUs in nvidia-smi" in lost["current"]
    assert "fallen off the bus x1 with no XID logged" in lost["current"]
    assert lost["reboot_required"] and "reboot_verify -l pve-gpu01" in lost["remedy"]
    held = [f for f in result["findings"] if f["id"] == "gpu_held"][0]
    assert held["current"] == "lxc 129 pid 4242 python3 (1030 MiB)"
    assert result["checks"]["gpu_count"]["status"] != "n/a"


def test_the_issue_host_with_the_gpu_not_bound_adds_gpu_held_unbound(tmp_path):
    built, result, new = _scenario_ids(tmp_path / "host", unbound=True)
    assert ("gpu_held_unbound", "high", built["held"]) in new
    assert len(new) == 6
    item = [f for f in result["findings"] if f["id"] == "gpu_held_unbound"][0]
    assert "/etc/pve/lxc/129.conf passes in no /dev/nvidia3" in item["remedy"]


def test_lxc_payload_cgroup_form_names_the_container_too(tmp_path):
    hosts.lost_gpu_host(str(tmp_path), unbound=True, cgroup="0::/lxc.payload.129/init.scope")
    assert _ids(audit.audit(str(tmp_path), hosts.common_wanted()), ("gpu_held_unbound",)) == [
        ("gpu_held_unbound", "high", "0000:04:00.0")]


def test_the_issue_host_capture_audits_the_same(tmp_path):
    src = str(tmp_path / "src")
    os.makedirs(src)
    hosts.lost_gpu_host(src, unbound=True)
    wanted = hosts.common_wanted("pve-gpu01")
    builder, original, _recorded = host_capture.capture(src, wanted)
    buf = io.BytesIO()
    builder.write(buf, "{}")
    dest = str(tmp_path / "unpacked")
    os.makedirs(dest)
    with tarfile.open(fileobj=io.BytesIO(buf.getvalue()), mode="r:gz") as tar:
        names = tar.getnames()
        tar.extractall(dest, filter="tar")
    assert any(n.endswith("proc/4242/cgroup") for n in names)
    assert any(n.endswith("edac/mc/mc0/ue_count") for n in names)
    again = audit.audit(dest, wanted)
    for key in ("host_health", "gpu_count", "gpu_processes"):
        assert json.dumps(again[key], sort_keys=True) == json.dumps(original[key],
                                                                    sort_keys=True)
    assert _ids(again) == _ids(original)


@pytest.mark.parametrize("builder", [hosts.seed_host, hosts.seed_health_host,
                                     hosts.tuned_host, nvhealth.h200_tree])
def test_clean_hosts_give_none_of_these(builder, tmp_path):
    builder(str(tmp_path))
    assert _ids(audit.audit(str(tmp_path), hosts.common_wanted())) == []
