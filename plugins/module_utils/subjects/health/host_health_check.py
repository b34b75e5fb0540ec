# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Column Host health: what the kernel log of the XID window (``xid_window_days``) says of
the host itself (hardware errors and machine checks, lockups and hung tasks, oopses and
panics, OOM kills, NVMe timeouts, filesystems remounted read-only) and EDAC's memory
error counters."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.findings import (
    check,
    column,
    found,
)


def _applies(facts, wanted):
    health = facts.get("host_health") or {}
    if not health.get("available") and not health.get("edac"):
        return "no kernel log and no EDAC"
    return None


COLUMN = column("host_health", "Host health", position=95, applies=_applies)


def _events(facts, name):
    return ((facts.get("host_health") or {}).get("events") or {}).get(name) or {}


def _current(entry, facts, what):
    return "%d %s in %s days, last %s" % (
        entry["count"], what, (facts.get("host_health") or {}).get("window_days"),
        entry.get("last") or "?")


def _detail(entry):
    return "newest: %s" % " | ".join(entry.get("samples") or [])


@check("host_hardware_error", COLUMN, severity="high", severities=("high", "critical", "medium"),
       order=75)
def host_hardware_error(facts, wanted):
    """CPER/APEI hardware error reports and machine checks in the window: critical when one
    was fatal, high when uncorrected or recoverable, medium when all were corrected."""
    entry = _events(facts, "hardware_error")
    if not entry.get("count"):
        return
    sev = set(entry.get("severities") or [])
    if "fatal" in sev:
        severity = "critical"
    elif sev & set(("recoverable", "uncorrected")) or not sev:
        severity = "high"
    else:
        severity = "medium"
    yield found("kernel log", _current(entry, facts, "hardware error reports") + (
        " (severity: %s)" % ", ".join(sorted(sev)) if sev else ""),
        "no hardware errors",
        "read the reports (journalctl -k | grep -F '[Hardware Error]'; rasdaemon's "
        "ras-mc-ctl --errors names the DIMM or CPU bank); fatal or repeating: drain the host "
        "and have the part named replaced", detail=_detail(entry), severity=severity)


@check("host_edac_errors", COLUMN, severity="critical", severities=("critical", "medium"),
       order=76)
def host_edac_errors(facts, wanted):
    """One per EDAC memory controller with errors since boot: uncorrectable (ue_count)
    critical, correctable only (ce_count) medium (on EPYC they show a DIMM going bad
    before it panics the host)."""
    for mc in (facts.get("host_health") or {}).get("edac") or []:
        ce, ue = mc.get("ce_count") or 0, mc.get("ue_count") or 0
        if not ce and not ue:
            continue
        dimms = ", ".join("%s ce=%s ue=%s" % (
            d.get("label") or "dimm%s" % d["dimm"], d.get("ce_count"), d.get("ue_count"))
            for d in mc.get("dimms") or [])
        if ue:
            remedy = ("drain the host and replace the DIMM named (%s); uncorrectable memory "
                      "errors corrupt data or panic the host"
                      % (dimms or "ras-mc-ctl --error-count names it"))
        else:
            remedy = ("schedule the DIMM's replacement (%s) and watch the count grow: "
                      "correctable errors come before uncorrectable ones" % (
                          dimms or "ras-mc-ctl --error-count names it"))
        yield found("edac %s" % mc["controller"],
                    "ce_count %d, ue_count %d since boot (%s)" % (ce, ue, mc.get("name") or "?"),
                    "0 and 0", remedy, detail=dimms or None,
                    severity="critical" if ue else "medium")


@check("host_fs_readonly", COLUMN, severity="high", order=77)
def host_fs_readonly(facts, wanted):
    """One per filesystem the kernel remounted read-only (or shut down) in the window."""
    entry = _events(facts, "fs_readonly")
    for dev, item in sorted((entry.get("subjects") or {}).items()):
        yield found(dev, "remounted read-only (or shut down) x%d in %s days" % (
            item["count"], (facts.get("host_health") or {}).get("window_days")),
            "read-write", "find the I/O or journal error before the remount (journalctl -k | "
            "grep -F '%s'), check the disk (smartctl -a, nvme smart-log), fsck it unmounted, "
            "then remount or reboot" % dev, detail=_detail(entry))


@check("host_kernel_oops", COLUMN, severity="high", order=78)
def host_kernel_oops(facts, wanted):
    """Kernel oopses, BUGs and panics in the window: the kernel is in an unknown state. A
    process's own trap or segfault (``traps: python3[41234] general protection fault
    ip:...``) is none: the kernel survives it, the process's owner sees it (hostlog)."""
    entry = _events(facts, "oops")
    if entry.get("count"):
        yield found("kernel log", _current(entry, facts, "oopses or panics"), "none",
                    "reboot the host (a kernel that oopsed is in an unknown state); read the "
                    "trace for the module it names (nvidia: collect nvidia-bug-report.sh) and "
                    "update that kernel or driver", reboot_required=True, detail=_detail(entry))


@check("host_kernel_hang", COLUMN, severity="high", order=79)
def host_kernel_hang(facts, wanted):
    """Soft or hard lockups and tasks blocked 120 s or more in the window."""
    entry = _events(facts, "lockup")
    if entry.get("count"):
        yield found("kernel log", _current(entry, facts, "lockups or hung tasks"), "none",
                    "read the stack the report prints (journalctl -k -g 'blocked for more "
                    "than|soft lockup'): a task stuck in nvidia or NVMe code points at that "
                    "device; repeating: reboot and update the kernel or driver",
                    detail=_detail(entry))


@check("host_nvme_errors", COLUMN, severity="high", order=81)
def host_nvme_errors(facts, wanted):
    """One per NVMe controller with command timeouts or controller resets in the window."""
    entry = _events(facts, "nvme")
    for dev, item in sorted((entry.get("subjects") or {}).items()):
        yield found(dev, "%d timeouts or resets in %s days" % (
            item["count"], (facts.get("host_health") or {}).get("window_days")), "none",
            "check the drive (nvme smart-log /dev/%s, nvme error-log) and its firmware; "
            "repeating: replace it, or try nvme_core.default_ps_max_latency_us=0 for "
            "power-state resets" % dev, detail=_detail(entry))


@check("host_oom_kill", COLUMN, severity="medium", order=83)
def host_oom_kill(facts, wanted):
    """One per memory cgroup owner (an LXC container, or the host) whose processes the OOM
    killer killed in the window."""
    entry = _events(facts, "oom")
    for subject, item in sorted((entry.get("subjects") or {}).items()):
        if subject.startswith("lxc/"):
            remedy = ("raise the container's memory (pct set %s --memory <MiB>) or lower what "
                      "runs in it (killed: %s)" % (subject[4:], ", ".join(item["tasks"])))
        else:
            remedy = ("the host ran out of memory (killed: %s): lower the containers' and "
                      "VMs' memory or add memory; check vm.overcommit and hugepages"
                      % ", ".join(item["tasks"]))
        yield found(subject, "%d OOM kills in %s days" % (
            item["count"], (facts.get("host_health") or {}).get("window_days")), "none",
            remedy, detail=_detail(entry))
