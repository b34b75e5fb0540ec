# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Disabling and re-enabling CPU idle states under a root, with read-back: the cpuidle_state
module, the tune's cpuidle part and the boot-time service.

Stdlib + hostfs + cpu only: the boot-time service ships this file with subjects/cpu/cpu.py. Reading
the
states is subjects/cpu/cpu.py's; the audit imports only that (docs/architecture.md, "What the audit
imports"). States are chosen by name or by latency, never by index.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cpu.cpu import (
    CpuError,
    cpuidle_available,
    cpuidle_driver,
    forget_states,
    format_cpu_list,
    online_cpus,
    parse_cpu_list,
    present_cpus,
    read_states,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    read_text,
    write_in_place,
)


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
        states = read_states(root, cpus, brief=True)
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
        forget_states()             # what is read after this write reads the kernel again
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
    states = read_states(root, wanted, brief=True)
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


class IdlePart(object):
    """Disable the idle states deeper than ``cpuidle_deeper_than`` (``idle_run``), where
    ``deeper_than_applies``; a host without C-states is not applicable."""

    name = "cpuidle"
    owns = ("cpuidle_deep_state",)
    steps = ("cpuidle",)
    stage = "tune"
    options = {}
    option_docs = {}
    role_doc = ("Disable idle states deeper than gpuhost_cpuidle_deeper_than on every online "
                "CPU (tag C(tune_cpuidle)).")
    # the snapshot's section (protocol in engines/tune/tune_registry.py)
    snapshot_key = "cpuidle"
    label = "{name}"
    restore_report = (("idle states restored", "changed", "name"),)

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

    def record(self, ctx):
        """``{"driver": ..., "cpus": {"<cpu>": {"<state name>": disabled}}}`` (online CPUs)."""
        states = read_states(ctx.root, brief=True)
        cpus = dict((str(cpu), dict((s["name"], s["disabled"]) for s in states[cpu]))
                    for cpu in sorted(states))
        return {"driver": cpuidle_driver(ctx.root), "cpus": cpus}

    def restore(self, ctx, recorded):
        items, failures = [], []
        if recorded and recorded["cpus"]:
            _restore_idle(ctx.root, recorded, ctx.check_mode, items, failures)
        return items, failures

    def check(self, recorded, bad, root):
        idle = recorded or {"cpus": {}}
        if not isinstance(idle, dict) or not isinstance(idle.get("cpus", {}), dict):
            bad("cpuidle is not a mapping of CPU to flags")
        for cpu, flags in (idle.get("cpus") or {}).items():
            if not str(cpu).isdigit() or int(cpu) > 65535 or not isinstance(flags, dict):
                bad("cpuidle CPU %r is not a CPU number with flags" % (cpu,))
            for name, flag in flags.items():
                if not isinstance(name, str) or "/" in name or not isinstance(flag, bool):
                    bad("cpuidle CPU %s state %r: flag %r" % (cpu, name, flag))

    def summary(self, recorded):
        disabled = {}
        for cpu, flags in sorted(recorded["cpus"].items(), key=lambda i: int(i[0])):
            for name, flag in flags.items():
                entry = disabled.setdefault(name, [])
                if flag:
                    entry.append(int(cpu))
        return {"cpuidle_driver": recorded["driver"], "cpuidle_cpus": len(recorded["cpus"]),
                "cpuidle_disabled": dict((n, format_cpu_list(c)) for n, c in disabled.items())}

    def diff_lines(self, item):
        return ("cpuidle %s: current flags on CPUs %s" % (item["name"], item["cpus_restored"]),
                "cpuidle %s: snapshot flags on CPUs %s" % (item["name"], item["cpus_restored"]))


def _restore_idle(root, recorded, check_mode, out, failures):
    """The recorded idle flags back on every CPU that is online (``set_states``)."""
    if not cpuidle_available(root):
        out.append({"name": "*", "status": "skipped", "cpus_restored": "",
                    "reason": "no cpuidle driver with states now (%s): idle flags not restored"
                              % (cpuidle_driver(root) or "no cpuidle folder")})
        return
    current = read_states(root, brief=True)
    to_disable, to_enable, offline = {}, {}, []
    per_name = {}
    for cpu_text, flags in recorded["cpus"].items():
        cpu = int(cpu_text)
        if cpu not in current:
            offline.append(cpu)
            continue
        by_name = dict((s["name"], s) for s in current[cpu])
        for name, disabled in flags.items():
            entry = per_name.setdefault(name, {"name": name, "restored": [], "missing": []})
            state = by_name.get(name)
            if state is None:
                entry["missing"].append(cpu)
            elif state["disabled"] != disabled:
                (to_disable if disabled else to_enable).setdefault(cpu, []).append(state)
                entry["restored"].append(cpu)
    errors = []
    for selection, disabled in ((to_disable, True), (to_enable, False)):
        if not selection:
            continue
        try:
            set_states(root, selection, disabled, check_mode=check_mode)
        except CpuError as exc:
            errors.append(str(exc))
    for name in sorted(per_name):
        entry = per_name[name]
        item = {"name": name, "cpus_restored": format_cpu_list(entry["restored"]),
                "status": "changed" if entry["restored"] else "ok"}
        if entry["missing"]:
            item["status"] = "failed"
            item["reason"] = "idle state %s not found any more on CPUs %s" % (
                name, format_cpu_list(entry["missing"]))
            failures.append(item["reason"])
        out.append(item)
    if offline:
        out.append({"name": "*", "status": "skipped", "cpus_restored": "",
                    "reason": "CPUs %s are offline now: their idle flags are not restored"
                              % format_cpu_list(offline)})
    for error in errors:
        out.append({"name": "*", "status": "failed", "cpus_restored": "", "reason": error})
        failures.append(error)


TUNE_PART = IdlePart()
