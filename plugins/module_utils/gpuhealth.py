# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU health findings from the audit's facts: XID/SXID events, memory errors, runtime
state (persistence, clock event reasons, power limit) and Fabric Manager.

Facts they read (see :func:`collect`): ``nvidia_smi`` (nvsmi.facts), ``kernel_log``
(kernlog.facts), ``fabric_manager`` (fabric.facts). Each ``*_findings`` function returns
a list of finding dicts in the audit's shape.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils import fabric as fabric_mod
from ansible_collections.gpuhost.tuning.plugins.module_utils import kernlog as kernlog_mod
from ansible_collections.gpuhost.tuning.plugins.module_utils import nvsmi as nvsmi_mod
from ansible_collections.gpuhost.tuning.plugins.module_utils import xid as xid_mod

PLAYBOOK_REBOOT = "gpuhost.tuning.reboot_verify"

# Clock event reasons by how bad they are while they hold.
CLOCK_REASON_SEVERITY = {
    "hw_slowdown": "high",
    "hw_thermal_slowdown": "high",
    "hw_power_brake_slowdown": "high",
    "sw_thermal_slowdown": "medium",
    "sw_power_cap": "low",
    "sync_boost": "info",
    "display_clocks_setting": "info",
}
_RANK = dict((name, index) for index, name in enumerate(
    ("critical", "high", "medium", "low", "info")))
# A power limit this many watts below the default counts as capped (rounding in the XML).
POWER_TOLERANCE_W = 1.0
# NVIDIA's replacement threshold for dynamic page retirement (pre-Ampere GPUs).
RETIRED_PAGES_RMA = 60


def _finding(fid, severity, subject, current, expected, remedy, reboot_required=False,
             detail=None):
    out = {"id": fid, "severity": severity, "subject": subject, "current": current,
           "expected": expected, "remedy": remedy, "reboot_required": bool(reboot_required)}
    if detail:
        out["detail"] = detail
    return out


def _limit(host):
    return " -l %s" % host if host else ""


def _worst(severities):
    return min(severities, key=lambda s: _RANK.get(s, 99))


# -----------------------------------------------------------------------------------------
# facts


def collect(root, outputs, driver_version, window_days=kernlog_mod.DEFAULT_WINDOW_DAYS):
    """``{nvidia_smi, kernel_log, fabric_manager}`` facts; ``outputs`` is the audit's
    cmdout.CommandOutputs (one ``nvidia-smi -q -x``, one kernel-log read)."""
    smi = nvsmi_mod.facts(outputs)
    log = kernlog_mod.facts(outputs, window_days, boot_time=kernlog_mod.boot_time(root))
    fab = fabric_mod.facts(root, smi, driver_version)
    return {"nvidia_smi": smi, "kernel_log": log, "fabric_manager": fab}


def smi_gpus(facts):
    return ((facts.get("nvidia_smi") or {}).get("gpus")) or []


# -----------------------------------------------------------------------------------------
# XID / SXID


_XID_REMEDY = {
    "none": "nothing to do: recorded for the record (NVIDIA's catalogue: IGNORE)",
    "restart_app": "restart the application that hit it; the GPU itself is fine (if it "
                   "repeats, debug the application: compute-sanitizer)",
    "unknown": "look the code up in NVIDIA's Xid catalogue "
               "(docs.nvidia.com/deploy/xid-errors) and nvidia-bug-report.sh",
    "reset_gpu": "stop the GPU's processes and containers, then nvidia-smi -r -i {addr}, or "
                 "reboot: ansible-playbook %s{limit} -e gpuhost_reboot=true" % PLAYBOOK_REBOOT,
    "reboot": "reboot the host: ansible-playbook %s{limit} -e gpuhost_reboot=true"
              % PLAYBOOK_REBOOT,
    "hardware": "hardware service: it came back after resets/reboots; drain the host, "
                "reseat or replace the GPU (riser, cabling, power), open a case with the "
                "vendor with nvidia-bug-report.sh attached",
}


def _xid_text(codes):
    parts = []
    for code in codes:
        text = "XID %d x%d (%s%s)" % (code["code"], code["count"], code["description"],
                                      ", last %s" % code["last"] if code.get("last") else "")
        if code.get("before_boot"):
            text += " before this boot"
        parts.append(text)
    return "; ".join(parts)


def xid_findings(facts, wanted):
    """``gpu_xid_events`` (one per GPU) and ``nvswitch_sxid_events`` (one per NVSwitch):
    severity by the worst class of the window's events. A reset or reboot asked for by
    events that all predate this boot has happened since: those count as ``low``."""
    log = facts.get("kernel_log") or {}
    host = wanted.get("host")
    out = []
    for dev in log.get("devices") or []:
        severities = []
        for code in dev["codes"]:
            severity = xid_mod.CLASS_SEVERITY.get(code["class"], "medium")
            if code.get("before_boot") and code["class"] in ("reset_gpu", "reboot"):
                severity = "low"
            severities.append(severity)
        severity = _worst(severities)
        worst = dev["worst"]
        if all(c.get("before_boot") for c in dev["codes"] if c["class"] == worst) \
                and worst in ("reset_gpu", "reboot"):
            remedy = "already rebooted since; watch for a repeat (%s)" % (
                _XID_REMEDY[worst].format(addr=dev["address"], limit=_limit(host)))
        else:
            remedy = _XID_REMEDY.get(worst, _XID_REMEDY["unknown"]).format(
                addr=dev["address"], limit=_limit(host))
        fid = "gpu_xid_events" if dev["kind"] == "xid" else "nvswitch_sxid_events"
        out.append(_finding(
            fid, severity, dev["address"],
            "%d event%s in %s days: %s" % (dev["events"], "" if dev["events"] == 1 else "s",
                                           log.get("window_days"), _xid_text(dev["codes"])),
            "no %s events" % ("XID" if dev["kind"] == "xid" else "SXID"),
            remedy, reboot_required=worst in ("reboot",),
            detail="needs: %s; last message: %s" % (
                xid_mod.CLASS_TEXT.get(worst, worst), dev["codes"][0].get("message") or "")))
    return out


# -----------------------------------------------------------------------------------------
# memory errors


def memory_findings(facts, wanted):
    host = wanted.get("host")
    out = []
    for gpu in smi_gpus(facts):
        addr = gpu.get("address") or "?"
        current, pending = gpu.get("ecc_mode"), gpu.get("ecc_mode_pending")
        if current and pending and current != pending:
            out.append(_finding(
                "gpu_ecc_pending", "medium", addr, "ECC %s, pending %s" % (current, pending),
                "ECC %s with nothing pending" % pending,
                "the new ECC mode applies at the next GPU reset or reboot: nvidia-smi -r -i "
                "%s, or ansible-playbook %s%s -e gpuhost_reboot=true (or undo it: "
                "nvidia-smi -e %d -i %s)" % (addr, PLAYBOOK_REBOOT, _limit(host),
                                             1 if current == "Enabled" else 0, addr),
                reboot_required=True))
        vol = gpu.get("ecc_volatile_uncorrectable")
        agg = gpu.get("ecc_aggregate_uncorrectable")
        if vol:
            out.append(_finding(
                "gpu_ecc_uncorrectable", "high", addr,
                "%d uncorrectable since the driver loaded (%s lifetime)" % (vol, agg),
                "0 uncorrectable",
                "reset the GPU (nvidia-smi -r -i %s) or reboot; if the count returns after "
                "the reset, hardware service" % addr, reboot_required=True))
        elif agg:
            out.append(_finding(
                "gpu_ecc_uncorrectable", "medium", addr,
                "%d uncorrectable in the GPU's lifetime, none since the driver loaded" % agg,
                "0 uncorrectable",
                "watch it: a rising lifetime count is a hardware case (row remapping and "
                "page retirement have handled these)"))
        if gpu.get("remapped_rows_failure"):
            out.append(_finding(
                "gpu_row_remap_failed", "critical", addr, "row remapping failed",
                "no remapping failure",
                "hardware service: the GPU has no spare rows left for a failing row; drain "
                "it and open an RMA case with the vendor (nvidia-bug-report.sh)"))
        if gpu.get("remapped_rows_pending"):
            out.append(_finding(
                "gpu_row_remap_pending", "high", addr,
                "row remap pending (%s correctable, %s uncorrectable rows remapped)" % (
                    gpu.get("remapped_rows_correctable"),
                    gpu.get("remapped_rows_uncorrectable")),
                "no remap pending",
                "reset the GPU when its work allows (nvidia-smi -r -i %s, its containers "
                "stopped) or reboot: ansible-playbook %s%s -e gpuhost_reboot=true; the "
                "remap takes effect only then" % (addr, PLAYBOOK_REBOOT, _limit(host)),
                reboot_required=True))
        sbe, dbe = gpu.get("retired_pages_sbe") or 0, gpu.get("retired_pages_dbe") or 0
        if gpu.get("retired_pages_pending"):
            out.append(_finding(
                "gpu_retired_pages", "high", addr, "page retirement pending (%d retired)"
                % (sbe + dbe), "nothing pending",
                "reboot or reset the GPU so the pending pages are retired: nvidia-smi -r -i "
                "%s" % addr, reboot_required=True))
        elif sbe + dbe >= RETIRED_PAGES_RMA:
            out.append(_finding(
                "gpu_retired_pages", "critical", addr, "%d pages retired" % (sbe + dbe),
                "fewer than %d" % RETIRED_PAGES_RMA,
                "hardware service: NVIDIA's replacement threshold is %d retired pages"
                % RETIRED_PAGES_RMA))
        elif dbe:
            out.append(_finding(
                "gpu_retired_pages", "low", addr, "%d pages retired (%d double-bit)"
                % (sbe + dbe, dbe), "0 retired", "watch the count"))
    return out


# -----------------------------------------------------------------------------------------
# runtime state


def runtime_findings(facts, wanted):
    out = []
    for gpu in smi_gpus(facts):
        addr = gpu.get("address") or "?"
        if gpu.get("persistence_mode") is False:
            out.append(_finding(
                "gpu_persistence_off", "medium", addr, "persistence mode off",
                "persistence mode on",
                "systemctl enable --now nvidia-persistenced (keeps the driver state loaded "
                "between CUDA processes: no re-initialisation per job; survives reboots, "
                "unlike nvidia-smi -pm 1)"))
        reasons = [r for r in gpu.get("clock_reasons_active") or []
                   if r not in nvsmi_mod.BENIGN_CLOCK_REASONS]
        if reasons:
            severity = _worst(CLOCK_REASON_SEVERITY.get(r, "medium") for r in reasons)
            out.append(_finding(
                "gpu_clock_throttle", severity, addr,
                "clocks held down by %s (%s)" % (", ".join(reasons),
                                                  gpu.get("performance_state") or "P?"),
                "no clock event reason but idle or application clocks",
                "thermal or hardware slowdown: check cooling, airflow and the power "
                "supplies (nvidia-smi -q -d PERFORMANCE,TEMPERATURE -i %s); sw_power_cap "
                "alone is the GPU at its power limit under load" % addr))
        power = gpu.get("power") or {}
        limit, default = power.get("limit_w"), power.get("default_limit_w")
        if limit is not None and default is not None and limit < default - POWER_TOLERANCE_W:
            out.append(_finding(
                "gpu_power_capped", "medium", addr,
                "power limit %g W" % limit, "%g W (the default limit)" % default,
                "nvidia-smi -pl %g -i %s (or find what lowered it: a boot script, a "
                "datacenter power policy)" % (default, addr)))
    return out


# -----------------------------------------------------------------------------------------
# fabric manager


def fabric_findings(facts, wanted):
    fact = facts.get("fabric_manager") or {}
    out = []
    for what, current, expected in fabric_mod.problems(fact):
        if what == "enabled":
            severity, remedy = "medium", "systemctl enable %s" % fabric_mod.UNIT
        elif what == "not installed":
            severity = "high"
            remedy = ("install nvidia-fabricmanager of the driver's version (%s): without it "
                      "CUDA cannot use the GPUs behind the NVSwitches"
                      % (fact.get("driver_version") or "?"))
        elif what == "version":
            severity = "high"
            remedy = ("install nvidia-fabricmanager %s (it refuses to run with another "
                      "driver version), then systemctl restart %s"
                      % (fact.get("driver_version"), fabric_mod.UNIT))
        else:
            severity = "high"
            remedy = ("systemctl restart %s and read journalctl -u %s; CUDA jobs fail "
                      "until the fabric is Completed" % (fabric_mod.UNIT, fabric_mod.UNIT))
        out.append(_finding("fabric_manager", severity, "nvidia-fabricmanager", current,
                            expected, remedy,
                            detail="%d NVSwitch(es)" % len(fact.get("nvswitches") or [])))
    return out


# -----------------------------------------------------------------------------------------
# applicability (None: applies)


def xid_applies(facts):
    log = facts.get("kernel_log") or {}
    if not log.get("available"):
        return "no kernel log (%s)" % (log.get("error") or "journal and kern.log absent")
    return None


def smi_applies(facts):
    smi = facts.get("nvidia_smi") or {}
    if not smi.get("available"):
        return "no nvidia-smi data (%s)" % (smi.get("error") or "not run")
    if not smi.get("gpus"):
        return "nvidia-smi lists no GPU"
    return None


def fabric_applies(facts):
    fact = facts.get("fabric_manager") or {}
    if not fact.get("needed"):
        return "no NVSwitch (PCIe-only host)"
    return None
