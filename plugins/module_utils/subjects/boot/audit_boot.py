# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The boot subject's part of the audit (platform/facts_base.py): the kernels (running,
installed, pinned, next boot, headers) and the wanted boot parameters and cpufreq drivers."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.facts_base import Fact
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import boot_params
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import (
    boot_facts,
    kernel_check,
)

FACTS = (Fact(20, "kernel", lambda c: boot_facts.kernel_facts(c.root), {}),)
# cpufreq scaling drivers that let the CPU boost as the workload asks (AMD EPYC, Intel).
CPUFREQ_DRIVERS = ("amd-pstate-epp", "amd-pstate", "intel_pstate")
# The wanted boot parameters and cpufreq drivers (doc fragment boot_wanted; post_boot_verify
# takes them too).
WANTED = {"boot_params": dict(type="dict", default={}),
          "cpufreq_drivers_wanted": dict(type="list", elements="str",
                                         default=list(CPUFREQ_DRIVERS))}


def wanted_rules(w):
    if w.get("boot_params"):
        boot_params("boot_params", w["boot_params"])


CHECKS = (kernel_check,)
