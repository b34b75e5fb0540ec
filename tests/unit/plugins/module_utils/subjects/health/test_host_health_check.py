"""subjects/health/host_health_check.py: the host's own health from the kernel log and EDAC (moved
from
test_host_health.py): kernel messages in their real formats (fixtures/kernmsg.py names each
source), EDAC counters as sysfs lays them out."""

import os

from fixtures import hosts, kernmsg, nvhealth

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit

from auditcase import judge

NOW = hosts.SEED_CAPTURED_AT
MINE = ("host_hardware_error", "host_edac_errors", "host_fs_readonly", "host_kernel_oops",
        "host_kernel_hang", "host_nvme_errors", "host_oom_kill")


def _ids(result, only=MINE):
    return sorted((f["id"], f["severity"], f["subject"]) for f in result["findings"]
                  if f["id"] in only)


def test_hardware_error_severity_follows_the_reports(tmp_path):
    def severity(messages):
        root = tmp_path / str(len(os.listdir(str(tmp_path))))
        root.mkdir()
        hosts.seed_host(str(root))
        nvhealth.proc_stat_btime(str(root), int(NOW - 86400))
        nvhealth.write_stored_log(str(root), [kernmsg.line(NOW - 60, m) for m in messages],
                                  NOW)
        return _ids(audit.audit(str(root), hosts.common_wanted()), ("host_hardware_error",))
    assert severity(kernmsg.ghes("corrected")) == [
        ("host_hardware_error", "medium", "kernel log")]
    assert severity(kernmsg.ghes("recoverable")) == [
        ("host_hardware_error", "high", "kernel log")]
    assert severity(kernmsg.ghes("fatal") + [kernmsg.MCE_LOGGED]) == [
        ("host_hardware_error", "critical", "kernel log")]
    assert severity([kernmsg.MCE_CPU]) == [("host_hardware_error", "high", "kernel log")]


def test_edac_correctable_only_is_medium(tmp_path):
    hosts.lost_gpu_host(str(tmp_path))
    with open(str(tmp_path / "sys/devices/system/edac/mc/mc0/ue_count"), "w") as handle:
        handle.write("0\n")
    assert _ids(audit.audit(str(tmp_path), hosts.common_wanted()), ("host_edac_errors",)) == [
        ("host_edac_errors", "medium", "edac mc0")]


def test_the_lost_gpu_hosts_edac_readonly_fs_and_oom(audited):
    result = audited("lost_gpu_host")
    assert _ids(result) == [("host_edac_errors", "critical", "edac mc0"),
                            ("host_fs_readonly", "high", "sdb1"),
                            ("host_oom_kill", "medium", "lxc/129")]
    for fid in ("host_kernel_oops", "host_kernel_hang", "host_nvme_errors"):
        assert judge(fid, result) == [], fid


def test_na_without_a_kernel_log_or_edac(audited):
    assert judge("host_oom_kill", audited("seed_host")) == "no kernel log and no EDAC"
