# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Column sysctl: kernel settings off their wanted values (numa_balancing has its own)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.sysctl import sysctl
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.findings import (
    PLAYBOOK_TUNE,
    check,
    column,
    found,
    limit,
)

# Severity of a sysctl off its wanted value; keys not named here are medium.
SYSCTL_SEVERITY = {
    "kernel.nmi_watchdog": "medium",
    "net.core.rmem_max": "medium",
    "net.core.wmem_max": "medium",
    "kernel.sched_autogroup_enabled": "low",
    "kernel.perf_event_paranoid": "low",
    "vm.swappiness": "low",
    "vm.dirty_ratio": "low",
    "vm.dirty_background_ratio": "low",
}
# The key with a finding id of its own (column numa_balancing).
NUMA_BALANCING = "kernel.numa_balancing"


def _no_proc_sys(facts, wanted):
    values = (facts.get("sysctl") or {}).get("values") or {}
    if values and all(v is None for v in values.values()):
        return "no /proc/sys"
    return None


COLUMN = column("sysctl", "sysctl", position=80, applies=_no_proc_sys)


def off_values(facts, wanted):
    """``found`` for every wanted key whose value on the host is off (a key the host does
    not have is not a finding)."""
    values = (facts.get("sysctl") or {}).get("values") or {}
    for key, want in (wanted.get("sysctl") or {}).items():
        want = " ".join(str(want).split())
        have = values.get(key)
        if have is None or sysctl.satisfied(key, have, want):
            continue
        yield found(key, have, want,
                    "sysctl -w %s=%s (now); ansible-playbook %s%s (now and persisted in "
                    "/etc/sysctl.d)" % (key, want, PLAYBOOK_TUNE, limit(wanted.get("host"))))


@check("sysctl", COLUMN, severity=lambda item: SYSCTL_SEVERITY.get(item["subject"], "medium"),
       severities=("medium", "low"), order=110)
def sysctl_off(facts, wanted):
    """Medium or low by key (:data:`SYSCTL_SEVERITY`)."""
    return [item for item in off_values(facts, wanted) if item["subject"] != NUMA_BALANCING]
