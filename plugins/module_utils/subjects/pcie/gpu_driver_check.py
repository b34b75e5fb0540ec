# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Column GPU driver: GPUs of the host's that no driver is bound to."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.findings import (
    check,
    column,
    found,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie.pcie_mrrs_check import (
    host_gpus,
    no_gpu,
)

COLUMN = column("gpu_driver", "GPU driver", position=40, applies=no_gpu)


@check("gpu_no_driver", COLUMN, severity="high", order=20)
def gpu_no_driver(facts, wanted):
    for gpu in host_gpus(facts):
        if not gpu.get("driver"):
            yield found(
                gpu["address"], "no driver bound", "nvidia",
                "modprobe nvidia; if it fails, check dkms status for kernel %s and "
                "journalctl -k | grep -i nvrm" % (
                    (facts.get("kernel") or {}).get("running") or "<running>"))
