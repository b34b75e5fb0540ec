"""recover_report: writes <host>-recover.json and .md, and nothing when they would not
change."""

from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.modules import recover_report

DOC = {"root": "/", "check_mode": False, "asked": {"gpus": [], "reboot": False},
       "failure": None, "result": {"gpus": [], "containers": [], "reboot_needed": False,
                                   "reboot_reasons": [], "refused": [], "problems": []}}


def test_it_writes_both_files_once(tmp_path):
    args = {"host": "gpu07", "report": DOC, "dest": str(tmp_path)}
    got = run_module(recover_report, args)
    assert got["changed"] and sorted(p.rsplit("/", 1)[1] for p in got["files"]) == [
        "gpu07-recover.json", "gpu07-recover.md"]
    assert "nothing to do" in (tmp_path / "gpu07-recover.md").read_text()
    assert run_module(recover_report, args)["changed"] is False


def test_a_report_that_is_no_mapping_is_refused(tmp_path):
    got = run_module(recover_report, {"host": "gpu07", "report": "x", "dest": str(tmp_path)})
    assert got["failed"]
