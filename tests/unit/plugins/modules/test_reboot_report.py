"""Module reboot_report: one host's reboot_verify report written once, in check mode not at
all, and a document or folder it cannot use named (the renderer's own tests are in
test_report.py; the document is tests/fixtures/reboot.py)."""

from fixtures.reboot import reboot_doc
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.modules import reboot_report


def test_reboot_report_writes_once_and_says_what_is_wrong(tmp_path):
    dest = tmp_path / "reports"
    args = {"host": "gpu07", "report": reboot_doc(), "dest": str(dest)}
    planned = run_module(reboot_report, args, check_mode=True)
    assert planned["changed"] and not dest.exists()
    first = run_module(reboot_report, args)
    assert first["written"] == [str(dest / "gpu07-reboot.json"), str(dest / "gpu07-reboot.md")]
    assert (dest / "gpu07-reboot.md").read_text().startswith("# gpu07: reboot_verify FAILED")
    again = run_module(reboot_report, args)
    assert again["changed"] is False and again["written"] == []
    doc = reboot_doc()
    del doc["after"]
    lacking = run_module(reboot_report, dict(args, report=doc))
    assert lacking["failed"] and lacking["msg"] == ("reboot_report: the report document "
                                                    "lacks 'after'")
    (tmp_path / "a-file").write_text("")
    blocked = run_module(reboot_report, dict(args, dest=str(tmp_path / "a-file")))
    assert blocked["failed"] and blocked["msg"].startswith(
        "reboot_report: cannot write reports in %s: " % (tmp_path / "a-file"))
    assert blocked["msg"].endswith("(pick a writable folder with gpuhost_report_dir)")
