"""GPU container NUMA placement: GPUs of a container from its config, their nodes, its
cpuset; and the live-section edit the pinning part writes with."""

import os

import pytest

from fixtures import health, hosts, lxc

from ansible_collections.gpuhost.tuning.plugins.module_utils import lxc as lxc_mod
from ansible_collections.gpuhost.tuning.plugins.module_utils import lxc_write
from ansible_collections.gpuhost.tuning.plugins.module_utils import placement
from ansible_collections.gpuhost.tuning.plugins.module_utils import placement_write


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


# --- the live-section edit ------------------------------------------------------------


def _set(text, values):
    return lxc_write.with_live_values(lxc_mod.LxcConfig.parse(text), values).render()


def test_with_live_values_adds_after_the_last_lxc_line_and_keeps_sections():
    text = lxc.container_129_text("after")
    out = _set(text, [("lxc.cgroup2.cpuset.cpus", "32-63,96-127"),
                      ("lxc.cgroup2.cpuset.mems", "1")])
    live, rest = text.split("\n\n", 1)
    new_live, new_rest = out.split("\n\n", 1)
    assert new_rest == rest  # pending and snapshot sections byte for byte
    assert new_live == live + ("\nlxc.cgroup2.cpuset.cpus: 32-63,96-127"
                               "\nlxc.cgroup2.cpuset.mems: 1")
    # idempotent: the same values again change nothing
    assert _set(out, [("lxc.cgroup2.cpuset.cpus", "32-63,96-127"),
                      ("lxc.cgroup2.cpuset.mems", "1")]) == out


def test_with_live_values_replaces_in_place_keeping_form_and_crlf():
    text = ("arch: amd64\r\nlxc.cgroup2.cpuset.cpus = 0-3\r\ncores: 4\r\n"
            "lxc.cgroup2.cpuset.cpus: 0-7\r\n[snap]\r\nlxc.cgroup2.cpuset.cpus: 0-1\r\n")
    out = _set(text, [("lxc.cgroup2.cpuset.cpus", "8-15")])
    assert out == ("arch: amd64\r\ncores: 4\r\nlxc.cgroup2.cpuset.cpus: 8-15\r\n[snap]\r\n"
                   "lxc.cgroup2.cpuset.cpus: 0-1\r\n")
    assert _set("a: 1\nlxc.cgroup2.cpuset.cpus = 0-3", [("lxc.cgroup2.cpuset.cpus", "4")]) \
        == "a: 1\nlxc.cgroup2.cpuset.cpus = 4"


def test_with_live_values_without_final_newline_and_removal():
    out = _set("arch: amd64\ncores: 4", [("lxc.cgroup2.cpuset.mems", "1")])
    assert out == "arch: amd64\ncores: 4\nlxc.cgroup2.cpuset.mems: 1"
    assert _set(out, [("lxc.cgroup2.cpuset.mems", None)]) == "arch: amd64\ncores: 4"


# --- the pinning part -----------------------------------------------------------------


def _read(root, vmid):
    with open(str(root / "etc/pve/lxc" / ("%d.conf" % vmid)), "rb") as handle:
        return handle.read()


def test_pin_run_pins_check_mode_idempotence_and_restore(tmp_path):
    from conftest import tree_snapshot
    health.gpu_host(tmp_path)
    original = dict((v, _read(tmp_path, v)) for v in (129, 131, 132))
    recorded = placement_write.pin_record(str(tmp_path))
    assert recorded["131"] == {"lxc.cgroup2.cpuset.cpus": ["lxc.cgroup2.cpuset.cpus: 0-15"],
                               "lxc.cgroup2.cpuset.mems": ["lxc.cgroup2.cpuset.mems: 0"]}
    assert recorded["132"] == {"lxc.cgroup2.cpuset.cpus": [], "lxc.cgroup2.cpuset.mems": []}
    before = tree_snapshot(str(tmp_path))
    planned = placement_write.pin_run(str(tmp_path), check_mode=True)
    assert planned["changed"] and tree_snapshot(str(tmp_path)) == before
    result = placement_write.pin_run(str(tmp_path))
    rows = dict((r["vmid"], r) for r in result["containers"])
    assert rows[129]["skipped_reason"] == "its GPUs sit on every node"
    assert rows[131]["after"] == {"cpus": "32-63,96-127", "mems": "1"}
    assert "next start" in result["message"] and not result["failed"]
    assert _read(tmp_path, 129) == original[129]
    text = _read(tmp_path, 131).decode()
    assert "lxc.cgroup2.cpuset.cpus: 32-63,96-127\nlxc.cgroup2.cpuset.mems: 1\n" in text
    assert text.replace("32-63,96-127", "0-15").replace("mems: 1", "mems: 0") \
        == original[131].decode()
    assert _read(tmp_path, 132) == original[132] + (
        b"lxc.cgroup2.cpuset.cpus: 32-63,96-127\nlxc.cgroup2.cpuset.mems: 1\n")
    assert oct(os.stat(str(tmp_path / "etc/pve/lxc/132.conf")).st_mode & 0o777) == "0o640"
    # the audit no longer finds anything; a second run changes nothing
    assert _found(tmp_path) == []
    assert placement_write.pin_run(str(tmp_path))["changed"] is False
    # revert puts the recorded keys back, byte for byte
    restored = placement_write.pin_restore(str(tmp_path), recorded)
    assert restored["changed"] and not restored["failures"]
    assert dict((v, _read(tmp_path, v)) for v in (129, 131, 132)) == original


def test_pin_run_only_listed_and_failure_reported(tmp_path, monkeypatch):
    import errno
    health.gpu_host(tmp_path)
    result = placement_write.pin_run(str(tmp_path), vmids=[132])
    assert [r["vmid"] for r in result["containers"] if r["changed"]] == [132]
    assert [r["skipped_reason"] for r in result["containers"] if r["vmid"] == 131] \
        == ["not in numa_pin_vmids"]
    assert _read(tmp_path, 131).count(b"cpuset.cpus: 0-15") == 1

    def read_only(path, data, **kwargs):  # pmxcfs without quorum
        raise OSError(errno.EROFS, "Read-only file system", path)

    monkeypatch.setattr(placement_write, "atomic_write", read_only)
    failed = placement_write.pin_run(str(tmp_path))
    assert failed["failed"] == [131] and not failed["changed"]
    row = [r for r in failed["containers"] if r["vmid"] == 131][0]
    assert "Read-only file system" in row["error"]
    assert _read(tmp_path, 131).count(b"cpuset.cpus: 0-15") == 1


def test_with_live_lines_puts_back_exact_lines_crlf_and_no_final_newline():
    def put(text, key, raws):
        return lxc_write.with_live_lines(lxc_mod.LxcConfig.parse(text), key, raws).render()

    key = "lxc.cgroup2.cpuset.cpus"
    text = "arch: amd64\r\nlxc.cgroup2.cpuset.cpus: 8-15\r\ncores: 4\r\n[snap]\r\n" \
           "lxc.cgroup2.cpuset.cpus: 0-1\r\n"
    back = put(text, key, ["lxc.cgroup2.cpuset.cpus =  0-3  "])
    assert back == text.replace("lxc.cgroup2.cpuset.cpus: 8-15",
                                "lxc.cgroup2.cpuset.cpus =  0-3  ", 1)
    assert put(back, key, ["lxc.cgroup2.cpuset.cpus: 8-15"]) == text
    assert put("a: 1\nlxc.x: 2\nlxc.cgroup2.cpuset.cpus: 4", key, []) == "a: 1\nlxc.x: 2"
    assert put("a: 1\nlxc.x: 2", key, ["lxc.cgroup2.cpuset.cpus: 4"]) \
        == "a: 1\nlxc.x: 2\nlxc.cgroup2.cpuset.cpus: 4"
    with pytest.raises(lxc_mod.LxcError):
        put("a: 1\n", key, ["lxc.cgroup2.cpuset.mems: 1"])
