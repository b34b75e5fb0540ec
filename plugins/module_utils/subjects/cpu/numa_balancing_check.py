# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Column NUMA balancing: kernel.numa_balancing off its wanted value."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.findings import check, column
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.sysctl.sysctl_check import (
    NUMA_BALANCING,
    off_values,
)


def _absent(facts, wanted):
    values = (facts.get("sysctl") or {}).get("values") or {}
    if values.get(NUMA_BALANCING) is None:
        return "%s not present" % NUMA_BALANCING
    return None


COLUMN = column("numa_balancing", "NUMA balancing", position=50, applies=_absent)


@check("numa_balancing", COLUMN, severity="high", order=50)
def numa_balancing(facts, wanted):
    return [item for item in off_values(facts, wanted) if item["subject"] == NUMA_BALANCING]
