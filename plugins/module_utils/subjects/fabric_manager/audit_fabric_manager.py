# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fabric_manager subject's part of the audit (platform/facts_base.py): whether the
host's GPUs need NVIDIA Fabric Manager (NVSwitch systems) and its state."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.facts_base import Fact
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.fabric_manager import (
    fabric_manager,
    fabric_manager_check,
)

FACTS = (Fact(130, "fabric_manager", lambda c: fabric_manager.facts(
    c.root, c.facts.get("nvidia_smi"), c.get("nvidia", {}).get("driver_version")),
    {"needed": False}),)
CHECKS = (fabric_manager_check,)
