# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA Fabric Manager on hosts with NVSwitch (HGX/DGX baseboards).

On such a host CUDA cannot use the GPUs until ``nvidia-fabricmanager`` has configured the
NVSwitch fabric, and the service refuses to run with a driver of another version. PCIe-only
hosts (no NVSwitch) do not need it.

Read from files and the one ``nvidia-smi -q -x`` of the audit:

- NVSwitches: PCI functions of vendor ``10de``, class ``0680`` (bridge, other);
- running: each GPU's ``fabric/state`` in nvidia-smi (``Completed`` with status
  ``Success`` once the manager has done its work; ``Not Started``/``In Progress`` while it
  has not), and systemd's ``/run/systemd/units/invocation:nvidia-fabricmanager.service``,
  present while the unit has an invocation;
- enabled: ``/etc/systemd/system/multi-user.target.wants/nvidia-fabricmanager.service``;
- version: the installed package in ``/var/lib/dpkg/status`` (``nvidia-fabricmanager`` or
  ``nvidia-fabricmanager-<branch>``, Debian revision dropped), compared with the loaded
  kernel module's version.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import pci
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    host_path,
    read_text,
)

UNIT = "nvidia-fabricmanager.service"
NVSWITCH_CLASSES = ("0680",)
DPKG_STATUS = "/var/lib/dpkg/status"
INVOCATION = "/run/systemd/units/invocation:" + UNIT
WANTS = "/etc/systemd/system/multi-user.target.wants/" + UNIT


def nvswitches(root, vendor="0x10de"):
    """Addresses of the NVSwitch functions under root (sysfs ``vendor`` and ``class``)."""
    found = []
    for address in pci.list_devices(root):
        folder = host_path(root, "/sys/bus/pci/devices/%s/" % address)
        if (read_text(folder + "vendor") or "").lower() != vendor:
            continue
        klass = (read_text(folder + "class") or "").lower()
        if klass.startswith(tuple("0x" + c for c in NVSWITCH_CLASSES)):
            found.append(address)
    return found


def package_version(root, prefix="nvidia-fabricmanager"):
    """``(package, upstream version)`` of the installed Fabric Manager package from dpkg's
    status file, or ``(None, None)``."""
    path = host_path(root, DPKG_STATUS)
    found = (None, None)
    fields = {}

    def take(entry):
        name = entry.get("Package", "")
        if not (name == prefix or name.startswith(prefix + "-")):
            return None
        if "installed" not in entry.get("Status", "").split():
            return None
        if name.endswith("-dev") or name.endswith("-devel"):
            return None
        version = entry.get("Version", "")
        version = version.split(":", 1)[-1].split("-", 1)[0]
        return name, version or None

    try:
        # dpkg's status of a full host is a few MiB: the cap of a stored command output
        with hostfs.open_read(path, "r", hostfs.OUTPUT_LIMIT, encoding="utf-8",
                              errors="replace") as handle:
            for line in handle:
                if line == "\n":
                    got = take(fields)
                    if got:
                        found = got
                    fields = {}
                elif not line[:1].isspace() and ":" in line:
                    key, _sep, value = line.partition(":")
                    if key in ("Package", "Status", "Version"):
                        fields[key] = value.strip()
            got = take(fields)
            if got:
                found = got
    except (IOError, OSError):
        return None, None
    return found


def facts(root, nvsmi_fact, driver_version):
    """The ``fabric_manager`` fact: ``{nvswitches, needed, unit_active, unit_enabled,
    package, version, driver_version, gpu_states: [{address, state, status}]}``."""
    switches = nvswitches(root)
    out = {"nvswitches": switches, "needed": bool(switches), "unit_active": None,
           "unit_enabled": None, "package": None, "version": None,
           "driver_version": driver_version, "gpu_states": []}
    if not switches:
        return out
    out["unit_active"] = hostfs.lexists(host_path(root, INVOCATION))
    out["unit_enabled"] = hostfs.lexists(host_path(root, WANTS))
    out["package"], out["version"] = package_version(root)
    for gpu in (nvsmi_fact or {}).get("gpus") or []:
        out["gpu_states"].append({"address": gpu.get("address"),
                                  "state": gpu.get("fabric_state"),
                                  "status": gpu.get("fabric_status")})
    return out


def problems(fact):
    """What is wrong, as ``[(what, current, expected)]``; [] when fine or not needed."""
    if not fact or not fact.get("needed"):
        return []
    found = []
    not_done = [g for g in fact.get("gpu_states") or []
                if g.get("state") is not None and (g["state"].lower() != "completed"
                                                   or (g.get("status") or "success").lower()
                                                   != "success")]
    if fact.get("version") is None:
        found.append(("not installed", "no nvidia-fabricmanager package",
                      "nvidia-fabricmanager %s installed" % (fact.get("driver_version") or "")))
    elif fact.get("driver_version") and fact["version"] != fact["driver_version"]:
        found.append(("version", "fabric manager %s, driver %s" % (
            fact["version"], fact["driver_version"]),
            "fabric manager %s (the driver's version)" % fact["driver_version"]))
    if not_done:
        states = ["%s %s/%s" % (g["address"], g["state"], g.get("status") or "-")
                  for g in not_done]
        found.append(("fabric", ", ".join(states), "every GPU's fabric state Completed/Success"))
    elif fact.get("unit_active") is False and not fact.get("gpu_states"):
        found.append(("service", "%s not running" % UNIT, "%s active" % UNIT))
    if fact.get("unit_enabled") is False and fact.get("version") is not None:
        found.append(("enabled", "%s not enabled" % UNIT, "enabled (starts at boot)"))
    return found
