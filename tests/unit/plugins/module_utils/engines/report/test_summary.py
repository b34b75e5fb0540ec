"""engines/report/summary.py: summary.md, hosts worst first with their counts and every finding
(moved from test_report.py), rendered from the fixture hosts' audits."""

import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import (
    documents,
    summary,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import views


def test_markdown_counts_and_every_finding(fleet):
    docs = [documents.host_document(h, a) for h, a in fleet.items()]
    text = summary.render_markdown(docs, "2025-06-01 10:00:00Z")
    lines = text.splitlines()
    # hosts worst first with their severity counts
    rows = [ln for ln in lines if ln.startswith("| pve-") or ln.startswith("| h200")]
    assert rows[0].startswith("| pve-gpu01 | critical | 1 | 21 |")
    finding_rows = [ln for ln in lines if ln.count("|") >= 9 and "`" in ln]
    # identical findings on several subjects of a host are one row listing them
    assert len(finding_rows) == sum(len(views.group_findings(a["findings"]))
                                    for a in fleet.values())
    mrrs = [ln for ln in finding_rows if "`pcie_mrrs`" in ln]
    assert len(mrrs) == 1 and mrrs[0].startswith("| pve-gpu01 | high | `pcie_mrrs` | 16: ")
    for item in fleet["pve-gpu01"]["findings"]:
        if item["id"] == "pcie_mrrs":
            assert item["subject"] in mrrs[0]
    assert 'do setpci -s "$s" CAP_EXP+8.w=5000:7000; done (now)' in mrrs[0]
    assert "<subject>" not in text
    # sysctl keys are one row each, except two off by the same values
    sysctl = [ln for ln in finding_rows if ln.startswith("| pve-gpu01 ") and "`sysctl`" in ln]
    assert len(sysctl) == len([f for f in fleet["pve-gpu01"]["findings"]
                               if f["id"] == "sysctl"]) - 1
    assert "| 2: net.core.rmem_max, net.core.wmem_max | 212992 | 16777216 |" in text
    assert "| pve-gpu02 | info | 0 | 0 | 0 | 0 | 1 |" in text


def test_markdown_escapes_pipes():
    item = {"id": "pcie_link_degraded", "severity": "high", "subject": "0000:01:00.0",
            "current": "x8 of x16", "expected": "x16",
            "remedy": "lspci -vv -s 0000:01:00.0 | grep -E 'LnkCap|LnkSta'",
            "reboot_required": False}
    doc = documents.host_document("h", {"findings": [item], "checks": {}})
    text = summary.render_markdown([doc])
    row = [ln for ln in text.splitlines() if "pcie_link_degraded" in ln][0]
    assert "\\| grep -E 'LnkCap\\|LnkSta'" in row
    assert len(re.findall(r"(?<!\\)\|", row)) == 9  # 8 columns, nothing split


def test_the_generation_time_is_in_the_summary(fleet):
    docs = [documents.host_document(h, a) for h, a in fleet.items()]
    text = summary.render_markdown(docs, "2025-06-01 10:00:00Z")
    assert "2025-06-01 10:00:00Z" in text
