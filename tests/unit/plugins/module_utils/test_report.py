"""Report rendering and module audit_report, run as Ansible runs it (host_audit,
host_capture and reboot_report have their own files in tests/unit/plugins/modules/)."""

import json
import os
import re

import pytest
from fixtures import hosts
from fixtures.reboot import reboot_doc as _reboot_doc
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.module_utils import audit, report
from ansible_collections.gpuhost.tuning.plugins.modules import audit_report


WANTED = hosts.common_wanted()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    audits = {}
    for name, build in (("pve-gpu01", hosts.seed_host), ("pve-gpu02", hosts.tuned_host),
                        ("h200-vm", hosts.vm_host)):
        root = tmp_path_factory.mktemp(name)
        build(root)
        audits[name] = audit.audit(str(root), dict(WANTED, host=name))
    return audits


def test_host_document_schema(fleet):
    doc = report.host_document("pve-gpu01", fleet["pve-gpu01"])
    assert doc["schema"] == 1 and doc["host"] == "pve-gpu01"
    assert set(doc) >= {"schema", "host", "collected_at", "facts", "findings"}
    assert set(doc["facts"]) >= {"kernel", "cpu", "sysctl", "gpus", "nvidia", "char_devices",
                                 "dkms", "lxc"}
    assert "findings" not in doc["facts"]
    assert json.loads(report.render_json(doc)) == doc


def test_markdown_counts_and_every_finding(fleet):
    docs = [report.host_document(h, a) for h, a in fleet.items()]
    text = report.render_markdown(docs, "2025-06-01 10:00:00Z")
    lines = text.splitlines()
    # hosts worst first with their severity counts
    rows = [ln for ln in lines if ln.startswith("| pve-") or ln.startswith("| h200")]
    assert rows[0].startswith("| pve-gpu01 | critical | 1 | 21 |")
    finding_rows = [ln for ln in lines if ln.count("|") >= 9 and "`" in ln]
    # identical findings on several subjects of a host are one row listing them
    assert len(finding_rows) == sum(len(report.group_findings(a["findings"]))
                                    for a in fleet.values())
    mrrs = [ln for ln in finding_rows if "`pcie_mrrs`" in ln]
    assert len(mrrs) == 1 and mrrs[0].startswith("| pve-gpu01 | high | `pcie_mrrs` | 16: ")
    for item in fleet["pve-gpu01"]["findings"]:
        if item["id"] == "pcie_mrrs":
            assert item["subject"] in mrrs[0]
    assert "setpci -s <subject> CAP_EXP+8.w=5000:7000" in mrrs[0]
    # sysctl keys are one row each, except two off by the same values
    sysctl = [ln for ln in finding_rows if ln.startswith("| pve-gpu01 ") and "`sysctl`" in ln]
    assert len(sysctl) == len([f for f in fleet["pve-gpu01"]["findings"]
                               if f["id"] == "sysctl"]) - 1
    assert "| 2: net.core.rmem_max, net.core.wmem_max | 212992 | 16777216 |" in text
    assert "| pve-gpu02 | info | 0 | 0 | 0 | 0 | 1 |" in text


def test_grouping_keeps_order_and_only_merges_identical_findings():
    def item(subject, current="512 bytes", fid="pcie_mrrs", detail=None):
        return {"id": fid, "severity": "high", "subject": subject, "current": current,
                "expected": "4096 bytes", "remedy": "setpci -s %s x; tune" % subject,
                "reboot_required": False, "detail": detail}
    rows = report.group_findings([item("a", detail="GPU"), item("b", detail="bridge"),
                                  item("c", current="256 bytes"), item("d", fid="other")])
    assert [r["subjects"] for r in rows] == [["a", "b"], ["c"], ["d"]]
    assert rows[0]["remedy"] == "setpci -s <subject> x; tune"
    assert rows[0]["details"] == [("a", "GPU"), ("b", "bridge")]
    assert rows[1]["remedy"] == "setpci -s c x; tune"


def test_markdown_escapes_pipes():
    item = {"id": "pcie_link_degraded", "severity": "high", "subject": "0000:01:00.0",
            "current": "x8 of x16", "expected": "x16",
            "remedy": "lspci -vv -s 0000:01:00.0 | grep -E 'LnkCap|LnkSta'",
            "reboot_required": False}
    doc = report.host_document("h", {"findings": [item], "checks": {}})
    text = report.render_markdown([doc])
    row = [ln for ln in text.splitlines() if "pcie_link_degraded" in ln][0]
    assert "\\| grep -E 'LnkCap\\|LnkSta'" in row
    assert len(re.findall(r"(?<!\\)\|", row)) == 9  # 8 columns, nothing split


def test_html_is_self_contained_with_a_matrix_row_per_host(fleet):
    docs = [report.host_document(h, a) for h, a in fleet.items()]
    page = report.render_html(docs, "now")
    assert "<script" not in page.lower()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    assert "<style>" in page
    matrix = page.split('<table class="matrix">')[1].split("</table>")[0]
    rows = re.findall(r'<td class="host"><a href="#host-([^"]+)">', matrix)
    assert rows == ["pve-gpu01", "h200-vm", "pve-gpu02"]  # worst first
    for host in fleet:
        assert 'id="host-%s"' % host in page
    # the seed's 8 GPUs and its root ports are in its GPU table, MRRS 512 marked bad
    assert page.count('<span class="bad">512</span>') == 16
    # ... and its 16 pcie_mrrs findings are one row: a count, the subjects on demand
    seed = page.split('id="host-pve-gpu01"')[1].split("<h2")[0]
    findings = seed.split('<table class="findings">')[1].split("</table>")[0]
    mrrs = [r for r in findings.split("<tr>") if ">pcie_mrrs<" in r]
    assert len(mrrs) == 1
    assert '<details class="subjects"><summary>16 subjects</summary>' in mrrs[0]
    assert mrrs[0].count("<div>0000:") == 16 and "bridge above 0000:01:00.0" in mrrs[0]
    assert "Findings (%d in " % len(fleet["pve-gpu01"]["findings"]) in seed
    assert 'class="s-critical"' in matrix


def test_html_escapes_text():
    item = {"id": "sysctl", "severity": "low", "subject": "<b>x</b>", "current": "a&b",
            "expected": "\"q\"", "remedy": "echo <script>", "reboot_required": False}
    page = report.render_html([report.host_document("<host>", {"findings": [item]})])
    assert "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt;" in page
    assert "echo <script>" not in page


def test_report_files_names(fleet):
    files = report.report_files(fleet, "now")
    assert set(files) == {"pve-gpu01.json", "pve-gpu02.json", "h200-vm.json", "summary.md",
                          "index.html", "gpuhost.prom"}
    # the JSON keeps one entry per finding
    doc = json.loads(files["pve-gpu01.json"])
    assert len([f for f in doc["findings"] if f["id"] == "pcie_mrrs"]) == 16
    # a name that had to change carries a hash of the whole name; a safe one is itself
    assert re.match(r"^_evil_host-[0-9a-f]{10}$", report.safe_name("../evil/host"))
    assert report.safe_name("pve-gpu01.lab_2") == "pve-gpu01.lab_2"


@pytest.mark.parametrize("names", [
    ("a/b", "a_b", "a\\b", "a\x00b", "a\nb"), (".x", "x", "..x"), ("", "_", "."),
    ("h" * 300, "h" * 301), ("gpu\udcff", "gpu\udcfe")])
def test_host_names_that_had_to_change_never_share_a_file(names):
    files = [report.safe_name(n) for n in names]
    assert len(set(files)) == len(names), files
    for name in files:
        assert "/" not in name and not name.startswith(".") and len(name.encode(
            "utf-8", "backslashreplace")) <= 211


# --- modules


def test_audit_report_module_writes_once(tmp_path, fleet):
    dest = tmp_path / "reports"
    args = {"audits": fleet, "dest": str(dest), "generated_at": "fixed"}
    first = run_module(audit_report, args)
    assert first["changed"] is True and "failed" not in first
    assert sorted(os.listdir(dest)) == ["gpuhost.prom", "h200-vm.json", "index.html",
                                        "pve-gpu01.json", "pve-gpu02.json", "summary.md"]
    assert first["metrics"]["h200-vm"].count('host="h200-vm"') > 5
    assert 'host="pve-gpu01"' not in first["metrics"]["h200-vm"]
    doc = json.loads((dest / "pve-gpu01.json").read_text())
    assert doc["schema"] == 1 and doc["findings"][0]["id"] == "dkms_missing_for_kernel"
    again = run_module(audit_report, args)
    assert again["changed"] is False and again["written"] == []
    assert first["summary"]["pve-gpu01"]["worst"] == "critical"


def test_audit_report_check_mode_writes_nothing(tmp_path, fleet):
    dest = tmp_path / "reports"
    result = run_module(audit_report, {"audits": fleet, "dest": str(dest)}, check_mode=True)
    assert result["changed"] is True and not dest.exists()


def test_audit_report_rejects_missing_audit(tmp_path):
    result = run_module(audit_report, {"audits": {"gpu9": {"msg": "unreachable"}},
                                       "dest": str(tmp_path)})
    assert result["failed"] is True and "gpu9" in result["msg"]


def test_reboot_files_json_keeps_the_document_and_markdown_reads_it():
    files = report.reboot_files("gpu07", _reboot_doc())
    assert sorted(files) == ["gpu07-reboot.json", "gpu07-reboot.md"]
    assert list(json.loads(files["gpu07-reboot.json"])) == list(_reboot_doc())
    md = files["gpu07-reboot.md"].splitlines()
    assert md[0] == "# gpu07: reboot_verify FAILED"
    assert "**Stopped at:** Gate: headers: install x" in md
    assert "| running kernel | 6.8.12-9-pve | - |" in md
    assert "Reboot: not reached (required: True)" in md
    assert "- DKMS modules nvidia; for the target: nothing" in md
    assert "- next boot (proxmox-boot-tool, trial): already set" in md
    assert "- skipped: apt (root /srv)" in md
    assert "## Boot configuration" not in md
    assert "| kernel | pending | running a, expected b |" in md
    assert "| 129 | True | False | False | c 509:* rwm | c 504:* rwm | True | 8 |  |" in md


def test_reboot_markdown_of_a_passed_run_without_upgrade():
    md = report.render_reboot_markdown(_reboot_doc(
        result="passed", failure=None, upgrade=None, checks=[], containers=[]))
    assert md.startswith("# gpu07: reboot_verify PASSED\n\n| | before | after |\n")
    assert "Stopped at" not in md and "## Kernel upgrade" not in md and "## Checks" not in md
