# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit's facts: what the host under a root is, read from sysfs, procfs and files.

Nothing here writes or runs a command, so the same code reads a live host and an unpacked
capture of one. A missing file is a fact (None, an empty list), never an error; a reader that
fails unexpectedly is recorded in ``errors`` and the rest goes on.

``collect(root, wanted)`` -> facts (the schema of ``host_audit``'s RETURN). The checks
(``module_utils/checks``) judge them; ``wanted`` here only says what to read (sysctl keys,
GPU vendor and classes, the container config folder).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import check_registry
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import (
    argspec,
    cmdout,
    facts_base,
    hostfs,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (
    ValidationError,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import policy


def wanted_spec():
    """The wanted values, declared once by their subjects (check_registry.wanted_spec): the
    suboptions of option ``wanted`` of host_audit, host_tune, audit_timer and
    post_boot_verify (doc fragment ``gpuhost.tuning.wanted``; role common composes them whole
    as ``__gpuhost_wanted``); their defaults complete ``merged_wanted``."""
    return check_registry.wanted_spec()


WANTED_KEYS = tuple(sorted(wanted_spec()))
# The version in which the per-key options (the wanted values as top-level options of
# host_audit, host_tune and post_boot_verify) stop working; ``wanted`` replaces them.
PER_KEY_REMOVED_IN = "0.3.0"


def wanted_option():
    """Option ``wanted``: the whole wanted values as one dict, typed and completed with
    their defaults by Ansible's validator (given or not)."""
    return dict(type="dict", default={}, options=wanted_spec())


def per_key_spec(keys=WANTED_KEYS):
    """The deprecated per-key options ``keys``: each a top-level copy of its wanted spec."""
    spec = wanted_spec()
    return dict((key, spec[key]) for key in keys)


class Wanted(dict):
    """Wanted values already completed and checked (``merged_wanted``): passed down as they
    are, so one module call fills and checks them once."""


def merged_wanted(wanted):
    """``wanted`` completed with the defaults of ``wanted_spec`` (None counts as not given)
    and typed; values that are already a ``Wanted`` are returned as they are."""
    if isinstance(wanted, Wanted):
        return wanted
    return Wanted(argspec.fill(wanted_spec(), wanted))


def wanted_values(p, per_key=(), deprecate=None):
    """The wanted values of a module taking option ``wanted`` (``_wanted_intake``: completed,
    the deprecated per-key options ``per_key`` over it), checked by every subject's rules and
    the operator policy's; ValidationError names the first bad value.

    A module checks them once, in its ``rules``, and returns them from there: its run takes
    them from ``validate.check_module``'s ``checked`` (and says the deprecation of the
    per-key options with ``per_key_used``)."""
    try:
        w = _wanted_intake(p, per_key, deprecate)
    except ValueError as exc:
        raise ValidationError("wanted: %s" % exc)
    check_registry.wanted_rules(dict(w, root=p.get("root") or "/"))
    try:    # the operator policy: acknowledged findings, XID overrides, copy rate marks
        policy.check_options(w, check_registry.finding_order())
    except ValueError as exc:
        raise ValidationError(str(exc))
    return w


def per_key_used(params, per_key, deprecate):
    """The deprecated per-key options of ``per_key`` that ``params`` set to something other
    than their default, as ``{key: value}``; ``deprecate(text)`` is told their names."""
    spec = wanted_spec() if per_key else {}
    used = dict((key, params[key]) for key in per_key if params.get(key) is not None and
                params[key] != spec[key].get("default"))
    if used and deprecate is not None:
        names = sorted(used, key=list(per_key).index)
        deprecate("option%s %s: pass %s inside option wanted (role common's __gpuhost_wanted);"
                  " the per-key options stop working in gpuhost.tuning %s" % (
                      "s" if len(names) > 1 else "", ", ".join(names),
                      "them" if len(names) > 1 else "it", PER_KEY_REMOVED_IN))
    return used


def _wanted_intake(params, per_key=(), deprecate=None):
    """The whole wanted values a module was given: its option ``wanted``, then each of the
    deprecated per-key options ``per_key`` that is set to something other than its default
    (it wins over ``wanted``; ``deprecate(text)`` is told its name). Typed and complete
    (``merged_wanted``); ValueError names a bad value."""
    wanted = dict(params.get("wanted") or {})
    wanted.update(per_key_used(params, per_key, deprecate))
    return merged_wanted(wanted)


def collect(root, wanted=None, outputs=None):
    """Every fact of the audit schema; see the host_audit module's RETURN. ``outputs`` (a
    cmdout.CommandOutputs) holds the two command outputs of a live audit (nvidia-smi, the
    journal); by default one is made for ``root`` without a module's runner."""
    wanted = merged_wanted(wanted)
    root = root or "/"
    if outputs is None:
        outputs = cmdout.CommandOutputs(root)
    # One reading session: links inside the root resolved once per folder, and every file
    # refused (a FIFO, a device, over its cap) or line skipped becomes an entry in errors.
    with hostfs.session() as reading:
        facts = _collect(root, wanted, outputs)
    for section, message in reading.problems:
        facts["errors"].append({"section": section, "error": message})
    return facts


def _collect(root, wanted, outputs):
    errors = []
    context = facts_base.FactContext(root, wanted, outputs)
    facts = facts_base.read_facts(check_registry.FACTS, context, errors)
    facts["errors"] = errors
    return facts
