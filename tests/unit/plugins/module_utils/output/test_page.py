"""output/page.py: index.html, self-contained and escaped (moved from test_report.py), and
its hosts x checks matrix with the columns grouped by subject."""

import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.checks import run as audit
from ansible_collections.gpuhost.tuning.plugins.module_utils.output import report
from ansible_collections.gpuhost.tuning.plugins.module_utils.output import documents, page


def test_every_column_is_in_one_subject_group():
    groups = page.column_groups()
    assert [g["label"] for g in groups] == ["GPU", "PCIe", "CPU", "Kernel and boot",
                                            "Containers and VMs", "Fleet"]
    shown = [c["key"] for g in groups for c in g["columns"]]
    assert sorted(shown) == sorted(check for check, _label, _ids in audit.CHECKS)
    listed = [key for _label, keys in page.GROUPS for key in keys]
    assert len(listed) == len(set(listed))
    assert [c["key"] for c in groups[-1]["columns"]] == ["fleet_drift"]


def test_a_column_in_no_group_still_shows_under_other(monkeypatch):
    monkeypatch.setattr(page, "GROUPS", page.GROUPS[1:])
    groups = page.column_groups()
    assert groups[-1]["label"] == page.OTHER and "gpu_driver" in [
        c["key"] for c in groups[-1]["columns"]]


def test_the_matrix_cells_follow_the_grouped_headings():
    doc = report.host_document("gpu01", {"findings": [], "checks": {
        "gpu_driver": {"label": "GPU driver", "status": "ok", "count": 0},
        "dkms": {"label": "DKMS", "status": "high", "count": 2}}})
    text = report.render_html([doc])
    matrix = text.split('<table class="matrix">')[1].split("</table>")[0]
    assert matrix.index(">GPU driver</span>") < matrix.index(">DKMS</span>")
    body = matrix.split("<tbody>")[1]
    assert body.index('title="GPU driver: ok"') < body.index('title="DKMS: high"')
    assert "word-break:break-all" not in text and "overflow-wrap:normal" in text


def test_html_is_self_contained_with_a_matrix_row_per_host(fleet):
    docs = [documents.host_document(h, a) for h, a in fleet.items()]
    html = page.render_html(docs, "now")
    assert "<script" not in html.lower()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    assert "<style>" in html
    matrix = html.split('<table class="matrix">')[1].split("</table>")[0]
    rows = re.findall(r'<td class="host"><a href="#host-([^"]+)">', matrix)
    assert rows == ["pve-gpu01", "h200-vm", "pve-gpu02"]  # worst first
    for host in fleet:
        assert 'id="host-%s"' % host in html
    # the seed's 8 GPUs and its root ports are in its GPU table, MRRS 512 marked bad
    assert html.count('<span class="bad">512</span>') == 16
    # ... and its 16 pcie_mrrs findings are one row: a count, the subjects on demand
    seed = html.split('id="host-pve-gpu01"')[1].split("<h2")[0]
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
    html = page.render_html([documents.host_document("<host>", {"findings": [item]})])
    assert "<b>x</b>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html
    assert "echo <script>" not in html
