# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Column cpufreq: the scaling driver, where a better one is possible."""

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
    if not ((facts.get("cpu") or {}).get("cpufreq") or {}).get("driver"):
        return "no cpufreq driver (VM?)"
    return None


COLUMN = column("cpufreq", "cpufreq", position=70, applies=_applies)


def amd_pstate_possible(cpu):
    return cpu.get("vendor") == "AuthenticAMD" or cpu.get("amd_pstate_status") is not None


@check("cpufreq_driver", COLUMN, severity="medium", order=100)
def cpufreq_driver(facts, wanted):
    """acpi-cpufreq where amd-pstate (AMD) or intel_pstate (Intel) is possible."""
    cpu = facts.get("cpu") or {}
    driver = (cpu.get("cpufreq") or {}).get("driver")
    if driver in (wanted.get("cpufreq_drivers_wanted") or []):
        return
    host = wanted.get("host")
    if driver == "acpi-cpufreq" and amd_pstate_possible(cpu):
        yield found(
            "cpufreq", driver, "amd-pstate-epp (amd_pstate=active)",
            "add amd_pstate=active to the kernel command line and reboot: ansible-playbook "
            "%s%s (CPPC must be enabled in the BIOS)" % (PLAYBOOK_REBOOT, limit(host)),
            reboot_required=True,
            detail=("amd_pstate status: %s" % cpu["amd_pstate_status"]
                    if cpu.get("amd_pstate_status") else
                    "amd_pstate not active (no /sys/devices/system/cpu/amd_pstate)"))
    elif driver == "acpi-cpufreq" and cpu.get("vendor") == "GenuineIntel":
        yield found(
            "cpufreq", driver, "intel_pstate",
            "remove intel_pstate=disable from the kernel command line (and enable HWP in the "
            "BIOS), then reboot: ansible-playbook %s%s" % (PLAYBOOK_REBOOT, limit(host)),
            reboot_required=True)
