"""apply_check: every refusal of a host, in order, and the apply report."""

import json

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.plan import apply_check
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.plan import changeset
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (
    ValidationError,
)

NOW = apply_check.created_epoch("2026-12-05T12:00:00Z")
DAY = 24 * 3600.0
GPU = "0000:01:00.0"


def row(part, item, before, after, status="planned", note=None):
    return {"part": part, "item": item, "before": before, "after": after, "status": status,
            "note": note}


def tune_result(numa="1", status="planned", failed=False, failures=None):
    rows = [row("sysctl", "kernel.numa_balancing", numa, "0", status),
            row("pcie", GPU + " endpoint MRRS", 512, 4096, status),
            row("cpuidle", "C2 (800 us)", "disabled on CPUs none",
                "disabled on CPUs 0-127", status)]
    if numa == "0":
        rows[0]["status"] = "ok"
    out = {"rows": rows, "changed": True, "failed": failed}
    if failures:
        out["failures"] = failures
    return out


def entry(result, refused=None):
    changes = [] if refused else changeset.changes(result)
    return {"changes": changes, "fingerprint": changeset.fingerprint(changes),
            "group": changeset.group_key(changes), "refused": refused, "reboot": False}


def plan(created="2026-12-05T10:00:00Z", version="0.2.0", **hosts):
    return {"schema": "gpuhost.tuning/plan/1", "collection_version": version,
            "created_at": created, "created_by": "ops@ctl", "digest": "ab" * 32,
            "hosts": hosts or {"gpu1": entry(tune_result())}}


def check(doc, host="gpu1", now_result=None, now=NOW, max_age=DAY, version="0.2.0"):
    now_result = tune_result() if now_result is None else now_result
    return apply_check.check_host(doc, host, now_result, now, max_age, version)


def test_the_plan_holds_when_the_host_would_change_exactly_as_planned():
    assert check(plan()) is None
    # the same change from another run's rows order and note
    again = tune_result()
    again["rows"].reverse()
    again["rows"][0]["note"] = "would write"
    assert check(plan(), now_result=again) is None


def test_another_collection_version_is_refused_first():
    doc = plan(version="0.2.0", created="2026-12-01T00:00:00Z")   # also too old
    assert check(doc, host="nothere", version="0.3.0") == (
        "the plan was made by gpuhost.tuning 0.2.0, this is 0.3.0: make a new plan")


def test_a_plan_older_than_the_max_age_is_refused_second():
    doc = plan(created="2026-12-04T10:00:00Z")   # 26 h before NOW
    assert check(doc, host="nothere") == (
        "the plan is 26 h old, gpuhost_plan_max_age is 24 h: make a new plan")
    assert check(doc, max_age=30 * 3600.0) is None
    assert "is 1.5 h old, gpuhost_plan_max_age is 0.5 h" in check(
        plan(created="2026-12-05T10:30:00Z"), max_age=1800.0)


def test_a_created_at_that_is_no_utc_time_is_refused():
    assert "created_at 'yesterday' is no UTC time" in check(plan(created="yesterday"))
    for text in ("2026-12-05T10:00:00Z", "2026-12-05T10:00:00+00:00",
                 "2026-12-05 10:00:00.123456", "2026-12-05T10:00:00"):
        assert apply_check.created_epoch(text) == NOW - 2 * 3600, text
    assert apply_check.created_epoch("2026-13-05T10:00:00Z") is None


def test_a_host_not_in_the_plan_is_refused_third():
    assert check(plan(), host="gpu9", now_result={}) == (
        "gpu9 is not in the plan: make a new plan that covers it")


def test_a_host_the_plan_refused_is_refused_fourth():
    doc = plan(gpu1=entry(None, refused="guest target: host_tune refuses a VM"))
    assert check(doc, now_result={}) == (
        "the plan refused gpu1: guest target: host_tune refuses a VM")


def test_a_host_host_tune_refuses_now_is_refused_fifth():
    failed = tune_result(failed=True, failures=["snapshot: cannot write /var/lib/gpuhost"])
    assert check(plan(), now_result=failed) == (
        "gpu1 cannot be tuned now: snapshot: cannot write /var/lib/gpuhost")
    assert "no check-mode result" in check(plan(), now_result="not a result")


def test_a_host_whose_state_moved_is_refused_last_naming_the_value():
    text = check(plan(), now_result=tune_result(numa="0"))
    assert text.startswith("gpu1: ")
    assert "kernel.numa_balancing is now 0 (planned 1 -> 0)" in text


def test_a_moved_host_names_the_first_lines_and_counts_the_rest():
    planned = {"rows": [row("sysctl", "vm.s%d" % i, "1", "2") for i in range(6)]}
    now = {"rows": [row("sysctl", "vm.s%d" % i, "3", "2") for i in range(6)]}
    text = check(plan(gpu1=entry(planned)), now_result=now)
    assert text.count("state moved since the plan") == apply_check.MOVED_LINES
    assert text.endswith("; and 3 more")


def test_a_host_that_needs_no_change_now_is_not_refused_and_has_nothing_to_do():
    done = tune_result(numa="0")
    for r in done["rows"]:
        r["status"] = "ok"
    assert apply_check.nothing_to_do(done) and check(plan(), now_result=done) is None
    assert not apply_check.nothing_to_do(tune_result())
    assert not apply_check.nothing_to_do(tune_result(failed=True, failures=["x"]))
    rep = apply_check.report(plan(), {"gpu1": {"status": "nothing to do"}})
    row = rep["hosts"]["gpu1"]
    assert row["status"] == "nothing to do" and row["reason"] == apply_check.NOTHING_TO_DO
    assert row["done"] is None and rep["finished"] is True


def test_hours_prints_whole_hours_plainly():
    assert [apply_check.hours(s) for s in (DAY, 5400, 26 * 3600 + 100)] == ["24", "1.5", "26"]


def test_the_report_says_planned_and_done_per_host():
    done = tune_result(status="changed")
    other = tune_result(status="changed")
    other["rows"].append(row("sysctl", "vm.swappiness", "60", "10", "changed"))
    doc = plan(gpu1=entry(tune_result()), gpu2=entry(tune_result()),
               gpu3=entry(tune_result()), gpu4=entry(tune_result()),
               gpu5=entry(tune_result()), gpu6=entry(None, refused="a guest"),
               gpu7=entry(tune_result()))
    results = {"gpu1": {"status": "applied", "tune": done},
               "gpu2": {"status": "refused", "reason": "gpu2: state moved"},
               "gpu3": {"status": "failed", "reason": "pcie: setpci failed", "tune": done},
               "gpu4": {"status": "applied", "tune": other},
               "gpu6": {"status": "refused", "reason": "the plan refused gpu6: a guest"},
               "gpu7": {"status": "skipped", "reason": "left out by gpuhost_plan_skip"}}
    rep = apply_check.report(doc, results, not_in_plan=["gpu8", "gpu1"],
                             generated_at="2026-12-05 12:00:00Z")
    status = dict((h, r["status"]) for h, r in rep["hosts"].items())
    assert status == {"gpu1": "applied", "gpu2": "refused", "gpu3": "failed",
                      "gpu4": "differs", "gpu5": "not reached", "gpu6": "refused",
                      "gpu7": "skipped", "gpu8": "not in the plan"}
    gpu1 = rep["hosts"]["gpu1"]
    assert gpu1["done"] == gpu1["planned"] and gpu1["moved"] == [] and gpu1["reason"] is None
    assert gpu1["done_summary"] == gpu1["planned_summary"]
    assert "kernel.numa_balancing 1 -> 0" in gpu1["planned_summary"]
    assert rep["hosts"]["gpu2"]["done"] is None
    assert "not in the plan: sysctl vm.swappiness 60 -> 10" in rep["hosts"]["gpu4"]["reason"]
    assert rep["counts"] == {"refused": 2, "failed": 1, "differs": 1, "applied": 1,
                             "nothing to do": 0, "skipped": 1, "not reached": 1,
                             "not in the plan": 1}
    assert rep["finished"] is False and rep["plan_digest"] == "ab" * 32
    assert json.loads(apply_check.json_text(rep)) == rep
    lines = apply_check.lines(rep)
    assert lines[0] == ("apply of plan abababababab: 2 refused, 1 failed, 1 differs, "
                        "1 applied, 1 skipped, 1 not reached, 1 not in the plan")
    assert "gpu2: refused: gpu2: state moved" in lines
    markdown = apply_check.markdown(rep)
    assert markdown.startswith("# Apply of plan " + "ab" * 32 + "\n")
    table = [line for line in markdown.splitlines() if line.startswith("| gpu")]
    assert [line.split(" | ")[0][2:] for line in table] == [
        "gpu2", "gpu6", "gpu3", "gpu4", "gpu1", "gpu7", "gpu5", "gpu8"]
    assert "| gpu1 | applied | 3 | 3 |  |" in markdown
    assert "## gpu4 (differs)" in markdown and "Differs from the plan:" in markdown


def test_a_finished_report_has_no_host_left():
    doc = plan()
    rep = apply_check.report(doc, {"gpu1": {"status": "applied",
                                            "tune": tune_result(status="changed")}})
    assert rep["finished"] is True and rep["counts"]["applied"] == 1
    checked = apply_check.report(doc, {}, check_mode=True)
    assert apply_check.headline(checked) == (
        "apply of plan abababababab (check mode, nothing changed): 1 not reached")


def test_the_options_rules_refuse_a_max_age_of_zero_and_an_empty_plan():
    assert set(apply_check.options()) >= {"step", "plan", "max_age", "skip", "hosts", "dest"}
    apply_check.rules({"step": "load", "plan": "plan-1.json", "max_age": 24.0})
    for bad in ({"step": "check", "max_age": 0}, {"step": "check", "max_age": -1.0},
                {"step": "load", "plan": " ", "max_age": 1.0}):
        with pytest.raises(ValidationError):
            apply_check.rules(bad)
