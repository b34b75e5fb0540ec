# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU peer-to-peer readiness, read only: IOMMU domain type of each GPU's group, PCIe ACS
on the bridges between GPUs, BAR1 size, and the IOMMU switches of the kernel command line.

How a GPU-to-GPU transfer travels over PCIe (no NVLink):

- below one PCIe switch, the switch's downstream port turns the request around to the
  peer's port, unless ACS P2P Request/Completion Redirect (or Egress Control) is set on
  that port: then it goes up to the root complex and back down (twice the hops, through
  the IOMMU);
- between GPUs on different root ports it always crosses the root complex; whether the
  IOMMU translates it depends on the domain type of the GPUs' IOMMU groups:
  ``identity`` (passthrough: bus addresses are physical addresses) or translated
  (``DMA``, ``DMA-FQ``: every peer access needs an IOMMU mapping; missing ones fault, which
  NCCL and vLLM users see as hangs or very slow P2P).

ACS bits are only read here, never written: turning them off merges IOMMU groups and
removes the isolation that VFIO passthrough to VMs relies on.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import itertools

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import pci
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import pci_p2p
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.host import procfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie.aer import item
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import host_path

# Domain types in which the IOMMU translates device addresses.
TRANSLATED_TYPES = ("DMA", "DMA-FQ")
# Kernel parameters that decide the IOMMU's mode (kernel-parameters.txt).
CMDLINE_KEYS = ("iommu", "amd_iommu", "intel_iommu", "iommu.passthrough", "iommu.strict",
                "pcie_acs_override", "pci")
# A BAR1 of this size or less is the legacy aperture (no Resizable BAR): a window onto a
# small part of the GPU's memory.
BAR1_LEGACY_BYTES = 256 << 20
GPU_DRIVER = "nvidia"


def cmdline_iommu(text):
    """The IOMMU-related parameters of a command line: ``{key: value}`` (flags map to None;
    ``pci`` only when it holds an ACS option such as ``disable_acs_redir=``)."""
    params = procfs.cmdline_params(text or "")
    out = {}
    for key in CMDLINE_KEYS:
        if key not in params:
            continue
        if key == "pci" and "acs" not in (params[key] or ""):
            continue
        out[key] = params[key]
    return out


def iommu_groups_present(root):
    """True when the kernel created IOMMU groups (an IOMMU driver is active)."""
    try:
        return bool(hostfs.listdir(host_path(root, pci_p2p.IOMMU_GROUPS)))
    except OSError:
        return False


def _gpu_entry(dev):
    group, kind = pci_p2p.iommu_group(dev)
    aperture = pci_p2p.largest_bar(dev)
    return {
        "address": dev.address,
        "driver": dev.driver,
        "numa_node": dev.numa_node,
        "iommu_group": group,
        "iommu_type": kind,
        "translated": None if group is None and kind is None else kind in TRANSLATED_TYPES,
        "bar1_index": aperture[0],
        "bar1_bytes": aperture[1],
    }


def _bridge_acs(dev):
    """``(acs summary or None, readable)``: readable False when less than the extended
    config space could be read (non-root)."""
    try:
        buf = dev.config()
    except (pci.PciError, OSError) as exc:
        return None, str(exc)
    if len(buf) <= 0x100:
        return None, ("only %d bytes of config space readable: run the audit as root to "
                      "read ACS" % len(buf))
    return pci_p2p.acs_summary(buf), None


def pair_path(up_a, up_b):
    """Where peer traffic between two GPUs turns around, from their upstream bridge lists
    (nearest first): ``(turn, between, ports)``: ``turn`` the lowest common bridge's
    address (a switch port) or None (the root complex); ``between`` every bridge below it on
    both sides; ``ports`` the two bridges right below ``turn`` (where ACS redirect acts)."""
    common = None
    for addr in up_a:
        if addr in up_b:
            common = addr
            break
    cut_a = up_a.index(common) if common else len(up_a)
    cut_b = up_b.index(common) if common else len(up_b)
    between = up_a[:cut_a] + up_b[:cut_b]
    ports = [side[cut - 1] for side, cut in ((up_a, cut_a), (up_b, cut_b)) if cut > 0]
    return common, between, ports


def collect(root, vendor=pci.NVIDIA_VENDOR, classes=pci.GPU_CLASSES, skip=()):
    """The audit's ``p2p`` facts: ``{gpu_count, iommu_groups, cmdline, gpus, bridges}``.

    ``gpus``: the GPUs the host's ``nvidia`` driver runs (those bound to vfio-pci belong to
    VMs; ``skip``: addresses a VM config names or vGPU splits) with ``iommu_group``,
    ``iommu_type``, ``translated``, ``bar1_bytes`` and
    ``bar1_index`` (the memory aperture: the largest BAR, see :func:`pci_p2p.largest_bar`),
    ``numa_node``. ``bridges``: every bridge between two of them, once, with ``port_type``,
    ``turns_at`` (the switch port peer traffic turns at, or ``root complex``), ``turnaround``
    (True where ACS redirect changes the route), ``gpus`` (those below it), ``acs`` (see
    :func:`pci_p2p.acs_summary`; None without the capability) and ``error``."""
    devs = [d for d in pci.select_devices(root, vendor, classes)
            if d.driver == GPU_DRIVER and d.address not in skip]
    gpus = [_gpu_entry(d) for d in devs]
    upstream = dict((d.address, [b.address for b in d.upstream()]) for d in devs)
    bridges = {}
    for a, b in itertools.combinations(sorted(upstream), 2):
        common, between, ports = pair_path(upstream[a], upstream[b])
        for addr in between:
            item = bridges.setdefault(addr, {"address": addr, "gpus": set(),
                                             "turns_at": set(), "turnaround": False})
            item["gpus"].update(g for g in (a, b) if addr in upstream[g])
            if addr in ports:
                item["turns_at"].add(common or "root complex")
                item["turnaround"] = True
    out = []
    for addr in sorted(bridges):
        item = bridges[addr]
        dev = pci.PciDevice(root, addr)
        acs, error = _bridge_acs(dev)
        try:
            port_type = dev.port_type
        except (pci.PciError, OSError, ValueError, IndexError):
            port_type = None
        out.append({"address": addr, "port_type": port_type, "gpus": sorted(item["gpus"]),
                    "turns_at": sorted(item["turns_at"]), "turnaround": item["turnaround"],
                    "acs": acs, "error": error})
    return {
        "gpu_count": len(gpus),
        "iommu_groups": iommu_groups_present(root),
        "cmdline": cmdline_iommu(procfs.read_cmdline(root)),
        "gpus": gpus,
        "bridges": out,
    }


def applies(p2p):
    """None when the P2P checks apply, else why not (fewer than two GPUs on the host's
    driver)."""
    count = (p2p or {}).get("gpu_count") or 0
    if count < 2:
        return "%s GPU%s on the nvidia driver: no peer-to-peer" % (
            "no" if not count else "one", "" if count == 1 else "s")
    return None


# --- findings -------------------------------------------------------------------------

REMEDY_IOMMU = (
    "boot with iommu=pt (Intel also intel_iommu=on; ansible-playbook "
    "gpuhost.tuning.reboot_verify with gpuhost_boot_params: {iommu: pt}): the host's own "
    "devices get identity (untranslated) DMA and peer traffic passes the IOMMU untouched, "
    "while devices passed through to VMs keep their own translated VFIO domains. "
    "Trade-off: host devices lose DMA isolation (a faulty or hostile device can write any "
    "host memory). Without a reboot: with the GPU's driver unbound, echo identity > "
    "/sys/kernel/iommu_groups/<group>/type (kernel 5.11+). Or keep the IOMMU and run with "
    "NCCL_P2P_DISABLE=1: GPU-to-GPU traffic then goes through host memory (slower, no hang)")


def _acs_remedy(bridges):
    names = ";".join(bridges)
    return (
        "boot with pci=disable_acs_redir=%s (kernel 4.19+; ansible-playbook "
        "gpuhost.tuning.reboot_verify with gpuhost_boot_params: {pci: "
        "'disable_acs_redir=%s'}; GRUB needs the value quoted, ; splits its commands): peer "
        "traffic then turns around in the switch. "
        "Trade-off: devices below those ports are no longer isolated from each other, their "
        "IOMMU groups merge and they can only be passed through to a VM together. For a "
        "test until the next reboot: setpci -s <port> ECAP_ACS+6.w=0000:002c on each port. "
        "The audit reads ACS and never writes it" % (names, names))


def _bar1_expected(gpu):
    memory = gpu.get("memory_bytes")
    if memory:
        return "at least the GPU's %s of memory (Resizable BAR)" % _size(memory)
    return "larger than %s (Resizable BAR)" % _size(BAR1_LEGACY_BYTES)


def _size(value):
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if value >= 1 << shift:
            scaled = float(value) / (1 << shift)
            return ("%d %s" if scaled == int(scaled) else "%.1f %s") % (scaled, unit)
    return "%d bytes" % value


REMEDY_BAR1 = (
    "enable Above 4G Decoding and Resizable BAR in the BIOS (UEFI boot needed); in a VM the "
    "hypervisor's 64-bit MMIO window must hold the full BAR (Proxmox/QEMU: a large enough "
    "pci-hole64 size, OVMF). With a small BAR1, peers and NICs reach the GPU's memory "
    "through a window the driver remaps: P2P and GPUDirect RDMA slow down or fall back to "
    "staging in host memory. Trade-off: large BARs need 64-bit address space, older "
    "firmware may then fail to place other devices' BARs")


def iommu_findings(p2p):
    """``p2p_iommu_translated`` (without its id): GPUs in translated IOMMU domains."""
    if applies(p2p):
        return []
    gpus = p2p.get("gpus") or []
    cmdline = p2p.get("cmdline") or {}
    translated = [g for g in gpus if g.get("translated")]
    if not translated:
        return []
    types = sorted(set(g["iommu_type"] for g in translated))
    return [item(
        "high", "iommu",
        "%d of %d GPUs in translated IOMMU domains (%s)" % (
            len(translated), len(gpus), ", ".join(types)),
        "identity domains (iommu=pt) for GPUs that talk to each other",
        REMEDY_IOMMU,
        detail="peer traffic between GPUs crosses the IOMMU, which must map every peer "
               "access: expect slow P2P or NCCL/vLLM hangs. Groups: %s; command line: %s" % (
                   ", ".join("%s %s (group %s)" % (g["address"], g["iommu_type"],
                                                   g["iommu_group"]) for g in translated),
                   " ".join(k if v is None else "%s=%s" % (k, v)
                            for k, v in sorted(cmdline.items())) or "no IOMMU option"))]


def _switch_turns(bridge):
    return [t for t in bridge.get("turns_at") or [] if t != "root complex"]


def acs_findings(p2p):
    """``p2p_acs_redirect`` (without its id): a switch port between GPUs with ACS redirect
    set. Root ports are left out: peer traffic between root ports crosses the root complex
    whatever their ACS says (its IOMMU part is ``p2p_iommu_translated``)."""
    if applies(p2p):
        return []
    translated = any(g.get("translated") for g in p2p.get("gpus") or [])
    flagged = [b for b in p2p.get("bridges") or []
               if (b.get("acs") or {}).get("p2p_redirect") and _switch_turns(b)]
    remedy = _acs_remedy([b["address"] for b in flagged])
    out = []
    for bridge in flagged:
        acs = bridge["acs"]
        out.append(item(
            "high" if translated else "medium", bridge["address"],
            "ACSCtl %s (%s)" % (acs.get("control"), " ".join(acs.get("enabled") or [])),
            "no ReqRedir/CmpltRedir/EgressCtrl on a switch port between GPUs", remedy,
            detail="%s below switch port %s: P2P of %s with its peers goes up through the "
                   "root complex%s instead of across the switch" % (
                       (bridge.get("port_type") or "bridge").replace("_", " "),
                       ", ".join(_switch_turns(bridge)), ", ".join(bridge.get("gpus") or []),
                       " and the translating IOMMU" if translated else "")))
    return out


def bar1_findings(p2p, memory_bytes=None):
    """``gpu_bar1_small`` (without its id). ``memory_bytes``: ``{address: bytes}`` of GPU
    memory when known (the driver's report); else BAR1 is compared with the legacy size."""
    if applies(p2p):
        return []
    memory_bytes = memory_bytes or {}
    out = []
    for gpu in p2p.get("gpus") or []:
        bar1 = gpu.get("bar1_bytes")
        if not bar1:
            continue  # no resource file or BAR1 unassigned (the driver reports that)
        memory = memory_bytes.get(gpu["address"])
        small = bar1 < memory if memory else bar1 <= BAR1_LEGACY_BYTES
        if small:
            out.append(item("medium", gpu["address"], "BAR1 %s" % _size(bar1),
                            _bar1_expected(dict(gpu, memory_bytes=memory)), REMEDY_BAR1))
    return out
