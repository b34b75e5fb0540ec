# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How a subject declares its part of the audit, and how the audit reads it.

Each subject folder that the audit reads has one declaration file, ``audit_<subject>.py``,
with up to five names, each optional (``declared`` gives the default of one left out: no
facts, no wanted values, no rules, no checks):

- ``FACTS``: a tuple of :class:`Fact`, each one key of the audit's facts (host_audit's
  RETURN), the function that reads it from a :class:`FactContext`, the value it takes when
  that function fails (the failure becomes an entry of ``errors``) and its place in the
  reading order (a fact reads only facts of a lower order);
- ``WANTED``: the spec entries of the wanted values the subject's checks judge against
  (suboptions of option ``wanted``, as AnsibleModule takes them);
- ``wanted_rules(w)``: refuses a wanted value that can only be a mistake (``w``: the wanted
  values, completed, with ``root``), raising validate.ValidationError; may do nothing;
- ``CHECKS``: the subject's check files (each registers its checks on import,
  platform/findings.py), and ``FLEET_CHECKS``, its fleet checks (platform/fleet_findings.py).

The audit's registry (engines/audit/check_registry.py) lists the declaration files, one line
each, and derives the fact list, the wanted spec and the checks from them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy


class Fact(object):
    """One fact of the audit: ``name`` its key; ``read(context)`` its value; ``default`` the
    value when ``read`` fails (copied, so no run shares it); ``section`` the name the failure
    is recorded under in ``errors`` (default ``name``); ``order`` its place in the reading
    order; ``kept`` False for a value other facts read that is not itself a fact of the
    result."""

    __slots__ = ("order", "name", "read", "default", "section", "kept")

    def __init__(self, order, name, read, default=None, section=None, kept=True):
        self.order = order
        self.name = name
        self.read = read
        self.default = default
        self.section = section or name
        self.kept = kept

    def __repr__(self):
        return "Fact(%d, %r)" % (self.order, self.name)


class FactContext(object):
    """What a fact's ``read`` is given: ``root``, ``wanted`` (the wanted values, complete),
    ``outputs`` (platform/cmdout.CommandOutputs: the command outputs of a live audit) and
    ``facts`` (every fact read so far, by name, the ones not kept included)."""

    __slots__ = ("root", "wanted", "outputs", "facts")

    def __init__(self, root, wanted, outputs):
        self.root = root or "/"
        self.wanted = wanted
        self.outputs = outputs
        self.facts = {}

    def get(self, name, empty=None):
        """The fact ``name`` read so far, or ``empty`` when it is missing or None."""
        value = self.facts.get(name)
        return empty if value is None else value


def ordered(declarations):
    """The facts of ``declarations`` (declaration files) in reading order; ValueError when
    two declare one name or one order."""
    found = sorted((fact for decl in declarations for fact in declared(decl, "FACTS")),
                   key=lambda fact: fact.order)
    for index in range(1, len(found)):
        first, second = found[index - 1], found[index]
        if first.order == second.order:
            raise ValueError("facts %s and %s share order %d" % (first.name, second.name,
                                                                 first.order))
    names = [fact.name for fact in found]
    twice = sorted(set(name for name in names if names.count(name) > 1))
    if twice:
        raise ValueError("facts declared twice: %s" % ", ".join(twice))
    return tuple(found)


def read_facts(facts, context, errors):
    """Read ``facts`` (in the given order) into ``context.facts``; returns the kept ones as
    a dict in that order. A reader that fails takes its default and appends
    ``{section, error}`` to ``errors``: one reader must not sink the whole audit."""
    out = {}
    for fact in facts:
        try:
            value = fact.read(context)
        except Exception as exc:  # noqa: BLE001 - any reader's failure is an audit error
            errors.append({"section": fact.section,
                           "error": "%s: %s" % (type(exc).__name__, exc)})
            value = copy.deepcopy(fact.default)
        context.facts[fact.name] = value
        if fact.kept:
            out[fact.name] = value
    return out


def no_rules(_wanted):
    """``wanted_rules`` of a subject whose wanted values need no check beyond their type."""
    return None


# A declaration's names and their values when the file leaves one out.
DEFAULTS = {"FACTS": (), "WANTED": {}, "wanted_rules": no_rules, "CHECKS": (),
            "FLEET_CHECKS": ()}


def declared(declaration, name):
    """``declaration``'s value of ``name`` (one of ``DEFAULTS``), or its default."""
    return getattr(declaration, name, DEFAULTS[name])
