# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The PCI vocabulary options and host files are written in: vendor ids, class codes,
addresses (``domain:bus:device.function``) and the Max Read Request Sizes PCIe encodes.
Plain strings and numbers, no host access: option specs and their checks (platform) use
them as well as the PCIe subject (subjects/pcie/pci.py, which reads the devices)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# The GPUs selected when nothing else is asked: NVIDIA's vendor id and the PCI display
# controller classes 0300 (VGA compatible) and 0302 (3D controller, a datacenter GPU).
NVIDIA_VENDOR = "10de"
GPU_CLASSES = ("0300", "0302")
# The Max Read Request Sizes DevCtl bits 14:12 encode (128 << field, field 0-5), in bytes.
MRRS_SIZES = (128, 256, 512, 1024, 2048, 4096)

_ADDR_RE = re.compile(
    r"^(?:(?P<domain>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{1,2}):"
    r"(?P<dev>[0-9a-fA-F]{1,2})\.(?P<fn>[0-7])$"
)


def normalize_address(addr):
    """``01:00.0`` / ``0000:01:00.0`` / ``0000:01:00.0`` upper case -> ``0000:01:00.0``."""
    text = str(addr if addr is not None else "").strip()
    match = _ADDR_RE.match(text)
    if not match:
        raise ValueError(
            "invalid PCI address %r: use domain:bus:device.function like 0000:01:00.0 "
            "or bus:device.function like 01:00.0 (as printed by lspci -D)" % (addr,)
        )
    domain = int(match.group("domain") or "0", 16)
    bus = int(match.group("bus"), 16)
    dev = int(match.group("dev"), 16)
    if dev > 0x1F:
        raise ValueError("invalid PCI address %r: device number %#x is above 0x1f" % (addr, dev))
    return "%04x:%02x:%02x.%d" % (domain, bus, dev, int(match.group("fn")))


def norm_hex(value, what):
    text = str(value).strip().lower()
    if text.startswith("0x"):
        text = text[2:]
    if not text or not re.match(r"^[0-9a-f]+$", text):
        raise ValueError("invalid %s %r: use hex digits like 10de" % (what, value))
    return text


def normalize_class(value):
    """``0300`` / ``0x0302`` / ``030200`` -> lowercase hex of 4 or 6 digits."""
    text = norm_hex(value, "PCI class")
    if len(text) not in (4, 6):
        raise ValueError(
            "invalid PCI class %r: use 4 hex digits (class and subclass, e.g. '0302') or 6 "
            "(with prog-if, e.g. '030200'); quote it in YAML, 0300 unquoted is a number"
            % (value,))
    return text
