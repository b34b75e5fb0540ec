"""audit_cuda: the cuda subject's declaration: no fact from files (the probe's results
are the fact cuda), the copy rate wanted, refused outside 1-100 %."""

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import facts_base
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (
    ValidationError,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import (
    audit_cuda,
    cuda_check,
)


def test_the_wanted_copy_rate_is_a_percentage():
    assert facts_base.declared(audit_cuda, "FACTS") == () and audit_cuda.CHECKS == (cuda_check,)
    audit_cuda.wanted_rules({"bandwidth_min_pct": 70})
    for bad in (0, 101):
        with pytest.raises(ValidationError, match="bandwidth_min_pct"):
            audit_cuda.wanted_rules({"bandwidth_min_pct": bad})
