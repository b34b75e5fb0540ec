"""engines/report/reboot.py: the reboot_verify report, ``<host>-reboot.json`` and its Markdown (the
module that writes them: tests/unit/plugins/modules/test_reboot_report.py)."""

import json

from fixtures.reboot import reboot_doc as _reboot_doc

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import reboot


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
