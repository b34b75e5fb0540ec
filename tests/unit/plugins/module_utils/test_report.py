"""report.py: the report files of a run and the audit modules (host_audit, audit_report,
host_capture) run as Ansible runs them; the rendering of each file is in output/test_*.py."""

import base64
import io
import json
import os
import re
import tarfile

import pytest
from fixtures import hosts
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.module_utils import audit, report
from ansible_collections.gpuhost.tuning.plugins.modules import (
    audit_report,
    host_audit,
    host_capture,
)


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
                          "index.html", "gpuhost.prom"}
    # the JSON keeps one entry per finding
    doc = json.loads(files["pve-gpu01.json"])
    assert len([f for f in doc["findings"] if f["id"] == "pcie_mrrs"]) == 16
    # a name that had to change carries a hash of the whole name; a safe one is itself
    assert re.match(r"^_evil_host-[0-9a-f]{10}$", report.safe_name("../evil/host"))
    assert report.safe_name("pve-gpu01.lab_2") == "pve-gpu01.lab_2"


# --- modules


def test_host_audit_module(tmp_path):
    hosts.seed_host(tmp_path)
    args = dict((k, v) for k, v in WANTED.items())
    args["root"] = str(tmp_path)
    result = run_module(host_audit, args, check_mode=True)
    assert result["changed"] is False and "failed" not in result
    assert result["worst"] == "critical"
    assert result["counts"]["high"] == len([f for f in result["audit"]["findings"]
                                            if f["severity"] == "high"])
    assert result["headline"].startswith("worst critical")
    assert "files_read" not in result
    recorded = run_module(host_audit, dict(args, record_files=True))
    assert recorded["files_read"]["/proc/sys/kernel/numa_balancing"] == "read"
    assert recorded["files_read"]["/var/lib/dkms"] == "list"


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


def test_host_capture_module_collect_and_write(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    hosts.vm_host(src)
    collected = run_module(host_capture, {"root": str(src), "sysctl": WANTED["sysctl"]})
    assert "failed" not in collected and collected["files"] > 20
    data = base64.b64decode(collected["archive"])
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        names = tar.getnames()
    assert ".gpuhost-capture.json" in names
    assert "sys/bus/pci/devices/0000:00:10.0" in names
    dest = tmp_path / "out" / "vm-capture.tar.gz"
    written = run_module(host_capture, {"archive": collected["archive"], "dest": str(dest)})
    assert written["changed"] is True and dest.read_bytes() == data
    again = run_module(host_capture, {"archive": collected["archive"], "dest": str(dest)})
    assert again["changed"] is False
    bad = run_module(host_capture, {"archive": "not base64!", "dest": str(dest)})
    assert bad["failed"] is True
