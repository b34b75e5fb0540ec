"""Hostile trees against the issue-25 readers: a process's cgroup file, EDAC counters and
the driver's GPU folders that are FIFOs or links out of the root, and a pid that is a
path. Nothing hangs, nothing outside the root is read, the rest of the audit still runs."""

import os
import signal

import pytest
from fixtures import hosts

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit


@pytest.fixture
def issue_host(tmp_path):
    root = tmp_path / "host"
    root.mkdir()
    built = hosts.lost_gpu_host(str(root), unbound=True)
    built["root"] = str(root)
    built["decoy"] = str(tmp_path / "decoy")  # outside the root: must never be read
    return built


def _audit(root):
    def stop(_sig, _frame):
        raise AssertionError("the audit hung")
    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(60)
    try:
        return audit.audit(root, hosts.common_wanted())
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _ids(result):
    return sorted(set(f["id"] for f in result["findings"]))


def test_cgroup_file_that_is_a_fifo_does_not_hang(issue_host):
    path = os.path.join(issue_host["root"], "proc/4242/cgroup")
    os.unlink(path)
    os.mkfifo(path)
    result = _audit(issue_host["root"])
    proc = result["gpu_processes"][3]["processes"][0]
    assert proc["container"] is None and "not in /proc" in proc["how"]
    assert "gpu_held_unbound" not in _ids(result)
    assert any("/proc/4242/cgroup" in e["error"] for e in result["errors"])
    assert "gpu_lost" in _ids(result) and "host_edac_errors" in _ids(result)


def test_cgroup_link_out_of_the_root_is_not_followed(issue_host):
    with open(issue_host["decoy"], "w") as handle:
        handle.write("0::/lxc/999/ns\n")
    path = os.path.join(issue_host["root"], "proc/4242/cgroup")
    os.unlink(path)
    os.symlink(issue_host["decoy"], path)
    result = _audit(issue_host["root"])
    # resolved inside the root the link names no file: the decoy's container never shows
    proc = result["gpu_processes"][3]["processes"][0]
    assert proc["container"] != "999"
    assert "lxc 999" not in repr(result["findings"])


def test_edac_counter_fifo_and_folder_link_out_of_the_root(issue_host):
    mc = os.path.join(issue_host["root"], "sys/devices/system/edac/mc")
    os.unlink(os.path.join(mc, "mc0/ue_count"))
    os.mkfifo(os.path.join(mc, "mc0/ue_count"))
    os.makedirs(os.path.join(issue_host["decoy"], "mc7"))
    with open(os.path.join(issue_host["decoy"], "mc7/ue_count"), "w") as handle:
        handle.write("99\n")
    os.symlink(os.path.join(issue_host["decoy"], "mc7"), os.path.join(mc, "mc7"))
    result = _audit(issue_host["root"])
    edac = dict((m["controller"], m) for m in result["host_health"]["edac"])
    assert edac["mc0"]["ue_count"] is None and edac["mc0"]["ce_count"] == 3
    assert "mc7" not in edac or edac["mc7"]["ue_count"] != 99
    # correctable errors still reported; the unreadable counter is named in errors
    assert [f["severity"] for f in result["findings"] if f["id"] == "host_edac_errors"] == [
        "medium"]


def test_a_pid_that_is_a_path_is_not_opened(issue_host):
    smi = os.path.join(issue_host["root"], ".gpuhost-capture/nvidia-smi-q-x.xml")
    with open(smi) as handle:
        text = handle.read()
    with open(smi, "w") as handle:
        handle.write(text.replace("<pid>4242</pid>", "<pid>../../etc</pid>"))
    result = _audit(issue_host["root"])
    proc = result["gpu_processes"][3]["processes"][0]
    assert proc["pid"] is None and proc["how"] == "no pid"
    assert not any("etc/cgroup" in path for path in result.get("files_read") or [])
