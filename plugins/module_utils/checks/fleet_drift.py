# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Column Fleet drift: a report-level check. One host's audit cannot see the others, so
``host_audit`` shows this column as n/a; ``audit_report``, which has every host of the run,
fills it (``drift.apply_to_documents``): driver, VBIOS, kernel, GPU count and model against
what most hosts run, and each GPU container's NVIDIA user space against its host's kernel
module."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.checks.base import (
    check,
    column,
)

HOST_LEVEL_NOTE = "compared across the hosts of the run by the report"

COLUMN = column("fleet_drift", "Fleet drift", position=125,
                applies=lambda facts, wanted: HOST_LEVEL_NOTE)


@check("fleet_drift", COLUMN, severity="medium", severities=("medium", "high"), order=123)
def fleet_drift(facts, wanted):
    """Found by the report (``drift.fleet_findings``): a host whose driver, VBIOS, kernel,
    GPU count or GPU model differs from most hosts' medium (subject: the attribute); a GPU
    container whose user-space driver differs from the host's kernel module high
    (subject ``lxc <vmid>``)."""
    return []
