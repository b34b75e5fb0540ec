# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The nvlink subject's part of the audit (platform/facts_base.py): each GPU's NVLink
links, from nvidia-smi and the fabric manager's state."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.facts_base import Fact
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.nvlink import (
    nvlink,
    nvlink_check,
)

FACTS = (Fact(150, "nvlink", lambda c: nvlink.facts(
    c.outputs, c.get("nvidia_smi", {}), c.get("fabric_manager", {})),
    {"checked": False, "reason": "not read", "available": False, "gpus": []}),)
CHECKS = (nvlink_check,)
