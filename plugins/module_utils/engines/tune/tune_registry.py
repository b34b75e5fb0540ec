# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The tune part registry: every tune part, in the order host_tune runs them, and all that
is derived from it. Adding a part is one object in its subject's file plus one line here
(docs/architecture.md, "Tune parts").

A part is an object with:

``name``
    its switch in host_tune's ``parts`` option; role tune's switch ``gpuhost_tune_<name>``
    and tag ``tune_<name>`` (``switch``, ``tag``). Two objects may share one name (the
    snapshot before and after).
``owns``
    the audit finding ids it makes right: listed before, verified after.
``steps``
    the keys of its own results in host_tune's ``parts`` return, in the order their
    failures are listed.
``stage``
    ``before`` (runs first; when it fails nothing after it runs), ``tune`` (a change of the
    host: any change makes the after stage record and verify), or ``after``.
``options``
    host_tune options only this part reads (may be empty), each declared once:
    ``{name: declaration}``, a declaration being its argument spec (``type``, ``default``,
    ...) plus ``description`` (its text in host_tune's DOCUMENTATION and, for a role
    variable, in role tune's argument spec and defaults, unless ``role_description`` says it
    there in the role's words) and ``role_var`` (optional: role tune's variable that sets
    it, ``gpuhost_tune_<option>``; without, the role does not pass it). From them
    ``scripts/role-specs.py`` writes host_tune's DOCUMENTATION and, for each role variable,
    its default in role tune's defaults, its argument spec entry and its line in the role's
    host_tune call (``role_options``); host_tune's argument spec takes ``option_spec`` of
    each. An option two parts share is one declaration (the same dict).
``option_docs`` (optional)
    ``{name: description}`` of options declared without ``description``.
``rules(params)`` (optional)
    raises ``validate.ValidationError`` on an option value the part cannot use: module
    host_tune runs every part's before it reads anything (``check_options``); objects
    sharing a name may share it (it runs once).
``default_on`` (optional, True when absent)
    False for an opt-in part: left out of the default of host_tune's ``parts``; its role
    switch defaults to false. Objects sharing a name agree on it.
``role_doc``
    the description of its role switch (a string or a list of them; one object of a name
    has it): ``scripts/role-specs.py`` writes the switch into role tune's defaults, vars and
    argument spec from it.
``files`` and ``file_options`` (optional)
    the host paths it may write, and the names of its options whose values are paths it
    may write: every snapshot records them (the ``files`` section), a revert puts them back.
``snapshot_key`` with ``record(ctx)``, ``restore(ctx, recorded)``, ``check``,
``summary``, ``diff_lines``, ``label``, ``restore_report`` (optional)
    its section of a snapshot (protocol in ``engines/tune/sections.py``).
``run(ctx)`` and ``not_run(ctx, status)``
    the work and its result dict, and the result when switched off (``off``) or not
    reached (``not run``): protocol in ``engines/tune/tune.py``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import bandwidth_part
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.ceiling import ceiling_part
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import boot_service
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cpu import cpuidle_state
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.device_nodes import (
    device_nodes_part,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import latency_part
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import mrrs_part
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.peermem import peermem_part
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.placement import (
    placement_write,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.sysctl import sysctl_settings
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import sections
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import snapstore
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import verify_part

STAGES = ("before", "tune", "after")
PART_ATTRS = ("name", "owns", "steps", "stage", "options", "run", "not_run")
SECTION_ATTRS = ("record", "restore", "check", "summary", "diff_lines", "label",
                 "restore_report")

# The parts in the order they run.
REGISTRY = (
    sections.BEFORE_PART,
    bandwidth_part.BEFORE_PART,
    latency_part.BEFORE_PART,
    ceiling_part.BEFORE_PART,
    sysctl_settings.TUNE_PART,
    cpuidle_state.TUNE_PART,
    mrrs_part.TUNE_PART,
    boot_service.TUNE_PART,
    peermem_part.TUNE_PART,
    device_nodes_part.TUNE_PART,
    placement_write.TUNE_PART,
    sections.APPLIED_PART,
    verify_part.VERIFY_PART,
    bandwidth_part.AFTER_PART,
    latency_part.AFTER_PART,
    ceiling_part.AFTER_PART,
)


def check_part(part):
    """Raise ValueError when ``part`` does not follow the protocol (at import time)."""
    for attr in PART_ATTRS + (SECTION_ATTRS if hasattr(part, "snapshot_key") else ()):
        if not hasattr(part, attr):
            raise ValueError("tune part %r has no %s" % (part, attr))
    if part.stage not in STAGES:
        raise ValueError("tune part %s: stage %r is not one of %s"
                         % (part.name, part.stage, ", ".join(STAGES)))


def derive(registry):
    """``(names, steps, managed)``: the part names in the order they run, every step key
    of host_tune's ``parts`` return, and finding id -> the part that owns it. Raises
    ValueError on a registry where two parts own one finding or a stage runs out of order."""
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


def default_parts(registry):
    """Parts that run when host_tune is not told which: all but the opt-in ones."""
    names = derive(registry)[0]
    return tuple(n for n in names if all(getattr(p, "default_on", True)
                                         for p in registry if p.name == n))


def switches(registry=REGISTRY):
    """``[(name, default_on, role_doc)]`` of role tune's part switches, in run order."""
    out = []
    for name in derive(registry)[0]:
        objects = [p for p in registry if p.name == name]
        docs = [p.role_doc for p in objects if getattr(p, "role_doc", None)]
        if not docs:
            raise ValueError("tune part %s has no role_doc (its role switch's description)"
                             % name)
        out.append((name, bool(getattr(objects[0], "default_on", True)), docs[0]))
    return out


def options(registry=REGISTRY):
    """``[(option, spec, description)]`` of every part's host_tune options, in run order
    (an option two parts share once, with the first description given)."""
    out, seen = [], {}
    for part in registry:
        for name, declaration in part.options.items():
            doc = (declaration.get("description")
                   or (getattr(part, "option_docs", None) or {}).get(name))
            if name not in seen:
                seen[name] = len(out)
                out.append([name, option_spec(declaration), doc])
            elif out[seen[name]][2] is None:
                out[seen[name]][2] = doc
    for name, _spec, doc in out:
        if not doc:
            raise ValueError("tune part option %s has no description (its declaration's "
                             "description or the part's option_docs)" % name)
    return [tuple(item) for item in out]


# What a declaration holds beside its argument spec.
DECLARATION_KEYS = ("description", "role_var", "role_description")


def option_spec(declaration):
    """The argument spec of an option declaration (``DECLARATION_KEYS`` left out)."""
    return dict((k, v) for k, v in declaration.items() if k not in DECLARATION_KEYS)


def role_options(registry=REGISTRY):
    """``[(role variable, option, spec, description)]`` of every part option that role tune
    passes to host_tune, in run order (an option two parts share once)."""
    out, seen, owner = [], set(), {}
    for part in registry:
        for name, declaration in part.options.items():
            var = declaration.get("role_var")
            if not var or name in seen:
                continue
            if owner.setdefault(var, name) != name:
                raise ValueError("tune part options %s and %s share role variable %s"
                                 % (owner[var], name, var))
            seen.add(name)
            doc = declaration.get("role_description") or declaration.get("description")
            if not doc:
                raise ValueError("tune part option %s has a role variable and no description"
                                 % name)
            out.append((var, name, option_spec(declaration), doc))
    return out


def rules(registry=REGISTRY):
    """The parts' option rules (``rules(params)``), in run order, each once."""
    out = []
    for part in registry:
        rule = getattr(part, "rules", None)
        if rule is not None and rule not in out:
            out.append(rule)
    return out


def check_options(params, registry=REGISTRY):
    """Run every part's option rules on ``params`` (host_tune's): raises
    ``validate.ValidationError`` naming the option, the value and what is allowed."""
    for rule in rules(registry):
        rule(params)


def switch(name):
    return "gpuhost_tune_" + name


def tag(name):
    return "tune_" + name


def managed_files(params=None, registry=REGISTRY):
    """Every host path a part may write: its ``files``, then the values of its
    ``file_options`` in ``params`` (host_tune's; the option defaults without), once each."""
    out = []
    for part in registry:
        paths = list(getattr(part, "files", ()))
        for option in getattr(part, "file_options", ()):
            paths.append((params or {}).get(option) or part.options[option].get("default"))
        out.extend(p for p in paths if p and p not in out)
    return out


PARTS, STEPS, MANAGED = derive(REGISTRY)
DEFAULT_PARTS = default_parts(REGISTRY)
# The snapshot's sections: the parts that declare one, in run order, then the files.
# The files section: every path the parts declare; a folder recorded as absent goes only when
# it holds nothing but what the installers wrote (boot_service.installed_paths).
FILES = snapstore.FilesSection(installed=boot_service.installed_paths)
SECTIONS = tuple(p for p in REGISTRY if hasattr(p, "snapshot_key")) + (FILES,)
MANAGED_FILES = tuple(managed_files())
