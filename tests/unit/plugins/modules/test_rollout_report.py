"""Module rollout_report: done / stopped (why) / not reached per host of a rolling run."""

import json

from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import rollout
from ansible_collections.gpuhost.tuning.plugins.modules import rollout_report

HOSTS = ["gpu1", "gpu2", "gpu3"]
WHY = "Gate: headers for kernel 6.14.11-5-bpo12-pve not found | install the headers"


def test_hosts_without_a_result_are_not_reached(tmp_path):
    args = {"hosts": HOSTS, "dest": str(tmp_path / "reports"), "title": "reboot_verify",
            "generated_at": "fixed",
            "results": {"gpu1": {"status": "done", "reason": None},
                        "gpu2": {"status": "stopped", "reason": WHY}}}
    result = run_module(rollout_report, args)
    assert "failed" not in result and result["changed"] is True
    assert [(h["host"], h["status"]) for h in result["hosts"]] == [
        ("gpu1", "done"), ("gpu2", "stopped"), ("gpu3", "not reached")]
    assert result["counts"] == {"done": 1, "stopped": 1, "not reached": 1}
    assert result["finished"] is False
    assert result["lines"][0] == "reboot_verify: 1 done, 1 stopped, 1 not reached"
    assert result["lines"][2] == "gpu2  stopped: " + WHY
    md = (tmp_path / "reports" / "rollout.md").read_text()
    assert "| gpu2 | stopped | Gate: headers for kernel 6.14.11-5-bpo12-pve not found \\| " \
           "install the headers |" in md
    assert "run the same command again" in md
    doc = json.loads((tmp_path / "reports" / "rollout.json").read_text())
    assert doc["hosts"][2] == {"host": "gpu3", "status": "not reached", "reason": None}
    again = run_module(rollout_report, args)
    assert again["changed"] is False


def test_all_done_is_finished_and_check_mode_writes_nothing(tmp_path):
    done = dict((h, {"status": "done"}) for h in HOSTS)
    doc = rollout.summarize(HOSTS, done, "tune")
    assert doc["finished"] is True and "run the same command" not in \
        rollout.render_markdown(doc)
    result = run_module(rollout_report, {"hosts": HOSTS, "results": done,
                                         "dest": str(tmp_path / "r")}, check_mode=True)
    assert result["changed"] is True and not (tmp_path / "r").exists()


def test_a_bad_name_is_refused(tmp_path):
    result = run_module(rollout_report, {"hosts": HOSTS, "results": {}, "dest": str(tmp_path),
                                         "name": "../evil"})
    assert result["failed"] is True and "plain file name" in result["msg"]
