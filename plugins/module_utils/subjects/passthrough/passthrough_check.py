# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Column Passthrough: devices VMs pass through (``hostpciN:``), their IOMMU, binding and
reset, hookscripts, vGPU, and GPUs claimed by a VM and a container
(``subjects/passthrough/vmgpu.py``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.findings import (
    check,
    column,
    found,
)


def _fact(facts):
    return facts.get("passthrough") or {}


def _applies(facts, wanted):
    fact = _fact(facts)
    if not fact.get("devices") and not fact.get("mapping_problems") and not any(
            vm.get("hookscript") for vm in fact.get("vms") or []):
        return "no VM passes a PCI device through"
    return None


COLUMN = column("passthrough", "Passthrough", position=116, applies=_applies)


def _subject(dev):
    return "vm %s %s %s" % (dev["vmid"], dev["key"], dev["address"])


def _whole(facts):
    """Devices passed whole (no mdev) that exist on this node."""
    return [d for d in _fact(facts).get("devices") or [] if d.get("exists") and not d.get("mdev")]


@check("passthrough_iommu_off", COLUMN, severity="critical", order=61)
def passthrough_iommu_off(facts, wanted):
    """VMs pass devices through but the kernel made no IOMMU groups: no VM with a
    ``hostpci`` device starts."""
    fact = _fact(facts)
    if fact.get("iommu_groups") or not fact.get("devices"):
        return
    cmdline = (facts.get("kernel") or {}).get("cmdline") or ""
    vendor = (facts.get("cpu") or {}).get("vendor") or ""
    words = cmdline.split()
    off = [w for w in words if w in ("intel_iommu=off", "amd_iommu=off", "iommu=off")]
    if off:
        remedy = "remove %s from the kernel command line, then reboot" % " ".join(off)
    elif vendor == "GenuineIntel":
        remedy = "add intel_iommu=on to the kernel command line (and VT-d in the BIOS), reboot"
    else:
        remedy = "enable the IOMMU (AMD-Vi/IOMMU) and SVM in the BIOS; AMD needs no boot " \
                 "parameter; reboot"
    yield found("iommu", "no IOMMU groups in /sys/kernel/iommu_groups",
                "IOMMU on (groups present)", remedy, reboot_required=True,
                detail="cmdline: %s%s" % (cmdline or "(empty)",
                                          "; iommu=pt set" if "iommu=pt" in words else ""))


@check("passthrough_device_missing", COLUMN, severity="high", order=62)
def passthrough_device_missing(facts, wanted):
    """A ``hostpci`` address or mapping that does not exist on this node."""
    fact = _fact(facts)
    for item in fact.get("mapping_problems") or []:
        yield found("vm %s %s" % (item["vmid"], item["key"]), item["problem"],
                    "a mapping with a map for node %s" % fact.get("node"),
                    "Datacenter > Resource Mappings: add this node's device to the mapping, "
                    "or fix the VM's %s" % item["key"])
    for dev in fact.get("devices") or []:
        if not dev.get("exists"):
            yield found(_subject(dev), "no PCI device %s on this node" % dev["address"],
                        "the device present",
                        "lspci -D to find the device's new address (BIOS or slot change?), "
                        "then qm set %s -%s <address>" % (dev["vmid"], dev["key"]))


@check("passthrough_id_mismatch", COLUMN, severity="high", order=63)
def passthrough_id_mismatch(facts, wanted):
    """The device behind a mapping is not the one the mapping recorded (vendor:device or
    subsystem id): PVE refuses to start the VM ("hardware probably changed")."""
    for dev in _fact(facts).get("devices") or []:
        if not dev.get("exists"):
            continue
        for what, now, expected in (("id", dev.get("id"), dev.get("expected_id")),
                                    ("subsystem-id", dev.get("subsystem"),
                                     dev.get("expected_subsystem"))):
            if expected and now != expected:
                yield found(_subject(dev), "%s %s" % (what, now), "%s %s" % (what, expected),
                            "check the device in the slot; if it was replaced on purpose, "
                            "edit the mapping (%s) in Datacenter > Resource Mappings"
                            % dev["via"])


@check("passthrough_iommu_group", COLUMN, severity="high", order=64)
def passthrough_iommu_group(facts, wanted):
    """The device's IOMMU group differs from the mapping's, or holds devices that are
    neither passed to the same VM nor bridges (the VM cannot own the group)."""
    for dev in _whole(facts):
        group = dev.get("iommu_group")
        if dev.get("expected_group") is not None and group != dev["expected_group"]:
            yield found(_subject(dev), "IOMMU group %s" % group,
                        "IOMMU group %s (the mapping's)" % dev["expected_group"],
                        "a kernel, BIOS or slot change moved the device: check "
                        "/sys/kernel/iommu_groups, then update the mapping")
        if dev.get("group_others"):
            yield found(_subject(dev), "IOMMU group %s also holds %s" % (
                group, ", ".join(dev["group_others"])),
                "only devices of vm %s or bridges" % dev["vmid"],
                "pass the other functions to the same VM, move the card to a slot with its "
                "own group, or enable ACS in the BIOS")


@check("passthrough_not_vfio", COLUMN, severity="medium", order=55)
def passthrough_not_vfio(facts, wanted):
    """A passed-through device on another driver than vfio-pci, with no vfio-pci binding
    at boot (``vfio-pci ids=`` or ``softdep <driver> pre: vfio-pci`` in modprobe.d, or its
    driver blacklisted): the host driver holds it until PVE rebinds it at VM start, which
    fails while the host uses it."""
    boot = _fact(facts).get("vfio_boot") or {}
    for dev in _whole(facts):
        driver = dev.get("driver")
        if driver == "vfio-pci" or dev.get("driver_option") == "keep":
            continue
        if dev.get("id") in (boot.get("ids") or []):
            continue
        if driver and (driver in (boot.get("blacklist") or [])
                       or driver in (boot.get("softdeps") or [])):
            continue
        yield found(_subject(dev), "driver %s" % (driver or "none"), "vfio-pci",
                    "echo 'options vfio-pci ids=%s' > /etc/modprobe.d/vfio.conf; "
                    "update-initramfs -u -k all; reboot (or stop the host's use of it and "
                    "start the VM)" % dev.get("id"), reboot_required=True,
                    detail="vm %s %s" % (dev["vmid"], "running" if dev.get("running")
                                         else "stopped"))


@check("passthrough_no_reset", COLUMN, severity="medium", order=59)
def passthrough_no_reset(facts, wanted):
    """A passed-through device whose ``reset_method`` is empty: it cannot be reset between
    VM starts ("failed to reset PCI device")."""
    for dev in _whole(facts):
        if dev.get("reset_method") == "":
            yield found(_subject(dev), "reset_method empty", "a reset method (flr, bus, ...)",
                        "echo bus > /sys/bus/pci/devices/%s/reset_method, or a kernel with "
                        "the device's reset quirk (vendor-reset for AMD GPUs)" % dev["address"])


@check("vm_hookscript_missing", COLUMN, severity="high", order=66)
def vm_hookscript_missing(facts, wanted):
    """A VM's ``hookscript:`` snippet missing or not executable on this node: the VM does
    not start."""
    for vm in _fact(facts).get("vms") or []:
        hook = vm.get("hookscript")
        if hook and hook.get("state") != "ok":
            yield found("vm %s hookscript" % vm["vmid"], "%s: %s" % (hook["volume"], hook["state"]),
                        "an executable snippet",
                        "copy the snippet to %s on this node and chmod +x it"
                        % (hook.get("path") or "the storage's snippets folder"))


def _mdev(facts):
    return [d for d in _fact(facts).get("devices") or [] if d.get("exists") and d.get("mdev")]


@check("vgpu_manager_not_running", COLUMN, severity="high", order=67)
def vgpu_manager_not_running(facts, wanted):
    """A VM asks for an mdev type and ``nvidia-vgpu-mgr.service`` is not running."""
    fact = _fact(facts)
    wants = sorted(set(d["vmid"] for d in _mdev(facts)
                       if (d.get("mdev") or "").startswith("nvidia")))
    if wants and not fact.get("vgpu_manager_active"):
        yield found("nvidia-vgpu-mgr", "not running", "active (VMs %s use vGPU)"
                    % ", ".join(str(v) for v in wants),
                    "systemctl enable --now nvidia-vgpu-mgr.service; if it fails, the vGPU "
                    "host driver does not match this kernel: check dkms status")


@check("vgpu_type_unavailable", COLUMN, severity="high", order=68)
def vgpu_type_unavailable(facts, wanted):
    """A VM's mdev type cannot be created: no virtual functions on the parent
    (``sriov_numvfs`` 0), the type not offered, or no instance left (VM stopped)."""
    for dev in _mdev(facts):
        if dev.get("sriov_totalvfs") and not dev.get("sriov_numvfs") and not dev.get("physfn"):
            yield found(_subject(dev), "sriov_numvfs 0", "virtual functions enabled",
                        "/usr/lib/nvidia/sriov-manage -e %s (or enable "
                        "pve-nvidia-sriov@ALL.service)" % dev["address"])
            continue
        mtype = dev.get("mdev_type") or {}
        if mtype.get("offered") is False:
            yield found(_subject(dev), "type %s not offered" % dev["mdev"],
                        "type %s in mdev_supported_types" % dev["mdev"],
                        "ls /sys/bus/pci/devices/%s/mdev_supported_types; pick an offered "
                        "type with qm set %s -%s" % (dev["address"], dev["vmid"], dev["key"]))
        elif mtype.get("offered") and mtype.get("available") == 0 and not dev.get("running"):
            yield found(_subject(dev), "type %s: 0 instances available" % dev["mdev"],
                        "an instance available", "stop the VM holding it or choose another "
                        "virtual function")


@check("gpu_vm_container_conflict", COLUMN, severity="critical", order=65)
def gpu_vm_container_conflict(facts, wanted):
    """A GPU passed to a container (its ``/dev/nvidiaN``) and named by a VM's
    ``hostpci``: starting the VM takes it from the running container."""
    for item in _fact(facts).get("conflicts") or []:
        yield found(item["address"], "lxc %s and vm %s" % (
            item["container"], ", ".join(str(v) for v in item["vms"])),
            "one owner", "remove the GPU from the container (its /dev/nvidia mount) or from "
            "the VM's hostpci, then restart the one that keeps it")
