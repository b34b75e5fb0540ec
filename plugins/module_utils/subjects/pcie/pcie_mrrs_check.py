# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Column PCIe MRRS: Max Read Request Size of every GPU of the host's and every bridge above
one (a VM's or vGPU's GPU is not judged: ``subjects/pcie/device_owner.py``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import device_owner
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.findings import (
    PLAYBOOK_TUNE,
    check,
    column,
    found,
    limit,
)


def host_gpus(facts):
    """The GPUs the host's rules judge (owner ``host`` or ``none``; see
    subjects/pcie/device_owner.py)."""
    return [g for g in facts.get("gpus") or []
            if g.get("owner", "host") in device_owner.HOST_OWNERS]


def no_gpu(facts, wanted):
    if host_gpus(facts):
        return None
    if facts.get("gpus"):
        return "no GPU of the host's (all passed to VMs or split for vGPU)"
    return "no NVIDIA GPU"


def _note(facts):
    gpus = host_gpus(facts)
    if gpus and all(g.get("on_host_bridge") for g in gpus):
        return "GPUs sit on the host bridge (VM passthrough): no bridge to check"
    return None


COLUMN = column("pcie_mrrs", "PCIe MRRS", position=20, applies=no_gpu, note=_note)


def devices(facts):
    """``(device, role, gpu)`` for every GPU and every bridge above one, each once."""
    seen = set()
    for gpu in host_gpus(facts):
        for dev, role in [(gpu, "GPU")] + [(b, "bridge above %s" % gpu["address"])
                                           for b in gpu.get("upstream") or []]:
            if dev["address"] in seen:
                continue
            seen.add(dev["address"])
            yield dev, role, gpu


def mrrs_setpci_value(size):
    field = {128: 0, 256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}[int(size)]
    return "%04x:7000" % (field << 12)


@check("pcie_mrrs", COLUMN, severity="high", order=30)
def pcie_mrrs(facts, wanted):
    want = int(wanted["mrrs_size"])
    for dev, role, _gpu in devices(facts):
        addr = dev["address"]
        mrrs = dev.get("max_read_request_size")
        if dev.get("error") or mrrs is None or mrrs >= want:
            continue
        yield found(
            addr, "%d bytes" % mrrs, "%d bytes" % want,
            "setpci -s %s CAP_EXP+8.w=%s (now); ansible-playbook %s%s (now and at "
            "every boot)" % (addr, mrrs_setpci_value(want), PLAYBOOK_TUNE,
                             limit(wanted.get("host"))),
            detail="%s %s:%s" % (role, dev.get("vendor"), dev.get("device")))


@check("pcie_unreadable", COLUMN, severity="info", order=160)
def pcie_unreadable(facts, wanted):
    for dev, _role, _gpu in devices(facts):
        if dev.get("error"):
            yield found(
                dev["address"], "config space not readable", "PCI Express capability readable",
                "run the audit as root (become: true); non-root reads only 64 bytes of "
                "config space", detail=dev["error"])
