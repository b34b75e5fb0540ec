# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``device_nodes`` tune part (opt-in): a oneshot unit ordered before
``pve-guests.service`` that creates the NVIDIA nodes containers bind (``devnodes`` audits
them; finding ``device_nodes_unit_missing``).

Its two files (the unit and the ``multi-user.target.wants`` link ``systemctl enable``
makes) are the part's ``files``, in every snapshot, so a revert to a snapshot taken before removes
them. On the live host the part runs ``systemctl daemon-reload`` and starts the unit, so
the nodes exist now too; on any other root it writes the files only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.device_nodes import (
    device_nodes,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import unitinstall
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    atomic_write,
    folder_in_root,
    host_path,
    read_bytes,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import (
    CommandError,
    CommandTimeout,
)

UNIT_NAME = device_nodes.UNIT_NAME
UNIT_PATH = "/etc/systemd/system/" + UNIT_NAME
WANTS_LINK = "/etc/systemd/system/multi-user.target.wants/" + UNIT_NAME
FILES = (UNIT_PATH, WANTS_LINK)
SYSTEMCTL_TIMEOUT = 120

# nvidia-modprobe -u -c=0: nvidia-uvm and nvidia-uvm-tools; -m: nvidia-modeset; nvidia-smi:
# every /dev/nvidiaN and nvidiactl. "-": a host without one of the tools still starts its
# containers (the audit names what stays missing).
UNIT_TEXT = """\
# Installed by gpuhost.tuning (role tune, part device_nodes): the NVIDIA device nodes
# containers bind exist before pve-guests.service starts them.
[Unit]
Description=NVIDIA device nodes before containers start (gpuhost.tuning)
After=systemd-modules-load.service nvidia-persistenced.service
Before=pve-guests.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=-/usr/bin/nvidia-modprobe -u -c=0
ExecStart=-/usr/bin/nvidia-modprobe -m
ExecStart=-/usr/bin/nvidia-smi -L

[Install]
WantedBy=multi-user.target
"""


def plan(root):
    """``{unit: create|update|ok, link: create|update|ok, old_unit}`` under ``root``."""
    old = read_bytes(host_path(root, UNIT_PATH))
    unit = "ok" if old == UNIT_TEXT.encode("utf-8") else ("create" if old is None else "update")
    link = "ok" if unitinstall.wants_link_ok(root, WANTS_LINK, UNIT_PATH) else (
        "update" if os.path.lexists(host_path(root, WANTS_LINK)) else "create")
    return {"unit": unit, "link": link, "old_unit": old}


def _in_the_way(root, p):
    """Why a write of the unit or its wants link would fail half-way, checked before
    either is written (None when neither would): a folder, or a file where a folder
    belongs, on one of their paths, or a folder leaving the root."""
    steps = [(UNIT_PATH, p["unit"] != "ok", "unit"), (WANTS_LINK, p["link"] != "ok", "link")]
    for path, todo, what in steps:
        if not todo:
            continue
        full = host_path(root, path)
        try:
            folder_in_root(root, host_path(root, os.path.dirname(path)), "%s folder" % what)
        except (OSError, ValueError) as exc:  # PathError is a ValueError
            return str(exc)
        parent = os.path.dirname(full)
        if os.path.lexists(parent) and not os.path.isdir(parent):
            return ("%s is not a folder: the %s %s goes in it (move it away and run again)"
                    % (os.path.dirname(path), what, path))
        if os.path.isdir(full) and not os.path.islink(full):
            return ("%s is a folder where the %s belongs: move it away (it is not this "
                    "collection's) and run again" % (path, what))
    return None


def install(root, runner=None, check_mode=False):
    """Install (or plan, in check mode) the unit and its wants link; on the live host
    reload systemd and start it. ``{changed, plan, diffs, commands, failed, msg}``."""
    p = plan(root)
    out = {"changed": p["unit"] != "ok" or p["link"] != "ok", "plan": dict(p),
           "diffs": [], "commands": [], "failed": False, "msg": ""}
    out["plan"].pop("old_unit")
    if p["unit"] != "ok":
        out["diffs"].append({"before_header": UNIT_PATH if p["old_unit"] is not None
                             else "/dev/null", "after_header": UNIT_PATH,
                             "before": (p["old_unit"] or b"").decode("utf-8", "replace"),
                             "after": UNIT_TEXT})
    why_not = unitinstall.not_live(root, runner)
    if check_mode:
        out["msg"] = "check mode: nothing written"
        return out
    why = _in_the_way(root, p)
    if why:
        out.update(failed=True, msg="installing %s failed: %s; nothing was written"
                   % (UNIT_NAME, why))
        return out
    try:
        if p["unit"] != "ok":
            folder_in_root(root, host_path(root, os.path.dirname(UNIT_PATH)), "unit folder")
            full = host_path(root, UNIT_PATH)
            if not os.path.isdir(os.path.dirname(full)):
                os.makedirs(os.path.dirname(full), 0o755)
            atomic_write(full, UNIT_TEXT, mode=0o644, preserve=False, root=root)
            if read_bytes(full) != UNIT_TEXT.encode("utf-8"):
                raise OSError("%s reads back other than written" % UNIT_PATH)
        if p["link"] != "ok":
            folder_in_root(root, host_path(root, os.path.dirname(WANTS_LINK)), "wants folder")
            unitinstall.make_wants_link(root, WANTS_LINK, UNIT_PATH)
            if not unitinstall.wants_link_ok(root, WANTS_LINK, UNIT_PATH):
                raise OSError("%s does not link to %s after writing" % (WANTS_LINK, UNIT_PATH))
    except (OSError, ValueError) as exc:  # PathError is a ValueError
        out.update(failed=True, msg="installing %s failed: %s" % (UNIT_NAME, exc))
        return out
    if why_not:
        out["msg"] = "files written; systemctl not run (%s)" % why_not
        return out
    systemctl = runner.which("systemctl")
    for args in (["daemon-reload"], ["start", UNIT_NAME]):
        if args[0] == "daemon-reload" and not out["changed"]:
            continue
        try:
            runner.run([systemctl] + args, timeout=SYSTEMCTL_TIMEOUT)
        except (CommandError, CommandTimeout, OSError) as exc:
            out.update(failed=True, msg="systemctl %s: %s" % (" ".join(args), exc))
            return out
        out["commands"].append("systemctl " + " ".join(args))
    return out


class DeviceNodesPart(object):
    """Install the unit that creates the NVIDIA nodes before pve-guests.service."""

    name = "device_nodes"
    owns = ("device_nodes_unit_missing",)
    steps = ("device_nodes",)
    stage = "tune"
    options = {}
    option_docs = {}
    default_on = False
    files = FILES
    role_doc = [
        "Opt-in (tag C(tune_device_nodes)). Install and enable "
        "C(gpuhost-nvidia-device-nodes.service), a oneshot unit ordered "
        "C(Before=pve-guests.service) that runs C(nvidia-modprobe -u -c=0), "
        "C(nvidia-modprobe -m) and C(nvidia-smi -L), so the nodes GPU containers bind exist "
        "when they start at boot (finding C(device_nodes_unit_missing)); on the live host it "
        "is started now too.",
        "Both files are in the snapshot; a revert to a snapshot from before removes them."]

    def run(self, ctx):
        result = install(ctx.root, ctx.runner, ctx.check_mode)
        p = result["plan"]
        before = "installed" if p["unit"] == "ok" and p["link"] == "ok" else (
            "absent" if p["unit"] == "create" else "differs")
        if result["failed"]:
            status = "failed"
        elif not result["changed"]:
            status = "ok"
        else:
            status = "planned" if ctx.check_mode else "changed"
        return {"changed": bool(result["changed"]),
                "detail": {"device_nodes": result}, "diffs": result["diffs"],
                "rows": [(UNIT_NAME, before, "installed, enabled", status,
                          result["msg"] or ", ".join(result["commands"]))],
                "failures": ["device_nodes: %s" % result["msg"]] if result["failed"] else []}

    def not_run(self, ctx, status):
        return {"rows": [(UNIT_NAME, "", "", status, "")]}


TUNE_PART = DeviceNodesPart()
