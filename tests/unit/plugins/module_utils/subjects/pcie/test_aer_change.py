"""subjects/pcie/aer_change.py: the AER counters of two audits compared (moved from test_aer.py) and
in the reports (moved from test_aer_report.py): audit_report reads the host's previous
``<host>.json`` in its folder and shows each device's change since then."""

import json

from fixtures import health, hosts, pci
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import aer
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import aer_change
from ansible_collections.gpuhost.tuning.plugins.modules import audit_report

WANTED = hosts.common_wanted()
GPU = "0000:83:00.0"      # health_host: 3 correctable (BadTLP) and 1 fatal (CmpltTO)
GPU2 = "0000:02:00.0"     # 40 correctable (RxErr)


def _audit(root, at):
    result = audit.audit(str(root), dict(WANTED, host="pve-gpu03"))
    result["collected_at"] = at
    return result


def _write(dest, result):
    return run_module(audit_report, {"audits": {"pve-gpu03": result}, "dest": str(dest),
                                     "generated_at": "2026-12-02 07:00:00Z"})


def test_reports_show_the_aer_change_since_the_previous_report(tmp_path):
    root, dest = tmp_path / "host", tmp_path / "reports"
    health.health_host(root)
    first = _write(dest, _audit(root, "2026-12-01T06:00:00Z"))
    assert first["changed"] and "failed" not in first
    summary = (dest / "summary.md").read_text()
    assert "since the previous report" not in summary           # nothing to compare with
    doc = json.loads((dest / "pve-gpu03.json").read_text())
    assert "aer_change" not in doc
    kept = dict((e["address"], e) for e in doc["facts"]["pcie_aer"])
    assert kept[GPU]["available"]                                # the counters are kept

    # a day later: two more correctable errors on one GPU; the other GPU's counters
    # restarted (a reset) and counted 10 since
    health.aer_files(root, GPU, correctable={"BadTLP": 5}, fatal={"CmpltTO": 1})
    health.aer_files(root, GPU2, correctable={"RxErr": 10})
    later = _audit(root, "2026-12-02T06:00:00Z")
    second = _write(dest, later)
    assert second["changed"] and "failed" not in second
    summary = (dest / "summary.md").read_text()
    table = summary.split("## PCIe errors since the previous report", 1)[1]
    assert "| pve-gpu03 | 2026-12-01T06:00:00Z | %s | +2 correctable |" % GPU in table
    assert "| %s | +10 correctable (counters restarted since: reboot or reset) |" % GPU2 \
        in table
    assert "| 0000:01:00.0 | no change |" in table
    # the finding's row carries it too (Markdown, HTML) and so does the JSON
    row = [ln for ln in summary.splitlines() if "`pcie_aer_errors` | %s |" % GPU in ln][0]
    assert "(since the previous report: +2 correctable)" in row
    page = (dest / "pve-gpu03.html").read_text()
    assert "PCIe errors since the previous report (2026-12-01T06:00:00Z)" in page
    assert '<div class="note">since the previous report: +2 correctable</div>' in page
    doc = json.loads((dest / "pve-gpu03.json").read_text())
    assert doc["aer_change"]["since"] == "2026-12-01T06:00:00Z"
    assert doc["aer_change"]["devices"][GPU] == "+2 correctable"
    finding = [f for f in doc["findings"] if f["id"] == "pcie_aer_errors"
               and f["subject"] == GPU][0]
    assert finding["change"] == "+2 correctable"

    # the same audit written again keeps its comparison: nothing rewritten
    again = _write(dest, later)
    assert again["changed"] is False and again["written"] == []


def test_changes_between_two_audits(tmp_path):
    pci.seed_gpus(tmp_path)
    health.aer_everywhere(tmp_path)
    health.aer_files(tmp_path, "0000:01:00.0", correctable={"BadTLP": 5})
    before = aer.collect(str(tmp_path))
    health.aer_files(tmp_path, "0000:01:00.0", correctable={"BadTLP": 9}, fatal={"DLP": 1})
    after = aer.collect(str(tmp_path))
    delta = aer_change.changes(before, after)
    assert delta["0000:01:00.0"] == {"fatal": 1, "nonfatal": 0, "correctable": 4,
                                     "reset": False}
    assert aer_change.change_text(delta["0000:01:00.0"]) == "+1 fatal, +4 correctable"
    assert aer_change.change_text(delta["0000:02:00.0"]) == "no change"
    # a reboot restarts the counters: the delta is what was counted since
    health.aer_files(tmp_path, "0000:01:00.0", correctable={"RxErr": 2})
    again = aer_change.changes(after, aer.collect(str(tmp_path)))["0000:01:00.0"]
    assert again["reset"] is True and again["correctable"] == 2 and again["fatal"] == 0
    assert "restarted" in aer_change.change_text(again)
    assert aer_change.change_text(None) == "no previous report"
