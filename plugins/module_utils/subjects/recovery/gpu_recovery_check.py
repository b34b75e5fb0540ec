# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Column GPU recovery: one finding per GPU that needs a reset, a drain or a reboot
(recovery.py: the driver's recovery action, the XID events since this boot, a pending row
remap), naming the evidence and what holds the GPU: what a reset of that GPU alone would
stop."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.findings import (
    PLAYBOOK_REBOOT,
    check,
    column,
    found,
    limit,
)


def _applies(facts, wanted):
    smi = facts.get("nvidia_smi") or {}
    log = facts.get("kernel_log") or {}
    if not smi.get("available") and not log.get("available"):
        return "neither nvidia-smi data nor a kernel log"
    return None


COLUMN = column("gpu_recovery", "GPU recovery", position=43, applies=_applies)

WHAT = {
    "reset": "a GPU reset",
    "drain_p2p": "its peer-to-peer traffic drained (stop the GPU's workloads), then a reset",
    "drain_and_reset": "its workloads drained, then a GPU reset",
    "reboot": "a reboot of the host",
}


def _holders_text(held):
    parts = []
    if held["containers"]:
        parts.append("containers %s" % ", ".join(held["containers"]))
    if held["vms"]:
        parts.append("VMs %s (passed through)" % ", ".join(held["vms"]))
    if held["processes"]:
        parts.append("host processes %s" % ", ".join(
            "%s (pid %s)" % (p.get("name") or "?", p.get("pid")) for p in held["processes"]))
    return "; ".join(parts) or "nothing"


def _remedy(gpu, host):
    held = gpu["holders"]
    if gpu["need"] == "reboot":
        return "reboot the host: ansible-playbook %s%s -e gpuhost_reboot_verify_reboot=true" % (
            PLAYBOOK_REBOOT, limit(host))
    if held["vms"]:
        return ("the GPU is passed to VM %s: shut the VM down (qm shutdown), then reset the "
                "GPU from the host or reboot" % ", ".join(held["vms"]))
    steps = []
    if held["containers"]:
        steps.append("stop container%s %s (pct shutdown)" % (
            "s" if len(held["containers"]) > 1 else "", ", ".join(held["containers"])))
    if held["processes"]:
        steps.append("stop host process%s %s" % (
            "es" if len(held["processes"]) > 1 else "",
            ", ".join(str(p.get("pid")) for p in held["processes"])))
    steps.append("nvidia-smi -r -i %s" % gpu["address"])
    steps.append("prove CUDA (gpuhost.tuning.cuda_probe) and start what was stopped")
    return "; ".join(steps) + "; the other GPUs' containers keep running"


@check("gpu_recovery_needed", COLUMN, severity="high", severities=("high", "critical"),
       order=72)
def gpu_recovery_needed(facts, wanted):
    """A GPU needs a reset, a drain and reset, or a drain of its P2P traffic: high; a
    reboot: critical."""
    for gpu in facts.get("gpu_recovery") or []:
        if gpu["need"] == "none":
            continue
        yield found(gpu["address"], "; ".join(gpu["evidence"]) or gpu["need"],
                    "recovery action None", _remedy(gpu, wanted.get("host")),
                    reboot_required=gpu["need"] == "reboot",
                    detail="needs %s; holders: %s" % (WHAT[gpu["need"]],
                                                      _holders_text(gpu["holders"])),
                    severity="critical" if gpu["need"] == "reboot" else "high")
