# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Column P2P: peer-to-peer readiness of hosts with two or more GPUs (``subjects/pcie/p2p.py``):
IOMMU
domain types, ACS on the switch ports between GPUs, the GPUs' memory aperture (BAR1)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import p2p
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.findings import check, column


def _applies(facts, wanted):
    return p2p.applies(facts.get("p2p") or {})


COLUMN = column("p2p", "P2P", position=34, applies=_applies)


def _memory_bytes(facts):
    """``{address: bytes}`` of GPU memory from the driver's report, when the audit has it."""
    out = {}
    for gpu in (facts.get("nvidia_smi") or {}).get("gpus") or []:
        mib = gpu.get("memory_total_mib")
        if gpu.get("address") and isinstance(mib, (int, float)) and mib > 0:
            out[gpu["address"]] = int(mib) << 20
    return out


@check("p2p_iommu_translated", COLUMN, severity="high", order=52)
def p2p_iommu_translated(facts, wanted):
    """GPUs on the host's driver in translated IOMMU domains (DMA, DMA-FQ); subject
    ``iommu``."""
    return p2p.iommu_findings(facts.get("p2p") or {})


@check("p2p_acs_redirect", COLUMN, severity="medium", severities=("medium", "high"), order=53)
def p2p_acs_redirect(facts, wanted):
    """A switch port between GPUs with ACS request/completion redirect or egress control
    set; high when the IOMMU also translates. Subject: the port's address."""
    return p2p.acs_findings(facts.get("p2p") or {})


@check("gpu_bar1_small", COLUMN, severity="medium", order=126)
def gpu_bar1_small(facts, wanted):
    """A GPU's memory aperture smaller than its memory (or 256 MiB and less when the
    memory size is unknown). Subject: the GPU's address."""
    return p2p.bar1_findings(facts.get("p2p") or {}, _memory_bytes(facts))
