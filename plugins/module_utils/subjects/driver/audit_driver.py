# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The driver subject's part of the audit (platform/facts_base.py): the user-space NVIDIA
driver inside each GPU container, and the fleet check of driver drift between hosts."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.facts_base import Fact
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import (
    container_driver,
    driver_drift,
)


def containers_nvidia(context):
    gpu_vmids = [ct["vmid"] for ct in context.get("lxc", []) if ct.get("gpu")]
    if not gpu_vmids:
        return []
    return container_driver.container_facts(context.root, context.wanted["lxc_config_dir"],
                                            gpu_vmids)


FACTS = (Fact(140, "containers_nvidia", containers_nvidia, []),)
CHECKS = ()
FLEET_CHECKS = (driver_drift,)
