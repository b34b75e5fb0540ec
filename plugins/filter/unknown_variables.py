# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over the roles' argument specs, read from the collection's own files: the gpuhost_*
variables no part of the collection reads, each with the nearest name it knows
(``unknown_variables``, role common's preflight), and every play host's values checked
against one role's spec in one controller step (``role_argument_errors``, the playbooks).

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
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

try:
    import yaml
except ImportError:  # pragma: no cover - ansible-core requires PyYAML
    yaml = None

ROLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "roles")
SPEC_LIMIT = 4 << 20  # one role's spec or vars file; the largest is about 60 KiB

_KNOWN = {}
_SPECS = {}


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


def role_spec(role, entry_point="main", roles=ROLES):
    """The options of ``role``'s entry point ``entry_point`` (cached)."""
    key = (roles, role, entry_point)
    if key not in _SPECS:
        path = os.path.join(roles, str(role), "meta", "argument_specs.yml")
        if os.sep in str(role) or not os.path.isfile(path):
            raise AnsibleFilterError("role_argument_errors: %r is not a role of this collection "
                                     "with an argument spec" % (role,))
        entry = (_load(path).get("argument_specs") or {}).get(entry_point)
        if not isinstance(entry, dict):
            raise AnsibleFilterError("role_argument_errors: role %s has no entry point %r"
                                     % (role, entry_point))
        _SPECS[key] = entry.get("options") or {}
    return _SPECS[key]


def role_argument_errors(hosts, role, hostvars, entry_point="main", roles=ROLES):
    """``["<host>: <error>", ...]``: each host's values of ``role``'s variables (as
    ``hostvars`` gives them: inventory, extra vars, facts) checked against the role's argument
    spec by ansible-core's own validator, the check ansible-core makes as a task per host."""
    if isinstance(hosts, str) or not hasattr(hosts, "__iter__"):
        raise AnsibleFilterError("role_argument_errors: a list of host names is needed, not %r"
                                 % (hosts,))
    spec = role_spec(role, entry_point, roles)
    out = []
    for host in hosts:
        values, errors = {}, []
        try:
            host_vars = hostvars[host]
        except KeyError:
            out.append("%s: not in the inventory" % host)
            continue
        for name in spec:
            if name not in host_vars:
                continue
            try:
                values[name] = host_vars[name]
            except Exception as exc:  # an undefined name in the value's template
                errors.append("%s: %s" % (name, exc))
        result = ArgumentSpecValidator(spec).validate(values)
        errors.extend(result.error_messages)
        out.extend("%s: %s" % (host, error) for error in errors)
    return out


class FilterModule(object):
    def filters(self):
        return {"unknown_variables": unknown_variables,
                "role_argument_errors": role_argument_errors}
