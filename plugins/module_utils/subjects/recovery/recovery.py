# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What each GPU needs to recover, derived from facts the audit already read (nothing here
reads the host): the driver's recovery action (``nvidia-smi -q -x``
``<gpu_recovery_action>``, 550 and later: ``None``, ``Reset``, ``Reboot``, ``Drain P2P``,
``Drain and Reset``, NVML's nvmlGpuRecoveryAction_t), the XID events of the kernel log's
window by NVIDIA's catalogue (subjects/health/xid.py), a pending row remap, NVLink links
inactive after an NVLink XID since this boot (``NVLINK_XIDS``: the links do not train again
until the GPU is reset), and the GPU's holders: the containers whose processes use it or
whose config binds it, the VMs it is passed to, and host processes outside any container.

The driver's answer is the GPU's state now: where it gives one, the XID events are evidence
but do not raise the need (a reset done since the event leaves the driver at ``None``).
Where it gives none (an older driver, a GPU nvidia-smi no longer lists after XID 79), the
worst XID class since this boot decides.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# The needs, mildest first.
NEEDS = ("none", "drain_p2p", "reset", "drain_and_reset", "reboot")
NEED_RANK = dict((name, index) for index, name in enumerate(NEEDS))

# The driver's recovery action text (lower case) -> the need.
DRIVER_ACTIONS = {
    "none": "none",
    "reset": "reset",
    "gpu reset": "reset",
    "gpu reset required": "reset",
    "reboot": "reboot",
    "node reboot": "reboot",
    "node reboot required": "reboot",
    "drain p2p": "drain_p2p",
    "drain and reset": "drain_and_reset",
}

# NVLink XIDs after which links found inactive now need the GPU reset (NVIDIA's Xid
# catalogue: 149 NETIR, and the other NVLink XIDs of its RESET_GPU bucket).
NVLINK_XIDS = (74, 144, 145, 146, 147, 148, 149, 150, 155)

# An XID class (subjects/health/xid.py) -> the need; a reset or reboot that came back three
# times or more (``hardware``) needs the reboot first, then service.
XID_CLASSES = {"reset_gpu": "reset", "reboot": "reboot", "hardware": "reboot"}


def worst(needs):
    return max(needs, key=lambda need: NEED_RANK[need]) if needs else "none"


def driver_need(text):
    """The need of the driver's recovery action ``text``; None when the driver gave none
    (absent, ``N/A``) or one this table does not know (kept as evidence)."""
    if not text:
        return None
    return DRIVER_ACTIONS.get(" ".join(str(text).lower().split()))


def _xid_evidence(device):
    """``(needs, evidence)`` of one kernel-log device: its XID codes since this boot."""
    needs, evidence = [], []
    for code in device.get("codes") or []:
        if code.get("before_boot"):
            continue
        cls = code.get("class")
        if cls in XID_CLASSES:
            needs.append(XID_CLASSES[cls])
            evidence.append("XID %s x%s (%s%s)" % (
                code.get("code"), code.get("count"), code.get("description"),
                ", last %s" % code["last"] if code.get("last") else ""))
    if device.get("worst") == "hardware":
        needs.append("reboot")
    return needs, evidence


def holders(address, processes, passthrough):
    """``{containers, vms, processes}`` holding GPU ``address``: containers (vmids, as
    strings) whose processes use it or whose config binds it, VMs it is passed to, and host
    processes outside any container (``{pid, name}``)."""
    containers, host = set(), []
    for gpu in processes or []:
        if gpu.get("address") != address:
            continue
        containers.update(str(vmid) for vmid in gpu.get("bound") or [])
        for proc in gpu.get("processes") or []:
            if proc.get("container"):
                containers.add(str(proc["container"]))
            else:
                host.append({"pid": proc.get("pid"), "name": proc.get("name")})
    vms = sorted(set(str(d["vmid"]) for d in (passthrough or {}).get("devices") or []
                     if d.get("address") == address))
    return {"containers": sorted(containers, key=_vmid_key), "vms": vms, "processes": host}


def _vmid_key(vmid):
    return (0, int(vmid), "") if vmid.isdigit() else (1, 0, vmid)


def _links_down(device, nvlink_gpu):
    """The evidence line for links inactive after an NVLink XID since this boot, or None."""
    codes = [c["code"] for c in (device or {}).get("codes") or []
             if c.get("code") in NVLINK_XIDS and not c.get("before_boot")]
    inactive = (nvlink_gpu or {}).get("inactive") or []
    if not codes or not inactive:
        return None
    return "NVLink links %s inactive after XID %s" % (
        ", ".join(str(link) for link in inactive), ", ".join(str(c) for c in sorted(codes)))


def facts(smi, kernel_log, processes, passthrough, nvlink=None):
    """The ``gpu_recovery`` fact: ``[{address, need, driver_action, evidence, holders}]`` for
    every GPU of nvidia-smi and every GPU the kernel log names, sorted by address. A pending
    row remap and links inactive after an NVLink XID need a reset whatever the driver says
    (the driver's action does not count them)."""
    links = dict((g.get("address"), g) for g in (nvlink or {}).get("gpus") or [])
    gpus = {}
    for gpu in (smi or {}).get("gpus") or []:
        if gpu.get("address"):
            gpus[gpu["address"]] = {"smi": gpu, "log": None}
    for device in (kernel_log or {}).get("devices") or []:
        if device.get("kind", "xid") == "xid" and device.get("address"):
            gpus.setdefault(device["address"], {"smi": None, "log": None})["log"] = device
    out = []
    for address in sorted(gpus):
        smi_gpu, device = gpus[address]["smi"], gpus[address]["log"]
        action = (smi_gpu or {}).get("recovery_action")
        driver = driver_need(action)
        needs, evidence = _xid_evidence(device or {})
        if action:
            evidence.insert(0, "driver recovery action %s" % action)
        state = []                       # what the GPU's state now needs beyond the driver
        if (smi_gpu or {}).get("remapped_rows_pending"):
            state.append("reset")
            evidence.append("row remap pending")
        down = _links_down(device, links.get(address))
        if down:
            state.append("reset")
            evidence.append(down)
        need = worst(needs + state) if driver is None else worst([driver] + state)
        out.append({"address": address, "need": need, "driver_action": action,
                    "evidence": evidence,
                    "holders": holders(address, processes, passthrough)})
    return out
