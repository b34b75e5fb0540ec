"""host_audit's opt-in CUDA pass (cuda.audit_pass: the host probe, then each running GPU
container) and its options; the findings of the CUDA checks themselves are in
checks/test_cuda.py."""

import pytest
from fixtures import hosts
from fixtures.cudaprobe import probe_999, probe_ok
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit as audit_mod
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import cuda
from ansible_collections.gpuhost.tuning.plugins.modules import host_audit


@pytest.fixture
def vm(tmp_path):
    return hosts.vm_host(str(tmp_path / "vm"))


def audit(root, **extra):
    res = run_module(host_audit, hosts.as_wanted(dict({"root": root}, **extra)))
    assert res.get("failed") is not True, res
    return res["audit"]


def ids(result, fid):
    return [f for f in result["findings"] if f["id"] == fid]


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
