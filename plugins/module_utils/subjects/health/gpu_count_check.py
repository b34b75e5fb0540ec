# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Column GPU count: GPUs on the PCI bus that the driver lost (or that the kernel log says
fell off the bus without an XID), and the count against the host's expected one
(``gpu_count``, role common's ``gpuhost_gpu_count``)."""

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
    count = facts.get("gpu_count") or {}
    if count.get("expected") or count.get("lost_text"):
        return None
    if not count.get("bus"):
        return "no NVIDIA GPU of the host's on the bus"
    if count.get("driver") is None:
        return "the driver's GPUs cannot be read (no nvidia-smi, no /proc/driver/nvidia/gpus)"
    return None


COLUMN = column("gpu_count", "GPU count", position=41, applies=_applies)

SERVICE = ("hardware service: the GPU was lost in %d boots; drain the host, reseat or "
           "replace the GPU (riser, cabling, power) and open a case with the vendor "
           "(nvidia-bug-report.sh)")


def _boots_lost(item, missing_now):
    boots = set((item or {}).get("boots") or [])
    if missing_now:
        boots.add("current")
    return boots


@check("gpu_lost", COLUMN, severity="high", severities=("high", "critical", "low"), order=73)
def gpu_lost(facts, wanted):
    """One per host GPU on the PCI bus that the driver does not list (nvidia-smi, else
    /proc/driver/nvidia/gpus), or that the kernel log says fell off the bus with no XID
    logged for it: high (reboot), critical once lost in two boots or more (hardware
    service), low when only logged before this boot and listed again now."""
    count = facts.get("gpu_count") or {}
    host = wanted.get("host")
    text = dict((g["address"], g) for g in count.get("lost_text") or [])
    missing = set(count.get("missing") or [])
    for address in sorted(missing | set(a for a, g in text.items() if g.get("text"))):
        item = text.get(address)
        now = address in missing
        if not now and item and item.get("xid"):
            continue  # fell off the bus with XID 79 and is back: gpu_xid_events says it
        boots = _boots_lost(item, now)
        parts = []
        if now:
            parts.append("on the PCI bus, not listed by the driver (%s of %s GPUs in %s)"
                         % (count.get("driver"), count.get("bus"), count.get("driver_source")))
        if item and item.get("text"):
            parts.append("kernel log: fallen off the bus x%d%s, last %s" % (
                item["text"], "" if item.get("xid") else " with no XID logged",
                item.get("last") or "?"))
        reboot = "reboot the host: ansible-playbook %s%s -e gpuhost_reboot_verify_reboot=true" % (
            PLAYBOOK_REBOOT, limit(host))
        if len(boots) >= 2:
            severity, remedy = "critical", SERVICE % len(boots)
        elif now or "current" in boots:
            severity, remedy = "high", reboot + "; if it is lost again after the reboot: " \
                "hardware service"
        else:
            severity, remedy = "low", "none now: rebooted since and listed again; a second " \
                "loss means hardware service"
        yield found(address, "; ".join(parts), "listed by the driver, never off the bus",
                    remedy, reboot_required=severity == "high",
                    detail="boots with the loss: %d (boot lines in the log: %d)" % (
                        len(boots), count.get("boots") or 0), severity=severity)


@check("gpu_count_expected", COLUMN, severity="high", severities=("high", "low"), order=74)
def gpu_count_expected(facts, wanted):
    """The NVIDIA GPUs on the PCI bus (any owner) against the host's expected count
    (``gpu_count``): fewer is high (a GPU not even enumerated), more is low (the inventory
    is out of date)."""
    count = facts.get("gpu_count") or {}
    expected = count.get("expected")
    if not expected or count.get("bus_all") == expected:
        return
    have = count.get("bus_all") or 0
    if have < expected:
        yield found("pci bus", "%d NVIDIA GPUs on the PCI bus" % have,
                    "%d (gpu_count)" % expected,
                    "power the host off and on (a warm reboot may not bring a GPU back to "
                    "the bus); still fewer after that: hardware service (reseat the GPU, "
                    "its riser and power cables; the vendor's case with lspci -vvv)",
                    reboot_required=True)
    else:
        yield found("pci bus", "%d NVIDIA GPUs on the PCI bus" % have,
                    "%d (gpu_count)" % expected,
                    "set gpuhost_gpu_count for this host to %d in the inventory" % have,
                    severity="low")
