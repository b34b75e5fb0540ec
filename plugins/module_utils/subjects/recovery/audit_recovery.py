# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The recovery subject's part of the audit (platform/facts_base.py): what each GPU needs to
recover and who holds it, from the facts read before it (nvidia-smi, the kernel log, the
GPU processes, the passthrough devices, the NVLink link states)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.facts_base import Fact
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.recovery import (
    gpu_recovery_check,
    recovery,
)

FACTS = (Fact(225, "gpu_recovery", lambda c: recovery.facts(
    c.facts.get("nvidia_smi"), c.facts.get("kernel_log"), c.facts.get("gpu_processes"),
    c.facts.get("passthrough"), c.facts.get("nvlink")), []),)
CHECKS = (gpu_recovery_check,)
