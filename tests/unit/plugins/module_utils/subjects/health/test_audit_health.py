"""audit_health: the health subject's declaration: nvidia-smi and the kernel log read
before the facts built on them, the GPU count and processes after the GPUs and the
placement, the XID window from the wanted values."""

import pytest
from auditcase import declared_facts
from fixtures import hosts

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (
    ValidationError,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import audit_health


def test_order_puts_the_count_after_what_it_counts():
    order = dict((f.name, f.order) for f in audit_health.FACTS)
    assert order["nvidia_smi"] < order["host_health"] < order["gpu_count"]
    assert order["gpu_processes"] > order["gpu_count"]


def test_the_window_is_the_wanted_days_or_the_default():
    assert audit_health.window_days({"xid_window_days": 3}) == 3
    assert audit_health.window_days({}) == audit_health.WANTED["xid_window_days"]["default"]


def test_a_tree_without_nvidia_smi_counts_the_bus(tmp_path):
    hosts.seed_host(tmp_path)
    known = {"gpus": [{"address": "0000:01:00.0", "owner": "host", "vendor": "0x10de",
                       "driver": "nvidia"}],
             "gpu_placement": {"containers": []}}
    got, errors = declared_facts(audit_health, tmp_path, known=known)
    assert errors == [] and got["nvidia_smi"]["available"] is False
    assert got["gpu_count"]["bus"] == 1 and got["gpu_processes"] == []
    assert got["host_health"]["window_days"] == 7


def test_the_thermal_margin_wanted_is_degrees_from_0_to_100():
    audit_health.wanted_rules({"thermal_margin_min_c": 10})
    with pytest.raises(ValidationError, match="thermal_margin_min_c"):
        audit_health.wanted_rules({"thermal_margin_min_c": -5})
