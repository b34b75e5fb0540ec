# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit's GPU health facts in one call: ``nvidia_smi`` (one ``nvidia-smi -q -x``),
``kernel_log`` (one kernel-log read, XID/SXID per device over a window),
``fabric_manager`` (NVSwitch hosts) and ``containers_nvidia`` (the user-space driver in
each GPU container). The checks that judge them live in ``checks/gpu_xid``,
``checks/gpu_memory``, ``checks/gpu_state``, ``checks/fabric_manager`` and
``fleet/drift`` (the fleet check, over the report's documents).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import container_driver
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.fabric_manager import (
    fabric_manager,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import kernel_log
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import nvsmi

DEFAULT_WINDOW_DAYS = kernel_log.DEFAULT_WINDOW_DAYS


def collect(root, outputs, driver_version, window_days=DEFAULT_WINDOW_DAYS, lxc=None,
            lxc_config_dir="/etc/pve/lxc", guard=None):
    """The four facts; ``outputs`` is the audit's cmdout.CommandOutputs. ``guard(section,
    func, default)`` runs each reader so that one failing is an audit error, not a crash."""
    if guard is None:
        def guard(_section, func, _default):
            return func()
    smi = guard("nvidia_smi", lambda: nvsmi.facts(outputs), {"available": False, "gpus": []})
    log = guard("kernel_log", lambda: kernel_log.facts(
        outputs, window_days, boot_time=kernel_log.boot_time(root)),
        {"available": False, "devices": []})
    fab = guard("fabric_manager", lambda: fabric_manager.facts(root, smi, driver_version),
                {"needed": False})
    gpu_vmids = [ct["vmid"] for ct in lxc or [] if ct.get("gpu")]
    cts = guard("containers_nvidia", lambda: container_driver.container_facts(
        root, lxc_config_dir, gpu_vmids) if gpu_vmids else [], [])
    return {"nvidia_smi": smi, "kernel_log": log, "fabric_manager": fab,
            "containers_nvidia": cts}


def smi_gpus(facts):
    """The GPUs of the audit's nvidia-smi log (empty without one)."""
    return ((facts.get("nvidia_smi") or {}).get("gpus")) or []


def smi_applies(facts, wanted=None):
    """None when nvidia-smi data is there, else why the columns built on it are n/a."""
    smi = facts.get("nvidia_smi") or {}
    if not smi.get("available"):
        return "no nvidia-smi data (%s)" % (smi.get("error") or "not run")
    if not smi.get("gpus"):
        return "nvidia-smi lists no GPU"
    return None
