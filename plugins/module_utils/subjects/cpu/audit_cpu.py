# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cpu subject's part of the audit (platform/facts_base.py): the CPU's identity, idle
states and frequency scaling, and the deepest idle state wanted enabled."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.facts_base import Fact
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (
    idle_state_name,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cpu import (
    cpu,
    cpufreq_check,
    cpuidle_check,
    numa_balancing_check,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.host import sysinfo


def cpu_facts(root):
    identity = sysinfo.cpu_identity(root)
    driver = cpu.cpuidle_driver(root)
    states = []
    if driver not in (None, "none"):
        states = [{"name": s["name"], "desc": s.get("desc"), "latency_us": s["latency_us"],
                   "cpus": len(s["cpus"]), "cpus_disabled": len(s["cpus_disabled"]),
                   "cpus_enabled_list": cpu.format_cpu_list(
                       sorted(set(s["cpus"]) - set(s["cpus_disabled"])))}
                  for s in cpu.summarize_states(root)]
    freq = cpu.cpufreq_info(root)
    return {
        "vendor": identity["vendor"],
        "model_name": identity["model_name"],
        "cppc": "cppc" in identity["flags"],
        "hypervisor": "hypervisor" in identity["flags"],
        "online": len(cpu.online_cpus(root)),
        "cpuidle": {
            "driver": driver,
            "governor": cpu.cpuidle_governor(root) if driver is not None else None,
            "states": states,
        },
        "cpufreq": {
            "driver": freq.get("driver"),
            "drivers": freq.get("drivers"),
            "governors": freq.get("governors"),
            "epp": freq.get("epp"),
            "boost": freq.get("boost"),
        },
        "amd_pstate_status": freq.get("amd_pstate_status"),
    }


FACTS = (Fact(30, "cpu", lambda c: cpu_facts(c.root), {}),)
WANTED = {"cpuidle_deeper_than": dict(type="str", default="C1")}


def wanted_rules(w):
    idle_state_name("cpuidle_deeper_than", w.get("cpuidle_deeper_than"))


CHECKS = (cpufreq_check, cpuidle_check, numa_balancing_check)
