"""audit_placement: the placement subject's declaration: every container's GPUs read once
(not a fact of its own: the passthrough subject reads it first), then the host's view
without the GPUs a VM or vGPU owns."""

from auditcase import declared_facts
from fixtures import hosts

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.placement import (
    audit_placement,
)


def test_the_seed_hosts_container_uses_its_eight_gpus(tmp_path):
    hosts.seed_host(tmp_path)
    got, errors = declared_facts(audit_placement, tmp_path, known={"gpus": []})
    assert errors == [] and list(got) == ["gpu_placement"]
    assert [c["vmid"] for c in got["gpu_placement"]["containers"]] == [129]
    assert got["gpu_placement"]["containers"][0]["minors"] == list(range(8))


def test_the_host_view_drops_the_gpus_a_vm_owns():
    found = {"containers": [{"gpus": [{"address": "a", "numa_node": 0},
                                      {"address": "b", "numa_node": 1}]}]}
    gpus = [{"address": "a", "owner": "host"}, {"address": "b", "owner": "vm 101"}]
    ct = audit_placement.host_placement(found, gpus)["containers"][0]
    assert [g["address"] for g in ct["gpus"]] == ["a"] and ct["gpu_nodes"] == [0]
    kept = {"containers": [{"gpus": [{"address": "a", "numa_node": 0}]}]}
    assert audit_placement.host_placement(kept, gpus[:1]) is kept
