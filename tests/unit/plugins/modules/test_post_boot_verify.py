"""post_boot_verify module: the checks after a boot, on whole host trees."""

import os

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit as audit_mod
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import (
    post_boot_verify as verify,
)
from ansible_collections.gpuhost.tuning.plugins.modules import post_boot_verify
from fixtures import hosts
from modrun import run_module

PARAMS = {"amd_pstate": "active", "processor.max_cstate": "1", "nmi_watchdog": "0"}


def run(root, audit=None, **args):
    args.setdefault("root", str(root))
    args.setdefault("boot_params", PARAMS)
    args.setdefault("systemctl", False)
    if audit is not None:
        args["audit"] = audit
    return run_module(post_boot_verify, hosts.as_wanted(args))


def statuses(result):
    return dict((c["name"], c["status"]) for c in result["checks"])


def audited(root):
    return audit_mod.audit(str(root), hosts.common_wanted())


def test_tuned_host_after_its_boot_passes(tmp_path):
    hosts.tuned_host(tmp_path)
    result = run(tmp_path, audited(tmp_path), expected_kernel=hosts.SEED_NEW)
    assert result["failures"] == [], result["lines"]
    assert statuses(result) == {
        "kernel": "pass", "cmdline": "pass", "modules": "pass", "module_params": "pass",
        "cpufreq": "pass", "cpuidle": "pass", "tuning_service": "skip", "sysctl": "pass",
        "mrrs": "pass"}
    assert result["running"]["kernel"] == hosts.SEED_NEW
    assert result["lines"][0] == "PASS  kernel  running %s, expected %s" % (
        hosts.SEED_NEW, hosts.SEED_NEW)


def test_seed_host_before_its_reboot_is_pending_not_failed(tmp_path):
    # the untuned host whose reboot into the new kernel has not happened yet
    hosts.seed_host(tmp_path)
    checks = ["kernel", "cmdline", "module_params", "cpufreq"]
    result = run(tmp_path, audited(tmp_path), expected_kernel=hosts.SEED_NEW, pending=True,
                 checks=checks)
    assert statuses(result) == dict((c, "pending") for c in checks)
    assert result["failures"] == []
    detail = dict((c["name"], c["detail"]) for c in result["checks"])
    assert detail["module_params"] == "nvidia_uvm/uvm_disable_hmm reads N"
    assert detail["cmdline"].startswith("/proc/cmdline lacks amd_pstate=active")
    assert detail["cpufreq"] == "scaling driver acpi-cpufreq"


def test_seed_host_after_a_boot_names_every_failure(tmp_path):
    hosts.seed_host(tmp_path)
    result = run(tmp_path, audited(tmp_path), expected_kernel=hosts.SEED_NEW,
                 modules=["nvidia", "nvidia-uvm", "gdrdrv"])
    failed = [f.split(" ", 1)[0] for f in result["failures"]]
    assert failed == ["kernel", "cmdline", "modules", "module_params", "cpufreq", "cpuidle",
                      "sysctl", "mrrs"]
    assert "modules (not loaded: gdrdrv)" in result["failures"]
    assert "mrrs (16 device(s) below 4096 bytes)" in result["failures"]
    assert "kernel.numa_balancing" in [c for c in result["checks"]
                                       if c["name"] == "sysctl"][0]["detail"]


def test_unloaded_module_parameter_is_unreadable(tmp_path):
    hosts.tuned_host(tmp_path)
    os.remove(os.path.join(str(tmp_path), "sys/module/nvidia_uvm/parameters/uvm_disable_hmm"))
    result = run(tmp_path, {}, expected_kernel=hosts.SEED_NEW, checks=["module_params"])
    assert result["failures"] == [
        "module_params (nvidia_uvm/uvm_disable_hmm unreadable (module not loaded?))"]


def test_an_unknown_check_is_refused(tmp_path):
    result = run(tmp_path, {}, checks=["kernel", "gpu_temp"])
    assert result["failed"] and "gpu_temp" in result["msg"]


def test_tuning_service_judged_from_systemctl_show():
    base = {"expected_kernel": "k", "tuning_service": "gpuhost-tuning.service"}
    now = {"kernel": "k", "missing": [], "loaded": [], "param_problems": [],
           "params_checked": []}

    def service(text):
        checks = verify.judge(base, now, {}, verify.parse_systemctl_show(text))
        return [c for c in checks if c["name"] == "tuning_service"][0]

    ok = service("LoadState=loaded\nResult=success\nExecMainStatus=0\nActiveState=active\n")
    assert ok["status"] == "pass"
    bad = service("LoadState=loaded\nResult=exit-code\nExecMainStatus=1\nActiveState=failed\n")
    assert bad == {"name": "tuning_service", "status": "fail", "detail":
                   "gpuhost-tuning.service: Result=exit-code ExecMainStatus=1 ActiveState=failed"}
    assert service("LoadState=not-found\n")["status"] == "skip"
