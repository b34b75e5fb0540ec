# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet check registry: checks over the per-host report documents of one report.

A host check (``checks/``) sees one host's facts; a *fleet check* sees every document of a
report (the hosts of the run, or the union of merged folders) and what the previous report
of each host said. Each file of this package declares one::

    FLEET_DRIFT = fleet_check(
        "fleet_drift", rule=judge, severities=("medium", "high"), order=123,
        column=("Fleet drift", 125), needs_fleet=True)

- ``id``: its finding id (or, for a check that adds no finding, its name).
- ``severities``: what its findings can be (the first its usual one; none: it adds no
  finding, only annotates documents).
- ``order``: its findings' rank among those of one severity, in the same order space as
  the host checks' (``platform.findings.check``); the host check registry takes it from here.
- ``column``: ``(label, position)`` of its own matrix column, which ``host_audit`` shows as
  n/a (one host cannot see the others) and the report fills; or None, or the key of the host
  column whose findings it annotates (``annotates``).
- ``rule(documents, context)``: ``{host: [finding]}`` it adds and ``{host: cell}`` for its
  column (None: leave the host's cell as it is); it may annotate the documents it is given.
- ``needs_fleet``: a slice of a sliced job (``fleet_files: false``) sees part of the fleet
  and skips it; a check that compares a host with its own past runs there too.
- ``forget(document)``: takes off what the rule added (report_merge judges the union
  afresh); derived for its own finding id and column, given for annotations.

Running them (:mod:`.run`) is once per report, in ``order``, then every document's findings
ranked once. Nothing here imports the host audit: the registry is declarations only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

HOST_LEVEL_NOTE = "compared across the hosts of the run by the report"

_FLEET = {}


class FleetCheck(object):
    """One fleet check (see the module's docstring for the fields)."""

    def __init__(self, fid, rule, order, severities=(), column=None, annotates=None,
                 needs_fleet=True, forget=None, doc=None):
        self.id = fid
        self.rule = rule
        self.order = order
        self.severities = tuple(severities)
        self.column = column
        self.annotates = annotates
        self.needs_fleet = needs_fleet
        self.forget_extra = forget
        self.doc = doc or (rule.__doc__ or "").strip()

    @property
    def label(self):
        return self.column[0] if self.column else None

    def host_cell(self, label=None):
        """The cell ``host_audit`` shows for this check's own column."""
        return {"label": label or self.label, "status": "n/a", "count": 0,
                "note": HOST_LEVEL_NOTE}

    def host_level(self, facts, wanted):
        """Why ``host_audit`` leaves this check's column n/a
        (``platform.findings.report_level``)."""
        del facts, wanted
        return HOST_LEVEL_NOTE

    def host_findings(self, facts, wanted):
        """What one host's audit finds for this check: nothing (the report finds it)."""
        del facts, wanted
        return []

    def forget(self, document):
        """``document``'s findings and checks without what this check added (new lists and
        dicts: the document itself is not changed)."""
        findings = [f for f in document.get("findings") or [] if f.get("id") != self.id]
        checks = dict(document.get("checks") or {})
        if self.column and self.id in checks:
            checks[self.id] = self.host_cell((checks[self.id] or {}).get("label"))
        if self.forget_extra is not None:
            findings = self.forget_extra(findings)
        return findings, checks


def fleet_check(fid, rule, order, severities=(), column=None, annotates=None,
                needs_fleet=True, forget=None):
    """Declare (register) a fleet check; returns it."""
    if fid in _FLEET:
        raise ValueError("fleet check %s declared twice" % fid)
    for other in _FLEET.values():
        if other.order == order:
            raise ValueError("fleet checks %s and %s share order %s" % (other.id, fid, order))
    if column is not None and not severities:
        raise ValueError("fleet check %s: a column of its own needs the severities of its "
                         "findings" % fid)
    item = FleetCheck(fid, rule, order, severities, column, annotates, needs_fleet, forget)
    _FLEET[fid] = item
    return item


def fleet_checks():
    """Registered fleet checks in the order they run."""
    return sorted(_FLEET.values(), key=lambda c: c.order)


class Context(object):
    """What a rule gets besides the documents: each host's previous report document
    (``previous``), ``warnings`` (a list to add lines to, or None) and ``path_of(host)``
    (the file a host's previous report was read from, for those lines)."""

    def __init__(self, previous=None, warnings=None, path_of=None):
        self.previous = previous or {}
        self.warnings = warnings
        self.path_of = path_of or (lambda host: "%s.json" % host)

    def warn(self, host, why):
        if self.warnings is not None:
            self.warnings.append("previous report %s %s: ignored for the AER comparison "
                                 "(this run's report replaces it)" % (self.path_of(host), why))
