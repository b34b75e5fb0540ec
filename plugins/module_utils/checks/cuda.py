# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The opt-in CUDA pass (role audit, ``gpuhost_audit_cuda: true``): what ``cuda_probe``
found on the live host and in its running GPU containers, judged here.

The probe results reach the audit as ``facts["cuda"]`` (gathered in the same call by
host_audit's ``cuda_probe``, or given as its ``cuda`` option); an audit of a capture never
probes, so these checks find nothing there. The findings sit in
existing report columns: a failed CUDA init under GPU driver, a slow copy under PCIe link.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.checks import (
    gpu_driver,
    pcie_link,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.checks.base import (
    PLAYBOOK_REBOOT,
    check,
    found,
    limit,
)

DEFAULT_MIN_PCT = 70


def _where(result):
    vmid = result.get("vmid")
    return "lxc %s" % vmid if vmid is not None else "host"


@check("cuda_init_failed", gpu_driver.COLUMN, severity="critical", order=56)
def cuda_init_failed(facts, wanted):
    """Critical: CUDA does not initialise on the host or in a running GPU container (the
    probe failed, did not return in its time limit, or was killed by a signal)."""
    for res in facts.get("cuda") or []:
        # The module's failure message: present exactly when the probe failed (the role
        # registers the results with failed_when false).
        if not res.get("msg"):
            continue
        init = res.get("init") or {}
        step = " (in step: %s)" % res["step"] if res.get("step") else ""
        if res.get("timed_out"):
            current = "no answer in %s s%s: killed" % (res.get("time_limit"), step)
        elif res.get("signal"):
            current = "killed by %s%s" % (res["signal"], step)
        elif init.get("code"):
            current = "cuInit %s %s" % (init["code"], init.get("name"))
        else:
            current = (res.get("msg") or "CUDA probe failed").split(": ", 1)[-1]
            if res.get("cause"):
                current = current.split("; cause: ")[0]     # the cause is the remedy
        remedy = res.get("cause") or "see the probe's message"
        if res.get("vmid") is not None:
            remedy += ("; ansible-playbook %s%s repairs the containers' device rules and "
                       "checks CUDA in each" % (PLAYBOOK_REBOOT, limit(wanted.get("host"))))
        yield found(_where(res), current, "cuInit 0 and a context on every GPU", remedy,
                    detail=res.get("msg"))


@check("pcie_bandwidth_low", pcie_link.COLUMN, severity="high", order=57)
def pcie_bandwidth_low(facts, wanted):
    """High: a GPU's measured pinned copy rate is below ``bandwidth_min_pct`` of its link."""
    floor = wanted.get("bandwidth_min_pct") or DEFAULT_MIN_PCT
    for res in facts.get("cuda") or []:
        if res.get("vmid") is not None:
            continue            # the host's measurement is the one for the link
        for dev in res.get("devices") or []:
            low = []
            for direction, label in (("h2d", "H2D"), ("d2h", "D2H")):
                pct = dev.get(direction + "_pct")
                if pct is not None and pct < floor:
                    low.append("%s %.1f GB/s = %.1f %%" % (label, dev[direction + "_gbs"], pct))
            if not low:
                continue
            yield found(
                dev["pci_bus_id"],
                "%s of %.1f GB/s (%s)" % (", ".join(low), dev["link_gbs"], dev.get("link")),
                "at least %s %% of the link each way" % floor,
                "check this GPU's MRRS (pcie_mrrs), link (pcie_link_degraded) and the bridges "
                "above it, the IOMMU mode (iommu=pt), and which NUMA node copies; re-measure "
                "with gpuhost.tuning.cuda_probe bandwidth: true",
                detail=dev.get("name"))
