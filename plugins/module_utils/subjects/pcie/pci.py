# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PCI devices under a root: sysfs attributes, config space, PCIe Device Control, MRRS (read).

Plain Python (stdlib + hostfs): the boot-time MRRS service ships this file to hosts and
runs it without Ansible; writing MRRS is in subjects/pcie/setpci_maxreadreq.py. Everything reads
``<root>/sys/bus/pci/devices/<dddd:bb:dd.f>``; symlinks are resolved inside ``root`` (a
capture or a test tree), never outside it.

Register layout (PCI Express Base spec, Linux ``pci_regs.h``): the PCI Express capability
(ID 0x10) is found by walking the standard capability list from the pointer at 0x34, only
when Status bit 4 is set. Device Capabilities at cap+4, Device Control at cap+8. Device
Control bits 14:12 are Max_Read_Request_Size (``128 << field``); bit 15 is Initiate FLR on
an endpoint (a function reset), so it is never written as 1 on a type-0 function.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import re
import struct

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.pci_ids import (
    GPU_CLASSES,
    NVIDIA_VENDOR,
    norm_hex,
    normalize_address,
    normalize_class,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    host_path,
    read_bytes,
    read_text,
)

SYSFS_DEVICES = "/sys/bus/pci/devices"

PCI_STATUS = 0x06
PCI_STATUS_CAP_LIST = 0x10
PCI_HEADER_TYPE = 0x0E
PCI_CAPABILITY_LIST = 0x34
PCI_CAP_ID_EXP = 0x10
PCI_FIND_CAP_TTL = 48  # the kernel's own loop bound for the capability walk

PCI_EXP_FLAGS = 0x02
PCI_EXP_DEVCAP = 0x04
PCI_EXP_DEVCTL = 0x08
PCI_EXP_DEVSTA = 0x0A
PCI_EXP_LNKCAP = 0x0C
PCI_EXP_LNKCTL = 0x10
PCI_EXP_LNKSTA = 0x12

DEVCTL_MRRS_MASK = 0x7000
DEVCTL_MRRS_SHIFT = 12
DEVCTL_BIT15 = 0x8000  # Initiate FLR on endpoints, Bridge Config Retry Enable on PCIe-PCI bridges
DEVCTL_MPS_MASK = 0x00E0
DEVCTL_MPS_SHIFT = 5


PORT_TYPES = {
    0x0: "endpoint",
    0x1: "legacy_endpoint",
    0x4: "root_port",
    0x5: "upstream_port",
    0x6: "downstream_port",
    0x7: "pcie_to_pci_bridge",
    0x8: "pci_to_pcie_bridge",
    0x9: "rc_integrated_endpoint",
    0xA: "rc_event_collector",
}

_SYSFS_BDF_RE = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_HOST_BRIDGE_RE = re.compile(r"^pci[0-9a-f]{4,8}:[0-9a-f]{2}$")
_SPEED_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*GT/s", re.IGNORECASE)
_HEX_RE = re.compile(r"^(?:0x)?([0-9a-fA-F]+)$")


class PciError(Exception):
    """A PCI read or lookup failed; the message names the device and what to do."""


# ---------------------------------------------------------------------------------------
# addresses and paths


def is_address(name):
    """True for a sysfs device directory name (``0000:01:00.0``)."""
    return bool(_SYSFS_BDF_RE.match(name or ""))


def resolve_in_root(root, path):
    """Resolve every symlink in the host path ``path`` inside ``root``.

    Relative targets are followed from the link's folder, absolute ones from ``root`` (a
    capture's absolute links point into the capture); ``..`` stops at ``root``. Returns the
    resolved host-absolute path (``/sys/devices/pci0000:00/...``), never outside ``root``.
    """
    try:
        return hostfs.resolve_links(root, path)
    except hostfs.LinkLoop:
        raise PciError("too many levels of symlinks resolving %s under %s"
                       % (path, os.path.abspath(root or "/")))


def list_devices(root):
    """Every PCI address in ``<root>/sys/bus/pci/devices``, sorted."""
    folder = host_path(root, SYSFS_DEVICES)
    try:
        names = hostfs.listdir(folder)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return []
        raise
    return sorted(n for n in names if is_address(n))


# ---------------------------------------------------------------------------------------
# config space decoding (pure functions on bytes / ints)


def _u8(buf, off):
    return buf[off]


def _u16(buf, off):
    return struct.unpack_from("<H", buf, off)[0]


def _u32(buf, off):
    return struct.unpack_from("<I", buf, off)[0]


def capabilities(buf, where="config space"):
    """The standard capability list as ``[(offset, cap_id), ...]`` in chain order.

    Walks from 0x34 only when Status bit 4 is set. Pointers are masked to dword alignment;
    a pointer below 0x40, a repeated offset or more than 48 hops ends the walk (broken or
    looping chains exist on real hardware and in captures). Raises PciError when the chain
    points past the bytes that could be read (unprivileged reads return only 64 bytes).
    """
    if len(buf) < 0x40:
        raise PciError("%s: only %d bytes of config space readable, need at least 64"
                       % (where, len(buf)))
    if _u16(buf, 0) == 0xFFFF:
        raise PciError("%s: config space reads all ones: the device does not respond (fell "
                       "off the bus, powered off or being reset); check dmesg" % where)
    return _walk(buf, where)[0]


def _walk(buf, where):
    """``(capabilities, loop)``: the chain, and the offset where it looped (a pointer back
    to an offset already seen, or more than 48 hops), None when it ended normally."""
    if not _u16(buf, PCI_STATUS) & PCI_STATUS_CAP_LIST:
        return [], None
    result = []
    seen = set()
    pos = _u8(buf, PCI_CAPABILITY_LIST) & 0xFC
    loop = None
    for _hop in range(PCI_FIND_CAP_TTL + 1):
        if pos < 0x40:
            break
        if pos in seen or _hop == PCI_FIND_CAP_TTL:
            loop = pos
            break
        if pos + 2 > len(buf):
            raise PciError(
                "%s: the capability list points to %#x but only %d bytes of config space "
                "were readable: reading past 64 bytes needs root (run with become)"
                % (where, pos, len(buf)))
        seen.add(pos)
        cap_id = _u8(buf, pos)
        if cap_id == 0xFF:
            break
        result.append((pos, cap_id))
        pos = _u8(buf, pos + 1) & 0xFC
    return result, loop


def field_size(field):
    """3-bit size field -> bytes; None for the reserved encodings 6 and 7."""
    return 128 << field if 0 <= field <= 5 else None


def decode_devctl(value):
    """PCIe Device Control (cap+8) as a dict; sizes in bytes."""
    value = int(value)
    return {
        "value": value,
        "correctable_error_reporting": bool(value & 0x0001),
        "nonfatal_error_reporting": bool(value & 0x0002),
        "fatal_error_reporting": bool(value & 0x0004),
        "unsupported_request_reporting": bool(value & 0x0008),
        "relaxed_ordering": bool(value & 0x0010),
        "mps": field_size((value & DEVCTL_MPS_MASK) >> DEVCTL_MPS_SHIFT),
        "extended_tag": bool(value & 0x0100),
        "phantom_functions": bool(value & 0x0200),
        "aux_power_pm": bool(value & 0x0400),
        "no_snoop": bool(value & 0x0800),
        "mrrs": field_size((value & DEVCTL_MRRS_MASK) >> DEVCTL_MRRS_SHIFT),
        "bridge_retry_or_flr": bool(value & DEVCTL_BIT15),
    }


def decode_devcap(value):
    """PCIe Device Capabilities (cap+4) as a dict; sizes in bytes."""
    value = int(value)
    return {
        "value": value,
        "mps_supported": field_size(value & 0x7),
        "phantom_functions_supported": (value >> 3) & 0x3,
        "extended_tag_supported": bool(value & 0x20),
        "role_based_error_reporting": bool(value & 0x8000),
        "flr_capable": bool(value & (1 << 28)),
    }


def parse_link_speed(text):
    """``32.0 GT/s PCIe`` / ``8 GT/s`` / ``2.5 GT/s`` -> float; ``Unknown`` or absent -> None."""
    if not text:
        return None
    match = _SPEED_RE.match(text)
    return float(match.group(1)) if match else None


def parse_link_width(text):
    if text is None:
        return None
    try:
        return int(text.split()[0])
    except (ValueError, IndexError):
        return None


def _hex_attr(text, digits):
    if text is None:
        return None
    match = _HEX_RE.match(text.strip())
    if not match:
        return None
    return "%0*x" % (digits, int(match.group(1), 16))


# ---------------------------------------------------------------------------------------
# one device


class PciDevice(object):
    """One PCI function under ``root``; every read goes to sysfs each time (live values)."""

    def __init__(self, root, address):
        self.root = root or "/"
        self.address = normalize_address(address)
        self.link_path = host_path(self.root, "%s/%s" % (SYSFS_DEVICES, self.address))
        if not hostfs.lexists(self.link_path):
            raise PciError(
                "PCI device %s not found: %s does not exist (list devices with lspci -D)"
                % (self.address, self.link_path))
        self.real = resolve_in_root(self.root, "%s/%s" % (SYSFS_DEVICES, self.address))
        self.path = host_path(self.root, self.real)
        if not hostfs.isdir(self.path):
            raise PciError("PCI device %s: %s resolves to %s, which is not a directory"
                           % (self.address, self.link_path, self.path))

    def __repr__(self):
        return "PciDevice(%r)" % self.address

    def __eq__(self, other):
        return isinstance(other, PciDevice) and (self.root, self.address) == (
            other.root, other.address)

    def __hash__(self):
        return hash((self.root, self.address))

    def attr(self, name):
        return read_text(os.path.join(self.path, name))

    @property
    def config_path(self):
        return os.path.join(self.path, "config")

    @property
    def vendor(self):
        return _hex_attr(self.attr("vendor"), 4)

    @property
    def device(self):
        return _hex_attr(self.attr("device"), 4)

    @property
    def pci_class(self):
        return _hex_attr(self.attr("class"), 6)

    @property
    def driver(self):
        link = os.path.join(self.path, "driver")
        if not hostfs.islink(link):
            return None
        return os.path.basename(hostfs.readlink(link).rstrip("/")) or None

    @property
    def numa_node(self):
        text = self.attr("numa_node")
        try:
            return int(text)
        except (TypeError, ValueError):
            return -1

    @property
    def physfn(self):
        """The physical function's address when this is an SR-IOV virtual function."""
        link = os.path.join(self.path, "physfn")
        if not hostfs.islink(link):
            return None
        return os.path.basename(hostfs.readlink(link).rstrip("/"))

    @property
    def link(self):
        return {
            "speed_gts": parse_link_speed(self.attr("current_link_speed")),
            "width": parse_link_width(self.attr("current_link_width")),
            "max_speed_gts": parse_link_speed(self.attr("max_link_speed")),
            "max_width": parse_link_width(self.attr("max_link_width")),
        }

    def config(self):
        data = read_bytes(self.config_path)
        if data is None:
            raise PciError("PCI device %s: no config file at %s" % (self.address, self.config_path))
        return data

    def header_type(self, buf=None):
        buf = self.config() if buf is None else buf
        return _u8(buf, PCI_HEADER_TYPE) & 0x7F

    def capabilities(self, buf=None):
        buf = self.config() if buf is None else buf
        return capabilities(buf, "PCI device %s (%s)" % (self.address, self.config_path))

    def pcie_cap_offset(self, buf=None):
        """Offset of the PCI Express capability, None for conventional PCI. A chain that
        loops before it is found raises PciError: the device is not known to be
        conventional PCI, and its MRRS can be neither read nor tuned."""
        buf = self.config() if buf is None else buf
        where = "PCI device %s (%s)" % (self.address, self.config_path)
        caps, loop = _walk(buf, where) if len(buf) >= 0x40 and _u16(buf, 0) != 0xFFFF \
            else (self.capabilities(buf), None)
        if loop is not None and not any(cap_id == PCI_CAP_ID_EXP for _p, cap_id in caps):
            raise PciError("%s: the capability list loops at %#x before a PCI Express "
                           "capability is found (corrupt config space or a misbehaving "
                           "device): MRRS unknown; check lspci -vvv -s %s and dmesg"
                           % (where, loop, self.address))
        for pos, cap_id in caps:
            if cap_id == PCI_CAP_ID_EXP:
                if pos + 0x0C > len(buf):
                    raise PciError(
                        "PCI device %s: PCI Express capability at %#x lies past the %d "
                        "readable bytes of %s: run as root" % (
                            self.address, pos, len(buf), self.config_path))
                return pos
        return None

    def _pcie_reg(self, off, width, buf=None):
        buf = self.config() if buf is None else buf
        cap = self.pcie_cap_offset(buf)
        if cap is None:
            return None
        return (_u16 if width == 2 else _u32)(buf, cap + off)

    @property
    def devcap(self):
        return self._pcie_reg(PCI_EXP_DEVCAP, 4)

    @property
    def devctl(self):
        return self._pcie_reg(PCI_EXP_DEVCTL, 2)

    @property
    def port_type(self):
        """``endpoint``, ``root_port``, ... from the PCIe Capabilities register, or None."""
        flags = self._pcie_reg(PCI_EXP_FLAGS, 2)
        if flags is None:
            return None
        return PORT_TYPES.get((flags >> 4) & 0xF, "type_%d" % ((flags >> 4) & 0xF))

    def upstream(self):
        """Bridges from the nearest up to the root complex (empty on a host bridge's bus).

        Read off the resolved sysfs path: each parent folder named like a PCI address is a
        bridge; ``pciDDDD:BB`` is the host bridge and ends the walk.
        """
        parts = [p for p in self.real.split("/") if p]
        bridges = []
        for name in reversed(parts[:-1]):
            if is_address(name):
                bridges.append(PciDevice(self.root, name))
                continue
            break  # pciDDDD:BB (host bridge) or anything that is not a PCI device
        return bridges

    @property
    def on_host_bridge(self):
        parts = [p for p in self.real.split("/") if p]
        return len(parts) >= 2 and bool(_HOST_BRIDGE_RE.match(parts[-2]))


# ---------------------------------------------------------------------------------------
# selection and summaries


def select_devices(root, vendor=NVIDIA_VENDOR, classes=GPU_CLASSES):
    """Devices of ``vendor`` whose class starts with one of ``classes`` (endpoint classes:
    ``0300`` VGA, ``0302`` 3D controller), as PciDevice, in address order."""
    vendor = "%04x" % int(norm_hex(vendor, "PCI vendor"), 16)
    prefixes = tuple(normalize_class(c) for c in classes)
    found = []
    for address in list_devices(root):
        dev = PciDevice(root, address)
        if dev.vendor != vendor:
            continue
        klass = dev.pci_class or ""
        if klass.startswith(prefixes):
            found.append(dev)
    return found


def summary(dev):
    """The audit schema for one device; PCIe fields are None without a PCIe capability."""
    buf = dev.config()
    cap = dev.pcie_cap_offset(buf)
    mrrs = mps = mps_supported = None
    if cap is not None:
        devctl = decode_devctl(_u16(buf, cap + PCI_EXP_DEVCTL))
        mrrs, mps = devctl["mrrs"], devctl["mps"]
        mps_supported = decode_devcap(_u32(buf, cap + PCI_EXP_DEVCAP))["mps_supported"]
    return {
        "address": dev.address,
        "vendor": dev.vendor,
        "device": dev.device,
        "class": dev.pci_class,
        "driver": dev.driver,
        "numa_node": dev.numa_node,
        "max_read_request_size": mrrs,
        "max_payload_size": mps,
        "max_payload_size_supported": mps_supported,
        "link": dev.link,
    }


def _hex16(value):
    return None if value is None else "0x%04x" % value
