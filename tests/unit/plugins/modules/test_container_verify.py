"""container_verify module: one container brought back after a boot, with the pct double
(tests/doubles/pct) acting on the same tree: its device story is the real one (rules decide
what pct exec can reach)."""

import json
import os

import fakecuda
import pytest

from ansible_collections.gpuhost.tuning.plugins.modules import container_verify
from fixtures import lxc
from modrun import run_module
from conftest import TESTS

DOUBLES = os.path.join(TESTS, "doubles")
TORCH = ["python3", "-c", "import torch; print(torch.cuda.is_available())"]
BEFORE = [195, 504, 507]  # the GPU drivers' majors before the reboot


@pytest.fixture
def host(tmp_path, monkeypatch):
    """Right after the reboot: /proc/devices has the new majors, 129.conf the old ones."""
    root = tmp_path / "host"
    lxc.seed_host(root, era="after", config_era="before")
    monkeypatch.setenv("PATH", DOUBLES + os.pathsep + os.environ.get("PATH", ""))
    monkeypatch.setenv("GPUHOST_DOUBLES_ROOT", str(root))
    monkeypatch.setenv("GPUHOST_DOUBLES_LOG", str(tmp_path / "calls.jsonl"))
    return root


def pct_state(root, state):
    state.setdefault("cuda_env", fakecuda.pct_cuda_env())   # containers see a libcuda.so.1
    path = os.path.join(str(root), "var/lib/gpuhost-doubles/pct.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        json.dump(state, handle)


def calls(root):
    path = os.path.join(os.path.dirname(str(root)), "calls.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as handle:
        return [json.loads(line)["argv"][1:] for line in handle if line.strip()]


def conf(root, vmid=129):
    with open(os.path.join(str(root), "etc/pve/lxc/%d.conf" % vmid)) as handle:
        return handle.read()


def run(root, check_mode=False, **args):
    args.setdefault("root", str(root))
    args.setdefault("previous_majors", BEFORE)
    return run_module(container_verify, args, check_mode=check_mode, diff=True)


def test_running_container_with_old_majors_is_stopped_repaired_started_and_cuda_works(host):
    pct_state(host, {"containers": {"129": {"status": "running"}}})
    result = run(host, vmid=129, start=True, running_before=True, cuda_check=TORCH)
    ct = result["container"]
    assert result["changed"] is True
    assert ct["problems"] == []
    assert (ct["stopped"], ct["started"], ct["rules_changed"]) == (True, True, True)
    assert "c 504:* rwm" in ct["rules_removed"] and "c 509:* rwm" in ct["rules_added"]
    assert ct["gpus"] == 8 and ct["gpu_check"] == 0 and ct["cuda_check"] == "True\n"
    assert (ct["cuda"]["code"], ct["cuda"]["name"], ct["cuda"]["devices"]) == (
        0, "CUDA_SUCCESS", 1)
    assert [c[0] for c in calls(host)] == ["status", "stop", "start", "exec", "exec", "exec"]
    assert calls(host)[4][2:5] == ["--", "python3", "-"]      # the probe, source on stdin
    live = conf(host).split("\n[", 1)[0]
    assert "c 509:* rwm" in live and "c 504:* rwm" not in live
    # second run: nothing to change, the container keeps running, the checks run again
    again = run(host, vmid=129, start=True, running_before=True, cuda_check=TORCH)
    assert again["changed"] is False and again["container"]["problems"] == []
    assert [c[0] for c in calls(host)][6:] == ["status", "exec", "exec", "exec"]


def test_failing_checks_inside_are_problems_not_errors(host):
    lxc.container_129(host, "after")  # rules already current
    pct_state(host, {"containers": {"129": {"status": "running"}},
                     "exec": [{"contains": "nvidia-smi", "stdout": "", "rc": 9,
                               "stderr": "NVIDIA-SMI has failed\n"},
                              {"contains": "torch", "stdout": "False\n", "rc": 0,
                               "stderr": "CUDA initialization: CUDA unknown error\n"}]})
    result = run(host, vmid=129, start=True, cuda_check=TORCH)
    assert "failed" not in result and result["changed"] is False
    assert result["container"]["problems"] == [
        "nvidia-smi -L exited 9: NVIDIA-SMI has failed",
        'python3 -c import torch; print(torch.cuda.is_available()) printed "False", want True: '
        "CUDA initialization: CUDA unknown error"]


def test_check_mode_plans_without_writing_or_stopping(host):
    pct_state(host, {"containers": {"129": {"status": "running"}}})
    before = conf(host)
    result = run(host, check_mode=True, vmid=129, start=True)
    ct = result["container"]
    assert result["changed"] is True and ct["rules_changed"] is True
    assert (ct["stopped"], ct["started"]) == (False, False)
    assert conf(host) == before
    assert [c[0] for c in calls(host)] == ["status", "exec", "exec"]
    assert "c 504:* rwm" in result["diff"]["before"]
    # before the repair the old majors block nvidia-uvm: CUDA says 999 where nvidia-smi works
    assert ct["gpu_check"] == 0 and ct["cuda"]["code"] == 999


def test_onboot_container_without_gpus_is_started_only(host):
    result = run(host, vmid=130, gpu=False, start=True, onboot=True)
    ct = result["container"]
    assert ct["started"] is True and ct["gpu_check"] is None and ct["rules_added"] == []
    assert calls(host) == [["status", "130"], ["start", "130"]]


def test_without_pct_only_the_rules_are_repaired(host):
    result = run(host, vmid=129, pct=False, start=True)
    ct = result["container"]
    assert ct["rules_changed"] is True and ct["started"] is False
    assert ct["skipped"] == ["pct stop/start/exec (root %s)" % host]
    assert calls(host) == []


def test_a_missing_config_fails_with_the_containers_there(host):
    result = run(host, vmid=999, start=True)
    assert result["failed"] is True
    assert result["msg"].startswith("CT 999: no config for container 999")
    assert "containers here: 129, 130" in result["msg"]


def test_cuda_failing_where_nvidia_smi_works_names_code_name_and_cause(host):
    """Rules repaired, but 129 lost its /dev/nvidia-uvm bind mount: nvidia-smi lists the
    GPUs, CUDA cannot initialise."""
    text = lxc.container_129_text("after").replace(
        "lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file\n", "")
    lxc.write_config(host, 129, text)
    pct_state(host, {"containers": {"129": {"status": "running"}}})
    result = run(host, vmid=129, start=True)
    ct = result["container"]
    assert ct["gpu_check"] == 0 and ct["gpus"] == 8
    assert ct["cuda"]["code"] == 999 and ct["cuda"]["name"] == "CUDA_ERROR_UNKNOWN"
    problem, = ct["problems"]
    assert problem.startswith("CUDA: cuInit(0) returned 999 CUDA_ERROR_UNKNOWN (unknown "
                              "error); cause: ")
    assert "lxc_cgroup_devices" in problem
    # the switch turns the built-in check off
    off = run(host, vmid=129, start=True, cuda_probe=False)["container"]
    assert off["problems"] == [] and off["cuda"] is None


def test_container_without_python3_is_a_problem_saying_so(host):
    lxc.container_129(host, "after")
    pct_state(host, {"containers": {"129": {"status": "running", "python3": False}}})
    problem, = run(host, vmid=129, start=True)["container"]["problems"]
    assert problem.startswith("CUDA: container 129 has no python3, which the CUDA probe needs")
