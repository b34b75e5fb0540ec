# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The passthrough subject's part of the audit (platform/facts_base.py): the VMs given GPUs,
their IOMMU groups and mappings, vfio at boot, and GPUs claimed by a VM and a container."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.facts_base import Fact
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.passthrough import (
    passthrough_check,
    vmgpu,
)

FACTS = (Fact(180, "passthrough", lambda c: vmgpu.collect(
    c.root, c.get("placement_read", {}).get("containers") or []), {}),)
CHECKS = (passthrough_check,)
