"""Hostile report folders (issue 36, third round): what report_merge, audit_report and
rollout_report meet in a controller folder a tenant, a broken clock or an old run left.

One case per class of failure:
- JSON no reader can take whole (200,000 ``[``: a RecursionError; NaN): every JSON read of
  the report code is ``bounded.json_loads``; the file is left out with a warning naming it,
  in every place a report folder is read (merge: audit, tune and rollout documents, the
  merge's own previous ``<host>.json``; audit_report's previous ``<host>.json``).
- host names that end like another writer's file (``lab-tune``, ``db-reboot``, every suffix
  our writers use): a document's kind comes from its content, so every host is kept.
- dates in the future (2099, a clock an hour fast): never trusted as newest, named in a
  warning; the age comes from the file's modification time; a few minutes of clock skew
  are trusted.
- rollout names that are the fleet files' or a host's files: refused, nothing written; an
  old such summary in a merged folder is left out with a warning.
- a rollout result with a status nobody knows: ``unknown``, its raw status named.
"""

import json
import os
import time

import pytest
from fixtures import hosts
from fixtures.reboot import reboot_doc
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import (
    files as files_mod,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import (
    merged,
    report,
    rollout,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report.reboot import (
    reboot_files,
)
from ansible_collections.gpuhost.tuning.plugins.modules import rollout_report

GENERATED = "2026-01-05 03:00:00Z"
NOW = 1767582000.0  # 2026-01-05T03:00:00Z, the merges' clock
DEEP = "[" * 200000
# every name an inventory may give a host whose files end like another writer's: each
# suffix our writers add (files.HOST_FILES), and the stems of the fleet files
ODD_HOSTS = ["lab-tune", "db-reboot", "n-tune.md", "n-tune.json", "n-reboot.json",
             "n-reboot.md", "x.json", "summary", "tune-summary", "gpu_1.example.org"]


@pytest.fixture(scope="module")
def seed_audit(tmp_path_factory):
    root = tmp_path_factory.mktemp("seed-host")
    hosts.seed_host(str(root))
    return audit.audit(str(root), dict(hosts.common_wanted(), host="a"))


def _audits(seed_audit, names, collected_at="2026-01-05T02:50:00Z"):
    return dict((name, dict(seed_audit, collected_at=collected_at)) for name in names)


def _now():
    return NOW


def _report(audits, dest, fleet=False):
    return report.audit_report_run({"audits": audits, "dest": str(dest),
                                    "generated_at": GENERATED, "mrrs_size": 4096,
                                    "write": True, "fleet_files": fleet})


def _merge(folders, dest, clock=time.time, stale_hours=24.0):
    return report.merge_run({"folders": [str(f) for f in folders], "dest": str(dest),
                             "stale_hours": stale_hours, "generated_at": GENERATED,
                             "mrrs_size": 4096}, False, clock=clock)


def _tune(host):
    return {"host": host, "root": "/", "check_mode": False, "snapshot": "original.json",
            "rows": [], "findings_before": [], "findings_after": [], "verified": True,
            "failures": []}


# ---------------------------------------------------------------------------------------
# JSON a reader cannot take whole: deep nesting, NaN


def _host_doc_text(folder, host):
    return (folder / ("%s.json" % host)).read_text()


BAD_JSON = [
    ("deep", DEEP, "nested 200000 deep"),
    ("deep object", '{"a":' * 100000 + "1" + "}" * 100000, "nested 100000 deep"),
    ("NaN", None, "NaN is not a number"),
]


@pytest.mark.parametrize("what, text, said", BAD_JSON, ids=[b[0] for b in BAD_JSON])
@pytest.mark.parametrize("name", ["b.json", "b-tune.json", "rollout.json",
                                  "b-reboot.json", "other.json"])
def test_json_no_reader_takes_whole_is_left_out_naming_the_file(
        seed_audit, tmp_path, what, text, said, name):
    folder = tmp_path / "slice"
    _report(_audits(seed_audit, ["a", "b"]), folder)
    if text is None:     # a host report whose duration is NaN: valid for Python, not JSON
        text = _host_doc_text(folder, "b").replace('"duration_s": ', '"duration_s": NaN, "x": ')
    (folder / name).write_text(text)
    start = time.monotonic()
    result = _merge([folder], tmp_path / "fleet")
    took = time.monotonic() - start
    path = str(folder / name)
    assert [line for line in result["warnings"] if path in line and said in line], \
        result["warnings"]
    assert "a" in result["hosts"]
    assert ("b" in result["hosts"]) is (name != "b.json")
    assert took < 10, took


@pytest.mark.parametrize("what, text, said", BAD_JSON, ids=[b[0] for b in BAD_JSON])
def test_a_previous_report_no_reader_takes_whole_is_ignored(seed_audit, tmp_path, what, text,
                                                            said):
    """audit_report's previous ``<host>.json`` (the AER comparison) and the merge's own
    previous one in dest: ignored with a warning, the new report written."""
    dest = tmp_path / "reports"
    _report(_audits(seed_audit, ["a"]), dest, fleet=True)
    if text is None:
        text = _host_doc_text(dest, "a").replace('"duration_s": ', '"duration_s": NaN, "x": ')
    (dest / "a.json").write_text(text)
    result = _report(_audits(seed_audit, ["a"], "2026-01-05T02:55:00Z"), dest, fleet=True)
    assert [line for line in result["warnings"]
            if str(dest / "a.json") in line and said in line], result
    assert json.loads((dest / "a.json").read_text())["host"] == "a"
    # the merge into a folder whose a.json is such a file
    (dest / "a.json").write_text(text if text is not None else DEEP)
    folder = tmp_path / "slice"
    _report(_audits(seed_audit, ["a"]), folder)
    merged_result = _merge([folder], dest)
    assert [line for line in merged_result["warnings"] if str(dest / "a.json") in line]
    assert json.loads((dest / "a.json").read_text())["host"] == "a"


# ---------------------------------------------------------------------------------------
# host names that end like another writer's file


def test_every_host_name_is_kept_whatever_it_ends_with(seed_audit, tmp_path):
    folder = tmp_path / "slice"
    _report(_audits(seed_audit, ODD_HOSTS), folder)
    # the other writers' files of the same hosts in the same folder, as the roles write
    # them (one gpuhost_report_dir): tune, reboot, a rollout summary
    tune_files = files_mod.write_files(str(folder), merged.tune_files(
        dict((h, _tune(h)) for h in ["lab-tune", "db-reboot", "n-tune.json"])))
    assert tune_files[1]
    for host in ("db-reboot", "lab-tune", "n-reboot.json"):
        files_mod.write_files(str(folder), reboot_files(host, reboot_doc(host=host)))
    rollout.report_run({"hosts": ODD_HOSTS, "results": {}, "dest": str(folder),
                        "name": "rollout", "title": "t", "generated_at": GENERATED})
    result = _merge([folder], tmp_path / "fleet")
    assert sorted(result["hosts"]) == sorted(ODD_HOSTS)
    assert sorted(result["tune"]["hosts"]) == ["db-reboot", "lab-tune", "n-tune.json"]
    assert sorted(result["rollout"]) == ["rollout"]
    assert "warnings" not in result, result["warnings"]
    for host in ODD_HOSTS:
        doc = json.loads((tmp_path / "fleet" / ("%s.json" % host)).read_text())
        assert doc["host"] == host


# ---------------------------------------------------------------------------------------
# dates in the future


def _dated(seed_audit, folder, host, collected_at, mtime=None):
    _report({host: dict(seed_audit, collected_at=collected_at)}, folder)
    path = folder / ("%s.json" % host)
    if mtime is not None:
        os.utime(str(path), (mtime, mtime))
    return str(path)


@pytest.mark.parametrize("future", ["2099-01-01T00:00:00Z", "2026-01-05T04:00:00Z"])
def test_a_report_dated_in_the_future_never_beats_a_recent_one(seed_audit, tmp_path, future):
    recent = _dated(seed_audit, tmp_path / "one", "a", "2026-01-05T02:50:00Z", NOW - 600)
    ahead = _dated(seed_audit, tmp_path / "two", "a", future, NOW - 60)
    result = _merge([tmp_path / "one", tmp_path / "two"], tmp_path / "fleet", _now)
    assert result["hosts"]["a"]["from"] == recent
    assert result["hosts"]["a"]["stale"] is False
    assert [line for line in result["warnings"] if ahead in line and future in line]


def test_a_future_report_alone_ages_by_its_file_and_is_stale_when_that_lies_too(
        seed_audit, tmp_path):
    path = _dated(seed_audit, tmp_path / "one", "a", "2099-01-01T00:00:00Z", NOW - 600)
    result = _merge([tmp_path / "one"], tmp_path / "fleet", _now)
    assert result["hosts"]["a"]["from"] == path
    assert (result["hosts"]["a"]["age_s"], result["hosts"]["a"]["stale"]) == (600, False)
    # 30 days old on disk: stale, whatever the document says
    os.utime(path, (NOW - 30 * 86400, NOW - 30 * 86400))
    assert _merge([tmp_path / "one"], tmp_path / "fleet", _now)["stale"] == ["a"]
    # its file dated in the future too: no sane age at all, so stale
    os.utime(path, (4102444800, 4102444800))
    result = _merge([tmp_path / "one"], tmp_path / "fleet", _now)
    assert result["stale"] == ["a"] and result["hosts"]["a"]["age_s"] is None
    assert "unknown" in (tmp_path / "fleet" / "summary.md").read_text()


def test_a_few_minutes_of_clock_skew_are_trusted(seed_audit, tmp_path):
    _dated(seed_audit, tmp_path / "one", "a", "2026-01-05T02:50:00Z")
    skewed = _dated(seed_audit, tmp_path / "two", "a", "2026-01-05T03:04:00Z")
    result = _merge([tmp_path / "one", tmp_path / "two"], tmp_path / "fleet", _now)
    assert result["hosts"]["a"]["from"] == skewed and "warnings" not in result
    assert result["hosts"]["a"]["age_s"] == 0


def test_future_rollout_summaries_and_tune_files_rank_below_past_ones(tmp_path):
    past = time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(time.time() - 3600))
    for folder, when in (("one", past), ("two", "2099-01-01 00:00:00Z")):
        status = "done" if folder == "one" else "stopped"
        rollout.report_run({"hosts": ["a"], "results": {"a": {"status": status}},
                            "dest": str(tmp_path / folder), "name": "rollout", "title": "t",
                            "generated_at": when})
        files_mod.write_files(str(tmp_path / folder), merged.tune_files({"a": dict(
            _tune("a"), snapshot=folder)}))
    tune_two = tmp_path / "two" / "a-tune.json"
    os.utime(str(tune_two), (4102444800, 4102444800))
    result = _merge([tmp_path / "one", tmp_path / "two"], tmp_path / "fleet")
    assert result["rollout"]["rollout"]["done"] == 1
    assert result["tune"]["hosts"]["a"] == str(tmp_path / "one" / "a-tune.json")
    text = "\n".join(result["warnings"])
    assert str(tmp_path / "two" / "rollout.json") in text and "2099-01-01" in text
    assert str(tune_two) in text


# ---------------------------------------------------------------------------------------
# rollout names that are the fleet files' or a host's files


CLASHING = ["summary", "Summary", "index", "gpuhost", "tune-summary", "gpu01", "gpu01-tune",
            "gpu01-reboot"]


@pytest.mark.parametrize("name", CLASHING)
def test_a_rollout_name_clashing_with_the_reports_is_refused(tmp_path, name):
    result = run_module(rollout_report, {"hosts": ["gpu01", "gpu02"], "results": {},
                                         "dest": str(tmp_path / "reports"), "name": name})
    assert result.get("failed") is True
    assert "name %r cannot be used" % name in result["msg"]
    assert "nothing was written" in result["msg"]
    assert not (tmp_path / "reports").exists()


def test_an_old_clashing_rollout_summary_is_not_merged_over_the_fleet_files(seed_audit,
                                                                            tmp_path):
    folder = tmp_path / "slice"
    _report(_audits(seed_audit, ["a"]), folder)
    doc = rollout.summarize(["a"], {"a": {"status": "done"}}, "old")
    (folder / "summary.json").write_text(json.dumps(doc))
    (folder / "a-tune.json.json").write_text(json.dumps(doc))  # fine: no host a-tune.json
    (folder / "a.json.json").write_text(json.dumps(doc))
    result = _merge([folder], tmp_path / "fleet")
    assert [line for line in result["warnings"] if str(folder / "summary.json") in line]
    assert (tmp_path / "fleet" / "summary.md").read_text().startswith("# GPU host audit")
    assert sorted(result["rollout"]) == ["a-tune.json", "a.json"]


def test_a_rollout_summary_named_like_a_merged_host_is_left_out(seed_audit, tmp_path):
    folder = tmp_path / "slice"
    _report(_audits(seed_audit, ["a"]), folder)
    other = tmp_path / "other"
    rollout.report_run({"hosts": ["b"], "results": {}, "dest": str(other), "name": "a",
                        "title": "t", "generated_at": GENERATED})
    result = _merge([folder, other], tmp_path / "fleet")
    assert [line for line in result["warnings"] if str(other / "a.json") in line]
    assert json.loads((tmp_path / "fleet" / "a.json").read_text())["host"] == "a"


# ---------------------------------------------------------------------------------------
# a rollout result with a status nobody knows


@pytest.mark.parametrize("status", ["finished", "", 3, None, "unknown"])
def test_an_unknown_status_is_shown_as_unknown_naming_it(tmp_path, status):
    results = {"a": {"status": "done"}, "b": {"status": status, "reason": "said so"}}
    result = run_module(rollout_report, {"hosts": ["a", "b", "c"], "results": results,
                                         "dest": str(tmp_path), "generated_at": "g"})
    rows = dict((row["host"], row) for row in result["hosts"])
    if status is None:       # no status at all: the run never recorded one
        assert rows["b"]["status"] == "not reached"
        return
    assert rows["b"]["status"] == "unknown"
    assert rows["b"]["raw_status"] == (status if isinstance(status, str) else repr(status))
    assert rows["c"]["status"] == "not reached"
    assert result["counts"]["unknown"] == 1 and result["finished"] is False
    assert result["lines"][0] == "rollout: 1 done, 0 stopped, 1 not reached, 1 unknown"
    assert "said so" in rows["b"]["reason"]
    md = (tmp_path / "rollout.md").read_text()
    assert "| b | unknown |" in md
    # merged again (two slices), the raw status and reason stay
    doc = json.loads((tmp_path / "rollout.json").read_text())
    files, counts = merged.rollout_merge_files({"rollout": [(doc, "x/rollout.json", 0)]}, "g")
    again = json.loads(files["rollout.json"])
    assert [r for r in again["hosts"] if r["host"] == "b"][0] == rows["b"]
    assert counts["rollout"]["unknown"] == 1
