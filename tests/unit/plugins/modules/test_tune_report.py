"""tune_report module: every host's <host>-tune.md and <host>-tune.json in one call, from
real host_tune results (the seed host tuned, a host with a failed part, a host that never
returned a result)."""

import json
import os
import re

import pytest
from fixtures import hosts
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import report
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import tune
from ansible_collections.gpuhost.tuning.plugins.modules import tune_report

WANTED = hosts.common_wanted()


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """gpu01: the seed host tuned; gpu02: an H200 VM where the sysctl file is in the way."""
    base = tmp_path_factory.mktemp("hosts")
    seed = str(base / "seed")
    hosts.seed_host(seed)
    vm = str(base / "vm")
    hosts.vm_host(vm)
    os.makedirs(os.path.join(vm, "etc/sysctl.d/99-gpuhost-tuning.conf"))  # a folder: unwritable
    out = {}
    for name, root in (("gpu01", seed), ("gpu02", vm)):
        out[name] = tune.tune_run({"root": root, "host": name, "sysctl": WANTED["sysctl"]})
        out[name].pop("diff", None)
    return out


def test_reports_of_every_host_in_one_call_then_nothing_rewritten(tmp_path, results):
    dest = str(tmp_path / "reports")
    first = run_module(tune_report, {"results": results, "dest": dest})
    assert first.get("failed") is not True, first.get("msg")
    assert sorted(os.listdir(dest)) == ["gpu01-tune.json", "gpu01-tune.md", "gpu02-tune.json",
                                        "gpu02-tune.md"]
    assert first["changed"] is True and len(first["written"]) == 4
    with open(os.path.join(dest, "gpu01-tune.md")) as handle:
        markdown = handle.read()
    assert markdown.startswith("# Tuning of gpu01\n")
    assert "| pcie | 0000:01:00.0 endpoint MRRS | 512 | 4096 | changed |  |" in markdown
    assert "| sysctl | kernel.numa_balancing | 1 | 0 | changed |  |" in markdown
    assert "- managed findings before: 26, after: 0\n- result: ok\n" in markdown
    with open(os.path.join(dest, "gpu01-tune.json")) as handle:
        doc = json.load(handle)
    assert set(doc) == set(report.TUNE_KEYS)
    assert doc["failures"] == [] and doc["verified"] is True and doc["host"] == "gpu01"
    assert first["tables"]["gpu01"] == markdown.splitlines()
    assert first["failed_hosts"] == ["gpu02"]

    stats = dict((n, os.stat(os.path.join(dest, n))) for n in os.listdir(dest))
    again = run_module(tune_report, {"results": results, "dest": dest})
    assert again["changed"] is False and again["written"] == []
    for name, st in stats.items():  # not rewritten: same inode, same mtime
        now = os.stat(os.path.join(dest, name))
        assert (now.st_ino, now.st_mtime_ns) == (st.st_ino, st.st_mtime_ns), name


def test_a_failed_part_is_in_the_table_and_the_result_line(tmp_path, results):
    dest = str(tmp_path / "reports")
    run_module(tune_report, {"results": results, "dest": dest})
    with open(os.path.join(dest, "gpu02-tune.md")) as handle:
        markdown = handle.read()
    assert "- result: FAILED: sysctl: " in markdown
    assert "| sysctl | (all) |  |  | failed | " in markdown
    # the other parts of that host are reported as done
    assert "endpoint MRRS | 4096 | 4096 | ok |" in markdown


def test_a_host_without_a_result_gets_a_report_saying_so(tmp_path):
    dest = str(tmp_path / "reports")
    result = run_module(tune_report, {"results": {
        "gpu03": {"failed": True, "msg": "MODULE FAILURE: python3 not found"}}, "dest": dest})
    assert result["failed_hosts"] == ["gpu03"]
    with open(os.path.join(dest, "gpu03-tune.json")) as handle:
        doc = json.load(handle)
    assert doc["failures"] == ["host_tune returned no result: MODULE FAILURE: python3 not found"]
    assert doc["rows"] == []


def test_check_mode_writes_nothing_but_lists_what_would_be(tmp_path, results):
    dest = str(tmp_path / "reports")
    result = run_module(tune_report, {"results": results, "dest": dest}, check_mode=True)
    assert result["changed"] is True and len(result["written"]) == 4
    assert not os.path.exists(dest)


def test_cells_never_break_the_table():
    doc = report.tune_document("gpu01", {
        "root": "/", "rows": [{"part": "sysctl", "item": "vm.x", "before": None, "after": "1",
                               "status": "failed", "note": "a | b\nc"}],
        "snapshot": "/var/lib/gpuhost/original.json", "check_mode": True})
    text = report.render_tune_markdown(doc)
    assert "# Tuning of gpu01 (check mode: planned, nothing changed)" in text
    assert "| sysctl | vm.x | - | 1 | failed | a / b c |" in text.splitlines()
    assert "after: not verified" in text


def test_host_names_cannot_escape_the_report_folder(tmp_path):
    dest = str(tmp_path / "reports")
    run_module(tune_report, {"results": {"../evil": {"rows": []}}, "dest": dest})
    names = sorted(os.listdir(dest))
    assert len(names) == 2 and re.match(r"^_evil-[0-9a-f]{10}-tune\.json$", names[0]), names
    assert names[1] == names[0].replace(".json", ".md")
    assert not os.path.exists(str(tmp_path / "evil-tune.md"))


# --- hosts + result_var: what the action plugin reads (report.registered_tunes) ---------------

def test_registered_results_are_read_per_host_and_a_missing_one_is_reported(tmp_path, results):
    stored = {"gpu01": {"__tuned": results["gpu01"]}, "gpu02": {"other": 1}}
    read = report.registered_tunes(stored.get, ["gpu01", "gpu02"], "__tuned")
    assert read == {"gpu01": results["gpu01"], "gpu02": {}}
    done = run_module(tune_report, {"results": read, "dest": str(tmp_path)})
    assert done["failed_hosts"] == ["gpu02"]
    assert "was not tuned in this play" in (tmp_path / "gpu02-tune.md").read_text()


def test_module_run_directly_refuses_hosts(tmp_path):
    res = run_module(tune_report, {"hosts": ["gpu01"], "result_var": "r", "dest": str(tmp_path)})
    assert res["failed"] is True and "pass results" in res["msg"]
    assert list(tmp_path.iterdir()) == []
