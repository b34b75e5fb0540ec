"""audit_fabric_manager: the fabric_manager subject's declaration: a PCIe-only host (the
seed host, no NVSwitch) does not need the fabric manager; the driver version it compares
with is the one the peermem subject read."""

from auditcase import declared_facts
from fixtures import hosts

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.fabric_manager import (
    audit_fabric_manager,
)


def test_a_pcie_only_host_needs_no_fabric_manager(tmp_path):
    hosts.seed_host(tmp_path)
    known = {"nvidia_smi": {"available": False, "gpus": []},
             "nvidia": {"driver_version": hosts.SEED_NVIDIA}}
    got, errors = declared_facts(audit_fabric_manager, tmp_path, known=known)
    assert errors == [] and got["fabric_manager"]["needed"] is False
    assert got["fabric_manager"]["driver_version"] == hosts.SEED_NVIDIA
