# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who owns each PCI device: the host, a VM (Proxmox ``hostpciN:``) or vGPU; read only.

Plain Python (stdlib + hostfs + pci): the boot-time program ships this file with pci.py and
setpci_maxreadreq.py (this package) and decides ownership at boot (the driver link then, and
the VM configs when ``/etc/pve`` is mounted), so a GPU given to a VM after the install is
never written.

Formats, from Proxmox's own sources:

- ``/etc/pve/qemu-server/<vmid>.conf`` (qemu-server ``src/PVE/QemuServer/PCI.pm``,
  ``$hostpci_fmt``; its tests ``src/test/cfg2cmd/q35-linux-hostpci*.conf``): the live config
  is everything before the first ``[section]`` line; ``hostpciN: <host>[,key=value...]``
  where host is ``HOSTPCIID[;HOSTPCIID2...]``, each ``[domain:]bus:dev[.func]`` in hex (no
  function: every function of the slot), or ``mapping=<id>``; options ``mdev=<type>``,
  ``driver=vfio|keep``, ``pcie=1``, ``x-vga=1``, ...; ``hookscript: <storage>:snippets/<f>``.
- ``/etc/pve/mapping/pci.cfg`` (pve-guest-common ``src/PVE/Mapping/PCI.pm``, a
  SectionConfig whose header is the bare id, ``format_section_header`` returns
  ``"$sectionId\\n"``): then indented ``map node=<n>,path=<p>[;<p>...],id=vvvv:dddd[,
  subsystem-id=vvvv:dddd][,iommugroup=N]`` lines (one per node and device), ``mdev 1``,
  ``description ...``.
- sysfs (Linux ``Documentation/ABI/testing/sysfs-bus-pci``): ``driver``, ``iommu_group``
  links, ``reset_method`` (space-separated methods, empty when none), ``sriov_numvfs``,
  ``physfn``/``virtfnN`` links, ``mdev_supported_types/<type>/available_instances``
  (``Documentation/driver-api/vfio-mediated-device.rst``), NVIDIA's
  ``nvidia/creatable_vgpu_types`` (kernel 6.8+ vGPU, qemu-server ``PCI/Mdev.pm``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import pci
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    host_path,
    read_text,
)

QEMU_DIR = "/etc/pve/qemu-server"
MAPPING_FILE = "/etc/pve/mapping/pci.cfg"
HOSTNAME_FILE = "/etc/hostname"
PASSTHROUGH_DRIVERS = ("vfio-pci", "pci-stub")
# Owners whose GPU the host's rules judge and the tune writes: bound to a host driver, or
# to none (gpu_no_driver's case). The others: ``vm <vmid>``, ``vgpu``, ``vfio``.
HOST_OWNERS = ("host", "none")
MAX_CONFIGS = 4096

_CONF = re.compile(r"^([0-9]+)\.conf$")
_HOSTPCI = re.compile(r"^hostpci([0-9]+)$")
_ID_RE = re.compile(r"^(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.([0-7]))?$")
_SECTION = re.compile(r"^\[[^\]]*\]\s*$")


# ---------------------------------------------------------------------------------------
# parsers (pure)


def property_string(text):
    """``0000:81:00.0,pcie=1,x-vga=1`` -> ``{"host": "0000:81:00.0", "pcie": "1", ...}``: a
    part without ``=`` is the default key ``host`` (PVE's ``default_key``)."""
    out = {}
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        if "=" in part:
            key, _sep, value = part.partition("=")
            out[key.strip()] = value.strip()
        else:
            out["host"] = part
    return out


def parse_vm_config(text):
    """``{name, onboot, hookscript, hostpci: [{key, host, mapping, mdev, driver, raw}]}`` of the
    live section of a qemu-server config (snapshots and ``[PENDING]`` left out)."""
    values = {}
    hostpci = []
    for line in (text or "").splitlines():
        if _SECTION.match(line):
            break
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        values[key] = value
        match = _HOSTPCI.match(key)
        if match:
            props = property_string(value)
            hostpci.append({
                "key": key,
                "host": [h for h in (props.get("host") or "").split(";") if h],
                "mapping": props.get("mapping"),
                "mdev": props.get("mdev"),
                "driver": props.get("driver") or "vfio",
                "raw": value,
            })
    hostpci.sort(key=lambda d: int(_HOSTPCI.match(d["key"]).group(1)))
    return {"name": values.get("name"),
            "onboot": values.get("onboot") in ("1", "yes", "on", "true"),
            "hookscript": values.get("hookscript"), "hostpci": hostpci}


def parse_mapping(text):
    """``{id: {mdev, maps: [{node, path: [...], id, subsystem-id, iommugroup}]}}`` of
    ``mapping/pci.cfg`` (a section header is the bare id; properties are indented)."""
    out = {}
    current = None
    for line in (text or "").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line[:1].isspace():
            name = line.strip()
            if name.startswith("pci:"):  # tolerated: a hand-written typed header
                name = name[4:].strip()
            current = out.setdefault(name, {"mdev": False, "maps": []})
            continue
        if current is None:
            continue
        key, _sep, value = line.strip().partition(" ")
        value = value.strip()
        if key == "map":
            props = property_string(value)
            group = props.get("iommugroup")
            current["maps"].append({
                "node": props.get("node"),
                "path": [p for p in (props.get("path") or "").split(";") if p],
                "id": (props.get("id") or "").lower() or None,
                "subsystem-id": (props.get("subsystem-id") or "").lower() or None,
                "iommugroup": int(group) if group and group.isdigit() else None,
            })
        elif key == "mdev":
            current["mdev"] = value in ("1", "true", "yes", "on")
    return out


def expand_id(root, hostpci_id):
    """A HOSTPCIID -> the sysfs addresses it names: ``81:00.0`` -> ``[0000:81:00.0]``;
    ``81:00`` (no function: the whole slot) -> every function of it under ``root`` (``.0``
    when none exists, so a missing device is still named). ``[]`` for a malformed id."""
    match = _ID_RE.match((hostpci_id or "").strip())
    if not match:
        return []
    domain = int(match.group(1) or "0", 16)
    base = "%04x:%02x:%02x" % (domain, int(match.group(2), 16), int(match.group(3), 16))
    if match.group(4) is not None:
        return ["%s.%s" % (base, match.group(4))]
    present = [a for a in pci.list_devices(root) if a.startswith(base + ".")]
    return present or [base + ".0"]


# ---------------------------------------------------------------------------------------
# readers


def node_name(root):
    """This node's name as PVE uses it (the short host name), or None."""
    text = read_text(host_path(root, HOSTNAME_FILE))
    return text.split()[0].split(".")[0] if text else None


def vm_configs(root, config_dir=QEMU_DIR):
    """``[{vmid, path, name, onboot, hookscript, hostpci}]`` of this node's VM configs."""
    out = []
    for vmid, path in hostfs.numbered_entries(host_path(root, config_dir), _CONF,
                                              files_only=True)[:MAX_CONFIGS]:
        entry = parse_vm_config(read_text(path) or "")
        entry.update(vmid=vmid, path="/" + os.path.relpath(path, os.path.abspath(root or "/")))
        out.append(entry)
    return out


def mappings(root):
    """The parsed ``mapping/pci.cfg`` (``{}`` without one)."""
    return parse_mapping(read_text(host_path(root, MAPPING_FILE)) or "")


def resolve(root, device, maps, node):
    """``(addresses, map entry or None, problem or None)`` of one hostpci entry."""
    if device.get("mapping"):
        mapping = maps.get(device["mapping"])
        if mapping is None:
            return [], None, "mapping %s is not in %s" % (device["mapping"], MAPPING_FILE)
        mine = [m for m in mapping["maps"] if node is None or m.get("node") == node]
        if not mine:
            return [], None, "mapping %s has no map for node %s" % (device["mapping"], node)
        addresses = []
        for entry in mine:
            for path in entry["path"]:
                addresses += [a for a in expand_id(root, path) if a not in addresses]
        return addresses, mine[0], None
    addresses = []
    for hid in device.get("host") or []:
        found = expand_id(root, hid)
        if not found:
            return [], None, "malformed PCI id %r" % hid
        addresses += [a for a in found if a not in addresses]
    return addresses, None, None


def claims(root, vms=None, maps=None, node=None):
    """``{address: [{vmid, key, via, mdev}]}``: every device a VM config on this node names
    (by address, or by mapping for this node), in VMID order."""
    vms = vm_configs(root) if vms is None else vms
    maps = mappings(root) if maps is None else maps
    node = node_name(root) if node is None else node
    out = {}
    for vm in vms:
        for device in vm["hostpci"]:
            addresses, _entry, _problem = resolve(root, device, maps, node)
            via = "mapping %s" % device["mapping"] if device.get("mapping") else "address"
            for address in addresses:
                out.setdefault(address, []).append(
                    {"vmid": vm["vmid"], "key": device["key"], "via": via,
                     "mdev": device.get("mdev")})
    return out


def _link_name(path):
    if not hostfs.islink(path):
        return None
    return os.path.basename(hostfs.readlink(path).rstrip("/")) or None


def vgpu_capable(dev):
    """True when ``dev`` is split for vGPU: SR-IOV virtual functions enabled, mediated
    device types offered, NVIDIA's vGPU sysfs, or it is itself a virtual function."""
    numvfs = read_text(os.path.join(dev.path, "sriov_numvfs"))
    if numvfs and numvfs.isdigit() and int(numvfs) > 0:
        return True
    if dev.physfn:
        return True
    return (hostfs.isdir(os.path.join(dev.path, "mdev_supported_types"))
            or hostfs.exists(os.path.join(dev.path, "nvidia", "creatable_vgpu_types")))


def owner_of(dev, claimed):
    """``vm <vmid>[,<vmid>]`` (a VM config names it, no mdev), ``vgpu`` (a vGPU parent or
    virtual function), ``vfio`` (bound to vfio-pci or pci-stub, no VM names it), ``host``
    (bound to another driver) or ``none`` (no driver)."""
    mine = claimed.get(dev.address) or []
    whole = sorted(set(c["vmid"] for c in mine if not c.get("mdev")))
    if whole:
        return "vm " + ",".join(str(v) for v in whole)
    if mine or vgpu_capable(dev):
        return "vgpu"
    driver = dev.driver
    if driver in PASSTHROUGH_DRIVERS:
        return "vfio"
    return "host" if driver else "none"


def owners(root, devices, claimed=None):
    """``{address: owner}`` of ``devices`` (PciDevice); claims read once."""
    claimed = claims(root) if claimed is None else claimed
    return dict((dev.address, owner_of(dev, claimed)) for dev in devices)


def host_owned(owner):
    """True when the host's rules and writes apply to a device of this owner."""
    return owner in HOST_OWNERS


def not_written_reason(owner, driver):
    return ("owner %s (driver %s): the VM's or the vGPU manager's driver owns its config "
            "space; not written (setpci it yourself inside the guest if needed)"
            % (owner, driver or "none"))
