"""report.py: the report files of a run and module audit_report run as Ansible runs it
(host_audit, host_capture and reboot_report have their own files in
tests/unit/plugins/modules/; the rendering of each file is in output/test_*.py)."""

import json
import os
import re

import pytest
from fixtures import hosts
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import report
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


def test_report_files_names(fleet):
    files = report.report_files(fleet, "now")
    assert set(files) == {"pve-gpu01.json", "pve-gpu02.json", "h200-vm.json", "summary.md",
                          "index.html", "gpuhost.prom", "pve-gpu01.html", "pve-gpu02.html",
                          "h200-vm.html"}
    # the JSON keeps one entry per finding
    doc = json.loads(files["pve-gpu01.json"])
    assert len([f for f in doc["findings"] if f["id"] == "pcie_mrrs"]) == 16
    # a name that had to change carries a hash of the whole name; a safe one is itself
    assert re.match(r"^_evil_host-[0-9a-f]{10}$", report.safe_name("../evil/host"))
    assert report.safe_name("pve-gpu01.lab_2") == "pve-gpu01.lab_2"


# --- modules


def test_audit_report_module_writes_once(tmp_path, fleet):
    dest = tmp_path / "reports"
    args = {"audits": fleet, "dest": str(dest), "generated_at": "2026-12-02 07:00:00Z"}
    first = run_module(audit_report, args)
    assert first["changed"] is True and "failed" not in first
    assert sorted(os.listdir(dest)) == ["gpuhost.prom", "h200-vm.html", "h200-vm.json",
                                        "index.html", "pve-gpu01.html", "pve-gpu01.json",
                                        "pve-gpu02.html", "pve-gpu02.json", "summary.md"]
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
