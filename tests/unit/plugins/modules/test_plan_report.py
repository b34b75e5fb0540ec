"""plan_report module: the plan of real host_tune check-mode results (the seed host twice,
one of them changed by hand, and an H200 VM that host_tune refuses), run as a module and
through its action plugin's wiring."""

import os

import pytest
from fixtures import hosts
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.action import plan_report as plan_action
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.plan import plan_writer
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.plan import planfile
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import tune
from ansible_collections.gpuhost.tuning.plugins.modules import plan_report


def _check(root, name):
    try:
        return tune.tune_run({"root": root, "wanted": hosts.common_wanted(name),
                              "guest": "refuse"}, check_mode=True)
    except ValueError as exc:  # what module host_tune fails with
        return {"failed": True, "msg": "%s: tune pass not started: %s" % (root, exc)}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    base = tmp_path_factory.mktemp("hosts")
    out = {}
    for name in ("gpu01", "gpu02", "gpu03"):
        root = str(base / name)
        hosts.seed_host(root)
        if name == "gpu02":
            with open(os.path.join(root, "proc/sys/kernel/numa_balancing"), "w") as handle:
                handle.write("0\n")
        out[name] = _check(root, name)
    vm = str(base / "vm")
    hosts.vm_host(vm)
    out["vm01"] = _check(vm, "vm01")
    for value in out.values():
        value.pop("diff", None)
    return out


def test_the_plan_of_real_results(tmp_path, results):
    dest = str(tmp_path / "plan")
    res = run_module(plan_report, {"results": results, "dest": dest, "serial": 2,
                                   "collection_version": "0.2.0"})
    assert res.get("failed") is not True, res.get("msg")
    doc = planfile.load(res["plan"])
    assert [g["hosts"] for g in doc["groups"]] == [["gpu02"], ["vm01"], ["gpu01", "gpu03"]]
    assert "kernel.numa_balancing 1 -> 0" not in doc["groups"][0]["summary"]
    assert "MRRS 512 -> 4096 on 16 devices" in doc["groups"][2]["summary"]
    assert "guest" in doc["hosts"]["vm01"]["refused"]
    assert doc["batches"] == [["gpu01", "gpu02"], ["gpu03", "vm01"]]
    assert res["refused"] == ["vm01"]
    with open(os.path.join(dest, "plan.md")) as handle:
        assert handle.readline() == "# Plan %s\n" % res["digest"]


def test_module_run_directly_refuses_hosts(tmp_path):
    res = run_module(plan_report, {"hosts": ["gpu01"], "result_var": "r", "dest": str(tmp_path)})
    assert res["failed"] is True and "pass results" in res["msg"]
    assert list(tmp_path.iterdir()) == []


def test_a_bad_serial_is_refused_before_anything(tmp_path):
    res = run_module(plan_report, {"results": {}, "dest": str(tmp_path), "serial": "150%"})
    assert res["failed"] is True and "is not a batch size" in res["msg"]


def test_the_action_plugin_reads_the_collection_version(tmp_path, monkeypatch):
    assert plan_action.ActionModule.READ is plan_writer.registered_results
    assert plan_action.ActionModule.SPEC() == plan_report_spec()
    seen = {}
    monkeypatch.setattr(plan_writer, "run", lambda p, check_mode: seen.update(p) or {})
    plan_action._run({"collection_version": None}, False)
    assert seen["collection_version"] == planfile.collection_version(
        plan_action.COLLECTION_ROOT)
    assert seen["collection_version"][0].isdigit()


def plan_report_spec():
    return plan_writer.options()
