"""audit_sysctl: the sysctl subject's declaration: the wanted keys' values (by key, in the
given order, /proc/sys's tabs as sysctl(8) prints them), transparent hugepages' bracketed
choice, and the wanted values refused when a key or value could only be a mistake."""

import pytest
from auditcase import declared_facts
from fixtures import procsys

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (
    ValidationError,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.sysctl import audit_sysctl
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.sysctl.audit_sysctl import (
    sysctl_readings,
    transparent_hugepages,
)


def test_only_the_wanted_keys_are_read(tmp_path):
    procsys.sysctls(tmp_path, procsys.DESKTOP_SYSCTLS)
    got, errors = declared_facts(audit_sysctl, tmp_path,
                                 wanted={"sysctl": {"vm.swappiness": "10"}})
    assert errors == [] and got["sysctl"]["values"] == {"vm.swappiness": "60"}


def test_wanted_sysctls_are_checked():
    audit_sysctl.wanted_rules({"sysctl": {"vm.swappiness": "10"}})
    with pytest.raises(ValidationError, match="sysctl"):
        audit_sysctl.wanted_rules({"sysctl": {"../../etc/passwd": "1"}})


def test_sysctl_readings_in_the_given_order_none_when_absent(tmp_path):
    procsys.sysctls(tmp_path, procsys.DESKTOP_SYSCTLS)
    keys = ["vm.swappiness", "kernel.numa_balancing", "net.ipv4.tcp_rmem", "vm.nope"]
    out = sysctl_readings(str(tmp_path), keys)
    assert list(out) == keys
    assert out == {"vm.swappiness": "60", "kernel.numa_balancing": "1",
                   # tabs become single spaces, as sysctl(8) prints a vector
                   "net.ipv4.tcp_rmem": "4096 131072 6291456", "vm.nope": None}


def test_transparent_hugepages_reads_the_bracketed_choice(tmp_path):
    procsys.thp(tmp_path, "always", "defer+madvise")
    assert transparent_hugepages(str(tmp_path)) == {"enabled": "always",
                                                    "defrag": "defer+madvise"}
    assert transparent_hugepages(str(tmp_path / "none")) == {"enabled": None,
                                                             "defrag": None}
