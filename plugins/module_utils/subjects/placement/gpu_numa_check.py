# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Column GPU NUMA: GPU containers' CPUs against their GPUs' NUMA nodes
(``subjects/placement/placement.py``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.placement import placement
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.findings import check, column


def _applies(facts, wanted):
    return placement.applies(facts.get("gpu_placement") or {})


COLUMN = column("gpu_numa", "GPU NUMA", position=112, applies=_applies)


@check("gpu_numa_mismatch", COLUMN, severity="high", severities=("high", "medium"), order=54)
def gpu_numa_mismatch(facts, wanted):
    """A GPU container's cpuset on nodes its GPUs are not on: high when none of its CPUs
    is on a GPU's node, medium when some are. Subject ``lxc <vmid>``."""
    return placement.mismatch_findings(facts.get("gpu_placement") or {}, wanted.get("host"))


@check("gpu_container_unpinned", COLUMN, severity="medium", severities=("medium", "low"),
       order=124)
def gpu_container_unpinned(facts, wanted):
    """A GPU container without a cpuset whose GPUs sit on some nodes only: medium with
    ``cores:`` (pvestatd moves it), low without. Subject ``lxc <vmid>``."""
    return placement.unpinned_findings(facts.get("gpu_placement") or {}, wanted.get("host"))
