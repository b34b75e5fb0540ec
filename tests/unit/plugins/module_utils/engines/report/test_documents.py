"""What ``<host>.json`` holds: every fact of the host_audit result, derived (the hand-kept
``report.FACT_KEYS`` lacked ``p2p`` and ``gpu_placement``, among others)."""

import json

from fixtures import hosts

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import report
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.fleet import fleet_run


def test_every_fact_of_the_audit_is_in_the_document_and_comes_back(tmp_path):
    hosts.seed_host(tmp_path)
    result = audit.audit(str(tmp_path), dict(hosts.common_wanted(), host="gpu01"))
    doc = json.loads(report.render_json(report.host_document("gpu01", result)))
    assert list(doc) == ["schema", "host", "collected_at", "root", "duration_s", "facts",
                         "findings", "checks", "status", "error", "last_seen", "groups"]
    facts = [k for k in result if k not in ("findings", "checks", "collected_at",
                                            "duration_s", "root")]
    assert list(doc["facts"]) == facts
    assert {"p2p", "gpu_placement", "nvlink", "host_health"} <= set(doc["facts"])
    # report_merge reads it back into the same audit result
    again = fleet_run.host_audit_of(doc)
    assert report.host_document("gpu01", again) == doc


def test_a_previous_report_too_deep_or_with_nan_is_ignored_naming_it(tmp_path):
    from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import documents
    (tmp_path / "a.json").write_text("[" * 200000)
    (tmp_path / "b.json").write_text('{"host": "b", "facts": {}, "duration_s": NaN}')
    warnings = []
    assert documents.previous_documents(str(tmp_path), ["a", "b"], warnings) == {}
    assert "a.json is not a readable JSON report (JSON nested 200000 deep" in warnings[0]
    assert "b.json is not a readable JSON report (NaN is not a number" in warnings[1]
