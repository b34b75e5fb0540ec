"""audit_cpu: the cpu subject's declaration: the CPU facts (identity, idle states,
frequency scaling) of a 128-thread EPYC tree and the wanted idle state, refused when it is
no idle state name."""

import pytest
from auditcase import declared_facts
from fixtures import hosts

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (
    ValidationError,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cpu import audit_cpu


def test_the_seed_hosts_cpu(tmp_path):
    hosts.seed_host(tmp_path)
    got, errors = declared_facts(audit_cpu, tmp_path)
    cpu = got["cpu"]
    assert errors == [] and cpu["online"] == 128 and cpu["vendor"] == "AuthenticAMD"
    assert cpu["cpufreq"]["driver"] == "acpi-cpufreq"
    enabled = [s for s in cpu["cpuidle"]["states"] if s["cpus_disabled"] == 0]
    assert "C2" in [s["name"] for s in enabled]


def test_the_wanted_idle_state_is_a_state_name():
    audit_cpu.wanted_rules({"cpuidle_deeper_than": "C1"})
    with pytest.raises(ValidationError, match="cpuidle_deeper_than"):
        audit_cpu.wanted_rules({"cpuidle_deeper_than": "C1; reboot"})
