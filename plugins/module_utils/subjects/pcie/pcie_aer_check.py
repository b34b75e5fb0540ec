# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Column PCIe errors: AER counters of every GPU and every bridge above one
(``subjects/pcie/aer.py``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import aer
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.findings import check, column


def _applies(facts, wanted):
    entries = facts.get("pcie_aer") or []
    if not entries:
        return "no NVIDIA GPU"
    if not any(e.get("available") for e in entries):
        return "no AER counters in sysfs (no AER capability or reporting, e.g. a VM)"
    return None


COLUMN = column("pcie_aer", "PCIe errors", position=32, applies=_applies)


@check("pcie_aer_errors", COLUMN, severity="high", severities=("high", "medium", "low"),
       order=51)
def pcie_aer_errors(facts, wanted):
    """High for fatal or non-fatal (uncorrectable) errors, medium for many correctable ones
    (aer.CORRECTABLE_MEDIUM), low for a few; one per GPU or bridge (subject: address)."""
    return aer.findings(facts.get("pcie_aer") or [])
