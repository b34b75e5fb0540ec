# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The VMs' side of a reboot (role reboot_verify): before it, the next kernel's initramfs
must bind every GPU a VM passes through to vfio-pci (module vfio_initramfs_check); after
it, each such GPU is on vfio-pci and each VM that ran before or is ``onboot`` runs again
(module vm_verify).

Formats: the VM configs and modprobe.d as ``subjects/passthrough/vmgpu.py`` reads them;
``lsinitramfs``
listings as ``subjects/boot/initramfs_images.py``; ``qm`` as qemu-server ``src/PVE/CLI/qm.pm``
prints it
(github:proxmox/qemu-server at e6352be): ``qm status <vmid>`` -> ``status: <qmpstatus>``
(``running``, ``stopped``, ``paused``, ...), ``qm start <vmid>`` exits non-zero with the
task's error on stderr (``VM <vmid> already running`` when it runs).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import initramfs_images
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import pci
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import host_path
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.passthrough import vmgpu
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import (
    CommandError,
    CommandTimeout,
)

GPU_CLASS = "03"
VFIO = "vfio-pci"
# The host drivers that take a GPU of this vendor at boot unless vfio-pci holds it first
# (``softdep <driver> pre: vfio-pci``) or the driver is blacklisted: any one of them so
# handled counts, as for the audit's passthrough_not_vfio.
HOST_DRIVERS = {"10de": ("nvidia", "nouveau", "nvidiafb"), "1002": ("amdgpu", "radeon"),
                "8086": ("i915", "xe")}
DEFAULT_LIST_TIMEOUT = 120
DEFAULT_START_TIMEOUT = 300
STATUS_TIMEOUT = 30


def _label(dev, names):
    name = names.get(dev["vmid"])
    return "vm %s%s %s %s (%s)" % (dev["vmid"], " (%s)" % name if name else "", dev["key"],
                                   dev["address"], dev.get("id") or "?")


def passed_gpus(facts):
    """The GPUs (display class) VMs pass whole (no mdev, not ``driver=keep``) that exist."""
    return [d for d in facts.get("devices") or []
            if d.get("exists") and not d.get("mdev") and d.get("driver_option") != "keep"
            and (d.get("class") or "").startswith(GPU_CLASS)]


def loaded_host_drivers(root, dev):
    """The vendor's host drivers (``HOST_DRIVERS``) loaded now (``/sys/module/<name>``)."""
    vendor = (dev.get("id") or "").split(":")[0]
    return tuple(d for d in HOST_DRIVERS.get(vendor, ())
                 if hostfs.isdir(host_path(root, "/sys/module/" + d.replace("-", "_"))))


def at_risk(dev, loaded=()):
    """The drivers that take ``dev`` at boot unless held off: its current host driver and
    the vendor's drivers ``loaded`` now; when neither, every host driver of its vendor."""
    driver = dev.get("driver")
    needed = list(loaded)
    if driver and driver not in ("vfio-pci", "pci-stub") and driver not in needed:
        needed.append(driver)
    return needed or list(HOST_DRIVERS.get((dev.get("id") or "").split(":")[0], ()))


def binders(dev, files, loaded=()):
    """The modprobe.d files (``vmgpu.modprobe_files``) that keep ``dev`` from its host
    driver at boot. Rule: its vendor:device in ``options vfio-pci ids=`` binds it (any such
    file); otherwise every driver that could take it at boot - its current host driver, and
    the vendor's host drivers loaded now (``loaded``), or when none is, any one of the
    vendor's - must have a ``softdep <driver> pre: vfio-pci`` or ``blacklist <driver>``.
    A ``blacklist nouveau`` beside a loaded nvidia binds nothing. ``[]`` when unbound."""
    needed = at_risk(dev, loaded)
    held = set(d for item in files for d in item["softdeps"] + item["blacklist"])
    anyone = not loaded and dev.get("driver") in (None, "vfio-pci", "pci-stub")
    by_ids = any(dev.get("id") in item["ids"] for item in files)
    covered = any(d in held for d in needed) if anyone else all(d in held for d in needed)
    if not by_ids and not covered:
        return []
    return [item["file"] for item in files
            if dev.get("id") in item["ids"]
            or any(d in item["softdeps"] or d in item["blacklist"] for d in needed)]


def gate(root, kernel, lister, runner, image=initramfs_images.IMAGE, timeout=DEFAULT_LIST_TIMEOUT):
    """``{kernel, image, devices, problems, ok}``: for each GPU a VM passes through, the
    modprobe.d files binding it to vfio-pci (``files``) and those of them inside
    ``kernel``'s initramfs (``in_image``). A host with no such GPU lists nothing."""
    facts = vmgpu.collect(root)
    names = dict((vm["vmid"], vm.get("name")) for vm in facts.get("vms") or [])
    gpus = passed_gpus(facts)
    path = image.replace("{kernel}", kernel)
    out = {"kernel": kernel, "image": path, "devices": [], "problems": [], "ok": True}
    if not gpus:
        return out
    files = vmgpu.modprobe_files(root)
    wanted = []
    for dev in gpus:
        loaded = loaded_host_drivers(root, dev)
        found = binders(dev, files, loaded)
        out["devices"].append({"vmid": dev["vmid"], "name": names.get(dev["vmid"]),
                               "key": dev["key"], "address": dev["address"],
                               "id": dev.get("id"), "driver": dev.get("driver"),
                               "files": found, "in_image": []})
        wanted += [f for f in found if f not in wanted]
    listed = initramfs_images.check_images(root, [kernel], lister, runner, files=wanted,
                                           image=image, timeout=timeout)
    item = listed["images"][0]
    unreadable = not item["exists"] or (listed["problems"] and not item["present"]
                                        and not item["missing"])
    for index, dev in enumerate(gpus):
        record = out["devices"][index]
        label = _label(dev, names)
        if not record["files"]:
            risk = at_risk(dev, loaded_host_drivers(root, dev)) or ["the host driver"]
            out["problems"].append(
                "%s: nothing in /etc/modprobe.d binds it to vfio-pci at boot (no 'options "
                "vfio-pci ids=%s', and %s not blacklisted nor softdep'd), so %s takes it: "
                "echo -e 'options vfio-pci ids=%s\\nsoftdep %s pre: vfio-pci' >> "
                "/etc/modprobe.d/vfio.conf && update-initramfs -u -k %s" % (
                    label, dev.get("id"), "/".join(risk), risk[0], dev.get("id"), risk[0],
                    kernel))
            continue
        if unreadable:
            continue
        record["in_image"] = [f for f in record["files"] if f in item["present"]]
        if not record["in_image"]:
            out["problems"].append(
                "%s: %s lacks %s (its vfio-pci binding), so the host driver takes it at boot:"
                " update-initramfs -u -k %s" % (label, path, ", ".join(record["files"]), kernel))
    if unreadable:
        out["problems"] += ["%s (GPUs passed through: %s)" % (p, ", ".join(
            _label(d, names) for d in gpus)) for p in listed["problems"]]
    out["ok"] = not out["problems"]
    return out


# ---------------------------------------------------------------------------------------
# after the boot


def _tail(text):
    lines = [x.strip() for x in (text or "").splitlines() if x.strip()]
    return " / ".join(lines[-3:])


def qm_status(runner, vmid, timeout=STATUS_TIMEOUT):
    """``running``, ``stopped``, ... as ``qm status`` prints it; raises CommandError."""
    _rc, out, _err = runner.run(["qm", "status", str(vmid)], timeout=timeout)
    for line in out.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "status":
            return value.strip()
    return "unknown"


def _drivers(root, addresses):
    """``{address: driver or None}`` read from sysfs now."""
    out = {}
    for address in addresses:
        try:
            out[address] = pci.PciDevice(root, address).driver
        except pci.PciError:
            out[address] = "(device gone)"
    return out


def verify_vms(root, runner, running_before=(), start=True, qm=True, check_mode=False,
               start_timeout=DEFAULT_START_TIMEOUT):
    """Module vm_verify: ``{vms, problems}``. Each VM that passes a GPU through, ran
    before the reboot (``running_before``) or is ``onboot``: its GPUs' drivers checked, the
    VM started (``qm start``) when it should run and does not (not in check mode, only when
    ``qm``), its status read back. Every ``qm`` call is bounded (``start_timeout`` for the
    start)."""
    facts = vmgpu.collect(root)
    running_before = set(int(v) for v in running_before or ())
    gpus = passed_gpus(facts)
    records, problems = [], []
    for vm in facts.get("vms") or []:
        vmid = vm["vmid"]
        mine = [d for d in gpus if d["vmid"] == vmid]
        should_run = vmid in running_before or vm.get("onboot")
        if not mine and not should_run:
            continue
        label = "vm %s%s" % (vmid, " (%s)" % vm["name"] if vm.get("name") else "")
        record = {"vmid": vmid, "name": vm.get("name"), "onboot": bool(vm.get("onboot")),
                  "running_before": vmid in running_before, "status_before": None,
                  "started": False, "status": None, "gpus": [], "problems": [],
                  "skipped": [] if qm else ["qm status/start (root %s)" % root]}
        records.append(record)
        # read before any qm call: ``qm start`` rebinds the GPU to vfio-pci, hiding the
        # host driver that took it at boot
        at_boot = _drivers(root, [d["address"] for d in mine])
        if qm:
            try:
                record["status_before"] = qm_status(runner, vmid)
            except CommandTimeout as exc:
                record["problems"].append("qm status: %s" % exc)
            except (CommandError, OSError) as exc:  # the VM's problem, not the module's
                record["problems"].append("qm status %s failed: %s" % (vmid, _tail(str(exc))))
            record["status"] = record["status_before"]
        if qm and start and should_run and record["status_before"] == "stopped":
            if check_mode:
                record["skipped"].append("qm start %s (check mode)" % vmid)
            else:
                try:
                    rc, out, err = runner.run(["qm", "start", str(vmid)], check=False,
                                              timeout=start_timeout)
                except CommandTimeout as exc:
                    rc, out, err = None, "", str(exc)
                record["started"] = rc == 0
                if rc != 0:
                    record["problems"].append("qm start %s %s: %s" % (
                        vmid, "exited %s" % rc if rc is not None else "timed out",
                        _tail(err or out) or "no output"))
                try:
                    record["status"] = qm_status(runner, vmid)
                except (CommandError, OSError) as exc:
                    record["problems"].append("qm status after start: %s" % _tail(str(exc)))
            if record["status"] not in (None, "running") and not check_mode:
                record["problems"].append("status %s after qm start, expected running"
                                          % record["status"])
        now = _drivers(root, [d["address"] for d in mine]) if record["started"] else at_boot
        vm_runs = record["status"] == "running"
        for dev in mine:
            driver, boot = now[dev["address"]], at_boot[dev["address"]]
            bound = driver == VFIO
            record["gpus"].append({"key": dev["key"], "address": dev["address"],
                                   "id": dev.get("id"), "driver": driver,
                                   "driver_before_start": boot, "bound": bound})
            if boot not in (None, VFIO, "pci-stub", "(device gone)"):
                record["problems"].append(
                    "%s %s was on %s before qm start, not vfio-pci: the host driver took it at "
                    "boot (add 'options vfio-pci ids=%s' and 'softdep %s pre: vfio-pci' to "
                    "/etc/modprobe.d/vfio.conf, then update-initramfs -u)" % (
                        dev["key"], dev["address"], boot, dev.get("id"), boot))
                if bound:
                    continue
            if bound or (driver is None and not vm_runs) or driver == boot:
                continue  # unbound: PVE binds it to vfio-pci when the VM starts
            record["problems"].append(
                "%s %s on %s, not vfio-pci%s" % (dev["key"], dev["address"], driver or "no driver",
                                                 " while the VM runs" if vm_runs else ""))
        problems += ["%s: %s" % (label, p) for p in record["problems"]]
    return {"vms": records, "problems": problems}
