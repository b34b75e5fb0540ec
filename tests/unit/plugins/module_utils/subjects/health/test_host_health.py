"""hostlog: the kernel-log classes of host health (each real message of
tests/fixtures/kernmsg.py classed, ordinary lines not kept) and the EDAC counts per memory
controller (moved from test_host_health.py, the issue-25 story, which keeps the findings)."""


import pytest
from fixtures import hosts, kernmsg, nvhealth

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import (
    host_health,
    kernel_log,
)

NOW = hosts.SEED_CAPTURED_AT


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
    assert host_health.classify(kernmsg.line(NOW, message))[0] == kind


@pytest.mark.parametrize("message", [
    kernmsg.HUNG_SHORT,  # 61 s: under the 120 s the check is for
    kernmsg.NVME_QUEUES, kernmsg.EXT4_MOUNT,
    "nvidia-uvm: Loaded the UVM driver, major device number 509.",
    nvhealth.XID_TEXT[79],
])
def test_ordinary_messages_are_not_kept(message):
    line = kernmsg.line(NOW, message)
    assert not host_health.wanted(line)
    assert kernel_log.keep([line]) == []


# ---- EDAC ---------------------------------------------------------------------------


def test_edac_counts_per_controller(tmp_path):
    hosts.lost_gpu_host(str(tmp_path))
    mcs = host_health.edac(str(tmp_path))
    assert [(m["controller"], m["ce_count"], m["ue_count"]) for m in mcs] == [
        ("mc0", 3, 1), ("mc1", 0, 0)]
    assert mcs[0]["dimms"] == [{"dimm": 0, "ce_count": 3, "ue_count": 1, "label": "P0_DIMM_A1"}]
    assert host_health.edac(str(tmp_path / "nothing")) == []


# ---- issue 36: a process's own fault is no oops; matched where the message starts --------


@pytest.mark.parametrize("message", [
    kernmsg.USER_GPF, kernmsg.USER_TRAP, kernmsg.USER_SEGFAULT,
    kernmsg.user_segfault("kernel BUG at "), kernmsg.user_segfault("Oops: 0002 [#1"),
])
def test_a_process_fault_is_not_kept(message):
    assert host_health.classify(kernmsg.line(NOW, message)) == (None, None)


@pytest.mark.parametrize("message", [kernmsg.KERNEL_GPF_OLD, kernmsg.KERNEL_GPF,
                                     kernmsg.KERNEL_GPF_610, kernmsg.PAGE_FAULT])
def test_the_kernels_general_protection_and_page_faults_are_oopses(message):
    assert host_health.classify(kernmsg.line(NOW, message))[0] == "oops"
    assert host_health.classify(message)[0] == "oops"  # a bare message, as a test gives it


def test_message_start_after_each_log_prefix():
    line = kernmsg.line(NOW, "[  812.345678] Oops: 0002 [#1]")
    assert line[host_health.message_start(line):] == "Oops: 0002 [#1]"
    line = "[Sun Feb 23 16:24:18 2025] Oops: 0002 [#1]"
    assert line[host_health.message_start(line):] == "Oops: 0002 [#1]"
    assert host_health.message_start("Oops: 0002 [#1]") == 0


def test_a_line_is_read_as_its_first_line_chars():
    line = kernmsg.line(NOW, kernmsg.NVME_TIMEOUT)
    assert host_health.classify(line + " " * 100000)[0] == "nvme"
    late = kernmsg.line(NOW, "x" * host_health.LINE_CHARS + kernmsg.NVME_TIMEOUT)
    assert host_health.classify(late) == (None, None)
