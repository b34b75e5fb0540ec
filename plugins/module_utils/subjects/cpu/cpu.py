# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""CPU idle states (cpuidle sysfs) and CPU frequency driver facts (read).

Stdlib + hostfs only: the boot-time service ships this file to hosts and runs it without
Ansible; changing idle states is in subjects/cpu/cpuidle_state.py. Layout (see
docs/hardware-facts.md):

- ``/sys/devices/system/cpu/online``: range list (``0-63,65-127``); offline CPUs have no
  ``cpuidle`` folder.
- ``/sys/devices/system/cpu/cpuidle/current_driver``: ``acpi_idle``, ``intel_idle``,
  ``haltpoll`` or ``none`` (no ``stateK`` folders then); no folder at all in many VMs.
- ``/sys/devices/system/cpu/cpuN/cpuidle/stateK/{name,desc,latency,residency,disable,...}``;
  ``latency`` is the exit latency in microseconds; ``disable`` is per CPU and writable.

States are chosen by name or by latency, never by index: index 3 is C3 on one CPU and C6
on another.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import os
import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    host_path,
    numbered_entries,
    read_int,
    read_text,
)

CPU_SYSFS = "/sys/devices/system/cpu"
_CPU_DIR = re.compile(r"^cpu(\d+)$")
_STATE_DIR = re.compile(r"^state(\d+)$")
_POLICY_DIR = re.compile(r"^policy(\d+)$")


MAX_CPU = 65535  # a CPU list naming more is refused before it is expanded


class CpuError(Exception):
    """A cpuidle/cpufreq operation failed; the message names CPU, state and what to do.

    ``written``: the ``(cpu, state name)`` flags changed before the failure (a partial run
    reports changed=true and names them)."""

    def __init__(self, msg, written=None):
        super(CpuError, self).__init__(msg)
        self.written = list(written or [])


def _read_flag(path):
    """The text of a ``disable`` file; None when missing; an unreadable one (a folder, EIO)
    raises CpuError naming it."""
    try:
        return read_text(path)
    except (IOError, OSError) as exc:
        raise CpuError("cannot read %s: %s (not a cpuidle flag file)" % (path, exc))


# --- CPU lists ------------------------------------------------------------------------


def parse_cpu_list(text):
    """Parse a kernel CPU list (``0-63,65-127``, ``0,2,4``, ``""``) into sorted ints.

    Raises ValueError on anything else (the message quotes the text).
    """
    cpus = set()
    text = (text or "").strip()
    if not text:
        return []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if "-" in part:
                low, high = part.split("-", 1)
                low, high = int(low), int(high)
                if high < low or high > MAX_CPU:
                    raise ValueError(part)
                cpus.update(range(low, high + 1))
            else:
                if int(part) > MAX_CPU or int(part) < 0:
                    raise ValueError(part)
                cpus.add(int(part))
        except ValueError:
            raise ValueError("not a CPU list: %r (want e.g. 0-63,65-127, CPUs 0-%d)"
                             % (text, MAX_CPU))
    return sorted(cpus)


def format_cpu_list(cpus):
    """The compact kernel form of a CPU list: ``[0, 1, 2, 5]`` -> ``"0-2,5"``; ``[]`` -> ``""``."""
    cpus = sorted(set(int(c) for c in cpus))
    parts = []
    start = prev = None
    for cpu in cpus:
        if start is None:
            start = prev = cpu
        elif cpu == prev + 1:
            prev = cpu
        else:
            parts.append(_span(start, prev))
            start = prev = cpu
    if start is not None:
        parts.append(_span(start, prev))
    return ",".join(parts)


def _span(start, end):
    return str(start) if start == end else "%d-%d" % (start, end)


# --- topology ---------------------------------------------------------------------------


def _cpu_sysfs(root, *parts):
    return host_path(root, "/".join((CPU_SYSFS,) + parts))


def present_cpus(root):
    """CPUs with a ``cpuN`` folder (every CPU the kernel knows, online or not)."""
    try:
        names = hostfs.listdir(_cpu_sysfs(root))
    except OSError:
        return []
    return sorted(int(m.group(1)) for m in (_CPU_DIR.match(n) for n in names) if m)


def online_cpus(root):
    """Online CPUs from ``/sys/devices/system/cpu/online``.

    Without that file (old kernels, some containers): every ``cpuN`` whose ``online`` file
    is not ``0``.
    """
    text = read_text(_cpu_sysfs(root, "online"))
    if text is not None:
        return parse_cpu_list(text)
    cpus = []
    for cpu in present_cpus(root):
        if read_text(_cpu_sysfs(root, "cpu%d" % cpu, "online"), "1") != "0":
            cpus.append(cpu)
    return cpus


# --- cpuidle ------------------------------------------------------------------------------


def cpuidle_driver(root):
    """The active cpuidle driver (``acpi_idle``, ``intel_idle``, ``haltpoll``, ``none``).

    None when there is no ``/sys/devices/system/cpu/cpuidle`` folder at all (many VMs,
    kernels without CONFIG_CPU_IDLE).
    """
    folder = _cpu_sysfs(root, "cpuidle")
    if not hostfs.isdir(folder):
        return None
    driver = read_text(os.path.join(folder, "current_driver"))
    return driver if driver else "none"


def cpuidle_governor(root):
    """The cpuidle governor (``menu``, ``teo``, ``ladder``, ``haltpoll``) or None."""
    folder = _cpu_sysfs(root, "cpuidle")
    return read_text(os.path.join(folder, "current_governor")) or read_text(
        os.path.join(folder, "current_governor_ro")
    )


def cpuidle_available(root):
    """True when a cpuidle driver with states is active (not missing, not ``none``)."""
    driver = cpuidle_driver(root)
    return driver not in (None, "none")


def _state_dirs(root, cpu):
    return numbered_entries(_cpu_sysfs(root, "cpu%d" % cpu, "cpuidle"), _STATE_DIR)


def _read_state(index, folder, brief=False):
    disable = _read_flag(os.path.join(folder, "disable"))
    state = {
        "index": index,
        "name": read_text(os.path.join(folder, "name"), "state%d" % index),
        "latency_us": read_int(os.path.join(folder, "latency"), None, 10),
        "disabled": disable not in (None, "", "0"),
        "path": folder,
    }
    if not brief:
        state["desc"] = read_text(os.path.join(folder, "desc"), "")
        state["residency_us"] = read_int(os.path.join(folder, "residency"), None, 10)
        state["default_status"] = read_text(os.path.join(folder, "default_status"))
    return state


def read_states(root, cpus=None, brief=False):
    """``{cpu: [state, ...]}`` for online CPUs (or ``cpus``, offline ones skipped).

    Each state: ``index``, ``name``, ``desc``, ``latency_us``, ``residency_us``,
    ``disabled`` (bool), ``default_status`` (None on kernels without it) and ``path`` (the
    stateK folder). ``brief``: only ``index``, ``name``, ``latency_us``, ``disabled`` and
    ``path``, half the reads (a 128-thread host has 384 state folders). CPUs without a
    ``cpuidle`` folder map to ``[]``. Returns ``{}`` when no cpuidle driver is active.
    """
    if not cpuidle_available(root):
        return {}
    held = brief and cpus is None and root in _HELD
    if held and _HELD[root] is not None:
        return _copy_states(_HELD[root])
    online = set(online_cpus(root))
    wanted = sorted(online if cpus is None else (set(cpus) & online))
    out = {}
    for cpu in wanted:
        out[cpu] = [_read_state(index, folder, brief)
                    for index, folder in _state_dirs(root, cpu)]
    if held:
        _HELD[root] = _copy_states(out)
    return out


# Roots whose brief states of every online CPU are read once while a caller holds them
# (states_held): one tune pass reads them in its audit, its snapshot and its cpuidle part
# before anything writes them (three reads of ~1,150 files on a 128-thread host, a fifth
# of a no-change tune's CPU). A write of a ``disable`` flag (cpuidle_state.set_states)
# forgets them, so what follows a write reads the kernel again.
_HELD = {}


def _copy_states(states):
    return dict((cpu, [dict(state) for state in items]) for cpu, items in states.items())


@contextlib.contextmanager
def states_held(root):
    """Within: ``read_states(root, brief=True)`` of all online CPUs reads the host once and
    answers from that read until :func:`forget_states` (each caller gets its own copy)."""
    _HELD[root] = None
    try:
        yield
    finally:
        _HELD.pop(root, None)


def forget_states():
    """Drop every held read (an idle flag was written): the next read is fresh."""
    for root in _HELD:
        _HELD[root] = None


def summarize_states(root, states=None):
    """States by name across online CPUs, in exit-latency order.

    ``[{name, desc, latency_us, latencies_us, cpus, cpus_disabled}]``: ``latency_us`` is
    the highest exit latency seen for the name (``latencies_us`` every distinct one),
    ``cpus`` and ``cpus_disabled`` are sorted CPU number lists. The audit's schema.
    """
    if states is None:
        states = read_states(root, brief=True)
    by_name = {}
    for cpu in sorted(states):
        for state in states[cpu]:
            entry = by_name.get(state["name"])
            if entry is None:
                # brief states (read_states(brief=True)): the description read once per name
                desc = state["desc"] if "desc" in state else read_text(
                    os.path.join(state["path"], "desc"), "")
                entry = by_name[state["name"]] = {
                    "name": state["name"], "desc": desc, "latencies_us": set(),
                    "cpus": [], "cpus_disabled": []}
            if state["latency_us"] is not None:
                entry["latencies_us"].add(state["latency_us"])
            entry["cpus"].append(cpu)
            if state["disabled"]:
                entry["cpus_disabled"].append(cpu)
    out = []
    for entry in by_name.values():
        lat = sorted(entry["latencies_us"])
        entry["latencies_us"] = lat
        entry["latency_us"] = lat[-1] if lat else None
        out.append(entry)
    out.sort(key=lambda e: (e["latency_us"] if e["latency_us"] is not None else -1, e["name"]))
    return out


# --- the cpuidle_state pass (modules cpuidle_state and host_tune) ---------------------


# --- cpufreq ------------------------------------------------------------------------------


def cpufreq_policies(root):
    """``[(policy_number, folder)]`` of ``/sys/devices/system/cpu/cpufreq/policy*``."""
    return numbered_entries(_cpu_sysfs(root, "cpufreq"), _POLICY_DIR)


def cpufreq_info(root):
    """CPU frequency facts; every value None when absent.

    ``{driver, governors, available_governors, amd_pstate_status, epp, boost, policies}``:
    ``driver`` from policy ``scaling_driver`` (``amd-pstate-epp``, ``amd-pstate``,
    ``acpi-cpufreq``; the first policy's, ``drivers`` lists all distinct ones),
    ``governors`` sorted unique ``scaling_governor`` over policies,
    ``available_governors`` of the first policy (list), ``amd_pstate_status`` from
    ``/sys/devices/system/cpu/amd_pstate/status`` (``active``, ``passive``, ``guided``,
    ``disable``), ``epp`` sorted unique ``energy_performance_preference`` (amd-pstate-epp
    and intel_pstate only).
    """
    policies = cpufreq_policies(root)
    drivers = []
    governors = set()
    epp = set()
    available = None
    for _number, folder in policies:
        driver = read_text(os.path.join(folder, "scaling_driver"))
        if driver and driver not in drivers:
            drivers.append(driver)
        governor = read_text(os.path.join(folder, "scaling_governor"))
        if governor:
            governors.add(governor)
        pref = read_text(os.path.join(folder, "energy_performance_preference"))
        if pref:
            epp.add(pref)
        if available is None:
            text = read_text(os.path.join(folder, "scaling_available_governors"))
            if text:
                available = text.split()
    boost = read_text(_cpu_sysfs(root, "cpufreq", "boost"))
    return {
        "driver": drivers[0] if drivers else None,
        "drivers": drivers or None,
        "governors": sorted(governors) or None,
        "available_governors": available,
        "amd_pstate_status": read_text(_cpu_sysfs(root, "amd_pstate", "status")),
        "epp": sorted(epp) or None,
        "boost": None if boost is None else boost == "1",
        "policies": len(policies) or None,
    }


# --- the tune part (module host_tune; protocol in engines/tune/tune.py) ---------------------------
