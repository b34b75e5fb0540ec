# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The device_nodes subject's part of the audit (platform/facts_base.py): the GPU device
nodes as the containers that started at boot found them (read before nvidia-smi runs: it
creates nvidiaN and nvidiactl)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.facts_base import Fact
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.device_nodes import (
    device_nodes,
    device_nodes_check,
)

FACTS = (Fact(100, "device_nodes", lambda c: device_nodes.collect(
    c.root, c.outputs, c.wanted["lxc_config_dir"], c.get("char_majors", {})),
    {"available": False, "error": "not read", "containers": [], "units": []}),)
CHECKS = (device_nodes_check,)
