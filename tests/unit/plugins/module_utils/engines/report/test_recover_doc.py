"""recover_doc: one host's gpu_recover report, the verdict first, per GPU its steps, the
containers stopped and started."""

import json

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import recover_doc

RECOVERED = {"root": "/", "check_mode": False, "asked": {"gpus": [], "reboot": False},
             "failure": None, "result": {
                 "changed": True, "reboot_needed": False, "reboot_reasons": [], "refused": [],
                 "problems": [],
                 "gpus": [{"address": "0000:04:00.0", "need": "reset", "action": "reset",
                           "result": "recovered", "reason": None, "stop": ["129"],
                           "evidence": ["driver recovery action Reset"],
                           "steps": [{"step": "reset", "outcome": "ok",
                                      "detail": "GPU 00000000:04:00.0 was successfully reset."}]}],
                 "containers": [{"vmid": "129", "running_before": True, "stopped": "shutdown",
                                 "started": True, "cuda": {"devices": 1, "error": None},
                                 "problem": None}]}}


def test_a_recovered_host():
    files = recover_doc.recover_files("gpu07", RECOVERED)
    assert sorted(files) == ["gpu07-recover.json", "gpu07-recover.md"]
    doc = json.loads(files["gpu07-recover.json"])
    assert doc["host"] == "gpu07" and doc["result"]["gpus"][0]["result"] == "recovered"
    md = files["gpu07-recover.md"]
    assert "**recovered: 0000:04:00.0**" in md
    assert "- reset: ok - GPU 00000000:04:00.0 was successfully reset." in md
    assert "| 129 | True | shutdown | True | 1 GPU(s) |" in md


def test_the_verdicts():
    marked = dict(RECOVERED, result=dict(RECOVERED["result"], reboot_needed=True,
                                         reboot_reasons=["0000:04:00.0: reset in_use: ..."]))
    assert recover_doc.verdict(marked).startswith(
        "needs the gated reboot (marked, not rebooted: gpuhost_recover_reboot is false)")
    refused = dict(RECOVERED, result=dict(RECOVERED["result"], refused=["x: VM 201"]))
    assert recover_doc.verdict(refused) == "refused: x: VM 201"
    nothing = dict(RECOVERED, result=dict(RECOVERED["result"], gpus=[]))
    assert recover_doc.verdict(nothing) == "nothing to do: no GPU needs a reset"
    assert recover_doc.verdict(dict(RECOVERED, failure="boom")) == "failed: boom"


def test_a_document_without_a_host_name_is_refused():
    try:
        recover_doc.recover_report_run({"report": RECOVERED, "dest": "/nonexistent"})
    except recover_doc.ReportError as exc:
        assert "lacks 'host'" in str(exc)
    else:
        raise AssertionError("no ReportError")
