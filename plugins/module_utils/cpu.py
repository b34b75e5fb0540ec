# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""CPU idle states (cpuidle sysfs) and CPU frequency driver facts.

Stdlib + hostfs only: the boot-time service ships this file to hosts and runs it without
Ansible. Layout (see docs/hardware-facts.md):

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

import os
import re

try:
    from ansible_collections.gpuhost.tuning.plugins.module_utils import hostfs
    from ansible_collections.gpuhost.tuning.plugins.module_utils.hostfs import (
        host_path,
        numbered_entries,
        read_int,
        read_text,
        write_in_place,
    )
except ImportError:  # pragma: no cover - shipped to a host as plain files next to hostfs.py
    import hostfs
    from hostfs import host_path, numbered_entries, read_int, read_text, write_in_place

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
    online = set(online_cpus(root))
    wanted = sorted(online if cpus is None else (set(cpus) & online))
    out = {}
    for cpu in wanted:
        out[cpu] = [_read_state(index, folder, brief)
                    for index, folder in _state_dirs(root, cpu)]
    return out


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


def state_names(states):
    """Every state name present on any CPU of a :func:`read_states` result, sorted."""
    return sorted(set(s["name"] for cpu_states in states.values() for s in cpu_states))


def deeper_than_applies(names, deeper_than):
    """Whether tuning ``deeper_than`` applies to a host whose CPUs have idle states ``names``.

    False on a host without idle states, or with only polling ones (a VM's POLL and
    haltpoll): nothing there is deeper. A name that no CPU has on a host with C-states is a
    CpuError (a typo such as ``c1`` must not pass as "not applicable").
    """
    names = list(names or [])
    if deeper_than in names:
        return True
    if not any(re.match(r"^C[0-9]", name) for name in names):
        return False
    raise CpuError("idle state %s (deeper_than) not found on any online CPU (available: %s): "
                   "name one of them as the kernel spells it" % (deeper_than, ", ".join(names)))


def select_states(root, names=None, max_latency_us=None, deeper_than=None, cpus=None,
                  states=None):
    """Choose states per CPU, by name or latency, never by index.

    Exactly one criterion:
    - ``names``: states with one of these names (a name no CPU has raises CpuError);
    - ``max_latency_us``: states whose exit latency is above it;
    - ``deeper_than``: states whose exit latency is above that named state's latency on the
      same CPU (``C1`` selects C2, C3, ... wherever they sit); CPUs without that state get
      nothing; a name no CPU has raises CpuError.

    Returns ``{cpu: [state, ...]}`` (only CPUs with at least one selected state).
    """
    given = [c for c in (names, max_latency_us, deeper_than) if c not in (None, [], "")]
    if len(given) != 1:
        raise CpuError("select idle states by exactly one of names, max_latency_us, deeper_than")
    if states is None:
        states = read_states(root, cpus)
    known = state_names(states)
    selection = {}
    if names:
        names = [names] if isinstance(names, str) else list(names)
        unknown = [n for n in names if n not in known]
        if unknown:
            raise CpuError(
                "idle state %s not found on any online CPU (available: %s)"
                % (", ".join(unknown), ", ".join(known) or "none")
            )
        for cpu, cpu_states in states.items():
            chosen = [s for s in cpu_states if s["name"] in names]
            if chosen:
                selection[cpu] = chosen
    elif max_latency_us is not None:
        limit = int(max_latency_us)
        for cpu, cpu_states in states.items():
            chosen = [s for s in cpu_states
                      if s["latency_us"] is not None and s["latency_us"] > limit]
            if chosen:
                selection[cpu] = chosen
    else:
        if deeper_than not in known:
            raise CpuError(
                "idle state %s (deeper_than) not found on any online CPU (available: %s)"
                % (deeper_than, ", ".join(known) or "none")
            )
        for cpu, cpu_states in states.items():
            ref = [s for s in cpu_states if s["name"] == deeper_than]
            if not ref or ref[0]["latency_us"] is None:
                continue
            limit = ref[0]["latency_us"]
            chosen = [s for s in cpu_states
                      if s["latency_us"] is not None and s["latency_us"] > limit]
            if chosen:
                selection[cpu] = chosen
    return selection


def set_states(root, selection, disabled, cpus=None, check_mode=False):
    """Write ``disable`` (1 or 0) for every selected state and read it back.

    ``selection`` is a :func:`select_states` result; ``cpus`` narrows it further. Returns
    ``{"changed": [(cpu, name), ...], "unchanged": [(cpu, name), ...]}``. In check mode
    nothing is written. All writes are attempted; then a CpuError lists every CPU/state
    whose write failed or did not take (value read back differs).
    """
    value = "1" if disabled else "0"
    changed = []
    unchanged = []
    failures = []
    todo = []
    # Read every file first: a missing one fails before anything is written.
    for cpu in sorted(selection):
        if cpus is not None and cpu not in cpus:
            continue
        for state in selection[cpu]:
            path = os.path.join(state["path"], "disable")
            try:
                current = read_text(path)
            except (IOError, OSError) as exc:
                failures.append("cpu%d %s: cannot read %s: %s" % (cpu, state["name"], path, exc))
                continue
            if current is None:
                failures.append("cpu%d %s: %s is missing" % (cpu, state["name"], path))
            elif (current != "0") == bool(disabled):
                unchanged.append((cpu, state["name"]))
            else:
                todo.append((cpu, state["name"], path))
    if failures:
        raise CpuError("cpuidle state files missing, nothing written: %s (CPU went offline?)"
                       % "; ".join(failures[:10]))
    for cpu, name, path in todo:
        if check_mode:
            changed.append((cpu, name))
            continue
        try:
            write_in_place(path, value)
        except (IOError, OSError) as exc:
            failures.append("cpu%d %s: writing %s to %s failed: %s"
                            % (cpu, name, value, path, exc))
            continue
        changed.append((cpu, name))
        try:
            after = read_text(path)
        except (IOError, OSError):
            after = None
        if after is None or (after != "0") != bool(disabled):
            failures.append("cpu%d %s: wrote %s to %s but it reads back %r"
                            % (cpu, name, value, path, after))
    if failures:
        shown = failures[:10]
        more = len(failures) - len(shown)
        done = ""
        if changed:
            by_name = {}
            for cpu, name in changed:
                by_name.setdefault(name, []).append(cpu)
            done = "; %d flag(s) written (changed): %s" % (len(changed), ", ".join(
                "%s on CPUs %s" % (name, format_cpu_list(cpus))
                for name, cpus in sorted(by_name.items())))
        raise CpuError(
            "cpuidle %s did not take on %d CPU state(s): %s%s (run as root; a hypervisor "
            "or firmware may own idle states)%s"
            % ("disable" if disabled else "enable", len(failures), "; ".join(shown),
               " and %d more" % more if more else "", done), written=changed)
    return {"changed": changed, "unchanged": unchanged}


# --- the cpuidle_state pass (modules cpuidle_state and host_tune) ---------------------


def idle_run(params, check_mode=False):
    """The whole cpuidle_state pass for ``params`` (the module's options: names,
    max_latency_us or deeper_than, state, cpus, root). Returns the module's result dict;
    raises CpuError when a write did not take (nothing is half-reported)."""
    params = dict({"names": None, "max_latency_us": None, "deeper_than": None,
                   "state": "disabled", "cpus": None, "root": "/"}, **params)
    root = params["root"]
    disabled = params["state"] == "disabled"
    driver = cpuidle_driver(root)
    online = online_cpus(root)
    result = dict(changed=False, available=False, driver=driver, states=[], changed_count=0,
                  cpus=format_cpu_list(online), skipped_cpus="")
    wanted = None
    if params["cpus"]:
        wanted = set()
        for item in params["cpus"]:
            wanted.update(parse_cpu_list(str(item)))
        present = set(present_cpus(root)) or set(online)
        unknown = sorted(wanted - present)
        if unknown:
            raise CpuError("CPU %s not present on this host (present: %s)"
                           % (format_cpu_list(unknown), format_cpu_list(present)))
        result["skipped_cpus"] = format_cpu_list(wanted - set(online))
        result["cpus"] = format_cpu_list(wanted & set(online))
    if not cpuidle_available(root):
        return result
    result["available"] = True
    states = read_states(root, wanted)
    selection = select_states(root, names=params["names"],
                              max_latency_us=params["max_latency_us"],
                              deeper_than=params["deeper_than"], states=states)
    outcome = set_states(root, selection, disabled, check_mode=check_mode)
    written = set(outcome["changed"])
    by_name = {}
    for cpu in sorted(selection):
        for state in selection[cpu]:
            entry = by_name.setdefault(state["name"], dict(cpus=[], before=[], after=[],
                                                           latency=set()))
            entry["cpus"].append(cpu)
            if state["latency_us"] is not None:
                entry["latency"].add(state["latency_us"])
            if state["disabled"]:
                entry["before"].append(cpu)
            now = disabled if (cpu, state["name"]) in written else state["disabled"]
            if now:
                entry["after"].append(cpu)
    for name, entry in by_name.items():
        result["states"].append(dict(
            name=name,
            latency_us=max(entry["latency"]) if entry["latency"] else None,
            cpus=format_cpu_list(entry["cpus"]),
            disabled_before=format_cpu_list(entry["before"]),
            disabled_after=format_cpu_list(entry["after"]),
        ))
    result["states"].sort(key=lambda s: (s["latency_us"] or 0, s["name"]))
    result["changed_count"] = len(written)
    result["changed"] = bool(written)
    return result


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


# --- the tune part (module host_tune; protocol in tune.py) --------------------------------


class IdlePart(object):
    """Disable the idle states deeper than ``cpuidle_deeper_than`` (``idle_run``), where
    ``deeper_than_applies``; a host without C-states is not applicable."""

    name = "cpuidle"
    owns = ("cpuidle_deep_state",)
    steps = ("cpuidle",)
    stage = "tune"
    options = {}

    def run(self, ctx):
        ref = ctx.params["cpuidle_deeper_than"]
        idle = (ctx.before.get("cpu") or {}).get("cpuidle") or {}
        try:
            applies = deeper_than_applies([s["name"] for s in idle.get("states") or []], ref)
        except CpuError as exc:  # a name no CPU has on a host with C-states (a typo)
            return self.not_run(ctx, "failed", str(exc))
        if not applies:
            return self.not_run(ctx, "not applicable")
        try:
            res = idle_run({"deeper_than": ref, "state": "disabled", "root": ctx.root},
                           ctx.check_mode)
        except (ValueError, OSError, CpuError) as exc:
            return self.not_run(ctx, "failed", str(exc), bool(getattr(exc, "written", None)))
        if not res["states"]:
            return dict(self.not_run(ctx, "not applicable", driver=res.get("driver")),
                        changed=res["changed"], detail={"cpuidle": res})
        return {"changed": res["changed"], "detail": {"cpuidle": res}, "rows": [
            ("%s (%s us)" % (s["name"], s["latency_us"]),
             "disabled on CPUs %s" % (s["disabled_before"] or "none"),
             "disabled on CPUs %s" % (s["disabled_after"] or "none"),
             "ok" if s["disabled_before"] == s["disabled_after"] else "changed",
             "CPUs %s" % s["cpus"]) for s in res["states"]]}

    def not_run(self, ctx, status, msg="", written=False, driver=None):
        ref = ctx.params["cpuidle_deeper_than"]
        if status == "not run":  # the pass stopped before: reported as the host stands
            status = "not applicable"
        driver = driver or ((ctx.before.get("cpu") or {}).get("cpuidle") or {}).get(
            "driver") or "none"
        out = {"rows": [("deeper than %s" % ref, "", "", status, msg or (
            "no state deeper than %s (cpuidle driver: %s)" % (ref, driver)))]}
        if status == "failed":
            out["changed"] = written  # what was written before the failure
            out["detail"] = {"cpuidle": {"failed": True, "changed": written, "msg": msg}}
            out["failures"] = ["cpuidle: %s" % (msg or "failed").strip()]
        return out


TUNE_PART = IdlePart()
