"""The audit's CUDA checks (cuda_init_failed, pcie_bandwidth_low) on cuda_probe results as
role audit passes them (registered with failed_when false), and none without them."""

import json
import os

import pytest
from fixtures import hosts, realhost
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.module_utils import audit as audit_mod
from ansible_collections.gpuhost.tuning.plugins.module_utils import cuda
from ansible_collections.gpuhost.tuning.plugins.modules import host_audit

H200_PROBE = os.path.join(realhost.H200, "probe")


@pytest.fixture
def vm(tmp_path):
    return hosts.vm_host(str(tmp_path / "vm"))


def probe_ok(address, h2d_pct=87.6, d2h_pct=87.4, name=None):
    """A passing host result shaped as the measured H200's, at ``address`` (``name``: another
    model's, e.g. one without a published pass mark)."""
    with open(os.path.join(H200_PROBE, "bw-2.json")) as handle:
        res = json.load(handle)
    res.pop("error")
    dev = res["devices"][0]
    dev.update(pci_bus_id=address, h2d_pct=h2d_pct, d2h_pct=d2h_pct,
               h2d_gbs=round(63.0 * h2d_pct / 100, 2), d2h_gbs=round(63.0 * d2h_pct / 100, 2))
    if name:
        dev["name"] = name
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
    res = run_module(host_audit, hosts.as_wanted(dict({"root": root}, **extra)))
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


def test_bad_floor_is_refused(vm):
    res = run_module(host_audit, hosts.as_wanted({"root": vm["root"], "bandwidth_min_pct": 0}))
    assert res["failed"] is True and "bandwidth_min_pct: 0 is not allowed" in res["msg"]


# --- the pass in the same call (host_audit cuda_probe, cuda.audit_pass) ----------------------

PCT_LIST = (
    "VMID       Status     Lock         Name                \n"
    "129        running                 gpu-inference       \n"
    "130        running    backup       metrics             \n"
    "131        stopped                 gpu-spare           \n")


def test_running_vmids_reads_pct_list_with_an_empty_lock_column():
    assert cuda.running_vmids(PCT_LIST) == {129, 130}
    assert cuda.running_vmids("") == set()


class Recorder:
    """A Runner that answers ``pct list`` and records every argv."""

    def __init__(self, listing=PCT_LIST, rc=0):
        self.listing, self.rc, self.calls = listing, rc, []

    def run(self, argv, check=True, data=None, **unused):
        self.calls.append(list(argv))
        if argv[1:] == ["list"]:
            return self.rc, self.listing, ""
        return 255, "", "container not running"


def test_pass_probes_the_host_then_only_running_gpu_containers(monkeypatch):
    probed = []
    monkeypatch.setattr(cuda, "probe_host", lambda runner, **kw: probed.append(kw) or
                        {"init": {"code": 0}, "devices": [], "error": None})
    runner = Recorder()
    cts = [{"vmid": 129, "gpu": True}, {"vmid": 130, "gpu": False},
           {"vmid": 131, "gpu": True}]
    results = cuda.audit_pass(runner, "/usr/sbin/pct", cts, size_mb=64, timeout=7)
    assert probed == [{"library": cuda.DEFAULT_LIBRARY, "bandwidth": True, "size_mb": 64,
                       "timeout": 7, "root": "/", "latency": True, "peer": True,
                       "latency_count": cuda.AUDIT_LATENCY_COUNT}]
    assert [c[:3] for c in runner.calls] == [
        ["/usr/sbin/pct", "list"], ["/usr/sbin/pct", "exec", "129"]]
    assert [r.get("vmid") for r in results] == [None, 129]
    assert "msg" not in results[0] and "error" not in results[0]
    assert results[1]["msg"].startswith("CUDA check failed on container 129: pct exec 129")


def test_pass_without_pct_or_with_pct_list_failing_probes_the_host_alone(monkeypatch):
    monkeypatch.setattr(cuda, "probe_host", lambda runner, **kw: {
        "init": None, "devices": [], "error": "cannot load"})
    cts = [{"vmid": 129, "gpu": True}]
    alone = cuda.audit_pass(Recorder(), None, cts)
    assert len(alone) == 1 and alone[0]["msg"] == "CUDA check failed on host: cannot load"
    runner = Recorder(rc=2)
    assert len(cuda.audit_pass(runner, "/usr/sbin/pct", cts)) == 1
    assert runner.calls == [["/usr/sbin/pct", "list"]]


def test_probe_results_become_findings_in_the_same_audit(vm):
    failed = probe_999(vmid=129)
    failed.pop("failed_when_result")
    seen = []
    result = audit_mod.audit(vm["root"], hosts.common_wanted(), cuda_probe=lambda facts: (
        seen.append(facts["lxc"]) or [probe_ok(vm["gpu"]), failed]))
    assert seen and isinstance(seen[0], list)   # the pass sees the containers just read
    ids = [(f["id"], f["subject"]) for f in result["findings"] if f["id"].startswith("cuda")]
    assert ids == [("cuda_init_failed", "lxc 129")]
    assert len(result["cuda"]) == 2


def test_module_refuses_the_pass_on_another_root(vm):
    res = run_module(host_audit, {"root": vm["root"], "cuda_probe": True})
    assert res["failed"] is True and "needs root /" in res["msg"]
