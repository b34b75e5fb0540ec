# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Setting PCIe Max Read Request Size under a root: plan, write (sysfs config or setpci),
read back. The boot-time program runs these functions; the module setpci_maxreadreq's pass
and the tune's pcie part are in subjects/pcie/mrrs_part.py.

Plain Python (stdlib + platform's hostfs and runner + pci): the boot-time service ships this
file with subjects/pcie/pci.py. Reading devices and registers is pci.py's; the audit imports
only that (docs/architecture.md, "What the audit imports")."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import re
import struct

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.pci_ids import MRRS_SIZES
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import QUERY_TIMEOUT_S
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import device_owner
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    host_path,
    read_text,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie.pci import (
    DEVCTL_BIT15,
    DEVCTL_MRRS_MASK,
    DEVCTL_MRRS_SHIFT,
    GPU_CLASSES,
    NVIDIA_VENDOR,
    PCI_EXP_DEVCTL,
    PCI_HEADER_TYPE,
    PciDevice,
    PciError,
    SYSFS_DEVICES,
    _hex16,
    _u16,
    _u8,
    decode_devctl,
    normalize_address,
    select_devices,
)


LOCKDOWN = "/sys/kernel/security/lockdown"


class PciWriteError(PciError):
    """A config-space write failed or did not take."""


def lockdown_state(root):
    """The active kernel lockdown mode (``none``, ``integrity``, ``confidentiality``) or None."""
    text = read_text(host_path(root, LOCKDOWN))
    if not text:
        return None
    match = re.search(r"\[(\w+)\]", text)
    return match.group(1) if match else text


def size_field(size):
    """MRRS/MPS size in bytes -> the 3-bit field (128 -> 0 ... 4096 -> 5)."""
    try:
        value = int(size)
    except (TypeError, ValueError):
        value = None
    if value not in MRRS_SIZES:
        raise ValueError(
            "invalid Max Read Request Size %r: use 128, 256, 512, 1024, 2048 or 4096 (bytes)"
            % (size,))
    return MRRS_SIZES.index(value)


def mrrs_devctl(devctl, size, endpoint=True):
    """The Device Control word with MRRS set to ``size``: only bits 14:12 change.

    On a type-0 function (``endpoint``) bit 15 is Initiate FLR; it is always written as 0
    there (the spec says it reads 0, but a device or a capture reading 1 must not reset).
    """
    value = (int(devctl) & ~DEVCTL_MRRS_MASK & 0xFFFF) | (size_field(size) << DEVCTL_MRRS_SHIFT)
    if endpoint:
        value &= ~DEVCTL_BIT15
    return value


def _write_config(path, offset, data):
    """pwrite ``data`` at ``offset`` of a sysfs ``config`` file (the kernel does a word write
    for 2 aligned bytes). The low-level writer, kept separate so tests can stand in for a
    device that drops writes."""
    # resolved inside the root like every read; a FIFO fails at once (ENXIO), never waits
    fd = os.open(hostfs.realpath(path), os.O_WRONLY | os.O_NONBLOCK)
    try:
        written = os.pwrite(fd, data, offset)
    finally:
        os.close(fd)
    if written != len(data):
        raise OSError(errno.EIO, "short write (%d of %d bytes)" % (written, len(data)))


def _denied_message(dev, detail):
    mode = lockdown_state(dev.root)
    text = read_text(host_path(dev.root, LOCKDOWN))
    msg = "PCI device %s: writing Device Control in %s was refused (%s). " % (
        dev.address, dev.config_path, detail)
    if mode and mode != "none":
        msg += ("The kernel is in lockdown mode %r (%s reads %r), which forbids PCI config "
                "writes from user space: boot without lockdown (e.g. disable Secure Boot "
                "enforcement or set lockdown=none) to change MRRS. " % (mode, LOCKDOWN, text))
    elif text is not None:
        msg += "Kernel lockdown is off (%s reads %r). " % (LOCKDOWN, text)
    else:
        msg += "If the kernel is locked down (%s), PCI config writes are refused. " % LOCKDOWN
    msg += "Config-space writes need root (CAP_SYS_ADMIN): run with become."
    return msg


def setpci_args(dev, value, mask, setpci="setpci"):
    """The setpci command for a masked Device Control write, against ``dev.root``'s sysfs."""
    return [
        setpci, "-A", "linux-sysfs", "-O",
        "sysfs.path=%s" % host_path(dev.root, "/sys/bus/pci"),
        "-s", dev.address, "CAP_EXP+8.w=%04x:%04x" % (value, mask),
    ]


def plan_mrrs(dev, size):
    """What a write would do, without writing: a dict with ``pcie`` False when the device has
    no PCI Express capability, else devctl before/after and sizes in bytes."""
    buf = dev.config()
    cap = dev.pcie_cap_offset(buf)
    if cap is None:
        return {"pcie": False}
    before = _u16(buf, cap + PCI_EXP_DEVCTL)
    endpoint = (_u8(buf, PCI_HEADER_TYPE) & 0x7F) == 0
    after = mrrs_devctl(before, size, endpoint)
    return {
        "pcie": True,
        "cap": cap,
        "endpoint": endpoint,
        "devctl_before": before,
        "devctl_after": after,
        "before": decode_devctl(before)["mrrs"],
        "after": decode_devctl(after)["mrrs"],
        "changed": (before & DEVCTL_MRRS_MASK) != (after & DEVCTL_MRRS_MASK),
    }


def set_mrrs(dev, size, method="sysfs", runner=None):
    """Set Max Read Request Size of ``dev`` to ``size`` bytes; write only bits 14:12.

    Returns the plan dict (see ``plan_mrrs``) with ``devctl_after``/``after`` as read back.
    No write when the field already holds ``size``. Raises PciWriteError naming the device
    when the write is refused (lockdown, privileges) or did not take; ValueError for a bad
    size; PciError when the device has no PCI Express capability.
    """
    size_field(size)
    if method not in ("sysfs", "setpci"):
        raise ValueError("invalid method %r: use sysfs or setpci" % (method,))
    plan = plan_mrrs(dev, size)
    if not plan["pcie"]:
        raise PciError("PCI device %s has no PCI Express capability: no Max Read Request Size"
                       % dev.address)
    if not plan["changed"]:
        return plan
    cap, value = plan["cap"], plan["devctl_after"]
    if method == "sysfs":
        try:
            _write_config(dev.config_path, cap + PCI_EXP_DEVCTL, struct.pack("<H", value))
        except (IOError, OSError) as exc:
            if exc.errno in (errno.EPERM, errno.EACCES, errno.EROFS):
                raise PciWriteError(_denied_message(dev, exc.strerror or str(exc)))
            raise PciWriteError("PCI device %s: writing %s at %#x failed: %s" % (
                dev.address, dev.config_path, cap + PCI_EXP_DEVCTL, exc))
    else:
        if runner is None:
            raise ValueError("method setpci needs a runner")
        mask = DEVCTL_MRRS_MASK | (DEVCTL_BIT15 if plan["endpoint"] else 0)
        binary = runner.which("setpci")
        if not binary:
            raise PciWriteError("setpci not found: install pciutils, or use method sysfs")
        try:
            _rc, _out, err = runner.run(setpci_args(dev, value & mask, mask, binary),
                                        timeout=QUERY_TIMEOUT_S)
        except Exception as exc:  # the runner's CommandError (command, rc, stderr)
            raise PciWriteError("PCI device %s: %s" % (dev.address, exc))
        # setpci exits 0 even when the write failed; it only warns on stderr.
        if err and re.search(r"Operation not permitted|Permission denied", err):
            raise PciWriteError(_denied_message(dev, "setpci: %s" % err.strip()))
    buf = dev.config()
    got = _u16(buf, cap + PCI_EXP_DEVCTL)
    plan["devctl_after"] = got
    plan["after"] = decode_devctl(got)["mrrs"]
    if (got & DEVCTL_MRRS_MASK) != (value & DEVCTL_MRRS_MASK):
        raise PciWriteError(
            "PCI device %s: Max Read Request Size did not take: wanted %s bytes, read back %s "
            "bytes (Device Control %#06x, wrote %#06x, reads %#06x). The device ignores the "
            "write (QEMU's emulated PCIe devices keep 128) or its driver reset it."
            % (dev.address, size, plan["after"], plan["devctl_before"], value, got))
    return plan


def resolve_targets(root, devices=None, vendor=NVIDIA_VENDOR, classes=GPU_CLASSES,
                    include_upstream=True, owners=None):
    """``[(PciDevice, role)]``: the listed (or selected) endpoints, then every bridge between
    the host's ones and their root complex, each once (a listed device keeps role
    ``endpoint``). A bridge above only a VM's or vGPU's device is left out.

    Every address is checked before anything is written: ValueError for a malformed one,
    PciError naming all addresses that do not exist. ``owners``: a dict filled with
    ``{address: owner}`` of the endpoints (``passthrough.owner_of``), read now.
    """
    if devices:
        addresses = []
        for addr in devices:
            norm = normalize_address(addr)
            if norm not in addresses:
                addresses.append(norm)
        missing = [a for a in addresses
                   if not hostfs.lexists(host_path(root, "%s/%s" % (SYSFS_DEVICES, a)))]
        if missing:
            raise PciError(
                "PCI device%s not found under %s: %s (list devices with lspci -D; nothing "
                "was written)" % ("s" if len(missing) > 1 else "",
                                  host_path(root, SYSFS_DEVICES), ", ".join(missing)))
        endpoints = [PciDevice(root, a) for a in addresses]
    else:
        endpoints = select_devices(root, vendor, classes)
    owned = device_owner.owners(root, endpoints)
    if owners is not None:
        owners.update(owned)
    targets = [(dev, "endpoint") for dev in endpoints]
    seen = set(dev.address for dev in endpoints)
    if include_upstream:
        for dev in endpoints:
            if not device_owner.host_owned(owned[dev.address]):
                continue
            for bridge in dev.upstream():
                if bridge.address not in seen:
                    seen.add(bridge.address)
                    targets.append((bridge, "upstream"))
    return targets


def tune_mrrs(root, size=4096, devices=None, vendor=NVIDIA_VENDOR, classes=GPU_CLASSES,
              include_upstream=True, state="present", method="sysfs", runner=None,
              check_mode=False):
    """Set (``present``) or report (``query``) MRRS on the selected devices and their bridges.

    Validates everything first (size, addresses, config spaces readable), then writes each
    device that needs it, trying all of them even when one fails. Returns a dict:
    ``changed``, ``devices`` (one entry per device: ``address, role, vendor, device, before,
    after, devctl_before, devctl_after`` and ``skipped_reason`` or ``error`` when set),
    ``failed_devices`` (addresses whose write failed or did not take).
    """
    size_field(size)
    if state not in ("present", "query"):
        raise ValueError("invalid state %r: use present or query" % (state,))
    if method not in ("sysfs", "setpci"):
        raise ValueError("invalid method %r: use sysfs or setpci" % (method,))
    owners = {}
    targets = resolve_targets(root, devices, vendor, classes, include_upstream, owners)
    planned = []
    for dev, role in targets:
        entry = {"address": dev.address, "role": role, "vendor": dev.vendor,
                 "device": dev.device, "before": None, "after": None,
                 "devctl_before": None, "devctl_after": None}
        plan = None
        owner = owners.get(dev.address) if role == "endpoint" else None
        if owner is not None and not device_owner.host_owned(owner):
            entry["owner"] = owner
            entry["skipped_reason"] = device_owner.not_written_reason(owner, dev.driver)
        elif dev.physfn:
            entry["skipped_reason"] = (
                "SR-IOV virtual function of %s: its Max Read Request Size field is reserved; "
                "set it on the physical function" % dev.physfn)
        else:
            plan = plan_mrrs(dev, size)  # raises PciError before any write
            if not plan["pcie"]:
                entry["skipped_reason"] = ("no PCI Express capability (conventional PCI "
                                           "function): it has no Max Read Request Size")
                plan = None
            else:
                entry["before"] = plan["before"]
                entry["devctl_before"] = _hex16(plan["devctl_before"])
                if state == "query":
                    entry["after"] = plan["before"]
                    entry["devctl_after"] = _hex16(plan["devctl_before"])
                else:
                    entry["after"] = plan["after"]
                    entry["devctl_after"] = _hex16(plan["devctl_after"])
        planned.append((dev, entry, plan))
    changed = False
    failed = []
    for dev, entry, plan in planned:
        if plan is None or state == "query" or not plan["changed"]:
            continue
        if check_mode:
            changed = True
            continue
        try:
            done = set_mrrs(dev, size, method=method, runner=runner)
        except (PciError, OSError) as exc:
            entry["error"] = str(exc)
            failed.append(dev.address)
            try:
                now = dev.devctl
            except (PciError, OSError):
                now = None
            if now is not None:
                entry["after"] = decode_devctl(now)["mrrs"]
                entry["devctl_after"] = _hex16(now)
                changed = changed or now != plan["devctl_before"]
            continue
        entry["after"] = done["after"]
        entry["devctl_after"] = _hex16(done["devctl_after"])
        changed = True
    return {"changed": changed, "devices": [e for _d, e, _p in planned],
            "failed_devices": failed}
