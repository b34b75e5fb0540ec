"""Playbook gpuhost.tuning.gpu_recover against a fixture tree with the pct and nvidia-smi
doubles on the PATH and the stand-in libcuda (tests/fakecuda.py) as the host's and the
containers' CUDA driver.

Eight GPUs; GPU 3 (0000:04:00.0) has the driver's recovery action Reset; container 129
holds it, container 130 holds GPU 5. The ladder stops 129 only, resets GPU 3, reads it
back, proves CUDA on it, starts 129 and proves CUDA inside; the second run changes
nothing; --check runs no pct command and no reset. A reset the driver refuses marks the
host for the gated reboot and does not reboot it; a GPU passed to a VM is refused naming
the VM; a hanging reset is killed at its limit and reported. Each play takes 3 to 5 s.
"""

import json
import os
import subprocess
import time

from fixtures import recoverhost

import fakecuda

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_PY = os.path.join(REPO, ".venv/bin/python")
PLAYBOOK = os.path.join(REPO, ".venv/bin/ansible-playbook")
DOUBLES = os.path.join(REPO, "tests", "doubles")
COLLECTIONS = os.path.join(REPO, "tests", "output", "pathlink")


def build(tmp_path, **kwargs):
    host = recoverhost.recover_host(tmp_path / "host", **kwargs)
    state = tmp_path / "state"
    state.mkdir()
    devices = ",".join(g for g in host["gpus"] if not (kwargs.get("vm") and g == host["vm_gpu"]))
    (state / "pct.json").write_text(json.dumps({
        "containers": {"129": {"status": "running"}, "130": {"status": "running"}},
        "cuda_env": fakecuda.pct_cuda_env(devices=devices)}))
    host.update(state=state, devices=devices, lib=fakecuda.build())
    return host


def play(tmp_path, host, extra=None, check=False, reset=None):
    if reset:
        (host["state"] / "nvidia-smi.json").write_text(json.dumps({"reset": reset}))
    log = tmp_path / "doubles.jsonl"
    if log.exists():
        log.unlink()
    env = fakecuda.clean_environ()
    env.update({
        "ANSIBLE_COLLECTIONS_PATH": COLLECTIONS,
        "ANSIBLE_CONFIG": os.path.join(REPO, "ansible.cfg"),
        "ANSIBLE_NOCOLOR": "1",
        "PATH": DOUBLES + os.pathsep + env.get("PATH", ""),
        "GPUHOST_DOUBLES_ROOT": host["root"],
        "GPUHOST_DOUBLES_STATE": str(host["state"]),
        "GPUHOST_DOUBLES_LOG": str(log),
        "GPUHOST_NVSMI_XML": host["xml"],
        "GPUHOST_NVSMI_STATE": str(host["state"] / "nvidia-smi.json"),
    })
    env.update(fakecuda.env(devices=host["devices"]))
    variables = {"ansible_python_interpreter": VENV_PY, "gpuhost_root": host["root"],
                 "gpuhost_report_dir": str(tmp_path / "reports"),
                 "gpuhost_recover_cuda_library": host["lib"],
                 "gpuhost_recover_shutdown_timeout": 5, "gpuhost_recover_reset_timeout": 3}
    variables.update(extra or {})
    args = [PLAYBOOK, "-c", "local", "-i", "localhost,", "gpuhost.tuning.gpu_recover",
            "-e", json.dumps(variables)] + (["--check"] if check else [])
    started = time.monotonic()
    proc = subprocess.run(args, env=env, capture_output=True, text=True, check=False,
                          cwd=str(tmp_path), timeout=120)
    seconds = time.monotonic() - started
    calls = []
    if log.exists():
        for line in log.read_text().splitlines():
            entry = json.loads(line)
            argv = entry["argv"]
            calls.append(argv if isinstance(argv, list) else [entry["tool"]] + argv.split())
    path = tmp_path / "reports" / "localhost-recover.json"
    report = json.loads(path.read_text()) if path.exists() else None
    assert report is None or "gpus" in report["result"], (report["failure"],
                                                          proc.stdout[-3000:])
    return proc, calls, report, seconds


def recap(output):
    line = [x for x in output.splitlines() if x.startswith("localhost ") and "ok=" in x][-1]
    return dict(part.split("=") for part in line.split()[2:])


def pct(calls):
    return [c[1:3] for c in calls if c[0] == "pct"]


def resets(calls):
    return [c for c in calls if c[:2] == ["nvidia-smi", "-r"]]


def test_one_gpu_reset_with_only_its_container_stopped_then_nothing(tmp_path):
    host = build(tmp_path)
    proc, calls, report, seconds = play(tmp_path, host)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    [gpu] = report["result"]["gpus"]
    assert (gpu["address"], gpu["result"]) == (host["reset_gpu"], "recovered"), gpu["steps"]
    assert [s["outcome"] for s in gpu["steps"]] == ["ok"] * 7, gpu["steps"]
    [ct] = report["result"]["containers"]
    assert (ct["vmid"], ct["stopped"], ct["started"], ct["cuda"]["error"]) == (
        "129", "shutdown", True, None)
    assert ["shutdown", "129"] in pct(calls) and ["start", "129"] in pct(calls)
    assert [c for c in pct(calls) if c[1] == "130"] == [], pct(calls)
    assert resets(calls) == [["nvidia-smi", "-r", "-i", host["reset_gpu"]]]
    md = (tmp_path / "reports" / "localhost-recover.md").read_text()
    assert "**recovered: %s**" % host["reset_gpu"] in md
    assert "rollout" in " ".join(os.listdir(str(tmp_path / "reports")))
    assert seconds < 30, seconds
    # second run: the driver now reports None, nothing to do
    proc, calls, report, _seconds = play(tmp_path, host)
    assert proc.returncode == 0 and recap(proc.stdout)["changed"] == "0", proc.stdout[-3000:]
    assert report["result"]["gpus"] == [] and pct(calls) == [] and resets(calls) == []


def test_check_mode_prints_the_plan_and_changes_nothing(tmp_path):
    host = build(tmp_path)
    before = open(host["xml"]).read()
    proc, calls, report, _seconds = play(tmp_path, host, check=True)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert pct(calls) == [] and resets(calls) == []
    [gpu] = report["result"]["gpus"]
    assert (gpu["result"], gpu["stop"]) == ("planned", ["129"])
    assert open(host["xml"]).read() == before


def test_a_refused_reset_marks_the_host_for_the_reboot_without_rebooting(tmp_path):
    host = build(tmp_path)
    proc, calls, report, _seconds = play(tmp_path, host, reset={host["reset_gpu"]: "in_use"})
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0
    assert "needs the gated reboot, not done (gpuhost_recover_reboot is false)" in out, out[-3000:]
    assert "In use by another client" in out
    assert report["result"]["reboot_needed"] is True
    assert ["start", "129"] in pct(calls)       # put back as it was
    assert not [c for c in calls if c[0] in ("systemctl", "reboot", "shutdown")]
    assert not (tmp_path / "reports" / "localhost-reboot.json").exists()


def test_a_gpu_passed_to_a_vm_is_refused_naming_the_vm(tmp_path):
    host = build(tmp_path, vm=True)
    proc, calls, report, _seconds = play(tmp_path, host, {
        "gpuhost_recover_gpus": [host["vm_gpu"]]})
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0
    assert "is passed through to VM 201" in out and "qm shutdown 201" in out, out[-3000:]
    assert "(qm status: 201 stopped)" in out
    assert resets(calls) == [] and pct(calls) == []
    assert [c for c in calls if c[0] == "qm"] == [["qm", "status", "201"]]


def test_a_hanging_reset_is_bounded_and_reported(tmp_path):
    host = build(tmp_path)
    proc, calls, report, seconds = play(tmp_path, host, reset={host["reset_gpu"]: "hang"})
    assert proc.returncode != 0
    step = [s for s in report["result"]["gpus"][0]["steps"] if s["step"] == "reset"][0]
    assert step["outcome"] == "timed_out" and "did not return in 3 s: killed" in step["detail"]
    assert report["result"]["reboot_needed"] and seconds < 40


def test_with_the_switch_the_gated_reboot_runs_with_its_gates(tmp_path):
    # The fixture has no boot loader tree: reboot_verify's boot_config gate stops the host
    # before any reboot, which shows the fallback runs reboot_verify's gates in order.
    host = build(tmp_path)
    proc, calls, report, _seconds = play(tmp_path, host, {"gpuhost_recover_reboot": True},
                                         reset={host["reset_gpu"]: "not_supported"})
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0
    assert "is not supported" in json.dumps(report["result"]["reboot_reasons"])
    assert "TASK [gpuhost.tuning.reboot_verify : Pre-flight (no change yet)]" in out
    reboot = json.loads((tmp_path / "reports" / "localhost-reboot.json").read_text())
    assert reboot["result"] == "failed" and reboot["reboot"]["rebooted"] is False
