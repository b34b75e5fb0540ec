# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit's ``passthrough`` facts: every device a VM config passes through, what sysfs
says about it, the IOMMU, the boot-time vfio binding, hookscripts and vGPU; read only.

Formats: see ``subjects/pcie/device_owner.py`` (qemu-server ``PCI.pm``, pve-guest-common
``Mapping/PCI.pm``). ``/etc/pve/storage.cfg`` is a SectionConfig (``<type>: <id>`` then
indented ``path <dir>``; pve-storage ``PVE/Storage/Plugin.pm``): a hookscript volume
``<storage>:snippets/<file>`` is ``<path>/snippets/<file>``. modprobe.d lines as
``modprobe.d(5)``: ``options vfio-pci ids=vvvv:dddd[:svvv:sddd][,...]``, ``softdep <mod>
pre: vfio-pci``, ``blacklist <mod>``. A running VM has ``/run/qemu-server/<vmid>.pid``; a
running unit ``/run/systemd/units/invocation:<unit>`` (systemd since v236).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import device_owner
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import pci
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import pci_p2p
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    host_path,
    read_text,
)

STORAGE_CFG = "/etc/pve/storage.cfg"
MODPROBE_DIR = "/etc/modprobe.d"
VGPU_UNIT = "nvidia-vgpu-mgr.service"
VGPU_INVOCATION = "/run/systemd/units/invocation:" + VGPU_UNIT
PID_DIR = "/run/qemu-server"
DEFAULT_STORAGE_PATHS = {"local": "/var/lib/vz"}
BRIDGE_CLASS = "06"
_MODPROBE = re.compile(r"^[^.].*\.conf$")


def storage_paths(root):
    """``{storage id: path}`` of the directory-like storages in ``storage.cfg``."""
    out = dict(DEFAULT_STORAGE_PATHS)
    current = None
    for line in (read_text(host_path(root, STORAGE_CFG)) or "").splitlines():
        if line and not line[:1].isspace():
            _kind, _sep, name = line.partition(":")
            current = name.strip() or None
        elif current and line.strip().startswith("path "):
            out[current] = line.strip()[5:].strip()
    return out


def hookscript(root, volume, paths):
    """``{volume, path, state}``: ``ok``, ``missing``, ``not executable`` or ``unknown
    storage``."""
    storage, _sep, rest = (volume or "").partition(":")
    base = paths.get(storage)
    if base is None or not rest:
        return {"volume": volume, "path": None, "state": "unknown storage"}
    path = "%s/%s" % (base.rstrip("/"), rest)
    full = host_path(root, path)
    if not hostfs.isfile(full):
        state = "missing"
    else:
        state = "ok" if hostfs.stat(full).st_mode & 0o111 else "not executable"
    return {"volume": volume, "path": path, "state": state}


def modprobe_files(root):
    """``[{file, ids, softdeps, blacklist}]``, one per modprobe.d file that binds anything to
    vfio-pci at boot: vendor:device ids given to vfio-pci, modules loaded after vfio-pci
    (``softdep <m> pre: vfio-pci``), blacklisted modules."""
    out = []
    folder = host_path(root, MODPROBE_DIR)
    try:
        names = sorted(n for n in hostfs.listdir(folder) if _MODPROBE.match(n))
    except OSError:
        names = []
    for name in names:
        text = read_text(os.path.join(folder, name)) or ""
        item = {"file": "%s/%s" % (MODPROBE_DIR, name), "ids": [], "softdeps": [],
                "blacklist": []}
        for line in text.splitlines():
            words = line.split("#", 1)[0].split()
            if len(words) >= 3 and words[0] == "options" and words[1] in ("vfio-pci", "vfio_pci"):
                for word in words[2:]:
                    if word.startswith("ids="):
                        item["ids"] += [":".join(i.split(":")[:2]).lower()
                                        for i in word[4:].split(",") if i]
            elif len(words) >= 4 and words[0] == "softdep" and "pre:" in words and (
                    "vfio-pci" in words or "vfio_pci" in words):
                item["softdeps"].append(words[1])
            elif len(words) == 2 and words[0] == "blacklist":
                item["blacklist"].append(words[1])
        if item["ids"] or item["softdeps"] or item["blacklist"]:
            out.append(item)
    return out


def vfio_boot(root):
    """``{ids, softdeps, blacklist, files}`` of modprobe.d (``modprobe_files`` merged)."""
    out = {"ids": [], "softdeps": [], "blacklist": [], "files": []}
    for item in modprobe_files(root):
        for key in ("ids", "softdeps", "blacklist"):
            out[key] += item[key]
        out["files"].append(item["file"])
    return out


def _ids(dev):
    sub_v = read_text(os.path.join(dev.path, "subsystem_vendor"))
    sub_d = read_text(os.path.join(dev.path, "subsystem_device"))
    sub = None
    if sub_v and sub_d:
        sub = "%s:%s" % (sub_v.lower().replace("0x", ""), sub_d.lower().replace("0x", ""))
    return "%s:%s" % (dev.vendor, dev.device), sub


def _group_members(root, number):
    folder = host_path(root, "%s/%d/devices" % (pci_p2p.IOMMU_GROUPS, number))
    try:
        return sorted(n for n in hostfs.listdir(folder) if pci.is_address(n))
    except OSError:
        return []


def mdev_type(dev, wanted):
    """``{offered, available}`` of the mdev type ``wanted`` on ``dev``: offered None when
    the device offers no mdev ABI (``nvidia/creatable_vgpu_types`` is read through NVML by
    PVE, so it is not judged here)."""
    folder = os.path.join(dev.path, "mdev_supported_types")
    if not hostfs.isdir(folder):
        return {"offered": None, "available": None}
    if not hostfs.isdir(os.path.join(folder, wanted)):
        return {"offered": False, "available": None}
    text = read_text(os.path.join(folder, wanted, "available_instances"))
    return {"offered": True, "available": int(text) if text and text.isdigit() else None}


def _device(root, vm, device, address, entry, claimed, running):
    item = {"vmid": vm["vmid"], "key": device["key"], "address": address,
            "via": "mapping %s" % device["mapping"] if device.get("mapping") else "address",
            "mdev": device.get("mdev"), "driver_option": device.get("driver"),
            "running": running, "exists": False}
    try:
        dev = pci.PciDevice(root, address)
    except pci.PciError:
        return item
    item["exists"] = True
    item["id"], item["subsystem"] = _ids(dev)
    item["driver"] = dev.driver
    item["class"] = dev.pci_class
    if entry is not None:
        item["expected_id"] = entry.get("id")
        item["expected_subsystem"] = entry.get("subsystem-id")
        item["expected_group"] = entry.get("iommugroup")
    number, _kind = pci_p2p.iommu_group(dev)
    item["iommu_group"] = number
    others = []
    for member in _group_members(root, number) if number is not None else []:
        if member == address:
            continue
        if vm["vmid"] in [c["vmid"] for c in claimed.get(member) or []]:
            continue
        try:
            klass = pci.PciDevice(root, member).pci_class or ""
        except pci.PciError:
            klass = ""
        if not klass.startswith(BRIDGE_CLASS):
            others.append(member)
    item["group_others"] = others
    reset = os.path.join(dev.path, "reset_method")
    item["reset_method"] = read_text(reset) if hostfs.exists(reset) else None
    if device.get("mdev"):
        numvfs = read_text(os.path.join(dev.path, "sriov_numvfs"))
        total = read_text(os.path.join(dev.path, "sriov_totalvfs"))
        item["sriov_numvfs"] = int(numvfs) if numvfs and numvfs.isdigit() else None
        item["sriov_totalvfs"] = int(total) if total and total.isdigit() else None
        item["physfn"] = dev.physfn
        item["mdev_type"] = mdev_type(dev, device["mdev"])
    return item


def _mapped_heads(root, entry):
    """``{address: expected props}`` as PVE's ``Mapping::PCI::assert_valid`` checks them:
    each path's own function (``.0`` when the path names the whole device) for id and
    subsystem-id, the first path alone for the IOMMU group."""
    out = {}
    for index, path in enumerate((entry or {}).get("path") or []):
        head = device_owner.expand_id(root, path if "." in path.split(":")[-1] else path + ".0")
        if head:
            props = dict(entry)
            if index:
                props["iommugroup"] = None
            out.setdefault(head[0], props)
    return out


def collect(root, containers=()):
    """``{node, vms, devices, mapping_problems, iommu_groups, vfio_boot, vgpu_manager_active,
    conflicts}``; ``containers``: the ``gpu_placement`` containers (``vmid``, ``gpus`` with
    ``address``) before the host's view drops the VMs' GPUs."""
    node = device_owner.node_name(root)
    vms = device_owner.vm_configs(root)
    maps = device_owner.mappings(root)
    claimed = device_owner.claims(root, vms, maps, node)
    paths = storage_paths(root)
    out_vms, devices, problems = [], [], []
    for vm in vms:
        running = hostfs.exists(host_path(root, "%s/%d.pid" % (PID_DIR, vm["vmid"])))
        out_vms.append({"vmid": vm["vmid"], "name": vm.get("name"), "path": vm["path"],
                        "onboot": vm["onboot"],
                        "running": running, "devices": [d["key"] for d in vm["hostpci"]],
                        "hookscript": hookscript(root, vm["hookscript"], paths)
                        if vm["hookscript"] else None})
        for device in vm["hostpci"]:
            addresses, entry, problem = device_owner.resolve(root, device, maps, node)
            if problem:
                problems.append({"vmid": vm["vmid"], "key": device["key"], "problem": problem})
            checked = _mapped_heads(root, entry)
            for address in addresses:
                devices.append(_device(root, vm, device, address, checked.get(address),
                                       claimed, running))
    conflicts = []
    for ct in containers or ():
        for gpu in ct.get("gpus") or []:
            vmids = sorted(set(c["vmid"] for c in claimed.get(gpu.get("address")) or []))
            if vmids:
                conflicts.append({"container": ct["vmid"], "address": gpu["address"],
                                  "vms": vmids})
    groups = host_path(root, pci_p2p.IOMMU_GROUPS)
    try:
        group_count = len(hostfs.listdir(groups))
    except OSError:
        group_count = 0
    return {"node": node, "vms": out_vms, "devices": devices, "mapping_problems": problems,
            "iommu_groups": group_count, "vfio_boot": vfio_boot(root) if devices else None,
            "vgpu_manager_active": hostfs.lexists(host_path(root, VGPU_INVOCATION)),
            "conflicts": conflicts}
