# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the host under ``root`` is: a Proxmox VE node, another physical host, a container
or a virtual machine guest.

The roles that change a host refuse a container or a VM guest (tuning a guest's sysctls,
idle states or boot loader does not tune the node its GPUs sit in, and rebooting it is not
the node's rollout); the audit says what it found. Read from the files systemd-detect-virt
reads (systemd src/basic/virt.c: detect_container, detect_vm_dmi, detect_vm_cpuid), all
under ``root``:

- ``/proc/1/environ``: NUL-separated ``NAME=value``; LXC (Proxmox containers included),
  podman and systemd-nspawn start init with ``container=<manager>`` (``lxc``, ``podman``,
  ``systemd-nspawn``).
- ``/run/systemd/container``: one line, the manager's name, written by systemd in a
  container; ``/run/host/container-manager``: the same, from the container manager
  (systemd's Container Interface); ``/.dockerenv``: docker, which sets neither.
- ``/proc/cpuinfo``: the ``hypervisor`` word in a processor's ``flags`` line (CPUID leaf 1,
  ECX bit 31, set by every x86 hypervisor for its guests).
- ``/sys/class/dmi/id/{product_name,sys_vendor,board_vendor,bios_vendor}``: a QEMU/KVM guest
  (Proxmox VMs included) reads sys_vendor ``QEMU`` and product_name ``Standard PC (Q35 +
  ICH9, 2009)`` or ``Standard PC (i440FX + PIIX, 1996)`` (``KVM`` on older machine types);
  VMware ``VMware, Inc.`` / ``VMware Virtual Platform`` (or ``VMware7,1``); Hyper-V and
  Azure ``Microsoft Corporation`` / ``Virtual Machine``; VirtualBox ``innotek GmbH``; Xen
  ``Xen``; Bochs ``Bochs``; Parallels; bhyve ``BHYVE``.
- ``/etc/pve``: the cluster file system (pmxcfs) every Proxmox VE node mounts; a container
  or a VM guest has none. A node that is itself a VM (a nested lab node) is a node.

A missing file is no evidence either way: a host with nothing of the above is ``host``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    host_path,
    read_text,
)

# What a finding, a refusal and the facts call each kind.
NODE = "proxmox_node"
HOST = "host"
CONTAINER = "container"
VM = "vm"
GUESTS = (CONTAINER, VM)

ENVIRON_LIMIT = 256 << 10  # init's environment is a few KiB; ARG_MAX-sized at most
CPUINFO_LINES = 64         # the first processor's flags line comes within its block

# DMI strings of hypervisors (prefixes, as systemd's detect_vm_dmi compares them): value ->
# the name reported. "Amazon EC2" and "Google Compute Engine" are left out: their bare-metal
# instances read the same, and their VMs set the cpuinfo hypervisor flag anyway.
DMI_VENDORS = (
    ("KVM", "kvm"),
    ("OpenStack", "kvm"),
    ("KubeVirt", "kvm"),
    ("QEMU", "qemu"),
    ("Standard PC (", "qemu"),
    ("VMware", "vmware"),
    ("VMW", "vmware"),
    ("innotek GmbH", "oracle"),
    ("VirtualBox", "oracle"),
    ("Xen", "xen"),
    ("Bochs", "bochs"),
    ("Parallels", "parallels"),
    ("BHYVE", "bhyve"),
    ("Apple Virtualization", "apple"),
)
DMI_FILES = ("product_name", "sys_vendor", "board_vendor", "bios_vendor")


def _first_line(root, path):
    text = read_text(host_path(root, path))
    return text.splitlines()[0].strip() if text else None


def container_manager(root):
    """``(manager, evidence)`` when ``root`` is a container, else ``(None, None)``. A
    /proc/1/environ the audit may not read (a sandboxed kernel refuses it even to root, as the
    lent GPU machines' Firecracker and gVisor guests do) tells nothing: the other signals
    decide (anything else that stops the read, a planted FIFO say, is still the audit's
    error)."""
    try:
        data = hostfs.read_bytes(host_path(root, "/proc/1/environ"), limit=ENVIRON_LIMIT)
    except (IOError, OSError) as exc:
        if getattr(exc, "errno", None) not in (errno.EACCES, errno.EPERM):
            raise
        data = None
    for entry in (data or b"").split(b"\0"):
        if entry.startswith(b"container="):
            name = entry[len(b"container="):].decode("utf-8", "replace").strip()
            if name:
                return name, "/proc/1/environ container=%s" % name
    for path in ("/run/systemd/container", "/run/host/container-manager"):
        name = _first_line(root, path)
        if name:
            return name, "%s: %s" % (path, name)
    if hostfs.exists(host_path(root, "/.dockerenv")):
        return "docker", "/.dockerenv"
    return None, None


def hypervisor_flag(root):
    """Whether the first processor's ``flags`` line in /proc/cpuinfo holds ``hypervisor``
    (None when there is no cpuinfo or no flags line)."""
    try:
        handle = hostfs.open_read(host_path(root, "/proc/cpuinfo"), "r", errors="replace")
    except (IOError, OSError) as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        raise
    with handle:
        for count, line in enumerate(handle):
            if count >= CPUINFO_LINES:
                break
            name, sep, value = line.partition(":")
            if sep and name.strip() == "flags":
                return "hypervisor" in value.split()
    return None


def dmi(root):
    """``{file: first line}`` of the DMI files that exist."""
    out = {}
    for name in DMI_FILES:
        value = _first_line(root, "/sys/class/dmi/id/" + name)
        if value:
            out[name] = value
    return out


def dmi_hypervisor(values):
    """``(name, evidence)`` of the hypervisor the DMI strings name, else ``(None, None)``."""
    for name in DMI_FILES:
        value = values.get(name) or ""
        for prefix, kind in DMI_VENDORS:
            if value.startswith(prefix):
                return kind, "/sys/class/dmi/id/%s: %s" % (name, value)
    if (values.get("sys_vendor") == "Microsoft Corporation"
            and values.get("product_name") == "Virtual Machine"):
        return "microsoft", ("/sys/class/dmi/id/sys_vendor, product_name: Microsoft "
                             "Corporation, Virtual Machine")
    return None, None


def proxmox_node(root):
    """Whether ``root`` has /etc/pve (pmxcfs) as a folder."""
    return hostfs.isdir(host_path(root, "/etc/pve"))


def detect(root):
    """``{kind, guest, technology, proxmox_node, evidence, dmi}``: ``kind`` one of
    proxmox_node, host, container, vm; ``guest`` true for a container or a VM guest;
    ``technology`` the container manager or hypervisor (None on a physical host);
    ``evidence`` the lines that decided it."""
    evidence = []
    manager, why = container_manager(root)
    node = proxmox_node(root)
    values = dmi(root)
    hypervisor, dmi_why = dmi_hypervisor(values)
    flag = hypervisor_flag(root)
    if manager:
        evidence.append(why)
        kind, technology = CONTAINER, manager
    else:
        if flag:
            evidence.append("/proc/cpuinfo flags: hypervisor")
        if dmi_why:
            evidence.append(dmi_why)
        technology = hypervisor or ("unknown hypervisor" if flag else None)
        kind = VM if technology else HOST
        if node:
            evidence.append("/etc/pve (pmxcfs) present")
            kind = NODE
    return {
        "kind": kind,
        "guest": kind in GUESTS,
        "technology": technology,
        "proxmox_node": bool(node),
        "evidence": evidence,
        "dmi": values,
    }


def describe(facts):
    """One phrase for a message: ``an LXC container (/proc/1/environ container=lxc)``."""
    facts = facts or {}
    kind = facts.get("kind")
    why = "; ".join(facts.get("evidence") or []) or "no evidence"
    if kind == CONTAINER:
        return "a container (%s; %s)" % (facts.get("technology"), why)
    if kind == VM:
        return "a virtual machine guest (%s; %s)" % (facts.get("technology"), why)
    if kind == NODE:
        return "a Proxmox VE node (%s)" % why
    return "a host that is neither a container nor a VM guest (no /etc/pve)"


def refusal(facts, host, root, changer):
    """Why ``changer`` (``role tune``, ``host_tune``, ...) changes nothing on the host under
    ``root`` whose facts say it is a container or a VM guest, or cannot say what it is;
    None for a host that is no guest. The one text of the roles' guest check (module
    host_kind returns it) and of host_tune's option ``guest``."""
    facts = facts or {}
    if facts.get("guest") is False:
        return None
    kinds = {CONTAINER: "a container", VM: "a virtual machine guest"}
    what = kinds.get(facts.get("kind"), "a host whose kind could not be read")
    why = "%s: %s" % (facts["technology"], "; ".join(facts.get("evidence") or [])) \
        if facts.get("technology") else (facts.get("error") or "no virt facts")
    return ("%s (%s) is %s (%s)%s: %s changes nothing on it. Target the Proxmox VE node that "
            "hosts it (the example inventories hold the nodes only); to tune a GPU VM guest "
            "on purpose set gpuhost_allow_guest=true" % (
                host or "the host", root, what, why,
                " and not a Proxmox VE node (no /etc/pve)" if facts.get("kind") == VM else "",
                changer))


def guest_warning(facts, host, how=None):
    """The warning for a guest changed on purpose (``how``: what passed it on, if not the
    role's variable itself), or None for a host that is no guest."""
    facts = facts or {}
    if not facts.get("guest"):
        return None
    return "%s is a %s guest (%s); changed because gpuhost_allow_guest is true%s" % (
        host, facts.get("kind"), "; ".join(facts.get("evidence") or []),
        " (%s)" % how if how else "")
