"""audit_pcie: the pcie subject's declaration: the GPUs with their bridges (8 GPUs at
MRRS 512 on the seed host), AER and P2P after them, the GPUs a VM owns left out of P2P, and
the GPU selection refused when it could only be a mistake."""

import pytest
from auditcase import declared_facts
from fixtures import hosts

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (
    ValidationError,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import audit_pcie


def test_the_seed_hosts_gpus_and_their_bridges(tmp_path):
    hosts.seed_host(tmp_path)
    got, errors = declared_facts(audit_pcie, tmp_path)
    assert errors == [] and list(got) == ["gpus", "pcie_aer", "p2p"]
    assert len(got["gpus"]) == 8
    first = got["gpus"][0]
    assert first["address"] == "0000:01:00.0" and first["owner"] == "host"
    assert first["max_read_request_size"] == 512 and first["upstream"]


def test_gpus_a_vm_owns_are_not_the_hosts():
    gpus = [{"address": "a", "owner": "host"}, {"address": "b", "owner": "vm 101"},
            {"address": "c"}]
    assert audit_pcie.not_host_owned(gpus) == ["b"]


def test_the_gpu_selection_is_checked():
    audit_pcie.wanted_rules({"gpu_vendor": "10de", "gpu_classes": ["0300", "0302"]})
    with pytest.raises(ValidationError, match="gpu_vendor"):
        audit_pcie.wanted_rules({"gpu_vendor": "nvidia", "gpu_classes": ["0300"]})
    assert audit_pcie.WANTED["mrrs_size"]["default"] == 4096
