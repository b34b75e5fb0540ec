"""module_utils/pci_p2p: the extended capability chain, the ACS registers of a bridge, the
BARs of sysfs ``resource`` and the IOMMU group, on config spaces and sysfs trees built by
tests/fixtures (pci.py: the kernel's layout; health.py: ACS and ``resource`` lines)."""

import os
import struct

from fixtures import health, pci

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import pci as pci_mod
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import pci_p2p


def _dsp(built):
    """The switch downstream port above the first GPU of ``pci.switch_gpus``."""
    return built["upstream"][built["gpus"][0]][0]


def test_acs_registers_read_from_the_extended_chain(tmp_path):
    dsp = _dsp(pci.switch_gpus(tmp_path))
    offset = health.set_acs(tmp_path, dsp, 0x001D, 0x007F)
    buf = pci.read_config(tmp_path, dsp)
    # the fixture's bytes, read independently of the code under test
    assert struct.unpack_from("<H", buf, offset + 6)[0] == 0x001D
    regs = pci_p2p.acs_registers(buf)
    assert regs == {"offset": offset, "capability": 0x007F, "control": 0x001D}
    summary = pci_p2p.acs_summary(buf)
    assert summary["enabled"] == ["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd"]
    assert summary["p2p_redirect"] is True
    assert pci_p2p.acs_summary(pci.read_config(tmp_path, "0000:03:00.0")) is None  # GPU
    assert pci_p2p.acs_registers(buf[:256]) is None  # extended space not readable


def test_parse_resource_sizes():
    text = ("0x00000000f2000000 0x00000000f2ffffff 0x0000000000040200\n"
            "0x0000018000000000 0x0000019fffffffff 0x000000000014220c\n"
            "0x0000000000000000 0x0000000000000000 0x0000000000000000\n")
    entries = pci_p2p.parse_resource(text)
    assert [e["size"] for e in entries] == [16 << 20, 128 << 30, 0]


def test_seed_gpu_extended_chain_holds_aer(tmp_path):
    info = pci.seed_gpus(tmp_path)
    dev = pci_mod.PciDevice(str(tmp_path), info["gpus"][0])
    ext = pci_p2p.extended_capabilities(dev.config())
    assert (0x420, 0x0001, 2) in ext  # AER


def test_extended_chain_in_order_with_next_pointers():
    cfg = pci.Config()
    chain = [(0x100, 0x0001, 2), (0x148, 0x000D, 1), (0x250, 0x0019, 1)]  # AER, ACS, SecPCIe
    pci.ext_caps(cfg, chain)
    assert pci_p2p.extended_capabilities(cfg.bytes()) == chain


def test_extended_chain_stops_on_loops_bad_pointers_and_absent_space():
    cfg = pci.Config()
    cfg.w32(0x100, 0x0001 | (2 << 16) | (0x100 << 20))  # points back at itself
    assert pci_p2p.extended_capabilities(cfg.bytes()) == [(0x100, 0x0001, 2)]
    # into the standard header, where a conventional function has its PM capability
    std = bytearray(pci.plain_config(0x1022, 0x14DA, 0x060000))
    struct.pack_into("<I", std, 0x100, 0x0001 | (2 << 16) | (0x040 << 20))
    assert struct.unpack_from("<I", std, 0x40)[0] not in (0, 0xFFFFFFFF)
    assert pci_p2p.extended_capabilities(bytes(std)) == [(0x100, 0x0001, 2)]
    gone = bytes(bytearray(b"\xff" * 4096))  # a function that fell off the bus reads all ones
    assert pci_p2p.extended_capabilities(gone) == []
    assert pci_p2p.extended_capabilities(bytes(4096)) == []  # no extended capabilities
    assert pci_p2p.extended_capabilities(cfg.bytes()[:256]) == []  # unprivileged read


def test_decode_acs_uses_lspci_names():
    assert pci_p2p.decode_acs(0x005F) == {
        "SrcValid": True, "TransBlk": True, "ReqRedir": True, "CmpltRedir": True,
        "UpstreamFwd": True, "EgressCtrl": False, "DirectTrans": True}
    assert not any(pci_p2p.decode_acs(0).values())


def test_acs_summary_without_redirect_bits(tmp_path):
    dsp = _dsp(pci.switch_gpus(tmp_path))
    health.set_acs(tmp_path, dsp, 0x0011, 0x007F)  # SrcValid UpstreamFwd only
    summary = pci_p2p.acs_summary(pci.read_config(tmp_path, dsp))
    assert summary["enabled"] == ["SrcValid", "UpstreamFwd"]
    assert summary["control"] == "0x0011" and summary["capability"] == "0x007f"
    assert summary["p2p_redirect"] is False
    health.set_acs(tmp_path, dsp, 0x0020)  # EgressCtrl alone sends peer traffic up too
    assert pci_p2p.acs_summary(pci.read_config(tmp_path, dsp))["p2p_redirect"] is True


def test_parse_resource_skips_short_and_bad_lines():
    text = ("0x00000000f2000000 0x00000000f2ffffff 0x0000000000040200\n"
            "\n"
            "0xzz 0x0 0x0\n"
            "0x0000000000001000 0x000000000000107f 0x0000000000040101\n")
    entries = pci_p2p.parse_resource(text)
    assert [(e["index"], e["size"]) for e in entries] == [(0, 16 << 20), (3, 0x80)]
    assert entries[1]["flags"] == 0x40101  # an I/O BAR


def _resource(tmp_path, address, lines):
    path = os.path.join(pci.device_dir(str(tmp_path), address), "resource")
    with open(path, "w") as handle:
        handle.write("".join("0x%016x 0x%016x 0x%016x\n" % line for line in lines))


def test_largest_bar_is_the_prefetchable_aperture_at_any_index(tmp_path):
    info = pci.seed_gpus(tmp_path)
    gpu = info["gpus"][0]
    dev = pci_mod.PciDevice(str(tmp_path), gpu)
    os.unlink(os.path.join(pci.device_dir(str(tmp_path), gpu), "resource"))
    assert pci_p2p.largest_bar(dev) == (None, None)  # no resource file
    health.gpu_resource(tmp_path, gpu, 128 << 30)
    assert pci_p2p.largest_bar(dev) == (1, 128 << 30)
    # a hypervisor made BAR0 64-bit: the aperture is BAR2; a larger non-prefetchable BAR
    # and a larger SR-IOV/ROM line (index 6 on) do not count
    pref, mem = health.RES_MEM64_PREF, health.RES_MEM32
    _resource(tmp_path, gpu, [
        (0xF2000000, 0xF2000000 + (64 << 20) - 1, mem), (0, 0, 0),
        (0x18000000000, 0x18000000000 + (32 << 30) - 1, pref), (0, 0, 0),
        (0x20000000000, 0x20000000000 + (64 << 30) - 1, mem), (0, 0, 0),
        (0x30000000000, 0x30000000000 + (256 << 30) - 1, pref)])
    assert pci_p2p.largest_bar(dev) == (2, 32 << 30)
    _resource(tmp_path, gpu, [(0, 0, 0)] * 13)
    assert pci_p2p.largest_bar(dev) == (None, 0)


def test_iommu_group_number_and_type(tmp_path):
    info = pci.seed_gpus(tmp_path)
    gpu = info["gpus"][0]
    dev = pci_mod.PciDevice(str(tmp_path), gpu)
    assert pci_p2p.iommu_group(dev) == (None, None)  # no IOMMU translating
    health.iommu_groups(tmp_path, info["gpus"], "DMA-FQ")
    assert pci_p2p.iommu_group(dev) == (10, "DMA-FQ")
    os.unlink(os.path.join(str(tmp_path), "sys/kernel/iommu_groups/10/type"))
    assert pci_p2p.iommu_group(dev) == (10, None)  # a kernel without the type file
    with open(os.path.join(str(tmp_path), "sys/kernel/iommu_groups/10/type"), "w"):
        pass
    assert pci_p2p.iommu_group(dev) == (10, None)  # an empty one
