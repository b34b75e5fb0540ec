"""report_merge: the per-host JSON of several report folders (slices of a sliced job, or
several runs) merged into what one run over all their hosts writes; audit_report's slice
mode (fleet_files false) that feeds it."""

import json
import os
import time

import pytest
from fixtures import hosts
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import report
from ansible_collections.gpuhost.tuning.plugins.modules import report_merge

GENERATED = "2026-01-05 03:00:00Z"
# five hosts: c (another kernel) and d (an H200 VM: driver, kernel, GPU count and model)
# drift against the union; a slice of b and d alone is a tie and sees no drift
BUILD = (("a", hosts.seed_host), ("b", hosts.seed_host), ("c", hosts.tuned_host),
         ("d", hosts.vm_host), ("e", hosts.seed_host))


@pytest.fixture(scope="module")
def audits(tmp_path_factory):
    out = {}
    for name, build in BUILD:
        root = tmp_path_factory.mktemp("host-" + name)
        build(root)
        out[name] = audit.audit(str(root), dict(hosts.common_wanted(), host=name))
    return out


def _report(audits, dest, fleet=True):
    return report.audit_report_run({"audits": audits, "dest": str(dest), "generated_at": GENERATED,
                                    "mrrs_size": 4096, "write": True, "fleet_files": fleet})


def _merge(folders, dest, check_mode=False, stale_hours=24.0 * 3650, clock=time.time):
    return report.merge_run({"folders": [str(f) for f in folders], "dest": str(dest),
                             "stale_hours": stale_hours, "generated_at": GENERATED,
                             "mrrs_size": 4096}, check_mode, clock=clock)


def _slices(names, n):
    """AWX's job slicing: slice k of n takes the hosts k, k+n, ... in inventory order."""
    return [names[k::n] for k in range(n)]


def _tree(folder):
    return dict((name, (folder / name).read_bytes()) for name in sorted(os.listdir(folder)))


def test_slices_merged_are_the_one_run_report_byte_for_byte(audits, tmp_path):
    _report(audits, tmp_path / "one")
    names = [name for name, _b in BUILD]
    folders = []
    for k, part in enumerate(_slices(names, 2)):
        folder = tmp_path / ("slice-%d" % (k + 1))
        _report(dict((h, audits[h]) for h in part), folder, fleet=False)
        assert sorted(os.listdir(folder)) == sorted("%s.json" % h for h in part)
        folders.append(folder)
    result = _merge(folders, tmp_path / "fleet")
    assert result["changed"] and result["stale"] == [] and "warnings" not in result
    assert _tree(tmp_path / "fleet") == _tree(tmp_path / "one")
    # the fleet check saw the union: d drifts against a, c, e, which only slice 1 holds
    d = json.loads((tmp_path / "fleet" / "d.json").read_text())
    assert "driver" in [f["subject"] for f in d["findings"] if f["id"] == "fleet_drift"]
    # a second merge changes nothing
    again = _merge(folders, tmp_path / "fleet")
    assert again["changed"] is False and again["written"] == []


def test_slices_written_the_old_way_merge_the_same(audits, tmp_path):
    """Slices that wrote full reports (fleet drift judged within the slice, their fleet
    files in one folder overwriting each other) still merge into the one-run report."""
    _report(audits, tmp_path / "one")
    for part in _slices([name for name, _b in BUILD], 2):
        _report(dict((h, audits[h]) for h in part), tmp_path / "shared")
    slice_d = json.loads((tmp_path / "shared" / "d.json").read_text())
    assert slice_d["checks"]["fleet_drift"]["note"].startswith("against the 2 hosts of this")
    _merge([tmp_path / "shared"], tmp_path / "fleet")
    assert _tree(tmp_path / "fleet") == _tree(tmp_path / "one")


def test_slice_mode_writes_only_the_per_host_json_with_the_hosts_own_verdict(audits, tmp_path):
    result = _report({"c": audits["c"], "d": audits["d"]}, tmp_path, fleet=False)
    assert sorted(os.listdir(tmp_path)) == ["c.json", "d.json"]
    d = json.loads((tmp_path / "d.json").read_text())
    assert d["checks"]["fleet_drift"]["status"] == "n/a"
    assert "fleet_drift" not in [f["id"] for f in d["findings"]]
    assert "gpuhost_finding{" in result["metrics"]["d"]


def test_newest_result_per_host_wins_and_old_ones_are_marked_stale(audits, tmp_path):
    old, new = tmp_path / "monday", tmp_path / "tuesday"
    _report({"a": audits["a"], "b": audits["b"]}, old, fleet=False)
    _report({"a": audits["a"]}, new, fleet=False)
    doc = json.loads((old / "a.json").read_text())
    for host, stamp in (("a", "2026-01-01T00:00:00Z"), ("b", "2026-01-01T00:00:00Z")):
        path = old / ("%s.json" % host)
        data = json.loads(path.read_text())
        data["collected_at"] = stamp
        path.write_text(json.dumps(data))
    fresh = json.loads((new / "a.json").read_text())
    fresh["collected_at"] = "2026-01-05T02:00:00Z"
    (new / "a.json").write_text(json.dumps(fresh))

    def clock():
        return 1767582000.0  # 2026-01-05 03:00:00Z
    # the newer folder given first: still the newer result wins
    result = _merge([new, old], tmp_path / "fleet", stale_hours=24, clock=clock)
    assert result["hosts"]["a"]["from"] == str(new / "a.json") and doc
    assert result["hosts"]["a"]["age_s"] == 3600 and not result["hosts"]["a"]["stale"]
    assert result["stale"] == ["b"] and result["hosts"]["b"]["age_s"] == 4 * 86400 + 3 * 3600
    summary = (tmp_path / "fleet" / "summary.md").read_text()
    assert "## Stale hosts" in summary
    assert "| b | 2026-01-01T00:00:00Z | 4d 3h | %s |" % old in summary
    page = (tmp_path / "fleet" / "index.html").read_text()
    assert "Stale hosts" in page and "4d 3h" in page
    merged_a = json.loads((tmp_path / "fleet" / "a.json").read_text())
    assert merged_a["collected_at"] == "2026-01-05T02:00:00Z"


def test_empty_slices_add_nothing_and_none_at_all_writes_nothing(audits, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = _merge([empty, empty], tmp_path / "fleet")
    assert result["changed"] is False and result["files"] == [] and "nothing" in result["msg"]
    assert not (tmp_path / "fleet").exists()
    _report({"a": audits["a"]}, tmp_path / "one")
    merged = _merge([empty, tmp_path / "one"], tmp_path / "fleet")
    assert merged["changed"] and sorted(merged["hosts"]) == ["a"]


def test_bad_files_are_left_out_naming_them_and_the_rest_merges(audits, tmp_path):
    folder = tmp_path / "slice"
    _report({"a": audits["a"], "b": audits["b"]}, folder, fleet=False)
    (folder / "a-tune.json").write_text("{}")  # a tune report now merged too: named
    (folder / "rollout.json").write_text('{"title": "rollout"}')
    (folder / "broken.json").write_text("{not json")
    (folder / "copy.json").write_bytes((folder / "b.json").read_bytes())
    (folder / "shape.json").write_text('{"host": "shape", "facts": [], "findings": []}')
    os.mkfifo(str(folder / "fifo.json"))
    result = _merge([folder], tmp_path / "fleet")
    assert sorted(result["hosts"]) == ["a", "b"]
    text = "\n".join(result["warnings"])
    for name in ("broken.json", "copy.json", "shape.json", "fifo.json", "a-tune.json"):
        assert str(folder / name) in text
    assert "rollout.json" not in text  # JSON of no report's shape: passed over quietly
    assert "tune" not in result
    assert "names host 'b', whose report is b.json" in text


def test_a_folder_that_cannot_be_listed_fails_naming_it_and_writes_nothing(audits, tmp_path):
    _report({"a": audits["a"]}, tmp_path / "one")
    with pytest.raises(report.ReportError) as err:
        _merge([tmp_path / "one", tmp_path / "missing"], tmp_path / "fleet")
    assert str(tmp_path / "missing") in str(err.value) and "nothing was written" in str(err.value)
    assert not (tmp_path / "fleet").exists()


def test_check_mode_writes_nothing(audits, tmp_path):
    _report({"a": audits["a"]}, tmp_path / "one")
    result = _merge([tmp_path / "one"], tmp_path / "fleet", check_mode=True)
    assert result["written"] and not (tmp_path / "fleet").exists()


def _with_aer(path, stamp, correctable):
    doc = json.loads(path.read_text())
    doc["collected_at"] = stamp
    device = doc["facts"]["pcie_aer"][0]
    device.update(available=True, fatal={"total": 0}, nonfatal={"total": 0},
                  correctable={"total": correctable})
    path.write_text(json.dumps(doc))
    return device["address"]


def test_aer_change_is_judged_against_the_hosts_older_report_in_another_folder(audits, tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    _report({"a": audits["a"]}, old, fleet=False)
    _report({"a": audits["a"]}, new, fleet=False)
    address = _with_aer(old / "a.json", "2026-01-01T00:00:00Z", 2)
    _with_aer(new / "a.json", "2026-01-05T00:00:00Z", 5)
    _merge([old, new], tmp_path / "fleet")
    merged = json.loads((tmp_path / "fleet" / "a.json").read_text())
    assert merged["aer_change"]["since"] == "2026-01-01T00:00:00Z"
    assert "+3 correctable" in merged["aer_change"]["devices"][address]
    assert "## PCIe errors since the previous report" in (
        tmp_path / "fleet" / "summary.md").read_text()
    # merging again (the merged folder itself among the sources) keeps the comparison
    _merge([old, new, tmp_path / "fleet"], tmp_path / "fleet")
    again = json.loads((tmp_path / "fleet" / "a.json").read_text())
    assert again["aer_change"] == merged["aer_change"]


@pytest.mark.parametrize("args,says", [
    ({"folders": [], "dest": "/x"}, "folders: [] is not allowed"),
    ({"folders": ["/x"], "dest": "/y", "stale_hours": 0}, "stale_hours: 0.0 is not allowed"),
])
def test_module_refuses_bad_options_naming_them(args, says):
    result = run_module(report_merge, args)
    assert result["failed"] is True and says in result["msg"]
    assert "nothing was read or written" in result["msg"]


def test_module_merges_on_its_own(audits, tmp_path):
    _report({"a": audits["a"]}, tmp_path / "one")
    result = run_module(report_merge, {"folders": [str(tmp_path / "one")],
                                       "dest": str(tmp_path / "fleet")})
    assert result.get("failed") is not True, result
    assert sorted(os.listdir(tmp_path / "fleet")) == ["a.html", "a.json", "gpuhost.prom",
                                                      "index.html", "summary.md"]


# --- tune reports and rollout summaries of slices (issue 28 item 1: "same for tune and
# rollout summaries")

def _tune_result(host, failed=False):
    return {"root": "/", "check_mode": False, "snapshot": "/var/lib/gpuhost/%s.json" % host,
            "rows": [{"part": "sysctl", "item": "vm.swappiness", "before": "60", "after": "10",
                      "status": "changed", "note": ""}],
            "findings_before": [], "findings_after": [], "verified": not failed,
            "failures": ["sysctl: read back 60"] if failed else []}


def _tune_report(results, dest):
    return report.tune_report_run({"results": results, "dest": str(dest)})


def test_tune_slices_merge_into_the_one_run_tune_reports_and_a_summary(tmp_path):
    names = ["a", "b", "c", "d", "e"]
    results = dict((h, _tune_result(h, failed=(h == "c"))) for h in names)
    _tune_report(results, tmp_path / "one")
    folders = []
    for k, part in enumerate(_slices(names, 3) + [[]]):     # the last slice has no host
        folder = tmp_path / ("slice%d" % k)
        folder.mkdir()
        if part:
            _tune_report(dict((h, results[h]) for h in part), folder)
        folders.append(folder)
    result = _merge(folders, tmp_path / "fleet")
    merged = _tree(tmp_path / "fleet")
    one = _tree(tmp_path / "one")
    assert dict((k, v) for k, v in merged.items() if k != "tune-summary.md") == one
    assert "summary.md" not in merged and "index.html" not in merged  # no audit report
    assert result["tune"]["failed"] == ["c"] and sorted(result["tune"]["hosts"]) == names
    summary = merged["tune-summary.md"].decode()
    assert summary.startswith("# GPU host tuning: 5 host(s), 1 failed\n")
    assert summary.index("| c | FAILED: sysctl: read back 60 |") < summary.index("| a | ok |")
    again = _merge(folders, tmp_path / "fleet")
    assert again["changed"] is False and again["written"] == []


def test_the_newest_tune_report_of_a_host_wins(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    _tune_report({"a": _tune_result("a", failed=True)}, new)
    _tune_report({"a": _tune_result("a")}, old)
    os.utime(str(old / "a-tune.json"), (time.time() - 3600, time.time() - 3600))
    # the newer file wins although its folder is given first
    result = _merge([new, old], tmp_path / "fleet")
    assert result["tune"]["hosts"] == {"a": str(new / "a-tune.json")}
    assert result["tune"]["failed"] == ["a"]


def _rollout(hosts_, results, dest, generated):
    from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import rollout
    return rollout.report_run({"hosts": hosts_, "results": results, "dest": str(dest),
                               "name": "rollout", "title": "reboot_verify",
                               "generated_at": generated})


def test_rollout_summaries_of_slices_merge_newest_row_per_host(tmp_path):
    one, two, empty = tmp_path / "s0", tmp_path / "s1", tmp_path / "s2"
    empty.mkdir()
    _rollout(["a", "c"], {"a": {"status": "done"}, "c": {"status": "stopped",
                                                         "reason": "reboot timed out"}},
             one, "2026-01-05 01:00:00Z")
    _rollout(["b", "c"], {"b": {"status": "done"}, "c": {"status": "done"}}, two,
             "2026-01-05 02:00:00Z")                 # c again, later: done now
    result = _merge([one, two, empty], tmp_path / "fleet")
    assert result["rollout"] == {"rollout": {"done": 3, "stopped": 0, "not reached": 0}}
    doc = json.loads((tmp_path / "fleet" / "rollout.json").read_text())
    assert [r["host"] for r in doc["hosts"]] == ["a", "c", "b"]  # the slices' order
    assert doc["title"] == "reboot_verify" and doc["finished"] is True
    assert (tmp_path / "fleet" / "rollout.md").read_text().startswith(
        "# reboot_verify: 3 done, 0 stopped, 0 not reached")


def test_slices_with_no_report_of_any_kind_write_nothing_and_do_not_fail(tmp_path):
    folders = [tmp_path / "s0", tmp_path / "s1"]
    for folder in folders:
        folder.mkdir()
    (folders[0] / "notes.json").write_text('{"anything": 1}')
    result = _merge(folders, tmp_path / "fleet")
    assert result["changed"] is False and result["written"] == []
    assert not (tmp_path / "fleet").exists()
