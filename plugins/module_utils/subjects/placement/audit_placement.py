# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The placement subject's part of the audit (platform/facts_base.py): which GPUs each
container uses and where its CPUs and memory sit (NUMA), as the host sees it: the GPUs a VM
or vGPU owns are left out (their NUMA rules are the VM's)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.facts_base import Fact
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import device_owner
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.placement import (
    gpu_numa_check,
    placement,
)


def host_placement(found, gpus):
    """``found`` (placement.collect) without the GPUs a VM or vGPU owns."""
    others = set(g["address"] for g in gpus or [] if not device_owner.host_owned(
        g.get("owner", "host")))
    if not others:
        return found
    for ct in (found or {}).get("containers") or []:
        ct["gpus"] = [g for g in ct["gpus"] if g.get("address") not in others]
        ct["gpu_nodes"] = sorted(set(g["numa_node"] for g in ct["gpus"] if g["numa_node"] >= 0))
    return found


FACTS = (
    # every container's GPUs, the VMs' included: the passthrough facts read it first
    Fact(175, "placement_read", lambda c: placement.collect(c.root, c.wanted["lxc_config_dir"]),
         {}, section="gpu_placement", kept=False),
    Fact(190, "gpu_placement", lambda c: host_placement(c.get("placement_read", {}),
                                                        c.facts.get("gpus")), {}),
)
CHECKS = (gpu_numa_check,)
