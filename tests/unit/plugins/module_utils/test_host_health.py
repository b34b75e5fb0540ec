"""Issue 25 items 1, 2 and 4: lost GPUs, host health from the kernel log and EDAC, and
held GPUs. Kernel messages in their real formats (fixtures/kernmsg.py names each source),
nvidia-smi's processes from the real H200 log (fixtures/nvidia/h200-580-process.xml)."""

import io
import json
import os
import subprocess
import tarfile
import time

import pytest
from fixtures import hosts, kernmsg, nvhealth

from ansible_collections.gpuhost.tuning.plugins.module_utils import (
    audit,
    capture,
    cmdout,
    gpuuse,
    hostlog,
    kernlog,
    nvsmi,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.runner import Runner
from conftest import TESTS

DOUBLES = os.path.join(TESTS, "doubles")
NOW = hosts.SEED_CAPTURED_AT
MINE = ("gpu_lost", "gpu_count_expected", "host_hardware_error", "host_edac_errors",
        "host_fs_readonly", "host_kernel_oops", "host_kernel_hang", "host_nvme_errors",
        "host_oom_kill", "gpu_held_unbound", "gpu_memory_no_process", "gpu_held")


def _health(tmp_path, messages, boot_offset=86400, window=7):
    """host_health facts of a tree whose stored kernel log holds ``[(age_s, message)]``."""
    root = str(tmp_path)
    nvhealth.proc_stat_btime(root, int(NOW - boot_offset))
    nvhealth.write_stored_log(root, [kernmsg.line(NOW - age, text) for age, text in messages],
                              NOW, window_days=window)
    outputs = cmdout.CommandOutputs(root)
    return kernlog.health_facts(root, outputs, window, boot_time=kernlog.boot_time(root))


def _ids(result, only=MINE):
    return sorted((f["id"], f["severity"], f["subject"]) for f in result["findings"]
                  if f["id"] in only)


# ---- kernel-log classes -------------------------------------------------------------


@pytest.mark.parametrize("message, kind", [
    (kernmsg.ghes()[0], "hardware_error"),
    (kernmsg.MCE_LOGGED, "hardware_error"),
    (kernmsg.MCE_CPU, "hardware_error"),
    (kernmsg.SOFT_LOCKUP, "lockup"),
    (kernmsg.HUNG_TASK, "lockup"),
    (kernmsg.OOPS, "oops"),
    (kernmsg.PANIC, "oops"),
    (kernmsg.oom()[1], "oom"),
    (kernmsg.oom(cgroup_oom=False)[1], "oom"),
    (kernmsg.NVME_TIMEOUT, "nvme"),
    (kernmsg.NVME_RESET, "nvme"),
    (kernmsg.NVME_DOWN, "nvme"),
    (kernmsg.EXT4_RO, "fs_readonly"),
    (kernmsg.off_bus("0000:83:00.0"), "gpu_off_bus"),
    (kernmsg.boot(), "boot"),
])
def test_each_real_message_is_classed(message, kind):
    assert hostlog.classify(kernmsg.line(NOW, message))[0] == kind


@pytest.mark.parametrize("message", [
    kernmsg.HUNG_SHORT,  # 61 s: under the 120 s the check is for
    kernmsg.NVME_QUEUES, kernmsg.EXT4_MOUNT,
    "nvidia-uvm: Loaded the UVM driver, major device number 509.",
    nvhealth.XID_TEXT[79],
])
def test_ordinary_messages_are_not_kept(message):
    line = kernmsg.line(NOW, message)
    assert not hostlog.wanted(line)
    assert kernlog.keep([line]) == []


def test_each_class_counted_over_the_window_only(tmp_path):
    old = 8 * 86400  # outside the 7-day window
    messages = [(old, kernmsg.SOFT_LOCKUP), (old, kernmsg.OOPS), (3600, kernmsg.SOFT_LOCKUP),
                (3000, kernmsg.HUNG_TASK), (2000, kernmsg.NVME_TIMEOUT),
                (1999, kernmsg.NVME_RESET), (1000, kernmsg.EXT4_RO)]
    messages += [(500, text) for text in kernmsg.ghes("corrected")]
    facts = _health(tmp_path, messages)
    events = facts["events"]
    assert events["lockup"]["count"] == 2
    assert events["oops"]["count"] == 0
    assert events["nvme"]["subjects"] == {"nvme1": {"count": 2, "tasks": []}}
    assert events["fs_readonly"]["subjects"]["sdb1"]["count"] == 1
    assert events["hardware_error"]["count"] == 1
    assert events["hardware_error"]["severities"] == ["corrected"]
    assert events["lockup"]["last"] == "2025-12-31T23:10:00Z"


def test_oom_kill_names_the_container_in_both_cgroup_forms(tmp_path):
    messages = [(900, t) for t in kernmsg.oom(pid=1)]
    messages += [(800, t) for t in kernmsg.oom(pid=2, memcg="/lxc.payload.130/init.scope",
                                               oom_memcg="/lxc.payload.130")]
    messages += [(700, t) for t in kernmsg.oom(pid=3, task="kvm", memcg="/qemu.slice/101.scope",
                                               oom_memcg="(null)", cgroup_oom=False)]
    subjects = _health(tmp_path, messages)["events"]["oom"]["subjects"]
    assert subjects == {"lxc/129": {"count": 1, "tasks": ["python3"]},
                        "lxc/130": {"count": 1, "tasks": ["python3"]},
                        "host": {"count": 1, "tasks": ["kvm"]}}


def test_live_journal_keeps_only_the_health_lines(tmp_path, monkeypatch):
    now = time.time()
    journal = tmp_path / "journal.txt"
    wanted = [kernmsg.line(now - 60, kernmsg.EXT4_RO), kernmsg.line(now - 50, kernmsg.OOPS)]
    noise = [kernmsg.line(now - 40, kernmsg.NVME_QUEUES),
             kernmsg.line(now - 30, "usb 1-1: new high-speed USB device number 2")]
    journal.write_text("\n".join(wanted + noise) + "\n")
    monkeypatch.setenv("PATH", DOUBLES + os.pathsep + os.environ["PATH"])
    monkeypatch.setenv("GPUHOST_JOURNAL_TEXT", str(journal))
    monkeypatch.setenv("GPUHOST_JOURNAL_RC", "0")
    outputs = cmdout.CommandOutputs("/", Runner(processes=subprocess))
    facts = kernlog.health_facts(str(tmp_path / "none"), outputs, 7)
    assert facts["events"]["oops"]["count"] == 1
    stored = outputs.captured()["/.gpuhost-capture/kernel-log.txt"].decode()
    assert stored.splitlines()[1:] == wanted


# ---- EDAC ---------------------------------------------------------------------------


def test_edac_counts_per_controller(tmp_path):
    hosts.lost_gpu_host(str(tmp_path))
    mcs = hostlog.edac(str(tmp_path))
    assert [(m["controller"], m["ce_count"], m["ue_count"]) for m in mcs] == [
        ("mc0", 3, 1), ("mc1", 0, 0)]
    assert mcs[0]["dimms"] == [{"dimm": 0, "ce_count": 3, "ue_count": 1, "label": "P0_DIMM_A1"}]
    assert hostlog.edac(str(tmp_path / "nothing")) == []


# ---- nvidia-smi processes and their containers ---------------------------------------


def test_real_h200_log_with_a_process_reads_it():
    gpu = nvsmi.parse(nvhealth.read(nvhealth.H200_REAL_PROCESS))["gpus"][0]
    assert gpu["memory_used_mib"] == 1039 and gpu["minor"] == 0
    assert gpu["processes"] == [{"pid": 440, "type": "C", "name": "python3", "used_mib": 1030}]
    idle = nvsmi.parse(nvhealth.read(nvhealth.H200_XML))["gpus"][0]
    assert idle["processes"] == [] and idle["memory_used_mib"] == 0


@pytest.mark.parametrize("text, want", [
    ("0::/lxc/129/ns/system.slice/sglang.service", "129"),  # Proxmox, cgroup2
    ("0::/lxc.payload.129/init.scope", "129"),  # LXC 4+
    ("12:devices:/lxc/131/ns\n0::/lxc/131/ns/init.scope", "131"),  # hybrid, v1 first
    ("0::/lxc.monitor/129", None),  # the container's monitor runs on the host
    ("0::/process_api/e9f34180c56b1101f3190413158d597f", None),  # the real H200's process
    ("0::/user.slice/user-0.slice/session-3.scope", None),
])
def test_cgroup_lines_name_the_container(text, want):
    assert gpuuse.cgroup_container(text) == want


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
    builder, original, _recorded = capture.capture(src, wanted)
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
