# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Column GPU state: persistence mode, clock event (throttle) reasons, power limit against
the default (from the audit's one ``nvidia-smi -q -x``); the performance state is shown
with the clock reasons."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import nvsmi
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.findings import (
    SEVERITY_RANK,
    check,
    column,
    found,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health.gpu_health import (
    smi_applies,
    smi_gpus,
)

COLUMN = column("gpu_state", "GPU state", position=46, applies=smi_applies)

# Clock event reasons by how bad they are while they hold (idle and application clocks
# are no problem and not listed).
CLOCK_REASON_SEVERITY = {
    "hw_slowdown": "high",
    "hw_thermal_slowdown": "high",
    "hw_power_brake_slowdown": "high",
    "sw_thermal_slowdown": "medium",
    "sw_power_cap": "low",
    "sync_boost": "info",
    "display_clocks_setting": "info",
}
# A limit this many watts below the default counts as lowered (the XML rounds to 0.01 W).
POWER_TOLERANCE_W = 1.0


def _addr(gpu):
    return gpu.get("address") or "?"


@check("gpu_clock_throttle", COLUMN, severity="high",
       severities=("high", "medium", "low", "info"), order=49)
def gpu_clock_throttle(facts, wanted):
    """Active clock event reasons other than idle and application clocks: hardware
    slowdowns high, software thermal medium, software power cap low (a GPU at its limit
    under load), sync boost and display clocks info."""
    for gpu in smi_gpus(facts):
        reasons = [r for r in gpu.get("clock_reasons_active") or []
                   if r not in nvsmi.BENIGN_CLOCK_REASONS]
        if not reasons:
            continue
        severity = min((CLOCK_REASON_SEVERITY.get(r, "medium") for r in reasons),
                       key=lambda s: SEVERITY_RANK[s])
        addr = _addr(gpu)
        pstate = gpu.get("performance_state") or "P?"
        yield found(
            addr, "clocks held down by %s (%s)" % (", ".join(reasons), pstate),
            "no clock event reason but idle or application clocks",
            "hardware or thermal slowdown: check cooling, airflow and the power supplies "
            "(nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER -i %s); sw_power_cap alone is "
            "the GPU at its power limit under load" % addr, severity=severity)


@check("gpu_persistence_off", COLUMN, severity="medium", order=122)
def gpu_persistence_off(facts, wanted):
    for gpu in smi_gpus(facts):
        if gpu.get("persistence_mode") is False:
            yield found(
                _addr(gpu), "persistence mode off", "persistence mode on",
                "systemctl enable --now nvidia-persistenced (keeps the GPU initialised "
                "between CUDA processes, and survives reboots, unlike nvidia-smi -pm 1, "
                "which the driver calls deprecated)")


@check("gpu_power_capped", COLUMN, severity="medium", order=121)
def gpu_power_capped(facts, wanted):
    for gpu in smi_gpus(facts):
        power = gpu.get("power") or {}
        current, default = power.get("limit_w"), power.get("default_limit_w")
        if current is None or default is None or current >= default - POWER_TOLERANCE_W:
            continue
        addr = _addr(gpu)
        yield found(
            addr, "power limit %g W" % current, "%g W (the default limit)" % default,
            "nvidia-smi -pl %g -i %s, and find what lowered it (a boot script, a datacenter "
            "power policy); the limit resets at reboot" % (default, addr))
