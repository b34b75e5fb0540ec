"""verify (module post_boot_verify): the loaded modules (``/proc/modules``), module
parameters as ``/sys/module`` shows them (``Y``/``N`` for a bool), ``systemctl show -p``
output, the running command line, and ``judge``: every check in ``CHECKS`` order, pass,
fail, or pending while a needed reboot has not happened. Trees from tests/fixtures."""

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import post_boot_verify
from fixtures import hosts, procsys


def test_loaded_modules_read_the_first_field(tmp_path):
    procsys.proc_modules(tmp_path, procsys.SEED_MODULES)
    loaded = post_boot_verify.loaded_modules(str(tmp_path))
    assert "nvidia_uvm" in loaded and all(" " not in m for m in loaded)
    assert post_boot_verify.loaded_modules(str(tmp_path / "none")) == []


def test_module_param_problems(tmp_path):
    procsys.nvidia_driver(tmp_path, uvm_disable_hmm="N")
    problems, checked = post_boot_verify.module_param_problems(
        str(tmp_path), {"nvidia_uvm": {"uvm_disable_hmm": "Y", "uvm_perf_prefetch_enable": 1},
                        "nvidia": {"NVreg_X": 1}})
    assert checked == ["nvidia_uvm/uvm_disable_hmm=Y", "nvidia_uvm/uvm_perf_prefetch_enable=1",
                       "nvidia/NVreg_X=1"]
    assert problems == ["nvidia_uvm/uvm_disable_hmm reads N",
                        "nvidia/NVreg_X unreadable (module not loaded?)"]


def test_parse_systemctl_show():
    text = "LoadState=loaded\nResult=success\nExecMainStatus=0\nActiveState=active\njunk\n"
    assert post_boot_verify.parse_systemctl_show(text) == {"LoadState": "loaded", "Result": "success",  # noqa: E501
                                                 "ExecMainStatus": "0",
                                                 "ActiveState": "active"}
    assert post_boot_verify.parse_systemctl_show(None) == {}


def test_running_on_the_tuned_host(tmp_path):
    root = str(tmp_path)
    hosts.tuned_host(root)
    now = post_boot_verify.running(root, {"amd_pstate": "active", "iommu": "pt"})
    assert now["kernel"] == hosts.SEED_NEW and now["missing"] == ["iommu=pt"]


WANTED = {"expected_kernel": "6.14.11-5-bpo12-pve", "modules": ["nvidia-uvm"],
          "cpufreq_drivers_wanted": ["amd-pstate-epp"], "cpuidle_deeper_than": "C1",
          "mrrs_size": 4096, "tuning_service": "gpuhost-tuning.service"}
GOOD_NOW = {"kernel": "6.14.11-5-bpo12-pve", "missing": [], "loaded": ["nvidia_uvm"],
            "param_problems": [], "params_checked": ["nvidia_uvm/uvm_disable_hmm=Y"]}
GOOD_AUDIT = {"findings": [], "cpu": {"cpufreq": {"driver": "amd-pstate-epp"}}}
SERVICE = {"LoadState": "loaded", "Result": "success", "ExecMainStatus": "0",
           "ActiveState": "active"}


def _status(checks):
    return dict((c["name"], c["status"]) for c in checks)


def test_judge_passes_a_tuned_host_in_checks_order():
    checks = post_boot_verify.judge(WANTED, GOOD_NOW, GOOD_AUDIT, SERVICE)
    assert [c["name"] for c in checks] == list(post_boot_verify.CHECKS)
    assert set(_status(checks).values()) == {"pass"}
    assert post_boot_verify.line(checks[0]) == (
        "PASS  kernel  running 6.14.11-5-bpo12-pve, expected 6.14.11-5-bpo12-pve")


@pytest.mark.parametrize("pending,off", [(False, "fail"), (True, "pending")])
def test_judge_what_a_reboot_fixes_is_pending_until_it_happened(pending, off):
    now = dict(GOOD_NOW, kernel="6.8.12-9-pve", missing=["iommu=pt"], loaded=[],
               param_problems=["nvidia_uvm/uvm_disable_hmm reads N"])
    audit = {"findings": [{"id": "cpuidle_deep_state", "subject": "C2"},
                          {"id": "sysctl", "subject": "vm.swappiness"},
                          {"id": "pcie_mrrs", "subject": "0000:01:00.0"}],
             "cpu": {"cpufreq": {"driver": "acpi-cpufreq"}}}
    status = _status(post_boot_verify.judge(dict(WANTED, pending=pending), now, audit,
                                            dict(SERVICE, Result="exit-code", ExecMainStatus="1")))
    assert status == {"kernel": off, "cmdline": off, "modules": "fail",
                      "module_params": off, "cpufreq": off, "cpuidle": "fail",
                      "tuning_service": "fail", "sysctl": "fail", "mrrs": "fail"}


def test_judge_skips_what_the_host_does_not_have():
    audit = {"findings": [], "cpu": {"cpufreq": {"driver": None}}}
    status = _status(post_boot_verify.judge(WANTED, GOOD_NOW, audit, {}))
    assert status["cpufreq"] == "skip" and status["tuning_service"] == "skip"
