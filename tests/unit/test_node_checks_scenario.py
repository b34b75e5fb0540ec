"""Issue 25's host, whole: the seed host that lost one GPU (7 in the driver, 8 on the bus),
with an EDAC uncorrectable count, an OOM kill in container 129, a read-only remount, a process
of container 129 on GPU 3 and ``/dev/nvidia-uvm`` missing at container start gives exactly
those findings against the same host without them; the clean seed host and the real H200
captures give none of the node checks' findings."""

import pytest
from fixtures import devnodes, hosts, realhost

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit

# Every finding id the node checks added (issue 25: GPU count, host health, held GPUs,
# device nodes at container start, NVLink).
NODE_IDS = ("gpu_lost", "gpu_count_expected", "host_hardware_error", "host_edac_errors",
            "host_fs_readonly", "host_kernel_oops", "host_kernel_hang", "host_nvme_errors",
            "host_oom_kill", "gpu_held_unbound", "gpu_memory_no_process", "gpu_held",
            "lxc_device_node_missing", "lxc_device_node_major", "lxc_dev_gid_unknown",
            "device_nodes_unit_missing", "lxc_dev_char_links_missing", "nvlink_inactive",
            "nvlink_errors")
WANTED = hosts.common_wanted("pve-gpu01")


def _with_nodes(root, without=()):
    """The host's /dev as a capture lists it, and the unit that makes the late nodes."""
    devnodes.write_listing(root, devnodes.clean_nodes(without=without))
    devnodes.write_unit(root)


def _found(root):
    result = audit.audit(root, WANTED)
    assert result["errors"] == []
    return result, set((f["id"], f["severity"], f["subject"]) for f in result["findings"])


def test_the_issue_host_gives_exactly_those_findings(tmp_path):
    seed = str(tmp_path / "seed")
    hosts.seed_host(seed)
    _with_nodes(seed)
    _unused, before = _found(seed)
    host = str(tmp_path / "host")
    built = hosts.lost_gpu_host(host)
    _with_nodes(host, without=("/dev/nvidia-uvm",))
    result, after = _found(host)
    assert before <= after                  # the seed host's own findings all still there
    assert sorted(after - before) == sorted([
        ("gpu_held", "info", built["held"]),
        ("gpu_lost", "high", built["lost"]),
        ("host_edac_errors", "critical", "edac mc0"),
        ("host_fs_readonly", "high", "sdb1"),
        ("host_oom_kill", "medium", "lxc/129"),
        ("lxc_device_node_missing", "high", "lxc 129 /dev/nvidia-uvm"),
    ])
    assert built["held"] == built["gpus"][3]           # the process sits on GPU 3


@pytest.mark.parametrize("name", ["seed", "tuned", "h200-real"])
def test_clean_hosts_give_no_node_check_finding(tmp_path, name):
    root = realhost.H200
    if name != "h200-real":
        root = str(tmp_path / name)
        (hosts.seed_host if name == "seed" else hosts.tuned_host)(root)
        _with_nodes(root)
    result = audit.audit(root, WANTED)
    assert [f for f in result["findings"] if f["id"] in NODE_IDS] == []
