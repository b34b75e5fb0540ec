"""subjects/ceiling/audit_ceiling.py: the subject's declaration (no fact, two wanted marks
with their ranges, its check file) and its line in the audit's registry."""

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import check_registry
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import validate
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.ceiling import (
    audit_ceiling,
    ceiling_check,
)


def test_declaration_and_registry():
    assert audit_ceiling in check_registry.SUBJECTS
    assert audit_ceiling.CHECKS == (ceiling_check,)
    assert not hasattr(audit_ceiling, "FACTS")
    spec = check_registry.wanted_spec()
    assert spec["ceiling_spread_pct"] == dict(type="int", default=10)
    assert spec["ceiling_min_pct"] == dict(type="int", default=85)
    assert "gpu_compute_low" in check_registry.finding_order()
    assert "gpu_memory_bandwidth_low" in check_registry.finding_order()


@pytest.mark.parametrize("key,value", [("ceiling_spread_pct", 0), ("ceiling_min_pct", 101)])
def test_out_of_range_marks_are_refused(key, value):
    w = {"ceiling_spread_pct": 10, "ceiling_min_pct": 85}
    w[key] = value
    with pytest.raises(validate.ValidationError) as err:
        audit_ceiling.wanted_rules(w)
    assert key in str(err.value)
    w[key] = 50
    audit_ceiling.wanted_rules(w)
