"""subjects/boot/kernel_check.py: kernel_headers_missing, reboot_pending (newer kernel, command
line not
running) and boot_param (wanted boot parameters in the boot configuration)."""

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import kernel_check

from auditcase import judge

NEW = "6.14.11-5-bpo12-pve"
OLD = "6.8.12-9-pve"


def test_headers_missing_for_the_next_kernel_is_high_for_the_running_one_medium(audited):
    facts = audited("seed_host")
    (item,) = judge("kernel_headers_missing", facts)
    assert (item["subject"], item["severity"], item["remedy"]) == (
        NEW, "high", "apt-get install proxmox-headers-%s" % NEW)
    facts["kernel"]["headers"][OLD] = False
    assert [(f["subject"], f["severity"]) for f in judge("kernel_headers_missing", facts)] == [
        (OLD, "medium"), (NEW, "high")]


def test_headers_not_judged_without_dkms_or_for_a_kernel_booted_from_outside(audited):
    assert judge("kernel_headers_missing", audited("tuned_host")) == []
    facts = audited("seed_host")
    facts["dkms"] = []
    assert judge("kernel_headers_missing", facts) == []
    facts = audited("seed_host")
    facts["kernel"].update(running="6.1.0-56-amd64", next_boot="6.1.0-56-amd64")
    facts["kernel"]["headers"]["6.1.0-56-amd64"] = False
    assert judge("kernel_headers_missing", facts) == []


def test_reboot_pending_for_the_newer_kernel(audited):
    found = judge("reboot_pending", audited("seed_host"))
    assert [(f["subject"], f["current"], f["expected"], f["reboot_required"])
            for f in found] == [("kernel", OLD, NEW, True)]
    assert "gpuhost.tuning.reboot_verify -l pve-gpu01" in found[0]["remedy"]


def test_reboot_pending_for_a_configured_command_line_not_running(audited):
    facts = audited("tuned_host")
    facts["kernel"]["cmdline"] = facts["kernel"]["cmdline"].replace(" nmi_watchdog=0", "")
    (item,) = judge("reboot_pending", facts)
    assert (item["subject"], item["current"]) == ("cmdline", "running without nmi_watchdog=0")
    assert item["expected"].endswith("(/etc/kernel/cmdline)")


def test_no_reboot_pending_when_tuned_or_the_next_kernel_is_older(audited):
    assert judge("reboot_pending", audited("tuned_host")) == []
    facts = audited("tuned_host")
    facts["kernel"]["next_boot"] = OLD
    assert judge("reboot_pending", facts) == []
    facts["kernel"]["pinned"] = OLD
    assert [f["expected"] for f in judge("reboot_pending", facts)] == [OLD]


def test_boot_params_missing_from_the_configuration(audited):
    found = judge("boot_param", audited("seed_host"))
    assert sorted((f["subject"], f["current"], f["expected"]) for f in found) == [
        ("amd_pstate", "absent", "amd_pstate=active"),
        ("nmi_watchdog", "absent", "nmi_watchdog=0"),
        ("processor.max_cstate", "absent", "processor.max_cstate=1")]
    assert all(f["severity"] == "low" and f["reboot_required"] for f in found)
    assert "adds it to /etc/kernel/cmdline" in found[0]["remedy"]


def test_boot_param_wanted_absent_and_a_wrong_value(audited):
    facts = audited("tuned_host")
    found = judge("boot_param", facts, boot_params={"nmi_watchdog": None, "amd_pstate": "guided"})
    assert sorted((f["subject"], f["current"], f["expected"]) for f in found) == [
        ("amd_pstate", "amd_pstate=active", "amd_pstate=guided"),
        ("nmi_watchdog", "nmi_watchdog=0", "absent")]


def test_no_boot_param_finding_when_configured_or_without_a_boot_tool(audited):
    assert judge("boot_param", audited("tuned_host")) == []
    facts = audited("seed_host")
    facts["kernel"]["boot_tool"] = None
    assert judge("boot_param", facts) == []


@pytest.mark.parametrize("key, cpu, applies", [
    ("amd_pstate", {"vendor": "AuthenticAMD"}, True),
    ("amd_pstate", {"vendor": "AuthenticAMD", "hypervisor": True}, False),
    ("amd_pstate", {"vendor": "GenuineIntel"}, False),
    ("intel_pstate", {"vendor": "GenuineIntel"}, True),
    ("processor.max_cstate", {"cpuidle": {"driver": "acpi_idle"}}, True),
    ("processor.max_cstate", {"cpuidle": {"driver": "intel_idle"}}, False),
    ("nmi_watchdog", {"hypervisor": True}, True)])
def test_cpu_parameters_apply_by_vendor_and_idle_driver(key, cpu, applies):
    assert kernel_check.boot_param_applies(key, cpu) is applies


def test_the_column_always_applies_and_notes_a_kernel_from_outside(audited):
    facts = audited("tuned_host")
    assert facts["checks"]["kernel"]["status"] == "ok"
    facts["kernel"]["running_installed"] = False
    assert "is not installed here" in kernel_check.COLUMN.remark(facts)
