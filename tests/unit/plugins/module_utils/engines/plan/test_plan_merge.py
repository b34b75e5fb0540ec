"""engines/plan/plan_merge: the plans of a sliced plan job merged into one (groups, batches
and digest over the union, the oldest created_at, merged_from), a host in two plans, plans
that disagree, an edited slice plan, a folder reused by two plan runs, and report_merge's
run writing the merged plan beside the other reports."""

import json
import os

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.plan import apply_check
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.plan import plan_merge
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.plan import plan_writer
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.plan import planfile

from .test_planfile import META, fleet

HALVES = (["gpu01", "gpu03", "gpu05", "gpu07"], ["gpu02", "gpu04", "gpu06", "gpu08"])


def _meta(hosts, created_at, **extra):
    meta = dict(META, hosts=hosts, created_at=created_at, serial=[1, "50%"])
    meta.update(extra)
    return meta


def _slice(tmp_path, name, hosts, created_at="2026-12-05T17:10:00Z", results=None, **extra):
    """A slice folder as plan_report writes it: the plan built of ``hosts``' results."""
    results = results or fleet()
    doc = planfile.build(dict((h, results[h]) for h in hosts), _meta(hosts, created_at, **extra))
    folder = tmp_path / name
    folder.mkdir(exist_ok=True)
    for file_name, text in plan_writer.plan_files(doc).items():
        (folder / file_name).write_text(text)
    return str(folder), doc


def _params(folders, dest):
    return {"folders": [str(f) for f in folders], "dest": str(dest), "stale_hours": 24.0,
            "generated_at": "2026-12-05 18:00:00Z", "mrrs_size": 4096}


def test_two_slices_merged_are_the_one_plan_over_all_hosts(tmp_path):
    one, first = _slice(tmp_path, "slice-1", HALVES[0], "2026-12-05T17:12:00Z")
    two, second = _slice(tmp_path, "slice-2", HALVES[1], "2026-12-05T17:10:00Z")
    whole = planfile.build(fleet(), _meta(HALVES[0] + HALVES[1], "2026-12-05T17:10:00Z"))
    warnings = []
    doc, result = plan_merge.merge_plans([one, two], warnings, merged_by="ops@ctl")
    assert warnings == [] and result["left_out"] == [] and "refused" not in result
    assert doc == planfile.checked(doc) and doc["digest"] == result["digest"]
    assert doc["digest"] not in (first["digest"], second["digest"])
    assert [g["hosts"] for g in doc["groups"]] == [g["hosts"] for g in whole["groups"]]
    assert [g["key"] for g in doc["groups"]] == [g["key"] for g in whole["groups"]]
    assert [g["summary"] for g in doc["groups"]] == [g["summary"] for g in whole["groups"]]
    assert doc["hosts"] == whole["hosts"]  # each entry as its slice planned it
    assert doc["hosts"]["gpu07"]["status"] == "unreachable"
    assert doc["hosts"]["gpu06"]["status"] == "refused"
    # batches over the union: 1, then 50% of all 8 hosts, as plan_report makes them
    assert doc["batches"] == planfile.batches(HALVES[0] + HALVES[1], [1, "50%"])
    assert list(doc["hosts"]) == HALVES[0] + HALVES[1]  # the slices' order
    assert doc["created_at"] == "2026-12-05T17:10:00Z"  # the oldest slice's
    assert doc["options"] == first["options"] and doc["collection_version"] == "0.2.0"
    assert [(m["file"], m["digest"], m["folder"]) for m in doc["merged_from"]] == [
        (planfile.file_name(first), first["digest"], one),
        (planfile.file_name(second), second["digest"], two)]
    assert doc["merged_by"] == "ops@ctl" and doc["created_by"] == "ops@ctl"
    assert plan_writer.plan_files(doc)["plan.md"].splitlines()[0] == "# Plan " + doc["digest"]
    assert "Merged by ops@ctl from 2 slice plans: %s (%s" % (
        planfile.file_name(first), one) in planfile.markdown(doc)
    # apply's whole-plan check takes it (the same version, made within the max age)
    now = apply_check.created_epoch(doc["created_at"]) + 60
    assert apply_check.check_plan(doc, now, 24 * 3600.0, "0.2.0") is None


def test_a_host_in_both_plans_takes_the_newer_entry_named_in_a_warning(tmp_path):
    changed = fleet()
    changed["gpu02"] = changed["gpu05"]  # by the second slice's time gpu02 moved too
    one, _first = _slice(tmp_path, "slice-1", ["gpu01", "gpu02"], "2026-12-05T17:10:00Z")
    two, second = _slice(tmp_path, "slice-2", ["gpu02", "gpu03"], "2026-12-05T17:20:00Z",
                         results=changed)
    old, _older = _slice(tmp_path, "slice-0", ["gpu02"], "2026-12-05T17:00:00Z")
    warnings = []
    doc, _result = plan_merge.merge_plans([one, two, old], warnings)
    assert doc["hosts"]["gpu02"] == second["hosts"]["gpu02"]
    assert list(doc["hosts"]) == ["gpu01", "gpu02", "gpu03"]
    assert len(warnings) == 2 and all(w.startswith("1 host is in the plans ")
                                      and w.endswith(": gpu02") for w in warnings)
    two_path = os.path.join(two, planfile.file_name(second))
    assert "newer one's entry merged (%s)" % two_path in warnings[0]
    assert "newer one's entry merged (%s)" % two_path in warnings[1]  # against slice-0


def test_many_hosts_in_two_plans_make_one_warning(tmp_path):
    one, first = _slice(tmp_path, "slice-1", HALVES[0], "2026-12-05T17:10:00Z")
    two, _second = _slice(tmp_path, "slice-2", HALVES[0], "2026-12-05T17:00:00Z")
    warnings = []
    doc, _result = plan_merge.merge_plans([one, two], warnings)
    assert doc["hosts"] == first["hosts"] and len(warnings) == 1
    assert warnings[0].startswith("4 hosts are in the plans %s" % one)
    assert "newer one's entries merged (%s" % one in warnings[0]
    assert plan_merge._names(["h%d" % i for i in range(25)]).endswith("h19 and 5 more")
    assert doc["created_at"] == "2026-12-05T17:00:00Z"


def test_plans_that_disagree_are_not_merged_and_say_what_differs(tmp_path):
    one, _a = _slice(tmp_path, "slice-1", HALVES[0])
    two, _b = _slice(tmp_path, "slice-2", HALVES[1], collection_version="0.3.0",
                     wanted={"sysctl": {"kernel.numa_balancing": "1"}})
    warnings = []
    doc, result = plan_merge.merge_plans([one, two], warnings)
    assert doc is None and warnings == [result["refused"]]
    assert one in result["refused"] and two in result["refused"]
    assert "collection_version 0.2.0 against 0.3.0" in result["refused"]
    assert "the wanted values (digest)" in result["refused"]
    assert "cannot be one approval" in result["refused"]


def test_an_edited_slice_plan_is_left_out_and_the_merge_says_so(tmp_path):
    one, first = _slice(tmp_path, "slice-1", HALVES[0])
    two, _second = _slice(tmp_path, "slice-2", HALVES[1])
    edited = json.loads((tmp_path / "slice-2" / "plan.json").read_text())
    del edited["hosts"]["gpu02"]
    (tmp_path / "slice-2" / "plan.json").write_text(json.dumps(edited))
    warnings = []
    doc, result = plan_merge.merge_plans([one, two], warnings)
    edited_path = os.path.join(two, "plan.json")
    assert doc == first  # the one good plan, as it is
    assert edited_path in result["left_out"] and len(result["left_out"]) == 2
    assert any(w.startswith("the plan was edited after it was made: the plan %s"
                            % edited_path) for w in warnings)
    assert any("no plan of that folder is merged" in w and two in w for w in warnings)
    assert any(w.startswith("the merged plan leaves out 2 plan file(s)") for w in warnings)


def test_a_folder_plan_is_its_newest_read_once_and_plans_told_by_content(tmp_path):
    one, _older = _slice(tmp_path, "slice-1", HALVES[0], "2026-12-05T16:00:00Z")
    one, newest = _slice(tmp_path, "slice-1", HALVES[0][:2], "2026-12-05T17:00:00Z")
    (tmp_path / "slice-1" / "gpu01.json").write_text(json.dumps({"host": "gpu01"}))
    # a plan under any name is still one plan; the same plan twice is read once
    (tmp_path / "slice-1" / "copy-of-plan.json").write_text(
        (tmp_path / "slice-1" / "plan.json").read_text())
    warnings = []
    doc, result = plan_merge.merge_plans([one], warnings)
    assert doc == newest and warnings == [] and len(result["merged_from"]) == 1
    (tmp_path / "empty").mkdir()
    assert plan_merge.merge_plans([str(tmp_path / "empty")], []) == (None, None)


def test_report_merge_writes_the_merged_plan_that_apply_loads(tmp_path):
    one, _a = _slice(tmp_path, "slice-1", HALVES[0])
    two, _b = _slice(tmp_path, "slice-2", HALVES[1])
    dest = tmp_path / "fleet"
    out = plan_merge.merge_run(_params([one, two], dest), check_mode=True)
    assert not dest.exists() and out["changed"] and "msg" not in out
    out = plan_merge.merge_run(_params([one, two], dest))
    names = sorted(os.listdir(str(dest)))
    assert names[1:] == ["plan.html", "plan.json", "plan.md"], names
    doc = planfile.load(out["plan"]["file"])
    assert names[0] == planfile.file_name(doc) and doc["digest"] == out["plan"]["digest"]
    assert planfile.load(str(dest / "plan.json")) == doc and out["plan"]["hosts"] == 8
    assert sorted(out["written"]) == sorted(out["files"]) and out["changed"]
    again = plan_merge.merge_run(_params([one, two], dest))
    assert again["written"] == [] and not again["changed"]
    assert again["plan"]["digest"] == doc["digest"]  # merged_by and all the same again


def test_report_merge_with_no_plan_has_no_plan_key(tmp_path):
    (tmp_path / "empty").mkdir()
    out = plan_merge.merge_run(_params([tmp_path / "empty"], tmp_path / "dest"))
    assert "plan" not in out and out["msg"].startswith("no host report")


def test_hostile_files_are_passed_over_without_a_hang(tmp_path):
    one, first = _slice(tmp_path, "slice-1", HALVES[0])
    os.mkfifo(str(tmp_path / "slice-1" / "fifo.json"))  # never opened for a blocking read
    deep = "[" * 200 + '"%s"' % planfile.SCHEMA + "]" * 200  # the mark, nested too deep
    (tmp_path / "slice-1" / "deep.json").write_text(deep)
    (tmp_path / "slice-1" / "list.json").write_text('["%s"]' % planfile.SCHEMA)
    warnings = []
    assert plan_merge.merge_plans([one], warnings)[0] == first and warnings == []
