"""subjects/placement/gpu_numa_check.py: gpu_numa_mismatch and gpu_container_unpinned, a GPU
container's CPUs
against its GPUs' NUMA nodes (fixtures/health.py: two nodes, containers 131 and 132)."""

from auditcase import judge


def test_a_container_pinned_to_the_other_node_is_high(audited):
    (item,) = judge("gpu_numa_mismatch", audited("health.gpu_host"))
    assert (item["subject"], item["severity"]) == ("lxc 131", "high")


def test_a_container_with_cores_and_no_cpuset_is_medium(audited):
    (item,) = judge("gpu_container_unpinned", audited("health.gpu_host"))
    assert (item["subject"], item["severity"]) == ("lxc 132", "medium")


def test_none_when_the_cpuset_is_on_the_gpus_node(audited):
    facts = audited("health.gpu_host")
    for ct in facts["gpu_placement"]["containers"]:
        if ct["vmid"] == 131:
            ct["cpu_nodes"] = list(ct["gpu_nodes"])
            ct["mem_nodes"] = list(ct["gpu_nodes"])
    assert [f["subject"] for f in judge("gpu_numa_mismatch", facts)] == []


def test_na_on_one_numa_node(audited):
    assert judge("gpu_numa_mismatch", audited("seed_host")).startswith("one NUMA node")
