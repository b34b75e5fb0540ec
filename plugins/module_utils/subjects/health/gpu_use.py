# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How many GPUs the host has and who holds them.

``gpu_count``: the NVIDIA display and 3D functions on the PCI bus (the audit's ``gpus``,
vendor ``0x10de``, classes ``0x0300``/``0x0302``) against the GPUs the driver sees: the
GPUs of ``nvidia-smi -q -x`` when the audit has it, else the folders of
``/proc/driver/nvidia/gpus/<address>/`` (one per GPU the driver registered). Only GPUs the
host owns count on the bus side (``passthrough.host_owned``: a GPU passed to a VM, bound to
vfio or running vGPU is not the host driver's), and only those bound to ``nvidia`` (a GPU
without a driver is ``gpu_no_driver``'s). The kernel log's GPUs fallen off the bus
(``host_health.lost_gpus``) come along, with the boots they were lost in.

``gpu_processes``: per GPU of ``nvidia-smi -q -x`` its ``<processes><process_info>``
(``pid``, ``type``, ``process_name``, ``used_memory``) and ``fb_memory_usage/used``; each
process mapped through ``/proc/<pid>/cgroup`` to the container that holds it (cgroup2
``0::/lxc/129/ns/...`` on Proxmox, ``0::/lxc.payload.129/...`` on LXC 4+, v1 lines
``N:controller:/lxc/129/...`` the same), and each container's GPUs from its config (the
``/dev/nvidiaN`` it binds, ``gpu_placement``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import device_owner
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import host_path
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health.host_health import (
    container_of,
)

NVIDIA_GPUS = "/proc/driver/nvidia/gpus"
NVIDIA_VENDOR = "10de"
# Memory in use on a GPU that lists no process, at or above which it is a finding (an idle
# H200 shows 0 MiB used, one CUDA context about 500 MiB).
IDLE_USED_MIB = 256
_BDF = re.compile(r"^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
_PID = re.compile(r"^\d{1,10}$")


def _norm(address):
    domain, bus, rest = address.split(":")
    dev, fn = rest.split(".")
    return "%04x:%02x:%02x.%d" % (int(domain, 16), int(bus, 16), int(dev, 16), int(fn))


def proc_gpus(root):
    """Addresses under ``/proc/driver/nvidia/gpus`` sorted, or None without the folder."""
    folder = host_path(root, NVIDIA_GPUS)
    if not hostfs.isdir(folder):
        return None
    try:
        names = hostfs.listdir(folder)
    except OSError:
        return None
    return sorted(_norm(n) for n in names if _BDF.match(n))


def count_facts(root, gpus, smi, health, expected=None):
    """The ``gpu_count`` fact: ``{bus, bus_all, bus_gpus, driver, driver_source, missing,
    expected, lost_text, boots}``; ``driver`` None when the driver's view cannot be read."""
    nvidia = [g for g in gpus or []
              if (g.get("vendor") or "").lower().replace("0x", "") == NVIDIA_VENDOR]
    bus_all = sorted(g["address"] for g in nvidia)
    bus = sorted(g["address"] for g in nvidia if g.get("driver") == "nvidia"
                 and device_owner.host_owned(g.get("owner", "host")))
    driver, source = None, None
    if (smi or {}).get("available"):
        driver = sorted(g["address"] for g in smi.get("gpus") or [] if g.get("address"))
        source = "nvidia-smi"
    else:
        listed = proc_gpus(root)
        if listed is not None:
            driver, source = listed, NVIDIA_GPUS
    missing = sorted(set(bus) - set(driver)) if driver is not None else []
    return {"bus": len(bus), "bus_all": len(bus_all), "bus_gpus": bus,
            "driver": len(driver) if driver is not None else None, "driver_source": source,
            "missing": missing, "expected": expected or None,
            "lost_text": list((health or {}).get("lost_gpus") or []),
            "boots": (health or {}).get("boots") or 0}


def cgroup_container(text):
    """The container a ``/proc/<pid>/cgroup`` text puts the process in, or None (host)."""
    for line in (text or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            ct = container_of(parts[2])
            if ct is not None:
                return ct
    return None


def _holder(root, pid):
    """``(container or None, how)`` of a process id: how is ``cgroup`` or why not known."""
    if not _PID.match(str(pid or "")):
        return None, "no pid"
    try:
        text = hostfs.read_text(host_path(root, "/proc/%s/cgroup" % pid), limit=65536)
    except (hostfs.HostFileError, IOError, OSError):  # named in errors by the session
        text = None
    if text is None:
        return None, "pid %s not in /proc (exited, or another PID namespace)" % pid
    return cgroup_container(text), "cgroup"


def process_facts(root, smi, placement):
    """The ``gpu_processes`` fact: ``[{address, index (the minor: /dev/nvidiaN),
    memory_used_mib, mig_mode, processes: [{pid, type, name, used_mib, container, how}],
    bound: [vmid...]}]`` for every GPU of nvidia-smi (empty without it)."""
    if not (smi or {}).get("available"):
        return []
    bound = {}
    for ct in (placement or {}).get("containers") or []:
        for gpu in ct.get("gpus") or []:
            if gpu.get("address"):
                bound.setdefault(gpu["address"], []).append(str(ct["vmid"]))
    out = []
    for index, gpu in enumerate(smi.get("gpus") or []):
        procs = []
        for proc in gpu.get("processes") or []:
            ct, how = _holder(root, proc.get("pid"))
            item = dict(proc)
            item.update(container=ct, how=how)
            procs.append(item)
        minor = gpu.get("minor")
        out.append({"address": gpu.get("address"),
                    "index": minor if isinstance(minor, int) else index,
                    "memory_used_mib": gpu.get("memory_used_mib"),
                    "mig_mode": gpu.get("mig_mode"), "processes": procs,
                    "bound": sorted(bound.get(gpu.get("address"), []), key=vmid_key)})
    return out


def vmid_key(vmid):
    """Sort key of container ids: numeric ones first, by number."""
    return (0, int(vmid), "") if str(vmid).isdigit() else (1, 0, str(vmid))
