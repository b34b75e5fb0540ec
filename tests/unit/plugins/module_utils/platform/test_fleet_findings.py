"""platform/fleet_findings.py: the fleet check declarations (moved from test_fleet_registry.py), the
host registry's columns derived from them, and the report context."""

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import check_registry
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.fleet import fleet_registry
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import (
    findings,
    fleet_findings,
)


def test_every_fleet_check_is_declared_once_and_runs_in_order():
    ids = [item.id for item in fleet_registry.fleet_checks()]
    assert ids == ["fleet_drift", "pcie_aer_change"]
    with pytest.raises(ValueError, match="declared twice"):
        fleet_findings.fleet_check("fleet_drift", lambda d, c: ({}, {}), order=9999)


def test_the_host_registry_takes_the_column_and_rank_from_the_declaration():
    drift = [c for c in fleet_registry.fleet_checks() if c.id == "fleet_drift"][0]
    col = [c for c in check_registry.columns() if c.key == "fleet_drift"][0]
    assert (col.label, col.position) == drift.column
    assert col.not_applicable({}, {}) == fleet_findings.HOST_LEVEL_NOTE
    assert findings.get("fleet_drift").order == drift.order
    assert findings.get("fleet_drift").severities == drift.severities


def test_a_host_cell_is_na_with_the_host_level_note_and_no_host_findings():
    drift = [c for c in fleet_registry.fleet_checks() if c.id == "fleet_drift"][0]
    cell = drift.host_cell()
    assert cell["status"] == "n/a" and cell["note"] == fleet_findings.HOST_LEVEL_NOTE
    assert cell["label"] == drift.column[0]
    assert list(drift.host_findings({}, {}) or []) == []


def test_the_context_names_the_previous_report_in_its_warnings():
    lines = []
    context = fleet_findings.Context(warnings=lines, path_of=lambda host: "/r/%s.json" % host)
    context.warn("gpu01", "is not JSON")
    assert lines == ["previous report /r/gpu01.json is not JSON: ignored for the AER "
                     "comparison (this run's report replaces it)"]
    fleet_findings.Context().warn("gpu01", "is not JSON")  # no list: nothing kept, no error
    assert fleet_findings.Context().path_of("gpu02") == "gpu02.json"
