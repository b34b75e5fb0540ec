# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvidia_peermem (GPUDirect RDMA peer memory): whether to load it now and list it in
modules-load.d for boot, and the ``nvidia_peermem`` tune part (module host_tune).

With ``auto`` it applies only where ``ib_core`` is available: on a PCIe-only host loading
it fails with "Invalid argument" and GPUDirect RDMA does not apply.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    atomic_write,
    host_path,
    read_bytes,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import CommandError
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import QUERY_TIMEOUT_S

PEERMEM_CONF = "/etc/modules-load.d/gpuhost-nvidia-peermem.conf"
PEERMEM_TEXT = ("# Installed by gpuhost.tuning (role tune): GPUDirect RDMA peer memory.\n"
                "nvidia_peermem\n")


def is_live(root):
    """True when ``root`` is the running host (modprobe and systemctl make sense)."""
    return (root or "/").rstrip("/") == ""


def decision(mode, nvidia, root):
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


def persist(root, check_mode, steps):
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


def _modprobe(runner):
    binary = runner.which("modprobe") or "modprobe"
    _rc, out, err = runner.run([binary, "nvidia_peermem"], timeout=QUERY_TIMEOUT_S)
    return {"changed": True, "cmd": [binary, "nvidia_peermem"], "stdout": out, "stderr": err}


# --- the tune part (module host_tune; protocol in engines/tune/tune.py) ---------------------------


class PeermemPart(object):
    """Load nvidia_peermem now (live host) and list it for boot, as ``decision`` says."""

    name = "nvidia_peermem"
    owns = ()
    steps = ("nvidia_peermem", "nvidia_peermem_at_boot", "modules_load_dir")
    stage = "tune"
    options = dict(nvidia_peermem=dict(
        type="str", default="auto", choices=["auto", "load", "skip"],
        role_var="gpuhost_nvidia_peermem",
        description="What to do with C(nvidia_peermem) (see the description).",
        role_description=[
            "C(auto) loads nvidia_peermem (now, and at boot through modules-load.d) only where "
            "ib_core is available; on a PCIe-only host it is reported as not applicable.",
            "C(load) always tries (a failure fails the host); C(skip) leaves it alone."]))
    files = (PEERMEM_CONF,)
    role_doc = "Handle nvidia_peermem per gpuhost_nvidia_peermem (tag C(tune_nvidia_peermem))."

    def run(self, ctx):
        choice = decision(ctx.params["nvidia_peermem"], ctx.before.get("nvidia"), ctx.root)
        steps, diffs = {}, []
        if choice["action"] == "load":
            if ctx.check_mode:
                steps["nvidia_peermem"] = {"changed": True, "skipped": True,
                                           "msg": "check mode: modprobe nvidia_peermem planned"}
            else:
                try:
                    steps["nvidia_peermem"] = _modprobe(ctx.runner)
                except (CommandError, OSError, ValueError) as exc:
                    steps["nvidia_peermem"] = {"failed": True, "changed": False,
                                               "msg": str(exc)}
        if choice["action"] in ("load", "persist"):
            diffs = persist(ctx.root, ctx.check_mode, steps)
        load = steps.get("nvidia_peermem") or {}
        status = choice["status"]
        if load.get("failed"):
            status = "failed"
        elif status == "load":
            status = "planned" if load.get("skipped") else "loaded"
        note = load.get("msg") if load.get("failed") or load.get("skipped") else choice["reason"]
        return {"changed": any(s.get("changed") for s in steps.values()), "detail": steps,
                "diffs": diffs, "fields": {"peermem": choice},
                "rows": [("nvidia_peermem", "", "", status, note)],
                "failures": ["%s: %s" % (step, str(steps[step].get("msg") or "failed").strip())
                             for step in self.steps if steps.get(step, {}).get("failed")]}

    def not_run(self, ctx, status):
        return {"rows": [("nvidia_peermem", "", "", status, "")]}


TUNE_PART = PeermemPart()
