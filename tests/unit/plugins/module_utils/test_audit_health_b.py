"""PCIe errors, P2P readiness and GPU container placement in the whole audit: the health
host's findings, the report columns, the capture round trip, and the real H200."""

import io
import shutil
import tarfile

import pytest
from fixtures import health, hosts, realhost

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import host_capture

WANTED = hosts.common_wanted(host="pve-gpu01")
MINE = ("pcie_aer_errors", "p2p_iommu_translated", "p2p_acs_redirect", "gpu_bar1_small",
        "gpu_numa_mismatch", "gpu_container_unpinned")
COLUMNS = ("pcie_aer", "p2p", "gpu_numa")
H200 = realhost.H200


def mine(result):
    return sorted((f["id"], f["subject"], f["severity"]) for f in result["findings"]
                  if f["id"] in MINE)


@pytest.fixture(scope="module")
def gpu_host(tmp_path_factory):
    root = tmp_path_factory.mktemp("gpuhost")
    health.gpu_host(root)
    return str(root), audit.audit(str(root), WANTED)


def test_health_host_findings_and_columns(gpu_host):
    _root, result = gpu_host
    assert mine(result) == [
        ("gpu_container_unpinned", "lxc 132", "medium"),
        ("gpu_numa_mismatch", "lxc 131", "high"),
        ("p2p_iommu_translated", "iommu", "high"),
        ("pcie_aer_errors", "0000:02:00.0", "low"),
        ("pcie_aer_errors", "0000:83:00.0", "high"),
    ]
    checks = result["checks"]
    assert checks["pcie_aer"]["status"] == "high" and checks["pcie_aer"]["count"] == 2
    assert checks["p2p"]["status"] == "high" and checks["gpu_numa"]["status"] == "high"
    assert [checks[c]["label"] for c in COLUMNS] == ["PCIe errors", "P2P", "GPU NUMA"]
    # the raw counters are in the audit's JSON
    entry = [e for e in result["pcie_aer"] if e["address"] == "0000:83:00.0"][0]
    assert entry["fatal"]["counters"]["CmpltTO"] == 1
    assert not result["errors"]


def test_capture_holds_the_files_read_and_audits_the_same(gpu_host, tmp_path):
    root, original = gpu_host
    builder, _result, recorded = host_capture.capture(root, WANTED)
    gpu = "/sys/devices/pci0000:80/0000:80:03.1/0000:83:00.0"
    for path in (gpu + "/aer_dev_fatal", "/sys/devices/pci0000:80/0000:80:03.1/"
                 "aer_rootport_total_err_fatal", "/sys/kernel/iommu_groups/16/type",
                 "/sys/devices/system/node/node1/cpulist", gpu + "/resource",
                 "/proc/driver/nvidia/gpus/0000:83:00.0/information",
                 "/etc/pve/lxc/131.conf", "/sys/devices/pci0000:80/0000:80:03.1/config"):
        assert recorded.get(path) == "read", path
    assert gpu + "/iommu_group" in recorded
    buf = io.BytesIO()
    builder.write(buf, "{}")
    dest = tmp_path / "unpacked"
    dest.mkdir()
    with tarfile.open(fileobj=io.BytesIO(buf.getvalue()), mode="r:gz") as tar:
        assert tar.getmember(gpu.lstrip("/") + "/iommu_group").issym()
        tar.extractall(dest, filter="tar")
    again = audit.audit(str(dest), WANTED)
    assert mine(again) == mine(original)
    for key in ("pcie_aer", "p2p", "gpu_placement"):
        assert again[key] == original[key], key


@pytest.fixture
def h200(tmp_path):
    root = tmp_path / "h200"
    shutil.copytree(H200, str(root), symlinks=True)
    return str(root)


def test_real_h200_audits_clean_and_a_doctored_copy_gives_exactly_the_aer_finding(h200):
    result = audit.audit(h200, WANTED)
    assert mine(result) == []
    assert result["checks"]["pcie_aer"]["status"] == "n/a"
    assert result["checks"]["p2p"]["note"] == "one GPU on the nvidia driver: no peer-to-peer"
    assert result["checks"]["gpu_numa"]["status"] == "n/a"
    health.aer_everywhere(h200)  # a kernel with AER reporting: zero counters
    assert mine(audit.audit(h200, WANTED)) == []
    health.aer_files(h200, "0000:00:06.0", fatal={"CmpltTO": 1})
    doctored = audit.audit(h200, WANTED)
    assert mine(doctored) == [("pcie_aer_errors", "0000:00:06.0", "high")]
    assert doctored["checks"]["pcie_aer"]["status"] == "high"
