"""How the audit_report action plugin reads each host's registered result
(``report.registered_audits``; the plugin itself runs in tests/integration/test_audit_playbook.py,
not imported here: importing controller code changes how modules warn in this process)."""

import pytest
from fixtures import hosts
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import report
from ansible_collections.gpuhost.tuning.plugins.modules import audit_report


@pytest.fixture(scope="module")
def seed_audit(tmp_path_factory):
    root = tmp_path_factory.mktemp("seed")
    hosts.seed_host(root)
    return audit.audit(str(root), dict(hosts.common_wanted(), host="gpu01"))


def test_reads_each_listed_host_and_only_those(seed_audit):
    stored = {"gpu01": {"res": {"audit": seed_audit, "changed": False}},
              "gpu02": {"res": {"audit": seed_audit}},
              "gpu03": {"res": {"audit": seed_audit}}}
    got = report.registered_audits(stored.get, ["gpu01", "gpu03"], "res")
    assert sorted(got) == ["gpu01", "gpu03"] and got["gpu01"] is seed_audit


def test_host_without_the_result_is_reported_as_failed(seed_audit):
    stored = {"gpu01": {"res": {"audit": seed_audit}},
              "gpu02": {"res": {"msg": "unreachable", "failed": True}},
              "gpu03": {"other": 1}}
    got = report.registered_audits(stored.get, ["gpu01", "gpu02", "gpu03", "gpu04"], "res")
    assert got["gpu01"] is seed_audit
    assert got["gpu02"] == {"status": "failed", "error": "unreachable"}
    assert got["gpu03"]["status"] == got["gpu04"]["status"] == "failed"


def test_no_host_with_the_variable_fails_naming_it(seed_audit):
    stored = {"gpu01": {"other": 1}, "gpu02": {}}
    with pytest.raises(report.ReportError) as err:
        report.registered_audits(stored.get, ["gpu01", "gpu02"], "res")
    assert "'res' of any host (gpu01, gpu02)" in str(err.value)
    assert "nothing was written" in str(err.value)


def test_module_run_directly_refuses_hosts(tmp_path):
    result = run_module(audit_report, {"hosts": ["gpu01"], "result_var": "res",
                                       "dest": str(tmp_path)})
    assert result["failed"] is True and "pass audits" in result["msg"]
    assert list(tmp_path.iterdir()) == []


def test_module_needs_audits_or_hosts(tmp_path):
    result = run_module(audit_report, {"dest": str(tmp_path)})
    assert result["failed"] is True and "audits, hosts" in result["msg"]
