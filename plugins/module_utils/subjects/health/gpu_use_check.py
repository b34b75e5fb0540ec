# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Column GPU use: who holds each GPU (nvidia-smi's processes mapped to their containers
through /proc/<pid>/cgroup), memory in use with no process, and containers holding a GPU
their config does not bind."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import gpu_use
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.findings import (
    check,
    column,
    found,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health.gpu_health import (
    smi_applies,
)

COLUMN = column("gpu_use", "GPU use", position=47, applies=smi_applies)


def _who(proc):
    ct = proc.get("container")
    return "%s pid %s %s (%s MiB)" % ("lxc %s" % ct if ct else "host", proc.get("pid"),
                                      proc.get("name") or "?", proc.get("used_mib"))


@check("gpu_held_unbound", COLUMN, severity="high", order=82)
def gpu_held_unbound(facts, wanted):
    """One per GPU and container whose processes use a GPU the container's config does
    not bind (its /dev/nvidiaN entries): the container reaches GPUs past its config."""
    for gpu in facts.get("gpu_processes") or []:
        holders = {}
        for proc in gpu["processes"]:
            ct = proc.get("container")
            if ct is not None and ct not in gpu["bound"]:
                holders.setdefault(ct, []).append(proc)
        for ct in sorted(holders, key=gpu_use.vmid_key):
            yield found(
                gpu["address"], "held by lxc %s: %s" % (ct, ", ".join(
                    _who(p) for p in holders[ct])),
                "only containers that bind it (%s)" % (
                    ", ".join("lxc %s" % v for v in gpu["bound"]) or "none"),
                "stop the process or bind the GPU on purpose: /etc/pve/lxc/%s.conf passes "
                "in no /dev/nvidia%d; remove the broad device rule (c 195:* with a bind of "
                "/dev) that lets it reach other GPUs, or add the GPU to its config"
                % (ct, gpu["index"]))


@check("gpu_memory_no_process", COLUMN, severity="medium", order=84)
def gpu_memory_no_process(facts, wanted):
    """GPU memory in use (at least 256 MiB) with no process listed: a dead server's memory
    or a context the driver did not free."""
    for gpu in facts.get("gpu_processes") or []:
        used = gpu.get("memory_used_mib")
        if gpu["processes"] or not isinstance(used, (int, float)) or \
                used < gpu_use.IDLE_USED_MIB or (gpu.get("mig_mode") or "") == "Enabled":
            continue
        yield found(gpu["address"], "%s MiB used, no process listed" % used,
                    "no memory used without a process",
                    "look for a process that holds /dev/nvidia%d (fuser -v /dev/nvidia*, in "
                    "the GPU containers too) and stop it; nothing holds it: reset the GPU "
                    "(nvidia-smi -r -i %s) or reboot" % (gpu["index"], gpu["address"]))


@check("gpu_held", COLUMN, severity="info", order=185)
def gpu_held(facts, wanted):
    """One per GPU with processes, naming them and their containers (a reset or reboot
    stops them)."""
    for gpu in facts.get("gpu_processes") or []:
        if gpu["processes"]:
            yield found(gpu["address"], "; ".join(_who(p) for p in gpu["processes"]),
                        "(for the record)",
                        "nothing to do; stop these before a GPU reset or a reboot")
