"""The audit's CUDA checks (cuda_init_failed, pcie_bandwidth_low) on cuda_probe results as
role audit passes them (registered with failed_when false), and none without them."""

import json
import os

import pytest
from fixtures import hosts, realhost
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.modules import host_audit

H200_PROBE = os.path.join(realhost.H200, "probe")


@pytest.fixture
def vm(tmp_path):
    return hosts.vm_host(str(tmp_path / "vm"))


def probe_ok(address, h2d_pct=87.6, d2h_pct=87.4):
    """A passing host result shaped as the measured H200's, at ``address``."""
    with open(os.path.join(H200_PROBE, "bw-2.json")) as handle:
        res = json.load(handle)
    res.pop("error")
    dev = res["devices"][0]
    dev.update(pci_bus_id=address, h2d_pct=h2d_pct, d2h_pct=d2h_pct,
               h2d_gbs=round(63.0 * h2d_pct / 100, 2), d2h_gbs=round(63.0 * d2h_pct / 100, 2))
    res.update(changed=False, failed=False, failed_when_result=False)
    return res


def probe_999(vmid=None):
    """A failed probe as registered with failed_when false: failed is false, msg says why."""
    with open(os.path.join(H200_PROBE, "negative.json")) as handle:
        res = json.load(handle)
    where = "container %s" % vmid if vmid else "host"
    res["msg"] = "CUDA check failed on %s: %s; cause: %s" % (
        where, res.pop("error"), res["cause"])
    res.update(failed=False, failed_when_result=False)
    if vmid:
        res["vmid"] = vmid
    return res


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
    result = audit(vm["root"], cuda=[probe_ok(vm["gpu"], h2d_pct=45.0)])
    found, = ids(result, "pcie_bandwidth_low")
    assert found["severity"] == "high" and found["subject"] == vm["gpu"]
    assert found["current"] == "H2D 28.4 GB/s = 45.0 % of 63.0 GB/s (32.0 GT/s PCIe x16)"
    assert found["expected"] == "at least 70 % of the link each way"
    assert result["checks"]["pcie_link"]["status"] == "high"
    # the floor is the user's
    assert not ids(audit(vm["root"], cuda=[probe_ok(vm["gpu"], h2d_pct=45.0)],
                         bandwidth_min_pct=40), "pcie_bandwidth_low")


def test_bad_floor_is_refused(vm):
    res = run_module(host_audit, {"root": vm["root"], "bandwidth_min_pct": 0})
    assert res["failed"] is True and "bandwidth_min_pct: 0 is not allowed" in res["msg"]
