# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Column C-states: idle states deeper than the wanted one, enabled on some CPU."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.findings import (
    PLAYBOOK_TUNE,
    check,
    column,
    found,
    limit,
)


def state_latency(states, name):
    for state in states:
        if state["name"] == name:
            return state["latency_us"]
    return None


def _applies(facts, wanted):
    idle = (facts.get("cpu") or {}).get("cpuidle") or {}
    if idle.get("driver") is None:
        return "no cpuidle in sysfs (VM?)"
    if not idle.get("states"):
        return "cpuidle driver %s has no states" % idle.get("driver")
    if state_latency(idle["states"], wanted.get("cpuidle_deeper_than")) is None:
        return "driver %s has no state %s (states: %s)" % (
            idle.get("driver"), wanted.get("cpuidle_deeper_than"),
            ", ".join(s["name"] for s in idle["states"]))
    return None


COLUMN = column("cpuidle", "C-states", position=60, applies=_applies)


@check("cpuidle_deep_state", COLUMN, severity="high", order=60)
def cpuidle_deep_state(facts, wanted):
    idle = (facts.get("cpu") or {}).get("cpuidle") or {}
    states = idle.get("states") or []
    ref = wanted.get("cpuidle_deeper_than")
    deepest = state_latency(states, ref)
    for state in states:
        if state["latency_us"] is None or state["latency_us"] <= deepest:
            continue
        enabled = state["cpus"] - state["cpus_disabled"]
        if enabled <= 0:
            continue
        yield found(
            state["name"],
            "enabled on %d of %d CPUs (exit latency %s us)" % (
                enabled, state["cpus"], state["latency_us"]),
            "disabled (no idle state deeper than %s)" % ref,
            "ansible-playbook %s%s (disables %s by name on every CPU, now and at boot); "
            "boot parameter processor.max_cstate=1 for acpi_idle" % (
                PLAYBOOK_TUNE, limit(wanted.get("host")), state["name"]),
            detail="driver %s; enabled on CPUs %s" % (
                idle.get("driver"), state.get("cpus_enabled_list")))
