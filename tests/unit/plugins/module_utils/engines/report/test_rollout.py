"""rollout: a play's ``serial`` and ``max_fail_percentage`` checked the way Ansible reads
them (a positive integer, ``"N%"`` from 1 to 100, a list of those; 0, negatives, ``[]``,
``"150%"``, text and bools refused before any host is touched), and the rollout summary:
every host of the play in order, done, stopped or not reached, with the driver change."""

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import files, rollout


@pytest.mark.parametrize("value,batches", [
    (1, [1]), ("2", [2]), ("25%", ["25%"]), ("100%", ["100%"]), ("1%", ["1%"]),
    ([1, "25%"], [1, "25%"]), (["3", 5], [3, 5]), ("007", [7]),
])
def test_batch_sizes_in_the_accepted_forms_are_what_ansible_batches_by(value, batches):
    assert rollout.serial_batches(value) == batches


@pytest.mark.parametrize("value", [
    0, -1, "0", "-1", [], [0], [1, -3], "0%", "101%", "150%", "12.5%", " 2", "2 ", "abc",
    "", None, 2.0, True, False, [True], {"a": 1}, [[1]], "[1, '25%']"])
def test_every_other_batch_size_is_refused_naming_it_and_the_forms(value):
    with pytest.raises(ValueError) as err:
        rollout.serial_batches(value)
    assert str(err.value).startswith("gpuhost_serial: ") and repr(value) in str(err.value)
    assert rollout.SERIAL_FORMS in str(err.value)


@pytest.mark.parametrize("value,number", [
    (0, 0), (100, 100), (12.5, 12.5), ("25", 25), ("25%", 25), ("0", 0), ("7.5", 7.5)])
def test_max_fail_percentage_is_a_number_from_0_to_100(value, number):
    assert rollout.max_fail_percentage(value) == number


@pytest.mark.parametrize("value", [
    -1, 100.5, 150, "150", "abc", "", None, True, False, [0], {"a": 1}, float("nan"),
    float("inf"), "-5"])
def test_any_other_max_fail_percentage_is_refused(value):
    with pytest.raises(ValueError) as err:
        rollout.max_fail_percentage(value)
    assert "gpuhost_max_fail_percentage: %r is not" % (value,) in str(err.value)
    assert rollout.MAX_FAIL_FORMS in str(err.value)


def test_summary_keeps_play_order_and_names_who_was_not_reached():
    results = {"gpu02": {"status": "stopped", "reason": "gate: headers missing",
                         "driver": {"before": "580.95.05", "after": None}},
               "gpu01": {"status": "done", "reason": "",
                         "driver": {"before": "580.95.05", "after": "590.48.01"}},
               "extra": {"status": "done"}, "gpu04": {"msg": "unreachable"}}
    doc = rollout.summarize(["gpu01", "gpu02", "gpu03", "gpu04", "gpu01"], results, "upgrade")
    assert [(r["host"], r["status"]) for r in doc["hosts"]] == [
        ("gpu01", "done"), ("gpu02", "stopped"), ("gpu03", "not reached"),
        ("gpu04", "not reached"), ("extra", "done")]
    assert doc["counts"] == {"done": 2, "stopped": 1, "not reached": 2}
    assert doc["finished"] is False
    out = rollout.lines(doc)
    assert out[0] == "upgrade: 2 done, 1 stopped, 2 not reached"
    assert out[1] == "gpu01  done (driver 580.95.05 -> 590.48.01)"
    assert out[2] == "gpu02  stopped (driver 580.95.05 -> ?): gate: headers missing"


def test_a_finished_rollout():
    doc = rollout.summarize(["a"], {"a": {"status": "done"}})
    assert doc["finished"] and rollout.headline(doc) == "rollout: 1 done, 0 stopped, 0 not " \
                                                        "reached"


def test_a_result_with_an_unknown_status_is_unknown_naming_the_raw_status():
    results = {"a": {"status": "Done", "reason": "typo"}, "b": {"msg": "unreachable"}}
    doc = rollout.summarize(["a", "b", "c"], results, "t")
    assert doc["hosts"][0] == {"host": "a", "status": "unknown", "raw_status": "Done",
                               "reason": "the run recorded status 'Done', which is none of "
                                         "done, stopped: typo"}
    assert [r["status"] for r in doc["hosts"][1:]] == ["not reached", "not reached"]
    assert doc["counts"] == {"done": 0, "stopped": 0, "not reached": 2, "unknown": 1}
    assert doc["finished"] is False
    assert rollout.headline(doc) == "t: 0 done, 0 stopped, 2 not reached, 1 unknown"
    assert "| a | unknown | the run recorded status 'Done'" in rollout.render_markdown(doc)
    # without one, the counts are as they always were
    assert "unknown" not in rollout.summarize(["a"], {"a": {"status": "done"}})["counts"]


def test_report_run_refuses_a_name_of_the_fleet_files_writing_nothing(tmp_path):
    with pytest.raises(files.ReportError, match="name 'summary' cannot be used: its files "
                                                "would replace or pose as the fleet files"):
        rollout.report_run({"hosts": ["a"], "results": {}, "dest": str(tmp_path / "r"),
                            "name": "summary", "title": "t", "generated_at": None})
    assert not (tmp_path / "r").exists()
