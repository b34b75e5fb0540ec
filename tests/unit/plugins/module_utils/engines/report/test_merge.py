"""engines/report/merge.py: what report_merge reads from report folders (audit, tune and rollout
reports), what it passes over and what it leaves out with a warning; folders under a tmp
path."""

import json

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import files
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import merge

HOST_DOC = {"host": "gpu01", "facts": {}, "findings": [], "checks": {}}
TUNE_DOC = {"host": "gpu01", "rows": [], "findings_before": [], "findings_after": [],
            "failures": []}
ROLLOUT = {"title": "driver 580", "counts": {"done": 1},
           "hosts": [{"host": "gpu01", "status": "done"}]}


def _write(folder, name, doc):
    (folder / name).write_text(doc if isinstance(doc, str) else json.dumps(doc))


@pytest.mark.parametrize("seconds, text", [(0, "0h 0m"), (3660, "1h 1m"),
                                           (90000, "1d 1h"), (-5, "0h 0m")])
def test_age_text(seconds, text):
    assert merge.age_text(seconds) == text


def test_folder_documents_keeps_host_reports_and_names_what_it_leaves_out(tmp_path):
    _write(tmp_path, "gpu01.json", HOST_DOC)
    _write(tmp_path, "gpu01-tune.json", TUNE_DOC)       # another report's file
    _write(tmp_path, "rollout.json", ROLLOUT)           # no host report at all
    _write(tmp_path, "broken.json", "{")
    _write(tmp_path, "gpu02.json", dict(HOST_DOC, host="gpu03"))   # copied or renamed
    _write(tmp_path, "odd.json", dict(HOST_DOC, findings="none"))
    warnings = []
    found = merge.folder_documents(str(tmp_path), warnings)
    assert [(d["host"], p) for d, p, _mtime in found] == [("gpu01", str(tmp_path / "gpu01.json"))]
    assert len(warnings) == 3
    assert "broken.json is not a readable JSON report" in warnings[0]
    assert "gpu02.json names host 'gpu03', whose report is gpu03.json" in warnings[1]
    assert "odd.json is not an audit report document" in warnings[2]


def test_tune_documents_and_rollout_documents(tmp_path):
    _write(tmp_path, "gpu01-tune.json", TUNE_DOC)
    _write(tmp_path, "gpu02-tune.json", dict(TUNE_DOC, rows="x"))
    _write(tmp_path, "rollout.json", ROLLOUT)
    _write(tmp_path, "bad-rollout.json", dict(ROLLOUT, hosts=[{"host": 1}]))
    warnings = []
    tunes = merge.tune_documents(str(tmp_path), warnings)
    assert [(d["host"], p) for d, p, _mtime in tunes] == [
        ("gpu01", str(tmp_path / "gpu01-tune.json"))]
    assert "gpu02-tune.json is not a tune report document" in warnings[0]
    rollouts = merge.rollout_documents(str(tmp_path), warnings)
    assert [name for name, _doc, _path in rollouts] == ["rollout"]
    assert "bad-rollout.json is not a rollout summary" in warnings[-1]


def test_an_unlistable_folder_is_a_report_error(tmp_path):
    with pytest.raises(files.ReportError, match="cannot list the report folder"):
        merge.folder_names(str(tmp_path / "none"))


def test_stamp_is_the_collection_time_or_zero():
    assert merge.stamp({"collected_at": "2026-01-01T00:00:00Z"}) == 1767225600
    assert merge.stamp({}) == 0


def test_documents_are_told_apart_by_content_not_by_a_suffix_of_their_name(tmp_path):
    """Hosts named like another writer's files (``lab-tune``, ``db-reboot``) are kept; a
    reboot report is passed over; a ``-tune.json`` that is no report at all is named."""
    _write(tmp_path, "lab-tune.json", dict(HOST_DOC, host="lab-tune"))
    _write(tmp_path, "db-reboot.json", dict(HOST_DOC, host="db-reboot"))
    _write(tmp_path, "lab-tune-tune.json", dict(TUNE_DOC, host="lab-tune"))
    _write(tmp_path, "db-reboot-reboot.json", {"host": "db-reboot", "before": {},
                                               "after": {}, "reboot": {}})
    _write(tmp_path, "gpu01-tune.json", {})
    _write(tmp_path, "x-tune.json", ROLLOUT)           # a rollout summary named x-tune
    warnings = []
    entries = merge.folder_entries(str(tmp_path), warnings)
    assert len(entries) == 6 and warnings == []
    found = merge.folder_documents(str(tmp_path), warnings, entries=entries)
    assert sorted(d["host"] for d, _p, _m in found) == ["db-reboot", "lab-tune"]
    tunes = merge.tune_documents(str(tmp_path), warnings, entries=entries)
    assert [d["host"] for d, _p, _m in tunes] == ["lab-tune"]
    rollouts = merge.rollout_documents(str(tmp_path), warnings, entries=entries)
    assert [name for name, _d, _p in rollouts] == ["x-tune"]
    assert len(warnings) == 1 and "gpu01-tune.json is not a tune report" in warnings[0]


def test_deep_or_nan_json_is_a_warning_naming_the_file(tmp_path):
    _write(tmp_path, "deep.json", "[" * 200000)
    _write(tmp_path, "nan.json", '{"host": "a", "facts": {}, "x": NaN}')
    warnings = []
    assert merge.folder_entries(str(tmp_path), warnings) == []
    assert "deep.json is not a readable JSON report (JSON nested 200000 deep" in warnings[0]
    assert "nan.json is not a readable JSON report (NaN is not a number" in warnings[1]


@pytest.mark.parametrize("when, mtime, out, warned", [
    (1000, 50, (True, 1000), False),
    (1000 + merge.CLOCK_SKEW_S, 50, (True, 1300), False),       # within the skew
    (1001 + merge.CLOCK_SKEW_S, 50, (False, 50), True),         # beyond: its file's time
    (4102444800, 4102444800, (False, 0), True),                 # both in 2100
    (0, 50, (False, 0), False), (None, 50, (False, 0), False)])  # no date at all
def test_trusted_time_ranks_a_future_date_below_every_past_one(when, mtime, out, warned):
    warnings = []
    assert merge.trusted_time(when, mtime, 1000, "f.json", "2100", warnings) == out
    assert bool(warnings) is warned
    if warned:
        assert warnings[0].startswith("f.json is dated 2100, more than 5 minutes ahead")
