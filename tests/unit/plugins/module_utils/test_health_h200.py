"""The real H200 capture (tests/fixtures/h200.tar.gz) through the AER, P2P and placement readers:
no false finding on the real files, and a doctored copy gives exactly the doctored one."""

import shutil

import pytest
from fixtures import health, realhost

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import aer, p2p
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.placement import placement
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import pci
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import pci_p2p

H200 = realhost.H200
GPU = "0000:00:06.0"


@pytest.fixture
def h200(tmp_path):
    root = tmp_path / "h200"
    shutil.copytree(H200, str(root), symlinks=True)
    return str(root)


def test_real_h200_reads_as_it_is(h200):
    dev = pci.PciDevice(h200, GPU)
    # the hypervisor made BAR0 64-bit: the 256 GiB memory aperture is register 2
    assert pci_p2p.largest_bar(dev) == (2, 256 << 30)
    assert pci_p2p.iommu_group(dev) == (None, None)  # no IOMMU in the VM
    entries = aer.collect(h200)
    assert [(e["address"], e["role"], e["available"]) for e in entries] == [
        (GPU, "gpu", False)]
    facts = p2p.collect(h200)
    assert facts["gpu_count"] == 1 and facts["gpus"][0]["bar1_bytes"] == 256 << 30
    assert facts["cmdline"] == {}  # pci=realloc=off is no ACS option
    assert placement.gpu_minors(h200) == {0: GPU}
    assert placement.node_cpus(h200) == {0: list(range(16))}


def test_real_h200_has_no_finding(h200):
    assert aer.findings(aer.collect(h200)) == []
    facts = p2p.collect(h200)
    assert p2p.applies(facts) == "one GPU on the nvidia driver: no peer-to-peer"
    assert p2p.iommu_findings(facts) + p2p.acs_findings(facts) + p2p.bar1_findings(
        facts) == []
    places = placement.collect(h200)
    assert placement.applies(places).startswith("one NUMA node")
    assert placement.mismatch_findings(places) + placement.unpinned_findings(places) == []


def test_doctored_h200_with_an_aer_fatal_count(h200):
    health.aer_files(h200, GPU, fatal={"MalfTLP": 1})
    found = aer.findings(aer.collect(h200))
    assert [(f["subject"], f["severity"]) for f in found] == [(GPU, "high")]
    assert found[0]["current"] == "1 fatal (MalfTLP 1) since boot"
