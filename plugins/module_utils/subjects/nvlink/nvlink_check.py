# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Column NVLink: inactive links and error counters (``nvidia-smi nvlink -s`` and ``-e``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.nvlink import nvlink
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.findings import (
    check,
    column,
    found,
)


def _applies(facts, wanted):
    fact = facts.get("nvlink") or {}
    if not fact.get("checked"):
        return fact.get("reason") or "not checked"
    if not fact.get("available"):
        return "nvidia-smi nvlink not read (%s)" % (fact.get("error") or "no output")
    if not any(g.get("links") for g in fact.get("gpus") or []):
        return "no NVLink (nvidia-smi nvlink lists no link)"
    return None


COLUMN = column("nvlink", "NVLink", position=106, applies=_applies)


def _links(numbers):
    return ", ".join(str(n) for n in numbers)


@check("nvlink_inactive", COLUMN, severity="high", order=141)
def nvlink_inactive(facts, wanted):
    """Links of a GPU that ``nvidia-smi nvlink -s`` shows inactive (all of them after
    XID 149: open-gpu-kernel-modules #1150): peer traffic falls back to PCIe or fails."""
    for gpu in (facts.get("nvlink") or {}).get("gpus") or []:
        if not gpu.get("inactive") or not gpu.get("links"):
            continue
        every = len(gpu["inactive"]) == gpu["links"]
        yield found(
            gpu["address"],
            "%s of %d NVLinks inactive (link %s)" % (
                "all" if every else len(gpu["inactive"]), gpu["links"],
                _links(gpu["inactive"])),
            "%d of %d active" % (gpu["links"], gpu["links"]),
            "check the kernel log for XID 149/74/79 on %s; stop its workloads and reset it "
            "(nvidia-smi -r -i %s) or reboot; links still inactive after that: hardware "
            "service (reseat the NVLink bridge or baseboard)" % (gpu["address"], gpu["address"]),
            detail="GPU %d %s" % (gpu["index"], gpu.get("name") or ""))


def _error_severity(finding):
    return "high" if nvlink.SEVERE.search(finding.get("current") or "") else "medium"


@check("nvlink_errors", COLUMN, severity=_error_severity, severities=("medium", "high"),
       order=142)
def nvlink_errors(facts, wanted):
    """Non-zero NVLink error counters since the driver loaded: CRC and replay errors medium
    (the link retransmits), recovery errors or failed recoveries high (the link retrained or
    went down)."""
    for gpu in (facts.get("nvlink") or {}).get("gpus") or []:
        if not gpu.get("errors"):
            continue
        parts = []
        for link in sorted(gpu["errors"], key=int):
            counts = gpu["errors"][link]
            parts.append("link %s: %s" % (link, ", ".join(
                "%s %d" % (name, counts[name]) for name in sorted(counts))))
        yield found(
            gpu["address"], "; ".join(parts), "0 on every link",
            "counters count since the driver loaded: compare with the next audit; rising "
            "CRC or replay errors on one link, or any recovery error: run dcgmi diag -r 3 "
            "(or NVIDIA's field diagnostic) on %s and open a hardware case with the output "
            "of nvidia-smi nvlink -e -i %s" % (gpu["address"], gpu["address"]),
            detail="GPU %d %s" % (gpu["index"], gpu.get("name") or ""))
