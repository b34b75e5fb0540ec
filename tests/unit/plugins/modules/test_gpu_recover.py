"""gpu_recover, the module in-process against a fixture tree, with the pct and nvidia-smi
doubles on the PATH and the stand-in libcuda proving the GPUs: one GPU of eight needs a
reset, container 129 holds it and 130 holds another."""

import json
import os

import pytest
from fixtures import recoverhost
from modrun import run_module

import fakecuda
from ansible_collections.gpuhost.tuning.plugins.modules import gpu_recover

DOUBLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))), "doubles")


@pytest.fixture
def host(tmp_path, monkeypatch):
    built = recoverhost.recover_host(tmp_path / "root")
    state = tmp_path / "state"
    state.mkdir()
    devices = ",".join(built["gpus"])
    (state / "pct.json").write_text(json.dumps({
        "containers": {"129": {"status": "running"}, "130": {"status": "running"}},
        "cuda_env": fakecuda.pct_cuda_env(devices=devices)}))
    calls = tmp_path / "calls.jsonl"
    for key, value in {"PATH": DOUBLES + os.pathsep + os.environ["PATH"],
                       "GPUHOST_DOUBLES_ROOT": built["root"],
                       "GPUHOST_DOUBLES_STATE": str(state),
                       "GPUHOST_DOUBLES_LOG": str(calls),
                       "GPUHOST_NVSMI_XML": built["xml"],
                       "GPUHOST_NVSMI_STATE": str(state / "nvidia-smi.json")}.items():
        monkeypatch.setenv(key, value)
    fakecuda.configurer(monkeypatch)(devices=devices)
    built.update(state=state, calls=calls, lib=fakecuda.build())
    return built


def _args(host, **extra):
    args = {"root": host["root"], "cuda_library": host["lib"], "reset_timeout": 5,
            "shutdown_timeout": 5}
    args.update(extra)
    return args


def _calls(host):
    if not host["calls"].exists():
        return []
    out = []
    for line in host["calls"].read_text().splitlines():
        entry = json.loads(line)
        argv = entry["argv"]
        out.append(argv if isinstance(argv, list) else [entry["tool"]] + argv.split())
    return out


def test_the_gpu_is_reset_with_only_its_container_stopped(host):
    got = run_module(gpu_recover, _args(host))
    assert not got.get("failed"), got
    [gpu] = got["gpus"]
    assert gpu["address"] == host["reset_gpu"] and gpu["result"] == "recovered", gpu["steps"]
    assert [s["step"] for s in gpu["steps"]] == [
        "drain", "persistence_off", "reset", "persistence_on", "read_back", "prove", "restore"]
    assert all(s["outcome"] == "ok" for s in gpu["steps"]), gpu["steps"]
    assert "runs 40 kernels on it" in gpu["steps"][5]["detail"]
    assert got["changed"] and not got["reboot_needed"] and got["problems"] == []
    [ct] = got["containers"]
    assert (ct["vmid"], ct["stopped"], ct["started"]) == ("129", "shutdown", True)
    assert ct["cuda"]["error"] is None
    pct = [c[1:3] for c in _calls(host) if c[0] == "pct"]
    assert ["shutdown", "129"] in pct and ["start", "129"] in pct
    assert not [c for c in pct if c[1] == "130"], pct
    resets = [c for c in _calls(host) if c[:2] == ["nvidia-smi", "-r"]]
    assert resets == [["nvidia-smi", "-r", "-i", host["reset_gpu"]]]
    again = run_module(gpu_recover, _args(host))
    assert again["changed"] is False and again["gpus"] == [], again


def test_check_mode_is_the_plan_and_runs_nothing(host):
    got = run_module(gpu_recover, _args(host), check_mode=True)
    [gpu] = got["gpus"]
    assert (gpu["result"], gpu["stop"], got["changed"]) == ("planned", ["129"], True)
    assert [c for c in _calls(host) if c[0] == "pct" or c[:2] == ["nvidia-smi", "-r"]] == []
