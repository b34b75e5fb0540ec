"""checks/cuda.py, on cuda_probe's results as host_audit's ``cuda`` takes them:
cuda_init_failed and pcie_bandwidth_low (moved from test_audit_cuda.py; results shaped as the
measured H200's, fixtures/cudaprobe.py), and gpu_launch_latency_high (moved from
test_check_launch_latency.py): a GPU's launch round trip after the calling thread slept
against the same GPU's back-to-back one, judged on host trees whose idle states and cpufreq
say what the likely cause is."""

import json
import os

import pytest
from conftest import TESTS
from fixtures import hosts
from fixtures.cudaprobe import probe_999, probe_ok
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.modules import host_audit

REAL = os.path.join(TESTS, "fixtures", "h200-latency")


def probe(address, sleeping_p50, back_p50, vmid=None):
    res = {"library": "libcuda.so.1",
           "init": {"code": 0, "name": "CUDA_SUCCESS", "text": "no error"},
           "driver_version": 13000, "cause": None, "changed": False, "failed": False,
           "devices": [{"index": 0, "name": "NVIDIA H200", "pci_bus_id": address,
                        "latency": {"count": 100, "gap_us": 1000, "skipped": None,
                                    "back_to_back": {"p50_us": back_p50,
                                                     "p99_us": back_p50 * 1.5,
                                                     "max_us": back_p50 * 3},
                                    "sleeping": {"p50_us": sleeping_p50,
                                                 "p99_us": sleeping_p50 * 3,
                                                 "max_us": sleeping_p50 * 6}}}]}
    if vmid is not None:
        res["vmid"] = vmid
    return res


def findings(root, results):
    res = run_module(host_audit, {"root": root, "cuda": results})
    assert res.get("failed") is not True, res
    return [f for f in res["audit"]["findings"] if f["id"] == "gpu_launch_latency_high"]


@pytest.fixture
def seed(tmp_path):
    return hosts.seed_host(str(tmp_path / "seed"))


@pytest.fixture
def tuned(tmp_path):
    return hosts.tuned_host(str(tmp_path / "tuned"))


def test_deep_idle_states_are_named_as_the_cause(seed):
    gpu = seed["gpus"][0]
    (found,) = findings(seed["root"], [probe(gpu, 420.0, 14.0)])
    assert found["severity"] == "medium" and found["subject"] == gpu
    assert "p50 420.0 us after a 1000 us sleep, 14.0 us back to back" in found["current"]
    assert "idle states deeper than C1 enabled (C2" in found["remedy"]
    assert "ansible-playbook gpuhost.tuning.tune" in found["remedy"]


def test_on_a_tuned_host_the_remedy_says_no_cause_shows(tuned):
    gpu = tuned["gpus"][0]
    (found,) = findings(tuned["root"], [probe(gpu, 420.0, 14.0)])
    assert "idle states" not in found["remedy"].split(":")[0]
    assert "BIOS power profile" in found["remedy"]


@pytest.mark.parametrize("sleeping, back", [(27.0, 14.0), (43.0, 14.0), (79.0, 40.0)])
def test_within_twice_or_30_us_is_no_finding(seed, sleeping, back):
    assert findings(seed["root"], [probe(seed["gpus"][0], sleeping, back)]) == []


def test_a_container_measurement_names_the_container(seed):
    gpu = seed["gpus"][1]
    (found,) = findings(seed["root"], [probe(gpu, 300.0, 12.0, vmid=129)])
    assert found["subject"] == "%s (lxc 129)" % gpu


def test_a_gpu_without_latency_or_skipped_is_not_judged(seed):
    res = probe(seed["gpus"][0], 400.0, 10.0)
    res["devices"][0]["latency"] = {"skipped": "the driver refused ...", "sleeping": None,
                                    "back_to_back": None}
    assert findings(seed["root"], [res]) == []
    del res["devices"][0]["latency"]
    assert findings(seed["root"], [res]) == []


@pytest.mark.parametrize("run", [1, 2, 3])
def test_the_real_h200_gives_no_finding(seed, run):
    """The lent H200's measured round trips (tests/fixtures/h200-latency): a woken thread's
    p99 is 3-4x the back-to-back one there, its median is not."""
    with open(os.path.join(REAL, "latency-run%d.json" % run)) as handle:
        measured = json.load(handle)["probe"][0]["latency"]
    res = probe(seed["gpus"][0], 1.0, 1.0)
    res["devices"][0]["latency"] = measured
    assert measured["sleeping"]["p99_us"] > 2 * measured["back_to_back"]["p99_us"]
    assert findings(seed["root"], [res]) == []


# --- cuda_init_failed, pcie_bandwidth_low (moved from test_audit_cuda.py)


@pytest.fixture
def vm(tmp_path):
    return hosts.vm_host(str(tmp_path / "vm"))


def audit(root, **extra):
    res = run_module(host_audit, dict({"root": root}, **extra))
    assert res.get("failed") is not True, res
    return res["audit"]


def ids(result, fid):
    return [f for f in result["findings"] if f["id"] == fid]


def test_without_probe_results_nothing_is_judged_and_no_fact_is_added(vm):
    result = audit(vm["root"])
    assert "cuda" not in result
    assert not ids(result, "cuda_init_failed") and not ids(result, "pcie_bandwidth_low")


def test_healthy_probe_gives_no_finding(vm):
    result = audit(vm["root"], cuda=[probe_ok(vm["gpu"])])
    assert result["cuda"][0]["devices"][0]["h2d_gbs"] == 55.19
    assert not ids(result, "cuda_init_failed") and not ids(result, "pcie_bandwidth_low")


def test_999_in_a_container_is_critical_and_names_container_code_and_cause(vm):
    result = audit(vm["root"], host="gpu07", cuda=[probe_ok(vm["gpu"]), probe_999(vmid=129)])
    found, = ids(result, "cuda_init_failed")
    assert found["severity"] == "critical"
    assert found["subject"] == "lxc 129"
    assert found["current"] == "cuInit 999 CUDA_ERROR_UNKNOWN"
    assert found["remedy"].startswith("/dev/nvidia-uvm is char 1:3, but nvidia-uvm's major "
                                      "is 238")
    assert "ansible-playbook gpuhost.tuning.reboot_verify -l gpu07" in found["remedy"]
    assert result["findings"][0]["id"] == "cuda_init_failed"     # critical ranks first
    assert result["checks"]["gpu_driver"]["status"] == "critical"


def test_host_failure_is_subject_host(vm):
    result = audit(vm["root"], cuda=[probe_999()])
    found, = ids(result, "cuda_init_failed")
    assert found["subject"] == "host"


def test_copy_rate_below_the_floor_is_high_per_gpu(vm):
    # a model without a published pass mark (policy.COPY_RATE_MARKS): the link percentage
    result = audit(vm["root"], cuda=[probe_ok(vm["gpu"], h2d_pct=45.0, name="NVIDIA L40S")])
    found, = ids(result, "pcie_bandwidth_low")
    assert found["severity"] == "high" and found["subject"] == vm["gpu"]
    assert found["current"] == "H2D 28.4 GB/s = 45.0 % of 63.0 GB/s (32.0 GT/s PCIe x16)"
    assert found["expected"] == "at least 70 % of the link each way"
    assert result["checks"]["pcie_link"]["status"] == "high"
    # the floor is the user's
    assert not ids(audit(vm["root"], cuda=[probe_ok(vm["gpu"], h2d_pct=45.0,
                                                    name="NVIDIA L40S")],
                         bandwidth_min_pct=40), "pcie_bandwidth_low")
