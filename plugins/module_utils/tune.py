# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The whole runtime tune pass of one host, in one process (module host_tune).

The same steps, in the same order and with the same semantics, as the tune role's task
files had when each was its own module round trip:

    audit before -> snapshot before (a failure stops here: nothing changed)
    -> sysctl -> cpuidle (only when the named state exists) -> pcie -> boot service
    -> nvidia_peermem -> applied snapshot (only when something changed)
    -> verify audit (only when something changed, not in check mode)
    -> managed findings that remain (minus skipped sysctl keys, minus parts switched off)

Each part calls the function its own module calls (``sysctl.settings_run``,
``cpu.idle_run``, ``pci.mrrs_run``, ``bootapply.service_run``, ``snapshot.snapshot_run``),
records its result, and a failure in one never stops the others. ``rows`` builds the
before -> after table the report shows.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpuhost.tuning.plugins.module_utils import audit as audit_mod
from ansible_collections.gpuhost.tuning.plugins.module_utils import bootapply
from ansible_collections.gpuhost.tuning.plugins.module_utils import cpu as cpu_mod
from ansible_collections.gpuhost.tuning.plugins.module_utils import pci as pci_mod
from ansible_collections.gpuhost.tuning.plugins.module_utils import snapshot as snap
from ansible_collections.gpuhost.tuning.plugins.module_utils import sysctl as sysctl_mod
from ansible_collections.gpuhost.tuning.plugins.module_utils.hostfs import (
    atomic_write,
    host_path,
    read_bytes,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.runner import (
    CommandError,
    Runner,
)

# Parts in the order they run; each can be switched off (role: gpuhost_tune_<part>).
PARTS = ("snapshot", "sysctl", "cpuidle", "pcie", "boot_service", "nvidia_peermem", "verify")
# Audit findings the tune pass owns, and the part that owns each.
MANAGED = {"pcie_mrrs": "pcie", "numa_balancing": "sysctl", "sysctl": "sysctl",
           "cpuidle_deep_state": "cpuidle"}
# Registered steps, in the order failures are listed.
STEPS = ("sysctl", "cpuidle", "pcie", "boot_service", "nvidia_peermem",
         "nvidia_peermem_at_boot", "modules_load_dir", "snapshot_applied")
PEERMEM_CONF = "/etc/modules-load.d/gpuhost-nvidia-peermem.conf"
PEERMEM_TEXT = ("# Installed by gpuhost.tuning (role tune): GPUDirect RDMA peer memory.\n"
                "nvidia_peermem\n")

DEFAULTS = {
    "root": "/", "host": None, "parts": list(PARTS),
    "gpu_vendor": "10de", "gpu_classes": ["0300", "0302"], "mrrs_size": 4096,
    "cpuidle_deeper_than": "C1", "sysctl": {},
    "sysctl_at_least": ["net.core.rmem_max", "net.core.wmem_max"],
    "sysctl_file": "/etc/sysctl.d/99-gpuhost-tuning.conf", "mrrs_method": "sysfs",
    "mrrs_include_upstream": True, "snapshot_dir": snap.SNAPSHOT_DIR,
    "boot_service_start": True, "nvidia_peermem": "auto",
}


def _params(params):
    p = dict(DEFAULTS)
    p.update((k, v) for k, v in params.items() if v is not None)
    unknown = sorted(set(p["parts"]) - set(PARTS))
    if unknown:
        raise ValueError("unknown tune part(s) %s: use %s"
                         % (", ".join(unknown), ", ".join(PARTS)))
    return p


def is_live(root):
    """True when ``root`` is the running host (modprobe and systemctl make sense)."""
    return (root or "/").rstrip("/") == ""


def _audit(p):
    return audit_mod.audit(p["root"], {
        "gpu_vendor": p["gpu_vendor"], "gpu_classes": p["gpu_classes"],
        "mrrs_size": p["mrrs_size"], "cpuidle_deeper_than": p["cpuidle_deeper_than"],
        "sysctl": p["sysctl"], "host": p["host"]})


def managed(findings, ids=None):
    """The findings the tune pass owns (``ids``: only those)."""
    ids = MANAGED if ids is None else ids
    return [f for f in findings if f["id"] in ids]


# ---------------------------------------------------------------------------------------
# nvidia_peermem: the same auto/load/skip decision the role's task file made


def peermem_decision(mode, nvidia, root):
    """What to do about nvidia_peermem: ``{action: none|persist|load, status, reason}``.

    ``nvidia`` is the audit's ``nvidia`` facts. On a PCIe-only host (no ib_core) ``auto``
    reports it as not applicable (loading it fails with "Invalid argument" there)."""
    nvidia = nvidia or {}
    ib = nvidia.get("ib_core") or {}
    peer = nvidia.get("nvidia_peermem") or {}
    has_ib = bool(ib.get("loaded")) or bool(ib.get("available"))
    if mode == "skip":
        return {"action": "none", "status": "skipped",
                "reason": "gpuhost_nvidia_peermem is skip"}
    if mode == "auto" and not has_ib:
        return {"action": "none", "status": "not applicable",
                "reason": "ib_core is not available (PCIe-only host): GPUDirect RDMA does "
                          "not apply"}
    if peer.get("loaded"):
        return {"action": "persist", "status": "ok", "reason": "already loaded"}
    if mode == "auto" and not peer.get("available"):
        return {"action": "none", "status": "not applicable",
                "reason": "no nvidia_peermem module for the running kernel"}
    if not is_live(root):
        return {"action": "persist", "status": "skipped",
                "reason": "modprobe skipped: root %s is not the live host" % root}
    return {"action": "load", "status": "load", "reason": ""}


def _persist_peermem(root, check_mode, steps):
    """modules-load.d/gpuhost-nvidia-peermem.conf, root:root 0644 (folder 0755 if missing)."""
    folder = host_path(root, os.path.dirname(PEERMEM_CONF))
    path = host_path(root, PEERMEM_CONF)
    diffs = []
    try:
        made = not os.path.isdir(folder)
        if made and not check_mode:
            os.makedirs(folder, 0o755)
        steps["modules_load_dir"] = {"changed": made, "path": os.path.dirname(PEERMEM_CONF)}
    except OSError as exc:
        steps["modules_load_dir"] = {"failed": True, "changed": False,
                                     "msg": "creating %s failed: %s" % (folder, exc)}
    try:
        old = read_bytes(path)
        wrong_mode = old is not None and (os.stat(path).st_mode & 0o7777) != 0o644
        changed = old != PEERMEM_TEXT.encode("utf-8") or wrong_mode
        if changed:
            diffs.append({"before_header": PEERMEM_CONF if old is not None else "/dev/null",
                          "after_header": PEERMEM_CONF,
                          "before": (old or b"").decode("utf-8", "replace"),
                          "after": PEERMEM_TEXT})
            if not check_mode:
                atomic_write(path, PEERMEM_TEXT, mode=0o644, preserve=False)
                if os.geteuid() == 0:
                    os.chown(path, 0, 0)
        steps["nvidia_peermem_at_boot"] = {"changed": changed, "path": PEERMEM_CONF}
    except OSError as exc:
        steps["nvidia_peermem_at_boot"] = {"failed": True, "changed": False,
                                           "msg": "writing %s failed: %s" % (path, exc)}
    return diffs


# ---------------------------------------------------------------------------------------
# the pass


def _step(steps, name, func):
    """Run one part; an exception is its failure (the others still run)."""
    try:
        steps[name] = func()
    except (ValueError, OSError, CommandError, pci_mod.PciError, cpu_mod.CpuError,
            bootapply.ConfigError, sysctl_mod.SysctlWriteError) as exc:
        steps[name] = {"failed": True, "changed": bool(getattr(exc, "written", None)),
                       "msg": str(exc)}
    return steps[name]


def tune_run(params, check_mode=False, runner=None, warn=None):
    """The tune pass for ``params`` (module host_tune's options; missing ones take its
    defaults). ``runner`` (runner.Runner) runs systemctl, setpci and modprobe; ``warn(text)``
    gets each warning. Returns the result (see ``tune_failure`` for whether it failed):
    ``changed``, ``parts`` (each part's own result), ``peermem`` (the decision), ``rows``,
    ``failures``, ``findings_before``, ``findings_after``, ``verified``, ``snapshot``
    (text), ``check_mode``, ``host``, ``root`` and ``diff`` (a list)."""
    p = _params(params)
    runner = runner or Runner()
    on = set(p["parts"])
    root = p["root"]
    before = _audit(p)
    result = {"changed": False, "host": p["host"], "root": root, "check_mode": bool(check_mode),
              "parts_on": [name for name in PARTS if name in on], "parts": {},
              "findings_before": managed(before["findings"]), "findings_after": [],
              "verified": False, "failures": [], "diff": []}
    steps = result["parts"]
    selection = {"vendor": p["gpu_vendor"], "classes": p["gpu_classes"],
                 "include_upstream": p["mrrs_include_upstream"]}

    # Snapshot before: a hard stop, nothing is changed on a host whose state is not recorded.
    if "snapshot" in on:
        taken = snap.snapshot_run(dict(selection, state="present", kind="before",
                                       dir=p["snapshot_dir"], sysctl_keys=list(p["sysctl"]),
                                       files=snap.managed_files(p["sysctl_file"]),
                                       root=root), check_mode)
        steps["snapshot_before"] = taken
        if snap.snapshot_failure(taken):
            result["failures"] = ["snapshot: %s (nothing was changed)" % taken["msg"]]
            result["snapshot"] = "FAILED: %s" % taken["msg"]
            result["rows"] = rows(p, result, before)
            return result
        result["changed"] = bool(taken.get("changed"))
        result["snapshot"] = taken.get("path") or (
            "unchanged since the last recorded state; original: %s" % taken.get("original"))
    else:
        result["snapshot"] = "unchanged since the last recorded state; original: not taken"

    if "sysctl" in on:
        _step(steps, "sysctl", lambda: sysctl_mod.settings_run(
            {"values": p["sysctl"], "at_least": p["sysctl_at_least"], "path": p["sysctl_file"],
             "root": root, "snapshot_dir": p["snapshot_dir"] if "snapshot" in on else None},
            check_mode, warn=warn))
        msg = sysctl_mod.settings_failure(steps["sysctl"]) if "values" in steps["sysctl"] else None
        if msg:
            steps["sysctl"].update(failed=True, msg=msg)

    states = [s["name"] for s in ((before.get("cpu") or {}).get("cpuidle") or {}).get("states")
              or []]
    if "cpuidle" in on:
        try:
            applies = cpu_mod.deeper_than_applies(states, p["cpuidle_deeper_than"])
        except cpu_mod.CpuError as exc:
            applies = False
            steps["cpuidle"] = {"failed": True, "changed": False, "msg": str(exc)}
    if "cpuidle" in on and applies:
        _step(steps, "cpuidle", lambda: cpu_mod.idle_run(
            {"deeper_than": p["cpuidle_deeper_than"], "state": "disabled", "root": root},
            check_mode))

    if "pcie" in on:
        _step(steps, "pcie", lambda: pci_mod.mrrs_run(
            dict(selection, size=p["mrrs_size"], method=p["mrrs_method"], state="present",
                 root=root), check_mode, runner, warn=warn))
        msg = pci_mod.mrrs_failure(steps["pcie"]) if "devices" in steps["pcie"] else None
        if msg:
            steps["pcie"].update(failed=True, msg=msg)

    if "boot_service" in on:
        steps["boot_service"] = bootapply.service_run(
            dict(selection, state="present",
                 mrrs_size=p["mrrs_size"] if "pcie" in on else 0,
                 cpuidle_deeper_than=p["cpuidle_deeper_than"] if "cpuidle" in on else "",
                 start=p["boot_service_start"], root=root), check_mode, runner)

    if "nvidia_peermem" in on:
        decision = peermem_decision(p["nvidia_peermem"], before.get("nvidia"), root)
        result["peermem"] = decision
        if decision["action"] == "load":
            if check_mode:
                steps["nvidia_peermem"] = {"changed": True, "skipped": True,
                                           "msg": "check mode: modprobe nvidia_peermem planned"}
            else:
                _step(steps, "nvidia_peermem", lambda: _modprobe(runner))
        if decision["action"] in ("load", "persist"):
            result["diff"].extend(_persist_peermem(root, check_mode, steps))

    changed = any(steps[name].get("changed") for name in STEPS if name in steps)
    if "snapshot" in on and changed:
        if check_mode:
            steps["snapshot_applied"] = {"changed": True, "path": None,
                                         "msg": "check mode: applied state not recorded"}
        else:
            steps["snapshot_applied"] = snap.snapshot_run(
                dict(selection, state="present", kind="applied", dir=p["snapshot_dir"],
                     sysctl_keys=list(p["sysctl"]), files=snap.managed_files(p["sysctl_file"]),
                     root=root), False)

    if "verify" in on and not check_mode:
        after = _audit(p) if changed else before
        ids = [fid for fid, part in MANAGED.items() if part in on]
        skipped = [k["key"] for k in steps.get("sysctl", {}).get("skipped_keys", [])]
        result["findings_after"] = [f for f in managed(after["findings"], ids)
                                    if f["subject"] not in skipped]
        result["verified"] = True
        result["audit_again"] = after is not before

    result["diff"] = _diffs(steps) + result["diff"]
    result["changed"] = bool(result["changed"] or changed
                             or steps.get("snapshot_applied", {}).get("changed"))
    result["failures"] = failures(steps, result["findings_after"])
    result["rows"] = rows(p, result, before)
    return result


def _modprobe(runner):
    binary = runner.which("modprobe") or "modprobe"
    _rc, out, err = runner.run([binary, "nvidia_peermem"])
    return {"changed": True, "cmd": [binary, "nvidia_peermem"], "stdout": out, "stderr": err}


def _diffs(steps):
    out = []
    for name in ("sysctl", "pcie", "boot_service"):
        diff = steps.get(name, {}).get("diff")
        for item in [diff] if isinstance(diff, dict) else diff or []:
            if "prepared" in item or item.get("before") != item.get("after"):
                out.append(item)
    for name in ("sysctl", "pcie", "boot_service"):
        steps.get(name, {}).pop("diff", None)
    return out


def failures(steps, remaining):
    """Every part that did not take (``name: why``), then every managed finding left."""
    out = []
    for name in STEPS:
        res = steps.get(name) or {}
        if res.get("failed"):
            out.append("%s: %s" % (name, str(res.get("msg") or "failed").strip()))
    for f in remaining:
        out.append("still off after tuning: %s %s: %s (want %s)" % (
            f["id"], f["subject"], f["current"], f["expected"]))
    return out


def tune_failure(result):
    """The failure message of a ``tune_run`` result, or None when every part took."""
    if not result.get("failures"):
        return None
    return "%s: %s" % (result.get("host") or result.get("root"), " | ".join(result["failures"]))


# ---------------------------------------------------------------------------------------
# the before -> after table


def _row(part, item, before, after, status, note=""):
    return {"part": part, "item": item, "before": before, "after": after, "status": status,
            "note": note}


def _off_or(on, res, otherwise):
    if not on:
        return "off"
    return "failed" if res.get("failed") else otherwise


def rows(p, result, before):
    """One row per managed value: ``{part, item, before, after, status, note}``."""
    on = set(p["parts"])
    steps = result["parts"]
    out = []
    sysctl = steps.get("sysctl") or {}
    if "values" not in sysctl:
        out.append(_row("sysctl", "(all)", "", "", _off_or("sysctl" in on, sysctl, "not run"),
                        sysctl.get("msg", "")))
    else:
        for e in sysctl["values"]:
            out.append(_row("sysctl", e["key"], e["before"], e["after"], e["status"],
                            e.get("reason", "")))
        if sysctl.get("file_changed"):
            out.append(_row("sysctl", sysctl["path"], "", "written", "changed",
                            "persisted (owned file)"))
    idle = steps.get("cpuidle") or {}
    if idle.get("states"):
        for s in idle["states"]:
            out.append(_row("cpuidle", "%s (%s us)" % (s["name"], s["latency_us"]),
                            "disabled on CPUs %s" % (s["disabled_before"] or "none"),
                            "disabled on CPUs %s" % (s["disabled_after"] or "none"),
                            "ok" if s["disabled_before"] == s["disabled_after"] else "changed",
                            "CPUs %s" % s["cpus"]))
    else:
        driver = idle.get("driver") or ((before.get("cpu") or {}).get("cpuidle") or {}).get(
            "driver") or "none"
        out.append(_row("cpuidle", "deeper than %s" % p["cpuidle_deeper_than"], "", "",
                        _off_or("cpuidle" in on, idle, "not applicable"),
                        idle.get("msg") or "no state deeper than %s (cpuidle driver: %s)"
                        % (p["cpuidle_deeper_than"], driver)))
    pcie = steps.get("pcie") or {}
    if pcie.get("devices"):
        for d in pcie["devices"]:
            status = ("failed" if d.get("error") is not None else
                      "skipped" if d.get("skipped_reason") is not None else
                      "ok" if d.get("before") == d.get("after") else "changed")
            out.append(_row("pcie", "%s %s MRRS" % (d["address"], d["role"]), d.get("before"),
                            d.get("after"), status,
                            d.get("error") or d.get("skipped_reason") or ""))
    else:
        out.append(_row("pcie", "MRRS", "", "", _off_or("pcie" in on, pcie, "no GPU"),
                        pcie.get("msg") or "no device of vendor %s" % p["gpu_vendor"]))
    svc = steps.get("boot_service") or {}
    if "files" in svc:
        written = [f for f in svc["files"] if f["action"] != "ok"]
        out.append(_row("boot_service", bootapply.UNIT_NAME, "",
                        "enabled" + ((", %s" % svc["active"]) if svc.get("active") else ""),
                        "changed" if svc.get("changed") else "ok",
                        "%d file(s) written; %s" % (len(written), "; ".join(
                            "%s: %s" % (c["command"], c["status"]) for c in svc["commands"]))))
    else:
        out.append(_row("boot_service", bootapply.UNIT_NAME, "", "",
                        _off_or("boot_service" in on, svc, "not run"), svc.get("msg", "")))
    peer = result.get("peermem") or {
        "status": "off" if "nvidia_peermem" not in on else "not run", "reason": ""}
    load = steps.get("nvidia_peermem") or {}
    status = peer["status"]
    if load.get("failed"):
        status = "failed"
    elif status == "load":
        status = "planned" if load.get("skipped") else "loaded"
    out.append(_row("nvidia_peermem", "nvidia_peermem", "", "", status,
                    load.get("msg") if load.get("failed") or load.get("skipped")
                    else peer["reason"]))
    return out


def report_document(result):
    """What ``<host>-tune.json`` holds for one host_tune result."""
    return {"host": result.get("host"), "root": result.get("root"),
            "check_mode": bool(result.get("check_mode")), "snapshot": result.get("snapshot"),
            "rows": result.get("rows") or [], "findings_before": result.get("findings_before")
            or [], "findings_after": result.get("findings_after") or [],
            "verified": bool(result.get("verified")), "failures": result.get("failures") or []}
