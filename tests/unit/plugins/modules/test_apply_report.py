"""apply_report: the controller's steps of playbooks/apply.yml (its action plugin's load,
check and write), on plans built by planfile.build from check-mode-like results."""

import json
import os
import time

import pytest
from ansible.errors import AnsibleActionFail
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.action import apply_report as action
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.plan import planfile
from ansible_collections.gpuhost.tuning.plugins.modules import apply_report

VERSION = planfile.collection_version(action.COLLECTION_ROOT)


def tune_result(numa="1", status="planned"):
    return {"changed": True, "rows": [
        {"part": "sysctl", "item": "kernel.numa_balancing", "before": numa, "after": "0",
         "status": status if numa != "0" else "ok", "note": None},
        {"part": "pcie", "item": "0000:01:00.0 endpoint MRRS", "before": 512, "after": 4096,
         "status": status, "note": None}]}


def make_plan(tmp_path, serial=None, created=None, **overrides):
    results = {"gpu1": tune_result(), "gpu2": tune_result(), "gpu3": tune_result(),
               "vm1": {"failed": True, "msg": "vm1 is a virtual machine guest"}}
    doc = planfile.build(results, {
        "collection_version": VERSION, "created_by": "ops@ctl", "serial": serial,
        "created_at": created or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "hosts": ["gpu1", "gpu2", "gpu3", "vm1"]})
    doc.update(overrides)
    if overrides:
        doc["digest"] = planfile.digest(doc)
    path = tmp_path / planfile.file_name(doc)
    path.write_text(json.dumps(doc))
    return str(path), doc


def params(**kw):
    out = {"step": "load", "plan": None, "max_age": 24.0, "skip": [], "inventory": None,
           "plan_var": "__gpuhost_apply_plan", "result_var": None,
           "status_var": "__gpuhost_apply_result", "hosts": None, "dest": None}
    out.update(kw)
    return out


class HostVars:
    def __init__(self, data):
        self.data = data

    def raw_get(self, host):
        return self.data.get(host, {})


INVENTORY = ["gpu1", "gpu2", "gpu3", "vm1", "gpu9"]


def test_load_targets_the_plan_hosts_of_the_inventory_in_batch_order(tmp_path):
    path, doc = make_plan(tmp_path, serial=[1, 2])
    loaded = action.step_load(params(plan=path, inventory=list(reversed(INVENTORY))), {})
    assert loaded["hosts"] == ["gpu1", "gpu2", "gpu3", "vm1"]
    assert loaded["serial"] == [1, 2, 1]
    assert loaded["not_in_plan"] == ["gpu9"] and loaded["skipped"] == {}
    assert loaded["digest"] == doc["digest"] and loaded["meta"]["collection_version"] == VERSION
    assert sorted(loaded["plan"]) == ["gpu1", "gpu2", "gpu3", "vm1"]
    assert "3 host(s) to apply" not in loaded["msg"] and "4 host(s) to apply" in loaded["msg"]


def test_load_leaves_out_hosts_and_groups_by_name_and_hosts_outside_the_pattern(tmp_path):
    path, _doc = make_plan(tmp_path)
    loaded = action.step_load(params(plan=path, inventory=["gpu1", "gpu2", "vm1"],
                                     skip=["guests", "gpu2"]), {"guests": ["vm1"]})
    assert loaded["hosts"] == ["gpu1"] and loaded["serial"] == [1]
    assert loaded["skipped"] == {
        "gpu2": "left out by gpuhost_plan_skip", "vm1": "left out by gpuhost_plan_skip",
        "gpu3": "not in the inventory pattern of this run (gpuhost_hosts)"}


def test_load_refuses_an_edited_plan_before_any_host(tmp_path):
    path, doc = make_plan(tmp_path)
    doc["hosts"]["gpu1"]["changes"][0]["after"] = "2"
    with open(path, "w") as handle:
        json.dump(doc, handle)
    with pytest.raises(AnsibleActionFail) as err:
        action.step_load(params(plan=path, inventory=INVENTORY), {})
    assert "the plan was edited after it was made" in str(err.value)
    assert str(err.value).endswith("no host was touched")


def test_load_refuses_a_plan_whose_file_name_names_another_digest(tmp_path):
    path, _doc = make_plan(tmp_path)
    other = str(tmp_path / "plan-0123456789ab.json")
    os.rename(path, other)
    with pytest.raises(AnsibleActionFail) as err:
        action.step_load(params(plan=other, inventory=INVENTORY), {})
    assert "the plan file's name says digest 0123456789ab" in str(err.value)
    copy = str(tmp_path / "plan.json")   # the newest plan's copy names no digest
    os.rename(other, copy)
    assert action.step_load(params(plan=copy, inventory=INVENTORY), {})["hosts"]


def test_load_refuses_an_old_plan_another_version_and_a_missing_file(tmp_path):
    made = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 26 * 3600 - 60))
    path, _doc = make_plan(tmp_path, created=made)
    with pytest.raises(AnsibleActionFail) as err:
        action.step_load(params(plan=path, inventory=INVENTORY), {})
    assert "the plan is 26 h old, gpuhost_plan_max_age is 24 h" in str(err.value)
    assert action.step_load(params(plan=path, inventory=INVENTORY, max_age=27.0), {})["hosts"]
    path, _doc = make_plan(tmp_path, collection_version="0.0.1")
    with pytest.raises(AnsibleActionFail) as err:
        action.step_load(params(plan=path, inventory=INVENTORY), {})
    assert "made by gpuhost.tuning 0.0.1, this is %s" % VERSION in str(err.value)
    with pytest.raises(AnsibleActionFail) as err:
        action.step_load(params(plan=str(tmp_path / "nothere.json"), inventory=INVENTORY), {})
    assert "no plan file" in str(err.value) and "gpuhost_plan" in str(err.value)


def _vars(loaded, host, **extra):
    data = {"localhost": {"__gpuhost_apply_plan": loaded}}
    out = {"hostvars": HostVars(data), "inventory_hostname": host}
    out.update(extra)
    return out


def test_check_refuses_per_host_in_order(tmp_path):
    path, _doc = make_plan(tmp_path)
    loaded = action.step_load(params(plan=path, inventory=INVENTORY), {})
    step = params(step="check")
    assert action.step_check(step, _vars(loaded, "gpu1"))["refused"] is None
    assert action.step_check(step, _vars(loaded, "vm1"))["refused"] == (
        "the plan refused vm1: vm1 is a virtual machine guest")
    assert "gpu9 is not in the plan" in action.step_check(step, _vars(loaded, "gpu9"))["refused"]
    now = params(step="check", result_var="__now")
    assert action.step_check(now, _vars(loaded, "gpu1", __now=tune_result()))["refused"] is None
    moved = action.step_check(now, _vars(loaded, "gpu2", __now=tune_result(numa="0")))["refused"]
    assert moved == ("gpu2: state moved since the plan: kernel.numa_balancing is now 0 "
                     "(planned 1 -> 0)")
    with pytest.raises(AnsibleActionFail, match="no loaded plan"):
        action.step_check(step, {"hostvars": HostVars({}), "inventory_hostname": "gpu1"})


def test_write_reports_planned_vs_done(tmp_path):
    path, doc = make_plan(tmp_path)
    loaded = action.step_load(params(plan=path, inventory=["gpu1", "gpu2", "gpu3", "gpu9"]), {})
    data = {"localhost": {"__gpuhost_apply_plan": loaded},
            "gpu1": {"__gpuhost_apply_result": {"status": "applied", "reason": None},
                     "__gpuhost_tune": tune_result(status="changed")},
            "gpu2": {"__gpuhost_apply_result": {"status": "refused", "reason": "moved"},
                     "__gpuhost_tune": tune_result(numa="0")}}
    dest = str(tmp_path / "reports")
    out = action.step_write(params(step="write", hosts=["gpu1", "gpu2", "gpu3"], dest=dest,
                                   result_var="__gpuhost_tune"),
                            {"hostvars": HostVars(data)}, check_mode=False)
    base = os.path.join(dest, "apply-%s" % doc["digest"][:12])
    assert out["files"] == [base + ".json", base + ".md"] and out["changed"]
    with open(base + ".json") as handle:
        rep = json.load(handle)
    status = dict((h, r["status"]) for h, r in rep["hosts"].items())
    assert status == {"gpu1": "applied", "gpu2": "refused", "gpu3": "not reached",
                      "vm1": "skipped", "gpu9": "not in the plan"}
    assert rep["hosts"]["gpu2"]["done"] is None  # its check-mode result is no change done
    assert rep["hosts"]["gpu1"]["done"] == rep["hosts"]["gpu1"]["planned"]
    assert out["lines"][0].startswith("apply of plan %s: 1 refused" % doc["digest"][:12])
    assert out["finished"] is False


def test_the_module_itself_only_says_where_it_runs():
    result = run_module(apply_report, {"step": "check"})
    assert result["failed"] and "runs on the controller as an action plugin" in result["msg"]
    result = run_module(apply_report, {"step": "check", "max_age": 0})
    assert "max_age (gpuhost_plan_max_age) must be a number of hours above 0" in result["msg"]
    result = run_module(apply_report, {"step": "load", "inventory": []})
    assert "missing: plan" in result["msg"]
