# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pcie subject's part of the audit (platform/facts_base.py): the GPUs and their
upstream bridges (MRRS, payload, link, owner), their AER counters and the P2P paths between
them; the GPU selection and the wanted MRRS."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import argspec
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.facts_base import Fact
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import gpu
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import (
    aer,
    aer_change,
    device_owner,
    gpu_driver_check,
    p2p,
    p2p_check,
    pci,
    pcie_aer_check,
    pcie_link_check,
    pcie_mrrs_check,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.pci_ids import MRRS_SIZES

# The wanted PCIe Max Read Request Size when none is given (one of pci_ids.MRRS_SIZES): the one
# spec of ``mrrs_size`` (``mrrs_size()``) for every module that names it.
MRRS_DEFAULT = 4096


def mrrs_size(**extra):
    """The ``mrrs_size`` option (wanted.mrrs_size, setpci_maxreadreq, boot_service);
    ``extra``: spec keys such as deprecated_aliases."""
    spec = dict(type="int", default=MRRS_DEFAULT, choices=list(MRRS_SIZES))
    spec.update(extra)
    return spec


def _device_summary(dev):
    try:
        info = pci.summary(dev)
        info["error"] = None
    except (pci.PciError, IOError, OSError, ValueError, IndexError) as exc:
        info = {
            "address": dev.address, "vendor": dev.vendor, "device": dev.device,
            "class": dev.pci_class, "driver": dev.driver, "numa_node": dev.numa_node,
            "max_read_request_size": None, "max_payload_size": None,
            "max_payload_size_supported": None, "link": dev.link,
            "error": str(exc),
        }
    return info


def gpu_facts(root, vendor, classes):
    devs = pci.select_devices(root, vendor, classes)
    owners = device_owner.owners(root, devs)
    gpus = []
    for dev in devs:
        info = _device_summary(dev)
        info["owner"] = owners[dev.address]
        info["upstream"] = [_device_summary(bridge) for bridge in dev.upstream()]
        info["on_host_bridge"] = not info["upstream"]
        gpus.append(info)
    return gpus


def not_host_owned(gpus):
    """The addresses of the GPUs a VM or vGPU owns (not the host's to judge or tune)."""
    return [g["address"] for g in gpus or []
            if not device_owner.host_owned(g.get("owner", "host"))]


FACTS = (
    Fact(50, "gpus", lambda c: gpu_facts(c.root, c.wanted["gpu_vendor"],
                                         c.wanted["gpu_classes"]), []),
    Fact(160, "pcie_aer", lambda c: aer.collect(c.root, c.wanted["gpu_vendor"],
                                                c.wanted["gpu_classes"]), []),
    Fact(170, "p2p", lambda c: p2p.collect(c.root, c.wanted["gpu_vendor"],
                                           c.wanted["gpu_classes"],
                                           skip=not_host_owned(c.get("gpus"))), {}),
)
WANTED = argspec.gpu_selection()
WANTED["mrrs_size"] = mrrs_size()


def wanted_rules(w):
    gpu(w, "gpu_vendor", "gpu_classes")


CHECKS = (gpu_driver_check, p2p_check, pcie_aer_check, pcie_link_check, pcie_mrrs_check)
FLEET_CHECKS = (aer_change,)
