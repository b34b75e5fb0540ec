"""output/reboot.py: the reboot_verify report, ``<host>-reboot.json`` and its Markdown (moved
from test_report.py, with the module that writes them)."""

import json

from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.module_utils.output import reboot
from ansible_collections.gpuhost.tuning.plugins.modules import reboot_report


def _reboot_doc(**over):
    doc = {
        "host": "gpu07", "result": "failed", "failure": "Gate: headers: install x",
        "root": "/", "asked": {"reboot": True},
        "before": {"running_kernel": "6.8.12-9-pve", "next_boot_kernel": "6.8.12-9-pve",
                   "cmdline": "root=ZFS=rpool/ROOT/pve-1 boot=zfs", "audit": "2 critical"},
        "upgrade": {"target": "6.14.11-5-bpo12-pve", "packages": ["a", "b"],
                    "dkms_modules": ["nvidia"], "dkms": [], "next_boot_method": "proxmox-boot-tool",
                    "trial": True, "next_boot_commands": [], "skipped": ["apt (root /srv)"]},
        "boot_config": None,
        "reboot": {"required": True, "expected_kernel": None, "rebooted": False,
                   "note": "not reached"},
        "after": {"running_kernel": None, "cmdline": None, "audit": None},
        "checks": [{"name": "kernel", "status": "pending", "detail": "running a, expected b"}],
        "containers": [{"vmid": 129, "gpu": True, "running_before": False, "onboot": False,
                        "rules_added": ["c 509:* rwm"], "rules_removed": ["c 504:* rwm"],
                        "started": True, "gpus": 8, "problems": []}],
        "pin": None,
    }
    doc.update(over)
    return doc


def test_reboot_files_json_keeps_the_document_and_markdown_reads_it():
    files = reboot.reboot_files("gpu07", _reboot_doc())
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
    md = reboot.render_reboot_markdown(_reboot_doc(
        result="passed", failure=None, upgrade=None, checks=[], containers=[]))
    assert md.startswith("# gpu07: reboot_verify PASSED\n\n| | before | after |\n")
    assert "Stopped at" not in md and "## Kernel upgrade" not in md and "## Checks" not in md


def test_reboot_report_writes_once_and_says_what_is_wrong(tmp_path):
    dest = tmp_path / "reports"
    args = {"host": "gpu07", "report": _reboot_doc(), "dest": str(dest)}
    planned = run_module(reboot_report, args, check_mode=True)
    assert planned["changed"] and not dest.exists()
    first = run_module(reboot_report, args)
    assert first["written"] == [str(dest / "gpu07-reboot.json"), str(dest / "gpu07-reboot.md")]
    assert (dest / "gpu07-reboot.md").read_text().startswith("# gpu07: reboot_verify FAILED")
    again = run_module(reboot_report, args)
    assert again["changed"] is False and again["written"] == []
    doc = _reboot_doc()
    del doc["after"]
    lacking = run_module(reboot_report, dict(args, report=doc))
    assert lacking["failed"] and lacking["msg"] == ("reboot_report: the report document "
                                                    "lacks 'after'")
    (tmp_path / "a-file").write_text("")
    blocked = run_module(reboot_report, dict(args, dest=str(tmp_path / "a-file")))
    assert blocked["failed"] and blocked["msg"].startswith(
        "reboot_report: cannot write reports in %s: " % (tmp_path / "a-file"))
    assert blocked["msg"].endswith("(pick a writable folder with gpuhost_report_dir)")
