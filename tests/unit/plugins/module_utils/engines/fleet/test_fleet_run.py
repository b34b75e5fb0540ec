"""engines/fleet/fleet_run.py: the fleet checks run once per report over the documents (moved from
test_fleet_registry.py; the declarations are in test_base.py), ranked once, and taken off
again for a merge."""

import pytest
from fixtures import hosts

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.fleet import fleet_registry
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import report
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import fleet_findings
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.fleet import fleet_run


def _doc(host, driver, gpus=2):
    facts = {"nvidia": {"driver_version": driver}, "kernel": {"running": "6.8.12-9-pve"},
             "gpus": [{"address": "0000:%02x:00.0" % (i + 1), "vendor": "10de",
                       "device": "2bb5"} for i in range(gpus)]}
    low = {"id": "cpufreq_governor", "severity": "low", "subject": "cpu0", "current": "x",
           "expected": "y", "remedy": "r", "reboot_required": False}
    return {"host": host, "facts": facts, "findings": [low],
            "checks": {"fleet_drift": fleet_findings.fleet_checks()[0].host_cell()}}


def test_judge_adds_findings_fills_the_column_and_ranks_once():
    docs = [_doc("gpu01", "590.48.01"), _doc("gpu02", "590.48.01"),
            _doc("gpu03", "580.95.05")]
    fleet_run.judge(docs, fleet_findings.Context())
    odd = docs[2]
    # the medium drift finding ranks before the low one the host audit found
    assert [f["id"] for f in odd["findings"]] == ["fleet_drift", "cpufreq_governor"]
    assert odd["checks"]["fleet_drift"] == {
        "label": "Fleet drift", "status": "medium", "count": 1,
        "note": "against the 3 hosts of this report"}
    assert docs[0]["checks"]["fleet_drift"]["status"] == "ok"


def test_a_slice_runs_only_the_checks_that_need_no_other_host():
    docs = [_doc("gpu01", "590.48.01"), _doc("gpu02", "590.48.01"),
            _doc("gpu03", "580.95.05")]
    fleet_run.judge(docs, fleet_findings.Context(), whole_fleet=False)
    assert [f["id"] for f in docs[2]["findings"]] == ["cpufreq_governor"]
    assert docs[2]["checks"]["fleet_drift"]["status"] == "n/a"


def test_a_rule_giving_another_id_or_severity_fails_loudly(monkeypatch):
    item = fleet_registry.fleet_checks()[0]
    monkeypatch.setattr(item, "rule", lambda d, c: ({"gpu01": [{"id": item.id,
                                                               "severity": "low"}]}, {}))
    with pytest.raises(ValueError, match="not its id and one of its severities"):
        fleet_run.judge([_doc("gpu01", "590.48.01")], fleet_findings.Context())


def test_forget_gives_back_the_host_audit():
    docs = [_doc("gpu01", "590.48.01"), _doc("gpu02", "590.48.01"),
            _doc("gpu03", "580.95.05")]
    before = dict(docs[2], findings=list(docs[2]["findings"]),
                  checks=dict(docs[2]["checks"]))
    fleet_run.judge(docs, fleet_findings.Context())
    again = fleet_run.host_audit_of(docs[2])
    assert again["findings"] == before["findings"] and again["checks"] == before["checks"]


def test_audit_report_runs_each_fleet_check_once(tmp_path, monkeypatch):
    """Before the registry, audit_report ran fleet drift twice (once for the files, once
    for the metrics)."""
    root = tmp_path / "seed"
    root.mkdir()
    hosts.seed_host(root)
    one = audit.audit(str(root), dict(hosts.common_wanted(), host="gpu01"))
    calls = []
    expected = sorted(c.rule.__module__ for c in fleet_registry.fleet_checks())

    def counting(rule):
        return lambda d, c: calls.append(rule.__module__) or rule(d, c)

    for item in fleet_registry.fleet_checks():
        monkeypatch.setattr(item, "rule", counting(item.rule))
    report.audit_report_run({"audits": {"gpu01": one, "gpu02": one}, "dest": str(tmp_path),
                             "generated_at": "2026-01-01 00:00:00Z", "mrrs_size": 4096,
                             "write": True}, check_mode=False)
    assert sorted(calls) == expected
