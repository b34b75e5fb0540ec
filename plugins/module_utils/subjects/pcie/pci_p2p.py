# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Peer-to-peer readiness of a PCI device, read only (nothing here writes): its extended
capabilities, the ACS registers of a bridge (lspci's names), the BARs of ``resource`` and
the largest memory aperture, and the IOMMU group. Devices and config space are pci.py's;
the p2p and passthrough checks (p2p.py, vmgpu.py) read these."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    host_path,
    read_text,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie.pci import (
    _hex16,
    _u16,
    _u32,
)

PCI_EXT_CAP_ID_ACS = 0x000D
PCI_ACS_CAP = 0x04  # ACS Capability Register (16 bit)
PCI_ACS_CTRL = 0x06  # ACS Control Register (16 bit)
# ACS Capability/Control bits (pci_regs.h PCI_ACS_*), in lspci's names.
ACS_BITS = (
    (0x0001, "SrcValid"),  # source validation
    (0x0002, "TransBlk"),  # translation blocking
    (0x0004, "ReqRedir"),  # P2P request redirect
    (0x0008, "CmpltRedir"),  # P2P completion redirect
    (0x0010, "UpstreamFwd"),  # upstream forwarding
    (0x0020, "EgressCtrl"),  # P2P egress control
    (0x0040, "DirectTrans"),  # direct translated P2P
)
ACS_P2P_REDIRECT = 0x0004 | 0x0008 | 0x0020  # what sends peer traffic up to the root complex


def extended_capabilities(buf):
    """The extended capability list from 0x100 as ``[(offset, cap_id, version), ...]``."""
    result = []
    if len(buf) < 0x104:
        return result
    seen = set()
    pos = 0x100
    for _hop in range((4096 - 256) // 8):
        if pos < 0x100 or pos + 4 > len(buf) or pos in seen:
            break
        seen.add(pos)
        header = _u32(buf, pos)
        if header in (0, 0xFFFFFFFF):
            break
        result.append((pos, header & 0xFFFF, (header >> 16) & 0xF))
        pos = (header >> 20) & 0xFFC
        if not pos:
            break
    return result


IOMMU_GROUPS = "/sys/kernel/iommu_groups"


def decode_acs(value):
    """ACS Capability or Control word -> ``{"SrcValid": True, ...}`` in lspci's names."""
    value = int(value)
    return dict((name, bool(value & bit)) for bit, name in ACS_BITS)


def acs_registers(buf):
    """``{offset, capability, control}`` of the ACS extended capability, or None when the
    function has none (or only 256 bytes of config space could be read)."""
    for pos, cap_id, _version in extended_capabilities(buf):
        if cap_id == PCI_EXT_CAP_ID_ACS:
            if pos + PCI_ACS_CTRL + 2 > len(buf):
                return None
            return {"offset": pos, "capability": _u16(buf, pos + PCI_ACS_CAP),
                    "control": _u16(buf, pos + PCI_ACS_CTRL)}
    return None


def acs_summary(buf):
    """The audit's view of a bridge's ACS: None without the capability, else ``{offset,
    capability, control}`` as ``0x....`` strings, ``enabled`` (lspci names of the control bits
    set) and ``p2p_redirect`` (request/completion redirect or egress control set: peer
    traffic is sent up to the root complex instead of across the bridge)."""
    regs = acs_registers(buf)
    if regs is None:
        return None
    ctrl = decode_acs(regs["control"])
    return {
        "offset": "0x%03x" % regs["offset"],
        "capability": _hex16(regs["capability"]),
        "control": _hex16(regs["control"]),
        "enabled": [name for _bit, name in ACS_BITS if ctrl[name]],
        "p2p_redirect": bool(regs["control"] & ACS_P2P_REDIRECT),
    }


def parse_resource(text):
    """sysfs ``resource`` (one ``0xSTART 0xEND 0xFLAGS`` line per BAR, ROM, SR-IOV BARs and
    bridge windows) -> ``[{index, start, end, flags, size}]`` with ``size`` 0 for an unused
    line. A 64-bit BAR takes two registers: its upper half's line is empty."""
    out = []
    for index, line in enumerate((text or "").splitlines()):
        fields = line.split()
        if len(fields) < 3:
            continue
        try:
            start, end, flags = (int(f, 16) for f in fields[:3])
        except ValueError:
            continue
        size = end - start + 1 if end else 0
        out.append({"index": index, "start": start, "end": end, "flags": flags,
                    "size": size})
    return out


IORESOURCE_MEM = 0x00000200
IORESOURCE_PREFETCH = 0x00002000
STANDARD_BARS = 6  # lines 0-5 of ``resource``; then the ROM, SR-IOV BARs, bridge windows


def largest_bar(dev):
    """``(index, size)`` of the largest memory BAR of ``dev`` (prefetchable ones first) from
    its ``resource`` file; ``(None, None)`` without the file, ``(None, 0)`` when no memory
    BAR is assigned. A GPU's memory aperture (NVIDIA's "BAR1") is its largest BAR; its
    register index varies (BAR1 on bare metal, BAR2 where a hypervisor made BAR0 64-bit)."""
    text = dev.attr("resource")
    if text is None:
        return None, None
    best = (None, 0)
    best_key = (False, 0)
    for entry in parse_resource(text):
        if entry["index"] >= STANDARD_BARS or not entry["flags"] & IORESOURCE_MEM:
            continue
        key = (bool(entry["flags"] & IORESOURCE_PREFETCH), entry["size"])
        if entry["size"] and key > best_key:
            best, best_key = (entry["index"], entry["size"]), key
    return best


def iommu_group(dev):
    """``(group number, domain type)`` of ``dev``: type as ``/sys/kernel/iommu_groups/N/type``
    says (``identity``, ``DMA``, ``DMA-FQ``, ``unmanaged``, ``blocked``), None when the file
    is absent; ``(None, None)`` without an ``iommu_group`` link (no IOMMU translating for
    the device: IOMMU off, or a guest without a virtual IOMMU)."""
    link = os.path.join(dev.path, "iommu_group")
    if not hostfs.islink(link):
        return None, None
    name = os.path.basename(hostfs.readlink(link).rstrip("/"))
    try:
        number = int(name)
    except ValueError:
        return None, None
    kind = read_text(host_path(dev.root, "%s/%d/type" % (IOMMU_GROUPS, number)))
    return number, kind or None
