# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter for role common's preflight: the gpuhost_* variables no part of the collection
reads, each with the nearest name it knows.

A misspelled variable (``-e gpuhost_tune_pcei=false``) is otherwise silently ignored and
the role does what the user meant to turn off. The known names are read from the
collection's own files, so there is one list: every option of every role's
meta/argument_specs.yml (role common's entry point ``play`` declares the playbooks' own
variables and the facts the roles set), and the old names of the roles' renamed-variable
maps (``__gpuhost_<role>_renamed`` in vars/main.yml), which still work with their own
deprecation warning."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib
import os

from ansible.errors import AnsibleFilterError

try:
    import yaml
except ImportError:  # pragma: no cover - ansible-core requires PyYAML
    yaml = None

ROLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "roles")
SPEC_LIMIT = 4 << 20  # one role's spec or vars file; the largest is about 60 KiB

_KNOWN = {}


def _load(path):
    with open(path, "rb") as handle:
        data = handle.read(SPEC_LIMIT + 1)
    if len(data) > SPEC_LIMIT:
        raise AnsibleFilterError("unknown_variables: %s is over %d bytes" % (path, SPEC_LIMIT))
    return yaml.safe_load(data) or {}


def known_names(roles=ROLES):
    """Every variable name the collection reads or sets, from its roles' files (cached)."""
    if roles in _KNOWN:
        return _KNOWN[roles]
    names = set()
    for role in sorted(os.listdir(roles)):
        spec = os.path.join(roles, role, "meta", "argument_specs.yml")
        if os.path.isfile(spec):
            for entry in ((_load(spec).get("argument_specs") or {}).values()):
                names.update(((entry or {}).get("options") or {}).keys())
        variables = os.path.join(roles, role, "vars", "main.yml")
        if os.path.isfile(variables):
            for key, value in _load(variables).items():
                if key.startswith("__gpuhost_") and key.endswith("_renamed") and isinstance(
                        value, dict):
                    names.update(value.keys())
    if not names:
        raise AnsibleFilterError("unknown_variables: no role argument specs under %s" % roles)
    _KNOWN[roles] = frozenset(names)
    return _KNOWN[roles]


def unknown_variables(names, prefix="gpuhost_", roles=ROLES):
    """``[{name, nearest}]``, sorted by name, of each of ``names`` that starts with
    ``prefix`` and that the collection does not know; ``nearest`` is the closest known name
    (difflib, ratio 0.6 or more) or None."""
    if isinstance(names, str) or not hasattr(names, "__iter__"):
        raise AnsibleFilterError("unknown_variables: a list of variable names is needed, not %r"
                                 % (names,))
    known = known_names(roles)
    out = []
    for name in sorted(set(n for n in names if isinstance(n, str))):
        if not name.startswith(prefix) or name in known:
            continue
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
        out.append({"name": name, "nearest": close[0] if close else None})
    return out


class FilterModule(object):
    def filters(self):
        return {"unknown_variables": unknown_variables}
