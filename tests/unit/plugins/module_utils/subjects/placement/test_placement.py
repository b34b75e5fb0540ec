"""GPU container NUMA placement: GPUs of a container from its config, their nodes, its
cpuset, and the findings (the pinning part: test_placement_write.py; the live-section
edit it writes with: test_lxc_write.py)."""

from fixtures import health, hosts, lxc

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.placement import placement


def _findings(facts, host=None):
    """Every placement finding with its id, as the check registry labels them."""
    return ([dict(f, id="gpu_numa_mismatch") for f in placement.mismatch_findings(facts, host)]
            + [dict(f, id="gpu_container_unpinned")
               for f in placement.unpinned_findings(facts, host)])


def _found(root, host=None):
    return _findings(placement.collect(str(root)), host)


def test_information_file_maps_minor_to_address(tmp_path):
    health.nvidia_gpus(tmp_path, ["0000:81:00.0", "0000:01:00.0"])
    info = placement.parse_information(health.information_text("0000:81:00.0", 0))
    assert info["Device Minor"] == "0" and info["Bus Location"] == "0000:81:00.0"
    assert info["GPU Excluded"] == "No"
    assert placement.gpu_minors(str(tmp_path)) == {0: "0000:81:00.0", 1: "0000:01:00.0"}


def test_health_host_findings(tmp_path):
    health.gpu_host(tmp_path)
    found = dict((f["subject"], f) for f in _found(tmp_path, host="gpu07"))
    assert sorted(found) == ["lxc 131", "lxc 132"]  # 129 has GPUs on both nodes
    wrong = found["lxc 131"]
    assert (wrong["id"], wrong["severity"]) == ("gpu_numa_mismatch", "high")
    assert wrong["current"] == "CPUs 0-15 on node 0; memory on node 0"
    assert wrong["expected"] == "CPUs and memory on node 1, where its GPUs are"
    assert "lxc.cgroup2.cpuset.cpus: 32-63,96-127" in wrong["remedy"]
    assert "lxc.cgroup2.cpuset.mems: 1" in wrong["remedy"]
    assert "next start" in wrong["remedy"] and "Trade-off" in wrong["remedy"]
    assert "-l gpu07" in wrong["remedy"]
    loose = found["lxc 132"]
    assert (loose["id"], loose["severity"]) == ("gpu_container_unpinned", "medium")
    assert "cores: 16, no cpuset" in loose["current"]
    assert "0000:83:00.0 (node 1)" in loose["detail"]


def test_facts_of_a_dev_entry_container(tmp_path):
    health.gpu_host(tmp_path)
    facts = placement.collect(str(tmp_path))
    assert facts["nodes"] == {"0": "0-31,64-95", "1": "32-63,96-127"}
    ct = [c for c in facts["containers"] if c["vmid"] == 132][0]
    assert ct["minors"] == [6] and ct["gpu_nodes"] == [1] and ct["cores"] == 16
    assert ct["cpuset_cpus"] is None and ct["cpu_nodes"] is None
    assert [c["vmid"] for c in facts["containers"]] == [129, 131, 132]  # 130 has no GPU


def test_cpuset_over_both_nodes_with_gpus_on_one_is_medium(tmp_path):
    health.gpu_host(tmp_path)
    lxc.write_config(tmp_path, 131, health.gpu_container_text(131, [4, 5], cpuset="16-47"))
    found = [f for f in _found(tmp_path) if f["subject"] == "lxc 131"]
    assert [(f["id"], f["severity"]) for f in found] == [("gpu_numa_mismatch", "medium")]
    assert found[0]["current"] == "CPUs 16-47 on nodes 0,1"


def test_pinned_right_is_clean(tmp_path):
    health.gpu_host(tmp_path)
    lxc.write_config(tmp_path, 131, health.gpu_container_text(
        131, [4, 5], cpuset="32-47", mems="1"))
    lxc.write_config(tmp_path, 132, health.gpu_container_text(132, [6], cpuset="48-63"))
    assert _found(tmp_path) == []


def test_no_cores_no_cpuset_is_low(tmp_path):
    health.gpu_host(tmp_path)
    lxc.write_config(tmp_path, 132, health.gpu_container_text(132, [6], cores=None))
    found = [f for f in _found(tmp_path) if f["subject"] == "lxc 132"]
    assert [(f["id"], f["severity"]) for f in found] == [("gpu_container_unpinned", "low")]


def test_one_node_is_not_applicable(tmp_path):
    health.gpu_host(tmp_path)
    health.numa_nodes(tmp_path, {0: "0-127"})
    import shutil
    shutil.rmtree(str(tmp_path / "sys/devices/system/node/node1"))
    facts = placement.collect(str(tmp_path))
    assert placement.applies(facts).startswith("one NUMA node")
    assert _findings(facts) == []


def test_vm_host_without_containers(tmp_path):
    hosts.vm_host(tmp_path)
    facts = placement.collect(str(tmp_path))
    assert facts["containers"] == [] and _findings(facts) == []
