"""engines/report/tune_doc.py: ``<host>-tune.json`` and ``<host>-tune.md`` of host_tune results."""

import json

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import (
    files as files_mod,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import tune_doc

ROW = {"part": "pcie", "item": "0000:01:00.0", "before": "512", "after": "4096",
       "status": "changed", "note": "a | b\nc"}
LEFT = {"id": "pcie_mrrs", "subject": "0000:02:00.0", "current": "512 bytes",
        "expected": "4096 bytes"}


def _result(**over):
    result = {"root": "/", "check_mode": False, "snapshot": "/var/lib/gpuhost/original.json",
              "rows": [ROW], "findings_before": [LEFT, LEFT], "findings_after": [LEFT],
              "verified": True, "failures": ["still off after tuning: pcie_mrrs"],
              "changed": True}
    result.update(over)
    return result


def test_the_document_keeps_its_keys_only():
    doc = tune_doc.tune_document("gpu01", _result())
    assert sorted(doc) == sorted(tune_doc.TUNE_KEYS)
    assert doc["snapshot"] == "/var/lib/gpuhost/original.json" and "changed" not in doc


def test_a_result_without_rows_is_a_failure():
    assert tune_doc.tune_document("gpu01", {"msg": "boom"})["failures"] == [
        "host_tune returned no result: boom"]
    assert tune_doc.tune_document("gpu01", None)["failures"] == [
        "host_tune returned no result: the host was not tuned in this play"]
    assert tune_doc.tune_document("gpu01", {})["snapshot"] == "not taken"


def test_markdown_table_escapes_the_note_and_lists_what_remains():
    text = tune_doc.render_tune_markdown(tune_doc.tune_document("gpu01", _result()))
    lines = text.splitlines()
    assert lines[0] == "# Tuning of gpu01"
    assert "- managed findings before: 2, after: 1" in lines
    assert "- result: FAILED: still off after tuning: pcie_mrrs" in lines
    assert "| pcie | 0000:01:00.0 | 512 | 4096 | changed | a / b c |" in lines
    assert lines[-1] == "- pcie_mrrs 0000:02:00.0: 512 bytes (want 4096 bytes)"


def test_check_mode_and_unverified_are_said():
    doc = tune_doc.tune_document("gpu01", _result(check_mode=True, verified=False, failures=[],
                                                  findings_after=[]))
    text = tune_doc.render_tune_markdown(doc)
    assert text.startswith("# Tuning of gpu01 (check mode: planned, nothing changed)\n")
    assert "- managed findings before: 2, after: not verified" in text
    assert "- result: ok" in text and "remain" not in text


def test_tune_files_per_host_with_safe_names():
    files = tune_doc.tune_files({"gpu01": _result(), "a/b": _result()})
    base = files_mod.safe_name("a/b")
    assert sorted(files) == sorted(["gpu01-tune.md", "gpu01-tune.json", base + "-tune.md",
                                    base + "-tune.json"])
    assert json.loads(files["gpu01-tune.json"])["host"] == "gpu01"
    with pytest.raises(files_mod.ReportError, match="would both write the tune report"):
        tune_doc.tune_files({"a/b": _result(), base: _result()})
