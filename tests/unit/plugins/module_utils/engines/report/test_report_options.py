"""report_options: the options of the report modules (audit_report, report_merge,
tune_report; each module and its action plugin take them from here) and their rules."""

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import report_options


def test_report_rules_tie_given_results_against_registered_hosts():
    rules = report_options.report_rules("audits")
    assert rules == {"mutually_exclusive": [["audits", "hosts"]],
                     "required_one_of": [["audits", "hosts"]],
                     "required_together": [["hosts", "result_var"]]}
    assert report_options.AUDIT_REPORT_RULES["mutually_exclusive"] == [["audits", "hosts"]]
    assert report_options.TUNE_REPORT_RULES["mutually_exclusive"] == [["results", "hosts"]]


@pytest.mark.parametrize("name,given", [("audit_report", "audits"),
                                        ("tune_report", "results")])
def test_report_specs_carry_the_registered_host_options(name, given):
    spec = getattr(report_options, name)()
    assert spec[given] == {"type": "dict"}
    assert spec["dest"]["required"] is True
    assert spec["hosts"] == {"type": "list", "elements": "str"}
    assert spec["result_var"] == {"type": "str"}


def test_report_merge_spec():
    spec = report_options.report_merge()
    assert spec["folders"] == {"type": "list", "elements": "path", "required": True}
    assert spec["stale_hours"]["default"] == 24.0
    assert "hosts" not in spec
