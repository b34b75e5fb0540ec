# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The recovery ladder on one host (module gpu_recover): for each GPU that needs a reset
(the ``gpu_recovery`` fact, recovery.py, or the GPUs the operator names) plan, drain only
the containers that hold it, reset it (gpu_reset.py), read it back, prove CUDA on it,
restore the containers and prove CUDA inside them; what cannot be recovered so marks the
host for the gated reboot, which this file never does.

- plan: a GPU whose need is ``reboot`` is not reset (marked for the reboot); a GPU passed
  through to a VM is refused (vfio-pci owns it, the host's driver cannot reset it) naming
  the VM; a GPU that a host process outside any container holds is refused naming the
  process and its pid (stopping a host service is the operator's call); the rest are reset.
- drain: each container holding a GPU to reset that runs: ``pct shutdown <vmid> --timeout
  N`` (bounded), then ``pct stop`` when it still runs; the containers of the other GPUs are
  never touched.
- reset: persistence mode off for that GPU when on, ``nvidia-smi -r -i <bus>`` bounded,
  persistence back on; an answer "in use" names the processes ``nvidia-smi -q -x`` lists
  on the GPU.
- read back: ``nvidia-smi -q -x`` lists the GPU at its bus and its recovery action is
  ``None`` (or absent: a driver before 550).
- prove: the CUDA probe on the host (subjects/cuda/cuda.py ``probe_host``) sees the GPU at
  its bus, creates a context on it and launches empty kernels there (the probe's latency
  pass, limited by bus to the GPUs reset).
- restore: ``pct start`` each container that ran, then the CUDA probe inside it
  (``probe_container``, as module container_verify does).

``reboot_needed`` is true when a GPU needs a reboot, its reset was refused by the driver,
failed, hung, or its read back or proof failed; ``reboot_reasons`` say which. Check mode
runs no command: the plan only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import (
    CommandTimeout,
    QUERY_TIMEOUT_S,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import cuda
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda.cuda_driver import (
    DEFAULT_LIBRARY,
    DEFAULT_TIMEOUT,
    normalize_bus_id,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import nvsmi
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.recovery import (
    gpu_reset,
    recovery,
)

# The needs a reset answers (recovery.NEEDS less none and reboot).
RESET_NEEDS = ("drain_p2p", "reset", "drain_and_reset")
SHUTDOWN_TIMEOUT_S = 60
# Empty kernels the proof launches on each GPU reset, twice (back to back and sleeping).
PROOF_LAUNCHES = 20
NO_HOLDERS = {"containers": [], "vms": [], "processes": []}


def _item(gpu, named):
    held = gpu.get("holders") or NO_HOLDERS
    address = gpu["address"]
    item = {"address": address, "need": gpu.get("need"), "named": named,
            "driver_action": gpu.get("driver_action"), "evidence": gpu.get("evidence") or [],
            "holders": held, "action": "reset", "reason": None,
            "stop": list(held.get("containers") or []), "steps": [], "result": None}
    if gpu.get("need") == "reboot":
        item.update(action="reboot", stop=[], reason="the driver asks for a reboot of the "
                    "host (%s): a reset does not clear it" % ("; ".join(item["evidence"])
                                                              or "need reboot"))
    elif held.get("vms"):
        vms = ", ".join(held["vms"])
        item.update(action="refused", stop=[], reason=(
            "GPU %s is passed through to VM %s: vfio-pci and the VM own it, the host's "
            "driver cannot reset it; shut the VM down (qm shutdown %s), then reset the GPU "
            "from the VM or give it back to the host, or reboot the host"
            % (address, vms, held["vms"][0])))
    elif held.get("processes"):
        procs = ", ".join("%s (pid %s)" % (p.get("name") or "?", p.get("pid"))
                          for p in held["processes"])
        item.update(action="refused", stop=[], reason=(
            "GPU %s is held by host process %s outside any container: stop it (its service "
            "or kill <pid>), then run gpu_recover again" % (address, procs)))
    return item


def plan(found, gpus=None):
    """The ladder's plan from the audit's facts ``found`` (``gpu_recovery``, and for a named
    GPU it does not list ``gpu_processes`` and ``passthrough``): one item per GPU to act on,
    ``{address, need, named, action (reset, refused, reboot), reason, stop (container
    vmids), holders, evidence, steps, result}``. ``gpus`` (bus addresses) names them; else
    every GPU of ``gpu_recovery`` whose need is not ``none``."""
    known = dict((g["address"], g) for g in found.get("gpu_recovery") or [])
    if not gpus:
        return [_item(g, False) for g in found.get("gpu_recovery") or []
                if g.get("need") != "none"]
    out = []
    for address in gpus:
        address = gpu_reset.normalize(address)
        gpu = known.get(address)
        if gpu is None:     # not listed by nvidia-smi (passed to a VM, fallen off the bus)
            gpu = {"address": address, "need": "reset",
                   "evidence": ["named by the operator; nvidia-smi does not list it"],
                   "holders": recovery.holders(address, found.get("gpu_processes"),
                                               found.get("passthrough"))}
        elif gpu.get("need") == "none":
            gpu = dict(gpu, need="reset", evidence=["named by the operator"])
        out.append(_item(gpu, True))
    return out


class Ladder(object):
    """One run of the ladder; ``options``: root, pct, qm, nvidia_smi, shutdown_timeout,
    reset_timeout, cuda_timeout, cuda_library."""

    def __init__(self, runner, options):
        self.runner = runner
        self.o = options
        self.containers = {}        # vmid -> {vmid, running_before, stopped, started, ...}
        self.changed = False

    # --- commands ---------------------------------------------------------------------

    def _run(self, argv, timeout=QUERY_TIMEOUT_S):
        """``(rc, out, err)``; rc None when killed at ``timeout`` (err says so)."""
        try:
            return self.runner.run(argv, check=False, timeout=timeout)
        except CommandTimeout as exc:
            return None, exc.out or "", str(exc)

    def _running(self, vmid):
        rc, out, err = self._run([self.o["pct"], "status", str(vmid)])
        if rc != 0:
            raise _Failed("pct status %s exited %s: %s" % (vmid, rc, _one(err or out)))
        return "status: running" in out

    def vm_states(self, vmids):
        """``201 running, 202 stopped`` from ``qm status`` (``?`` where it does not answer)."""
        out = []
        for vmid in vmids:
            rc, text, _err = self._run([self.o.get("qm") or "qm", "status", str(vmid)])
            state = text.split(":", 1)[1].strip() if rc == 0 and ":" in text else "?"
            out.append("%s %s" % (vmid, state))
        return ", ".join(out)

    def smi(self):
        """``nvidia-smi -q -x`` parsed, or raises _Failed."""
        rc, out, err = self._run([self.o["nvidia_smi"], "-q", "-x"])
        if rc != 0:
            raise _Failed("nvidia-smi -q -x exited %s: %s" % (rc, _one(err or out)))
        try:
            return dict((g["address"], g) for g in nvsmi.parse(out)["gpus"])
        except nvsmi.NvsmiError as exc:
            raise _Failed(str(exc))

    # --- steps ------------------------------------------------------------------------

    def drain(self, vmid):
        """Stop container ``vmid`` when it runs (once per run): bounded shutdown, then stop.
        Returns its record; ``problem`` set when it could not be stopped."""
        if vmid in self.containers:
            return self.containers[vmid]
        ct = {"vmid": vmid, "running_before": False, "stopped": None, "started": False,
              "cuda": None, "problem": None}
        self.containers[vmid] = ct
        try:
            ct["running_before"] = self._running(vmid)
            if not ct["running_before"]:
                return ct
            limit = int(self.o.get("shutdown_timeout") or SHUTDOWN_TIMEOUT_S)
            self.changed = True
            self._run([self.o["pct"], "shutdown", str(vmid), "--timeout", str(limit)],
                      timeout=limit + 30)
            ct["stopped"] = "shutdown"
            if self._running(vmid):
                rc, out, err = self._run([self.o["pct"], "stop", str(vmid)], timeout=limit)
                ct["stopped"] = "stop"
                if rc != 0 or self._running(vmid):
                    raise _Failed("pct stop %s exited %s: %s" % (vmid, rc, _one(err or out)))
        except _Failed as exc:
            ct["problem"] = "container %s could not be stopped: %s" % (vmid, exc)
        return ct

    def reset(self, item, before):
        smi_gpu = before.get(item["address"]) or {}
        nvidia_smi, address = self.o["nvidia_smi"], item["address"]
        persistence = smi_gpu.get("persistence_mode") is True
        if persistence:
            problem = gpu_reset.set_persistence(self.runner, nvidia_smi, address, False)
            item["steps"].append(_step("persistence_off", problem, problem or
                                       "persistence mode off for the reset (a client)"))
        self.changed = True
        got = gpu_reset.reset(self.runner, nvidia_smi, address,
                              int(self.o.get("reset_timeout") or gpu_reset.RESET_TIMEOUT_S))
        detail = got["message"]
        if got["outcome"] == "in_use":
            try:
                procs = (self.smi().get(address) or {}).get("processes") or []
            except _Failed:
                procs = []
            got["processes"] = [{"pid": p.get("pid"), "name": p.get("name")} for p in procs]
            if procs:
                detail += " (nvidia-smi -q -x lists on it: %s)" % ", ".join(
                    "%s pid %s" % (p.get("name") or "?", p.get("pid")) for p in procs)
        if got["outcome"] == "peers_required":
            detail += " (GPUs that must be reset with it: %s; not widened here)" % ", ".join(
                got["peers"])
        item["reset"] = got
        item["steps"].append({"step": "reset", "outcome": "ok" if got["outcome"] == "reset"
                              else got["outcome"], "detail": detail,
                              "seconds": got.get("seconds")})
        if persistence:
            problem = gpu_reset.set_persistence(self.runner, nvidia_smi, address, True)
            item["steps"].append(_step("persistence_on", problem,
                                       problem or "persistence mode on again"))
        return got["outcome"] == "reset"

    def read_back(self, items):
        try:
            after = self.smi()
            problem = None
        except _Failed as exc:
            after, problem = {}, str(exc)
        ok = []
        for item in items:
            gpu = after.get(item["address"])
            if problem:
                why = problem
            elif gpu is None:
                why = "nvidia-smi -q -x does not list %s after the reset" % item["address"]
            elif (gpu.get("recovery_action") or "None") != "None":
                why = "the driver's recovery action is still %s" % gpu["recovery_action"]
            else:
                why = None
                ok.append(item)
            item["steps"].append(_step("read_back", why, why or (
                "listed at %s, recovery action %s" % (item["address"],
                                                      gpu.get("recovery_action") or "N/A"))))
        return ok

    def prove(self, items):
        """The CUDA probe on the host, its kernel launches limited to the GPUs reset (its
        ``latency_gpus``, chosen by bus): each must be listed, take a context and run
        PROOF_LAUNCHES empty kernels."""
        result = cuda.probe_host(self.runner, library=self.o.get("cuda_library") or
                                 DEFAULT_LIBRARY, root=self.o["root"],
                                 timeout=self.o.get("cuda_timeout") or DEFAULT_TIMEOUT,
                                 latency=True, latency_count=PROOF_LAUNCHES, latency_gap_us=0,
                                 latency_gpus=[i["address"] for i in items])
        devices = dict((normalize_bus_id(d.get("pci_bus_id") or ""), d)
                       for d in result.get("devices") or [])
        for item in items:
            dev = devices.get(item["address"])
            if dev is None:
                why = "the CUDA probe does not see %s: %s" % (
                    item["address"], result.get("error") or "not among its devices")
            elif dev.get("error"):
                why = "CUDA on %s: %s" % (item["address"], dev["error"])
            elif dev.get("skipped") or (dev.get("latency") or {}).get("skipped"):
                why = "CUDA on %s: %s" % (item["address"], dev.get("skipped") or
                                          dev["latency"]["skipped"])
            else:
                why = None
            item["steps"].append(_step("prove", why, why or "CUDA sees %s as GPU %s (%s), "
                                       "creates a context and runs %d kernels on it" % (
                                           item["address"], dev.get("index"), dev.get("name"),
                                           2 * PROOF_LAUNCHES)))
        return [i for i in items if i["steps"][-1]["outcome"] == "ok"]

    def restore(self):
        """Start every container this run stopped, then prove CUDA inside it."""
        for vmid in sorted(self.containers, key=_vmid_key):
            ct = self.containers[vmid]
            if not ct["stopped"]:
                continue
            rc, out, err = self._run([self.o["pct"], "start", str(vmid)],
                                     timeout=int(self.o.get("shutdown_timeout")
                                                 or SHUTDOWN_TIMEOUT_S) + 30)
            if rc != 0:
                ct["problem"] = "pct start %s exited %s: %s" % (vmid, rc, _one(err or out))
                continue
            ct["started"] = True
            got = cuda.probe_container(self.runner, self.o["pct"], vmid, root=self.o["root"],
                                       timeout=self.o.get("cuda_timeout") or DEFAULT_TIMEOUT)
            ct["cuda"] = {"devices": len(got.get("devices") or []), "error": got.get("error")}
            if got.get("error"):
                ct["problem"] = cuda.failure_message(got)


class _Failed(Exception):
    """A step could not run (a command that failed, an answer that is not what it should)."""


def _one(text):
    return " ".join((text or "").split())[:500] or "no output"


def _step(name, problem, detail):
    return {"step": name, "outcome": "failed" if problem else "ok", "detail": detail}


def _vmid_key(vmid):
    return (0, int(vmid), "") if str(vmid).isdigit() else (1, 0, str(vmid))


def run(runner, options, found, gpus=None, check_mode=False):
    """The ladder on this host from the audit's facts ``found`` (``plan``): ``{changed, gpus
    (the plan items with their steps and result), containers, reboot_needed,
    reboot_reasons, refused, problems}``."""
    items = plan(found, gpus)
    ladder = Ladder(runner, options)
    for item in items:
        if item["action"] == "refused" and item["holders"]["vms"] and not check_mode:
            item["reason"] += " (qm status: %s)" % ladder.vm_states(item["holders"]["vms"])
    if not check_mode and any(i["action"] == "reset" for i in items):
        _ladder(ladder, [i for i in items if i["action"] == "reset"])
    for item in items:
        if item["action"] == "reboot":
            item["result"] = "reboot"
        elif item["action"] == "refused":
            item["result"] = "refused"
        elif check_mode:
            item["result"] = "planned"
    containers = [ladder.containers[v] for v in sorted(ladder.containers, key=_vmid_key)]
    reasons = ["%s: %s" % (i["address"], i["reason"]) for i in items if i["result"] == "reboot"]
    reasons += ["%s: %s" % (i["address"], _failure(i)) for i in items if i["result"] == "failed"]
    # check mode: changed says what a real run would do (a reset is planned)
    changed = ladder.changed or (check_mode and any(i["result"] == "planned" for i in items))
    return {"changed": changed, "gpus": items, "containers": containers,
            "reboot_needed": bool(reasons), "reboot_reasons": reasons,
            "refused": ["%s: %s" % (i["address"], i["reason"]) for i in items
                        if i["result"] == "refused"],
            "problems": [c["problem"] for c in containers if c["problem"]]}


def _failure(item):
    failed = [s for s in item["steps"] if s["outcome"] != "ok"]
    return "%s %s: %s" % (failed[0]["step"], failed[0]["outcome"], failed[0]["detail"]) \
        if failed else "failed"


def _ladder(ladder, items):
    try:
        before = ladder.smi()
    except _Failed:
        before = {}             # the reset still runs; persistence is left as it is
    resettable = []
    for item in items:
        cts = [ladder.drain(vmid) for vmid in item["stop"]]
        problems = [c["problem"] for c in cts if c["problem"]]
        stopped = ["%s (%s)" % (c["vmid"], c["stopped"]) for c in cts if c["stopped"]]
        item["steps"].append(_step("drain", problems, "; ".join(problems) or (
            "stopped container %s" % ", ".join(stopped) if stopped else
            "its containers %s were not running" % ", ".join(item["stop"]) if item["stop"]
            else "no container holds it")))
        if not problems and ladder.reset(item, before):
            resettable.append(item)
    proven = ladder.prove(ladder.read_back(resettable)) if resettable else []
    ladder.restore()
    for item in items:
        item["result"] = "recovered" if item in proven else "failed"
        for vmid in item["stop"]:
            ct = ladder.containers.get(vmid) or {}
            item["steps"].append(_step("restore", ct.get("problem"), ct.get("problem") or (
                "container %s started, CUDA proven inside" % vmid if ct.get("started")
                else "container %s was not running: left stopped" % vmid)))
