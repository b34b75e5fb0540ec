# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The whole runtime tune pass of one host, in one process (module host_tune): a loop over
tune parts.

A tune part is an object exported by the module_utils file of its subject (``pci.py``
exports ``TUNE_PART``, the PCIe Max Read Request Size) and registered in ``REGISTRY``
below. It has:

``name``
    the switch in host_tune's ``parts`` option (role: ``gpuhost_tune_<name>``, tag
    ``tune_<name>``); two objects may share one name (the snapshot before and after).
``owns``
    the audit finding ids it makes right: listed before, verified after.
``steps``
    the keys of its own results in host_tune's ``parts`` return, in the order their
    failures are listed.
``stage``
    ``before`` (runs first; when it fails nothing after it runs), ``tune`` (a change of the
    host: any change makes the after stage record and verify), or ``after``.
``options``
    host_tune options only this part reads: ``{name: argument spec}`` (may be empty).
``default_on`` (optional, True when absent)
    False for an opt-in part: left out of the default of host_tune's ``parts``
    (``DEFAULT_PARTS``); its role switch defaults to false. Objects sharing a name agree
    on it.
``run(ctx)``
    does the work and returns a result dict (below). It never raises for a host that
    refuses: every error its subject can raise is caught and returned as ``failures``.
``not_run(ctx, status)``
    the result when it is switched off (``status`` ``off``) or not reached (``not run``,
    after a failed ``before`` part): usually one row saying so.

A result dict has any of: ``changed`` (bool), ``failures`` (``"step: why"`` lines, empty
when it took), ``rows`` (the before -> after table, ``{part, item, before, after, status,
note}``), ``diffs`` (Ansible diff dicts), ``skipped`` (finding subjects it may leave,
such as sysctl keys the kernel has not got), ``detail`` (``{step: the result its own
module returns}``) and ``fields`` (keys of host_tune's return it sets, such as
``snapshot``). ``ctx`` (``Context``) holds the options, the audit taken before, the parts
switched on, the runner, check mode and whether a tune part changed the host so far.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils import audit as audit_mod
from ansible_collections.gpuhost.tuning.plugins.module_utils import argspec
from ansible_collections.gpuhost.tuning.plugins.module_utils import bandwidth
from ansible_collections.gpuhost.tuning.plugins.module_utils import bootservice
from ansible_collections.gpuhost.tuning.plugins.module_utils import cpu_write
from ansible_collections.gpuhost.tuning.plugins.module_utils import devnodes_write
from ansible_collections.gpuhost.tuning.plugins.module_utils import facts
from ansible_collections.gpuhost.tuning.plugins.module_utils import latency
from ansible_collections.gpuhost.tuning.plugins.module_utils import pci_write
from ansible_collections.gpuhost.tuning.plugins.module_utils import peermem
from ansible_collections.gpuhost.tuning.plugins.module_utils import placement_write
from ansible_collections.gpuhost.tuning.plugins.module_utils import snapshot as snap
from ansible_collections.gpuhost.tuning.plugins.module_utils import sysctl_write
from ansible_collections.gpuhost.tuning.plugins.module_utils.runner import Runner

STAGES = ("before", "tune", "after")
RESULT_KEYS = ("changed", "failures", "rows", "diffs", "skipped", "detail", "fields")


def _managed(findings, ids):
    return [f for f in findings if f["id"] in ids]


class VerifyPart(object):
    """Audit again (only when a tune part changed the host, never in check mode) and list
    the findings owned by the parts that ran which remain."""

    name = "verify"
    owns = ()
    steps = ()
    stage = "after"
    options = {}

    def run(self, ctx):
        if ctx.check_mode:
            return {}
        after = ctx.audit() if ctx.changed else ctx.before
        ids = dict((fid, part) for fid, part in MANAGED.items() if part in ctx.on)
        remaining = [f for f in _managed(after["findings"], ids)
                     if f["subject"] not in ctx.skipped.get(ids[f["id"]], ())]
        return {"fields": {"findings_after": remaining, "verified": True,
                           "audit_again": after is not ctx.before},
                "failures": ["still off after tuning: %s %s: %s (want %s)" % (
                    f["id"], f["subject"], f["current"], f["expected"]) for f in remaining]}

    def not_run(self, ctx, status):
        return {}


VERIFY_PART = VerifyPart()

# The parts in the order they run. Adding a part: export it from its subject's file and
# put it here.
REGISTRY = (
    snap.BEFORE_PART,
    bandwidth.BEFORE_PART,
    latency.BEFORE_PART,
    sysctl_write.TUNE_PART,
    cpu_write.TUNE_PART,
    pci_write.TUNE_PART,
    bootservice.TUNE_PART,
    peermem.TUNE_PART,
    devnodes_write.TUNE_PART,
    placement_write.TUNE_PART,
    snap.APPLIED_PART,
    VERIFY_PART,
    bandwidth.AFTER_PART,
    latency.AFTER_PART,
)


def check_part(part):
    """Raise ValueError when ``part`` does not follow the protocol (at import time)."""
    for attr in ("name", "owns", "steps", "stage", "options", "run", "not_run"):
        if not hasattr(part, attr):
            raise ValueError("tune part %r has no %s" % (part, attr))
    if part.stage not in STAGES:
        raise ValueError("tune part %s: stage %r is not one of %s"
                         % (part.name, part.stage, ", ".join(STAGES)))


def _derive(registry):
    names, steps, managed, default_on = [], [], {}, {}
    stage = 0
    for part in registry:
        check_part(part)
        if STAGES.index(part.stage) < stage:
            raise ValueError("tune part %s: stage %s after a later stage"
                             % (part.name, part.stage))
        stage = STAGES.index(part.stage)
        on = bool(getattr(part, "default_on", True))
        if default_on.setdefault(part.name, on) != on:
            raise ValueError("tune part %s: its objects disagree on default_on" % part.name)
        if part.name not in names:
            names.append(part.name)
        steps.extend(s for s in part.steps if s not in steps)
        for fid in part.owns:
            if managed.get(fid, part.name) != part.name:
                raise ValueError("finding %s is owned by tune parts %s and %s"
                                 % (fid, managed[fid], part.name))
            managed[fid] = part.name
    return tuple(names), tuple(steps), managed


# Derived from the registry: the part names in the order they run, every step key of
# host_tune's ``parts`` return, and finding id -> the part that owns it.
PARTS, STEPS, MANAGED = _derive(REGISTRY)
# Parts that run when host_tune is not told which: all but the opt-in ones (default_on
# False, such as numa_pin, which rewrites container configs, and bandwidth, which takes GPU
# memory for its copies).
DEFAULT_PARTS = tuple(n for n in PARTS if all(getattr(p, "default_on", True)
                                              for p in REGISTRY if p.name == n))

# The wanted values host_tune took as top-level options before option ``wanted`` (deprecated,
# they stop working in 0.3.0; a part reads them from ``Context.wanted``).
PER_KEY = ("host", "mrrs_size", "cpuidle_deeper_than", "sysctl", "gpu_vendor", "gpu_classes",
           "lxc_config_dir")

# Options every part may read (``wanted``: the audit's wanted values, whole); each part adds
# its own.
COMMON_OPTIONS = dict(
    wanted=facts.wanted_option(),
    parts=dict(type="list", elements="str", choices=list(PARTS), default=list(DEFAULT_PARTS)),
    mrrs_include_upstream=dict(type="bool", default=True),
)
COMMON_OPTIONS.update(facts.per_key_spec(PER_KEY))
COMMON_OPTIONS.update(argspec.root())


def argument_spec():
    """host_tune's argument spec: the common options (``parts`` choosing among the parts
    registered now), then each part's own."""
    spec = dict(COMMON_OPTIONS)
    spec["parts"] = dict(spec["parts"], choices=list(PARTS))
    for part in REGISTRY:
        for name, option in part.options.items():
            if spec.get(name, option) != option:
                raise ValueError("tune part %s redefines option %s" % (part.name, name))
            spec[name] = option
    return spec


def _params(params):
    """host_tune's options as given, checked and completed by Ansible's own validator from
    the spec of the parts registered now (a caller inside the collection may pass some)."""
    return argspec.fill(argument_spec(), params)


class Context(object):
    """What a part's ``run`` reads: ``wanted`` (the wanted values, whole and typed:
    ``facts.wanted_intake`` of option ``wanted`` and the deprecated per-key options),
    ``params`` (host_tune's options, defaults filled; its per-key names ``PER_KEY`` hold the
    values of ``wanted``), ``root``, ``check_mode``, ``runner`` (runner.Runner: systemctl,
    setpci, modprobe), ``warn(text)``, ``on`` (the part names switched on), ``before`` (the
    audit taken before), ``selection`` (the GPU selection as the subject functions name it),
    ``changed`` (a tune part changed the host so far), ``ran`` (``(name, changed)`` of each
    tune-stage part that ran so far, in order) and ``skipped`` (part name -> the finding
    subjects it left)."""

    def __init__(self, params, check_mode, runner, warn):
        self.wanted = facts.wanted_intake(params, PER_KEY, deprecate=warn)
        self.params = dict(params, **dict((key, self.wanted[key]) for key in PER_KEY))
        self.root = params["root"]
        self.check_mode = bool(check_mode)
        self.runner = runner
        self.warn = warn
        self.on = set(params["parts"])
        self.selection = {"vendor": self.wanted["gpu_vendor"],
                          "classes": self.wanted["gpu_classes"],
                          "include_upstream": params["mrrs_include_upstream"]}
        self.changed = False
        self.ran = []
        self.skipped = {}
        self.before = self.audit()

    def audit(self):
        """The audit against the wanted values, whole (the same as role audit's)."""
        return audit_mod.audit(self.root, self.wanted)


def tune_run(params, check_mode=False, runner=None, warn=None):
    """The tune pass for ``params`` (module host_tune's options; missing ones take its
    defaults): every registered part in order. Returns host_tune's result (see
    ``tune_failure`` for whether it failed): ``changed``, ``parts`` (each step's own
    result), ``rows``, ``failures``, ``findings_before``, ``findings_after``, ``verified``,
    ``snapshot``, ``check_mode``, ``host``, ``root``, ``diff`` and the fields parts set
    (``peermem``, ``audit_again``)."""
    p = _params(params)
    ctx = Context(p, check_mode, runner or Runner(), warn)
    result = {"changed": False, "host": ctx.wanted["host"], "root": ctx.root,
              "check_mode": ctx.check_mode, "parts_on": [n for n in PARTS if n in ctx.on],
              "parts": {}, "findings_before": _managed(ctx.before["findings"], MANAGED),
              "findings_after": [], "verified": False, "failures": [], "diff": [],
              "rows": []}
    stopped = False
    for part in REGISTRY:
        if part.name not in ctx.on:
            out = part.not_run(ctx, "off")
        elif stopped:
            out = part.not_run(ctx, "not run")
        else:
            out = part.run(ctx)
        unknown = set(out) - set(RESULT_KEYS)
        if unknown:
            raise ValueError("tune part %s returned unknown keys %s"
                             % (part.name, ", ".join(sorted(unknown))))
        changed = bool(out.get("changed"))
        result["changed"] = result["changed"] or changed
        if part.stage == "tune":
            ctx.changed = ctx.changed or changed
            if part.name in ctx.on and not stopped:
                ctx.ran.append((part.name, changed))
        if out.get("skipped"):
            ctx.skipped.setdefault(part.name, set()).update(out["skipped"])
        result["parts"].update(out.get("detail") or {})
        for item, before, after, status, note in out.get("rows") or []:
            result["rows"].append({"part": part.name, "item": item, "before": before,
                                   "after": after, "status": status, "note": note})
        result["diff"].extend(out.get("diffs") or [])
        result["failures"].extend(out.get("failures") or [])
        result.update(out.get("fields") or {})
        if part.stage == "before" and out.get("failures"):
            stopped = True
    return result


def tune_failure(result):
    """The failure message of a ``tune_run`` result, or None when every part took."""
    if not result.get("failures"):
        return None
    return "%s: %s" % (result.get("host") or result.get("root"), " | ".join(result["failures"]))
