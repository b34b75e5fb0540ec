"""The hosts x checks matrix of index.html: columns grouped by subject."""

from ansible_collections.gpuhost.tuning.plugins.module_utils import audit, report
from ansible_collections.gpuhost.tuning.plugins.module_utils.output import page


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
