# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The whole runtime tune pass of one host, in one process (module host_tune): a loop over
the tune parts of ``engines.tune.tune_registry.REGISTRY``, where a part's attributes are described.

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

import copy

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import argspec
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import facts
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cpu import cpu
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import tune_registry
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import Runner
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.host import virt

RESULT_KEYS = ("changed", "failures", "rows", "diffs", "skipped", "detail", "fields")

# From the registry (tests register a part by replacing these): the parts in the order they
# run, their names, every step key of host_tune's ``parts`` return, finding id -> the part
# that owns it, and the parts that run when host_tune is not told which (all but the opt-in
# ones: numa_pin rewrites container configs, bandwidth takes GPU memory for its copies).
REGISTRY = tune_registry.REGISTRY
PARTS, STEPS, MANAGED = tune_registry.PARTS, tune_registry.STEPS, tune_registry.MANAGED
DEFAULT_PARTS = tune_registry.DEFAULT_PARTS
STAGES = tune_registry.STAGES
check_part = tune_registry.check_part
_derive = tune_registry.derive


def _managed(findings, ids):
    return [f for f in findings if f["id"] in ids]


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
    guest=dict(type="str", choices=["allow", "warn", "refuse"], default="allow"),
    # a saved plan's change set for this host: module host_tune compares it under its lock
    planned_changes=dict(type="list", elements="dict"),
)
COMMON_OPTIONS.update(facts.per_key_spec(PER_KEY))
COMMON_OPTIONS.update(argspec.root())


def argument_spec():
    """host_tune's argument spec: the common options (``parts`` choosing among the parts
    registered now), then each part's own (``tune_registry.option_spec`` of its
    declarations). A copy: Ansible's validator fills a dict option's default in place
    (``wanted``'s ``{}`` became the whole defaults of the first run in the process)."""
    spec = dict(COMMON_OPTIONS)
    spec["parts"] = dict(spec["parts"], choices=list(PARTS))
    for part in REGISTRY:
        for name, declaration in part.options.items():
            option = tune_registry.option_spec(declaration)
            if spec.get(name, option) != option:
                raise ValueError("tune part %s redefines option %s" % (part.name, name))
            spec[name] = option
    return copy.deepcopy(spec)


def check_options(params):
    """The option rules of every part registered now on host_tune's ``params`` (module
    host_tune's rules): raises validate.ValidationError naming the option, the value and
    what is allowed."""
    tune_registry.check_options(params, REGISTRY)


def _params(params):
    """host_tune's options as given, checked and completed by Ansible's own validator from
    the spec of the parts registered now (a caller inside the collection may pass some)."""
    return argspec.fill(argument_spec(), params)


class Context(object):
    """What a part's ``run`` reads: ``wanted`` (the wanted values, whole and typed:
    ``facts.wanted_values`` of option ``wanted`` and the deprecated per-key options),
    ``params`` (host_tune's options, defaults filled; its per-key names ``PER_KEY`` hold the
    values of ``wanted``), ``root``, ``check_mode``, ``runner`` (runner.Runner: systemctl,
    setpci, modprobe), ``warn(text)``, ``on`` (the part names switched on), ``before`` (the
    audit taken before), ``selection`` (the GPU selection as the subject functions name it),
    ``changed`` (a tune part changed the host so far), ``ran`` (``(name, changed)`` of each
    tune-stage part that ran so far, in order), ``skipped`` (part name -> the finding
    subjects it left), ``managed`` (finding id -> owning part), ``sections`` (the snapshot's)
    and ``files`` (every path a part may write, with these options)."""

    def __init__(self, params, check_mode, runner, warn, wanted=None):
        if wanted is None:
            wanted = facts.wanted_values(params, PER_KEY, deprecate=warn)
        else:       # checked by the module's rules: only the deprecation is said here
            facts.per_key_used(params, PER_KEY, warn)
        self.wanted = wanted
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
        self.managed = MANAGED
        self.sections = tune_registry.SECTIONS
        self.files = tune_registry.managed_files(self.params)
        self.before = self.audit()

    def audit(self):
        """The audit against the wanted values, whole (the same as role audit's)."""
        return audit.audit(self.root, self.wanted)


def tune_run(params, check_mode=False, runner=None, warn=None, wanted=None):
    """The tune pass for ``params`` (module host_tune's options; missing ones take its
    defaults): every registered part in order. Returns host_tune's result (see
    ``tune_failure`` for whether it failed): ``changed``, ``parts`` (each step's own
    result), ``rows``, ``failures``, ``findings_before``, ``findings_after``, ``verified``,
    ``snapshot``, ``check_mode``, ``host``, ``root``, ``diff`` and the fields parts set
    (``peermem``, ``audit_again``). ``wanted``: the wanted values as the module's rules
    checked them (``facts.wanted_values``); None checks them here."""
    p = _params(params)
    # the idle states read once by the audit, the snapshot and the cpuidle part (until a
    # flag is written)
    with cpu.states_held(p["root"]):
        return _tune_run(p, check_mode, runner, warn, wanted)


def _tune_run(p, check_mode, runner, warn, wanted):
    ctx = Context(p, check_mode, runner or Runner(), warn, wanted)
    # the role's guest check, here instead of a module round trip of its own: after the
    # read-only audit, before any part
    found = ctx.before.get("virt") or {}
    refused = virt.refusal(found, ctx.wanted["host"], ctx.root, "host_tune")
    if refused and p["guest"] == "refuse":
        raise ValueError(refused + " (host_tune: guest warn or allow)")
    warning = virt.guest_warning(found, ctx.wanted["host"] or ctx.root, "host_tune guest: warn")
    if refused and p["guest"] == "warn" and warning and warn is not None:
        warn(warning)
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
