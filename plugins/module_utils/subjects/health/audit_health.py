# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The health subject's part of the audit (platform/facts_base.py): one ``nvidia-smi -q -x``,
one kernel-log read (XID/SXID per device over a window, the host's own health), the GPU
count and the processes on the GPUs; the XID window, the expected GPU count and the
operator policy (acknowledged findings, XID overrides: judged in the checks, never read from
the host)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.facts_base import Fact
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import int_range
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import (
    gpu_count_check,
    gpu_memory_check,
    gpu_state_check,
    gpu_use,
    gpu_use_check,
    gpu_xid_check,
    host_health_check,
    kernel_log,
    nvsmi,
)


def window_days(wanted):
    """The days of kernel log the audit counts events over."""
    return int(wanted.get("xid_window_days") or kernel_log.DEFAULT_WINDOW_DAYS)


FACTS = (
    Fact(110, "nvidia_smi", lambda c: nvsmi.facts(c.outputs), {"available": False, "gpus": []}),
    Fact(120, "kernel_log", lambda c: kernel_log.facts(
        c.outputs, window_days(c.wanted), boot_time=kernel_log.boot_time(c.root)),
        {"available": False, "devices": []}),
    Fact(200, "host_health", lambda c: kernel_log.health_facts(
        c.root, c.outputs, window_days(c.wanted), boot_time=kernel_log.boot_time(c.root)),
        {"available": False}),
    Fact(210, "gpu_count", lambda c: gpu_use.count_facts(
        c.root, c.facts["gpus"], c.facts.get("nvidia_smi"), c.facts["host_health"],
        c.wanted.get("gpu_count")), {}),
    Fact(220, "gpu_processes", lambda c: gpu_use.process_facts(
        c.root, c.facts.get("nvidia_smi"), c.facts["gpu_placement"]), []),
)
WANTED = {
    "xid_window_days": dict(type="int", default=kernel_log.DEFAULT_WINDOW_DAYS),
    "acknowledged": dict(type="list", elements="dict", default=[]),
    "xid_policy": dict(type="list", elements="dict", default=[]),
    "gpu_count": dict(type="int"),
    "thermal_margin_min_c": dict(type="int", default=10),
}


def wanted_rules(w):
    # the policy's values (acknowledged, xid_policy) name finding ids: the audit's registry
    # checks them (engines/audit/facts.wanted_values), which knows every id
    int_range("thermal_margin_min_c", w.get("thermal_margin_min_c"), 0, 100)


CHECKS = (gpu_count_check, gpu_memory_check, gpu_state_check, gpu_use_check, gpu_xid_check,
          host_health_check)
