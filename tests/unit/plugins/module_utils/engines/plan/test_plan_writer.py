"""engines/plan/plan_writer: the run of module plan_report (the plan's four files written
atomically, left alone when the same), its rules, and the registered results the action
plugin reads."""

import json
import os

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.plan import plan_writer
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.plan import planfile
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import files
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (
    ValidationError,
)

ROW = {"part": "sysctl", "item": "kernel.numa_balancing", "before": "1", "after": "0",
       "status": "changed", "note": ""}


def params(dest, **extra):
    p = {"results": {"gpu01": {"rows": [ROW]}, "gpu02": {"rows": [ROW]},
                     "gpu03": {"unreachable": True, "msg": "timed out"}},
         "hosts": None, "result_var": None, "dest": dest, "serial": None, "parts": ["sysctl"],
         "wanted": {}, "collection_version": "0.2.0", "created_by": "ops@ctl"}
    p.update(extra)
    return p


def test_the_plan_files_and_a_second_run(tmp_path):
    dest = str(tmp_path / "plan")
    out = plan_writer.run(params(dest), clock=lambda: 1796490600)
    doc = planfile.load(out["plan"])
    assert os.path.basename(out["plan"]) == "plan-%s.json" % out["digest"][:12]
    assert sorted(os.listdir(dest)) == sorted([os.path.basename(out["plan"]), "plan.html",
                                               "plan.json", "plan.md"])
    assert doc["created_at"] == "2026-12-05T17:10:00Z" and doc["created_by"] == "ops@ctl"
    assert out["changed"] is True and len(out["written"]) == 4
    assert out["groups"] == ["1 host: refused: unreachable: timed out",
                             "2 hosts: kernel.numa_balancing 1 -> 0"]
    assert out["refused"] == ["gpu03"]
    assert out["headline"].startswith("3 hosts in 2 groups: 2 to change")
    again = plan_writer.run(params(dest), clock=lambda: 1796490600)
    assert again["changed"] is False and again["written"] == []
    later = plan_writer.run(params(dest), clock=lambda: 1796490660)
    assert later["digest"] != out["digest"] and len(os.listdir(dest)) == 5


def test_check_mode_writes_nothing(tmp_path):
    dest = str(tmp_path / "plan")
    out = plan_writer.run(params(dest), check_mode=True)
    assert out["changed"] is True and not os.path.exists(dest)


def test_rules():
    with pytest.raises(ValidationError, match="pass results"):
        plan_writer.rules({"results": None, "hosts": ["a"], "dest": "/x"})
    with pytest.raises(ValidationError, match="results"):
        plan_writer.rules({"results": [1], "dest": "/x"})
    with pytest.raises(ValidationError, match="gpuhost_serial: 0 is not a batch size"):
        plan_writer.rules({"results": {}, "dest": "/x", "serial": 0})
    plan_writer.rules({"results": {}, "dest": "/x", "serial": [1, "25%"]})


def test_registered_results(tmp_path):
    stored = {"gpu01": {"__t": {"rows": [ROW]}}, "gpu02": {}}
    assert plan_writer.registered_results(stored.get, ["gpu01", "gpu02"], "__t") == {
        "gpu01": {"rows": [ROW]}, "gpu02": None}
    with pytest.raises(files.ReportError, match="no host_tune result in variable '__x'"):
        plan_writer.registered_results(stored.get, ["gpu01", "gpu02"], "__x")


def test_a_folder_that_cannot_be_written(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(files.ReportError, match="gpuhost_plan_dir"):
        plan_writer.run(params(str(tmp_path / "file" / "plan")))


def test_plan_json_is_a_copy_readable_by_eye(tmp_path):
    dest = str(tmp_path)
    out = plan_writer.run(params(dest))
    with open(out["plan"]) as one, open(os.path.join(dest, "plan.json")) as two:
        text = one.read()
        assert text == two.read()
    assert "\n \"batches\"" in text and json.loads(text)["digest"] == out["digest"]
    assert "@" in plan_writer.controller_user()
