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


def _seconds(microseconds):
    return "%.1f s" % (microseconds / 1e6)


@check("gpu_slowdown_since_load", COLUMN, severity="medium", severities=("medium", "low"),
       order=127)
def gpu_slowdown_since_load(facts, wanted):
    """Clock event counters (microseconds since the driver loaded) non-zero for a hardware
    reason (thermal slowdown, power brake): medium; for the software thermal limit alone:
    low. The power cap and sync boost are a GPU working at its limits, not counted."""
    for gpu in smi_gpus(facts):
        counters = gpu.get("clock_event_counters_us") or {}
        hardware = sorted((n, v) for n, v in counters.items() if n.startswith("hw_") and v)
        thermal = sorted((n, v) for n, v in counters.items()
                         if n.startswith("sw_therm") and v)
        if not hardware and not thermal:
            continue
        addr = _addr(gpu)
        held = ", ".join("%s %s" % (n, _seconds(v)) for n, v in hardware + thermal)
        yield found(
            addr, "clocks held down since the driver loaded: %s" % held,
            "no hardware or thermal slowdown",
            "check cooling, airflow and the power supplies (nvidia-smi -q -d "
            "PERFORMANCE,TEMPERATURE,POWER -i %s); the counters restart when the driver "
            "loads" % addr, severity="medium" if hardware else "low")


@check("gpu_thermal_margin_low", COLUMN, severity="medium", severities=("medium", "high"),
       order=128)
def gpu_thermal_margin_low(facts, wanted):
    """The GPU's temperature margin to its slowdown limit (T.Limit, ``gpu_temp_tlimit``), or
    its memory's margin to the memory's limit (``gpu_temp_max_mem_threshold`` less
    ``memory_temp``), below ``thermal_margin_min_c``: medium; at or past a limit (0 C or
    less): high."""
    least = wanted.get("thermal_margin_min_c")
    if least is None:
        return
    for gpu in smi_gpus(facts):
        margins = []
        margin = gpu.get("temperature_margin_c")
        if isinstance(margin, (int, float)) and margin < least:
            margins.append((margin, "%s C below the slowdown limit" % margin))
        mem, limit = gpu.get("memory_temperature_c"), gpu.get("memory_temperature_limit_c")
        if isinstance(mem, (int, float)) and isinstance(limit, (int, float)) and limit > 0 \
                and limit - mem < least:
            margins.append((limit - mem, "memory %s C below its %s C limit" % (
                limit - mem, limit)))
        if not margins:
            continue
        addr = _addr(gpu)
        yield found(
            addr, "%s (GPU %s C, memory %s C)" % (
                "; ".join(text for _m, text in margins), gpu.get("temperature_c"), mem),
            "at least %d C of margin" % least,
            "check cooling and airflow before the GPU slows down (nvidia-smi -q -d "
            "TEMPERATURE -i %s)" % addr,
            severity="high" if min(m for m, _t in margins) <= 0 else "medium")


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
