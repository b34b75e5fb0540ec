"""audit_boot: the boot subject's declaration: the kernel facts and the wanted boot
parameters, refused when one could only be a mistake."""

import pytest
from auditcase import declared_facts
from fixtures import hosts

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (
    ValidationError,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import audit_boot


def test_the_kernel_facts_of_the_seed_host(tmp_path):
    hosts.seed_host(tmp_path)
    got, errors = declared_facts(audit_boot, tmp_path)
    assert errors == [] and got["kernel"]["running"] == hosts.SEED_RUNNING


def test_wanted_boot_parameters_are_checked():
    audit_boot.wanted_rules({"boot_params": {}})
    audit_boot.wanted_rules({"boot_params": {"iommu": "pt"}})
    with pytest.raises(ValidationError, match="boot_params"):
        audit_boot.wanted_rules({"boot_params": {"iommu": "pt\ninit=/bin/sh"}})
    assert set(audit_boot.WANTED) == {"boot_params", "cpufreq_drivers_wanted"}
