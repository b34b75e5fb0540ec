# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Column GPU XID: NVIDIA XID events per GPU and SXID events per NVSwitch in the kernel
log's window (``xid_window_days``), by what NVIDIA's catalogue says they need, or what the
operator's ``xid_policy`` says instead (policy.apply_xid_policy)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import policy
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import xid
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.findings import (
    PLAYBOOK_REBOOT,
    SEVERITY_RANK,
    check,
    column,
    found,
    limit,
)


def _applies(facts, wanted):
    log = facts.get("kernel_log") or {}
    if not log.get("available"):
        return "no kernel log (%s)" % (log.get("error") or "no journal, no kern.log")
    return None


COLUMN = column("gpu_xid", "GPU XID", position=42, applies=_applies)
# Usual first (a reset or reboot), then every other severity a class maps to.
EVENT_SEVERITIES = ("high", "critical", "medium", "low", "info")

REMEDY = {
    "none": "nothing to do: recorded for the record (NVIDIA's catalogue: IGNORE)",
    "restart_app": "restart the application that hit it; the GPU itself is fine (if it "
                   "repeats, debug the application: compute-sanitizer)",
    "unknown": "look the code up in NVIDIA's Xid catalogue "
               "(docs.nvidia.com/deploy/xid-errors) and collect nvidia-bug-report.sh",
    "reset_gpu": "stop the GPU's processes and containers, then nvidia-smi -r -i {addr}, or "
                 "reboot: ansible-playbook %s{limit} -e gpuhost_reboot_verify_reboot=true"
                 % PLAYBOOK_REBOOT,
    "reboot": "reboot the host: ansible-playbook %s{limit} -e gpuhost_reboot_verify_reboot=true"
              % PLAYBOOK_REBOOT,
    "hardware": "hardware service: it came back after resets or reboots; drain the host, "
                "reseat or replace the GPU (riser, cabling, power), open a case with the "
                "vendor with nvidia-bug-report.sh attached",
}


def _codes_text(codes):
    parts = []
    for code in codes:
        text = "XID %d x%d (%s%s)" % (code["code"], code["count"], code["description"],
                                      ", last %s" % code["last"] if code.get("last") else "")
        if code.get("before_boot"):
            text += " before this boot"
        if code.get("cancelled_by"):
            text += ", ended by XID %d at %s" % (code["cancelled_by"]["code"],
                                                 code["cancelled_by"]["at"])
        parts.append(text)
    return "; ".join(parts)


def _events(facts, wanted, kind):
    log = facts.get("kernel_log") or {}
    host = wanted.get("host")
    # the operator's xid_policy (class, min_count, window_hours per XID) over the catalogue
    devices = policy.apply_xid_policy(log.get("devices") or [], wanted.get("xid_policy"),
                                      log.get("read_at"))
    for dev in devices:
        if dev["kind"] != kind:
            continue
        severities = []
        for code in dev["codes"]:
            severity = xid.CLASS_SEVERITY.get(code["class"], "medium")
            # A reset or reboot asked for before this boot has happened since.
            if code.get("before_boot") and code["class"] in ("reset_gpu", "reboot"):
                severity = "low"
            severities.append(severity)
        severity = min(severities, key=lambda s: SEVERITY_RANK[s])
        worst = dev["worst"]
        remedy = REMEDY.get(worst, REMEDY["unknown"]).format(addr=dev["address"],
                                                             limit=limit(host))
        done = [c for c in dev["codes"] if c["class"] == worst]
        if worst in ("reset_gpu", "reboot") and all(c.get("before_boot") for c in done):
            remedy = "none now: rebooted since; watch for a repeat (it asked: %s)" % remedy
        label = "XID" if kind == "xid" else "SXID"
        yield found(
            dev["address"],
            "%d %s event%s in %s days: %s" % (dev["events"], label,
                                              "" if dev["events"] == 1 else "s",
                                              log.get("window_days"),
                                              _codes_text(dev["codes"]).replace(
                                                  "XID", label)),
            "no %s events" % label, remedy,
            reboot_required=worst == "reboot" and severity != "low",
            detail="needs: %s%s; last message: %s" % (
                xid.CLASS_TEXT.get(worst, worst),
                "".join(" (XID %d: %s)" % (c["code"], c["policy"]) for c in dev["codes"]
                        if c.get("policy")),
                dev["codes"][0].get("message") or ""),
            severity=severity)


@check("gpu_xid_events", COLUMN, severity="high", severities=EVENT_SEVERITIES, order=43)
def gpu_xid_events(facts, wanted):
    """One per GPU with XID events in the window; severity by the worst class: hardware
    critical, reset/reboot high, unknown medium, restart the application low, nothing
    info; a reset or reboot already done since (events before this boot) low."""
    return _events(facts, wanted, "xid")


@check("nvswitch_sxid_events", COLUMN, severity="high", severities=EVENT_SEVERITIES, order=44)
def nvswitch_sxid_events(facts, wanted):
    """One per NVSwitch with SXID events in the window: fatal ones high (critical when
    they repeat), non-fatal info."""
    return _events(facts, wanted, "sxid")
