# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Proxmox containers after a boot: the device-rules pass (module lxc_cgroup_devices) and
one container's repair, restart and GPU checks (module container_verify).

The config editing itself is subjects/lxc/lxc.py's; this file reads ``/proc/devices``, writes the
file
(atomically, read back) and drives ``pct`` through the runner.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import time

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import cuda
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    atomic_write,
    host_path,
    isfile,
    read_bytes,
    unified_diff_dict,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.lxc.lxc import (
    LxcConfig,
    LxcError,
    config_path,
    list_configs,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.lxc.lxc_write import (
    sync_device_rules,
    write_target,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.host.procfs import (
    char_majors,
    read_proc_devices,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import CommandTimeout
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import QUERY_TIMEOUT_S

RULE_KEYS = ("added", "removed", "moved")


def locate(params):
    """The config file of ``params``' ``path`` or ``vmid`` under ``root``."""
    root = params["root"]
    if params.get("path"):
        path = host_path(root, params["path"])
        if not isfile(path):
            raise LxcError("container config %s does not exist" % path)
        return path
    path = config_path(root, params["vmid"], params["config_dir"])
    if not isfile(path):
        known = [str(v) for v, _p in list_configs(root, params["config_dir"])]
        raise LxcError(
            "no config for container %s at %s (containers here: %s); %s shows only this "
            "node's containers: run on the node that hosts it"
            % (params["vmid"], path, ", ".join(known) or "none", params["config_dir"])
        )
    return path


def backup_copy(path, data):
    """A timestamped copy next to ``path``, written without chmod (pmxcfs)."""
    stamp = time.strftime("%Y-%m-%d@%H:%M:%S", time.localtime())
    backup = "%s.%d.%s~" % (path, os.getpid(), stamp)
    try:
        with open(backup, "xb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except (IOError, OSError) as exc:
        try:
            os.unlink(backup)  # no 0-byte or half copy left behind (full or read-only disk)
        except OSError:
            pass
        raise LxcError("backup of %s failed, nothing changed: %s" % (path, exc))
    return backup


def rules_run(params, check_mode):
    """The lxc_cgroup_devices pass for the module's ``params``: the container's device allow
    rules made to match ``/proc/devices``. Returns the module's result (``diff`` included);
    raises LxcError with what to do."""
    path = locate(params)
    text = read_proc_devices(params["root"])
    if text is None:
        raise LxcError("%s is missing: cannot read device majors"
                       % host_path(params["root"], "/proc/devices"))
    config = LxcConfig.read(path)
    sync = sync_device_rules(config, char_majors(text=text), params["drivers"],
                             access=params["access"], remove_stale=params["remove_stale"],
                             missing=params["missing"], where=path,
                             previous_majors=params["previous_majors"])
    plan = sync["plan"]
    result = dict(
        changed=plan.changed,
        config_file=path,
        added=sync["added"],
        removed=sync["removed"],
        majors=sync["majors"],
        majors_all=sync["majors_all"],
        missing=sync["missing"],
        moved=sync["moved"],
        other_allowed=sync["other_allowed"],
        onboot=config.onboot,
    )
    if not plan.changed:
        return result
    # Bytes that are not UTF-8 are shown replaced: the result must stay JSON after a write.
    before = config.render_bytes().decode("utf-8", "replace")
    new = plan.apply()
    result["diff"] = unified_diff_dict(path, before,
                                       new.render_bytes().decode("utf-8", "replace"))
    # a linked config is written where the link leads (inside root): the link stays
    target = write_target(params["root"], path)
    if check_mode:
        return result
    if params["backup"]:
        result["backup_file"] = backup_copy(target, config.render_bytes())
    try:
        atomic_write(target, new.render_bytes(), chmod=False)
    except (IOError, OSError) as exc:
        if result.get("backup_file"):
            os.unlink(result["backup_file"])
        raise LxcError("writing %s failed, nothing changed: %s (is /etc/pve read-only "
                       "without quorum? check pvecm status)" % (target, exc))
    if read_bytes(target) != new.render_bytes():
        raise LxcError("%s reads back different from what was written" % target)
    return result


def _rules_params(params):
    return {"vmid": params["vmid"], "path": None, "config_dir": params["config_dir"],
            "drivers": params["drivers"], "access": "rwm", "remove_stale": True,
            "previous_majors": params["previous_majors"], "missing": "fail",
            "backup": params["backup"], "root": params["root"]}


def _exec_problem(argv, rc, out, err):
    return "%s exited %s: %s" % (" ".join(argv), rc, ("%s %s" % (out, err)).strip())


def _bounded_exec(runner, argv, timeout):
    """``(rc, out, err, problem)`` of an in-container command killed after ``timeout`` s
    (``problem`` then says so; rc None)."""
    try:
        rc, out, err = runner.run(argv, check=False, timeout=timeout)
    except CommandTimeout as exc:
        return None, exc.out or "", exc.err or "", str(exc)
    return rc, out, err, None


def in_container_checks(params, runner, vmid, record):
    """Run the checks inside a running container through ``pct exec``: the GPU listing
    (``gpu_check``, must exit 0; its ``GPU n:`` lines are counted), the built-in CUDA
    probe (``cuda_probe``, on unless false: CUDA must initialise, which ``nvidia-smi`` cannot
    show) and the optional user check (``cuda_check``, must print ``cuda_expect``), each
    killed after ``cuda_timeout`` s (a driver that hangs cuInit hangs nvidia-smi too), which
    is a problem naming the command. Fills ``record``."""
    prefix = ["pct", "exec", str(vmid), "--"]
    probe = params.get("cuda_probe", True)
    timeout = params.get("cuda_timeout") or cuda.DEFAULT_TIMEOUT
    if not params["gpu_check"] and not probe:
        return False
    if params["gpu_check"]:
        rc, out, err, hung = _bounded_exec(runner, prefix + list(params["gpu_check"]), timeout)
        if hung:
            record["problems"].append(hung)
            return True             # the driver does not answer: CUDA would hang the same
        record["gpu_check"] = rc
        record["gpus"] = len([x for x in out.splitlines() if x.startswith("GPU ")])
        if rc != 0:
            record["problems"].append(_exec_problem(params["gpu_check"], rc, out, err))
    if probe:
        cuda_probe(runner, vmid, record, timeout, params["root"])
    if params["gpu_check"] and params["cuda_check"]:
        rc, out, err, hung = _bounded_exec(runner, prefix + list(params["cuda_check"]),
                                           timeout)
        if hung:
            record["problems"].append(hung)
            return True
        record["cuda_check"] = out
        if out.strip() != params["cuda_expect"]:
            record["problems"].append("%s printed %s, want %s: %s" % (
                " ".join(params["cuda_check"]), json.dumps(out.strip()),
                params["cuda_expect"], err.strip()[:200]))
    return True


def cuda_probe(runner, vmid, record, timeout=cuda.DEFAULT_TIMEOUT, root="/"):
    """CUDA initialises inside the container (``cuda_probe`` through ``pct exec -- python3
    -``, killed after ``timeout`` s): ``record["cuda"]`` gets the code, its name, the cause
    and the GPUs CUDA sees; a failure (a hang or a crash too) is a problem naming the code,
    its name and the cause, or the limit or signal and the step."""
    result = cuda.probe_container(runner, "pct", vmid, timeout=timeout, root=root)
    init = result.get("init") or {}
    record["cuda"] = {"code": init.get("code"), "name": init.get("name"),
                      "text": init.get("text"), "devices": len(result.get("devices") or []),
                      "error": result.get("error"), "cause": result.get("cause"),
                      "timed_out": result.get("timed_out"), "signal": result.get("signal"),
                      "step": result.get("step")}
    if result.get("error"):
        problem = "CUDA: %s" % result["error"]
        if result.get("cause"):
            problem += "; cause: %s" % result["cause"]
        record["problems"].append(problem)


def verify_run(params, runner, check_mode=False):
    """One container after a boot (module container_verify): a GPU container's device rules
    repaired from ``/proc/devices`` (stopped first when running and they change), started
    when ``start`` asks it, and the checks run inside. ``pct`` runs only when ``pct`` is
    true; in check mode only ``pct status`` and the in-container checks run. Returns the
    container's record (``problems`` lists what is wrong); raises LxcError or
    runner.CommandError when a step fails."""
    vmid = params["vmid"]
    record = {"vmid": vmid, "gpu": params["gpu"], "running_before": params["running_before"],
              "onboot": params["onboot"], "rules_added": [], "rules_removed": [],
              "rules_moved": [], "rules_changed": False, "stopped": False, "started": False,
              "gpus": 0, "gpu_check": None, "cuda": None, "cuda_check": None,
              "skipped": [] if params["pct"] else
              ["pct stop/start/exec (root %s)" % params["root"]],
              "problems": []}
    rules = {}
    plan = rules_run(_rules_params(params), True) if params["gpu"] else {"changed": False}
    running = False
    if params["pct"]:
        _rc, out, _err = runner.run(["pct", "status", str(vmid)], timeout=QUERY_TIMEOUT_S)
        running = "running" in out
    if params["pct"] and plan["changed"] and running and not check_mode:
        runner.run(["pct", "stop", str(vmid)])
        record["stopped"] = True
    if plan["changed"]:
        rules = rules_run(_rules_params(params), check_mode)
        record["rules_changed"] = rules["changed"]
        record["diff"] = rules.get("diff")
    for key in RULE_KEYS:
        record["rules_" + key] = (rules or plan).get(key) or []
    if (params["pct"] and params["start"] and not check_mode
            and (not running or record["stopped"])):
        runner.run(["pct", "start", str(vmid)])
        record["started"] = True
    if params["pct"] and params["gpu"] and (
            (running and not record["stopped"]) or record["started"]):
        in_container_checks(params, runner, vmid, record)
    return record
