# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The check registry: what a finding is, in one place.

A *column* is one cell of the reports' hosts x checks matrix (``dkms``, ``pcie_mrrs``, ...);
each file of this package declares one column and the checks whose findings it shows. A
*check* is one finding id with its severity, its rank and a function from the facts and the
wanted values to what it found::

    COLUMN = column("cpufreq", "cpufreq", position=70,
                    applies=lambda facts, wanted: None if ... else "no cpufreq driver (VM?)")

    @check("cpufreq_driver", COLUMN, severity="medium", order=100)
    def cpufreq_driver(facts, wanted):
        yield found("cpufreq", "acpi-cpufreq", "amd-pstate-epp", "add amd_pstate=active ...")

Everything else is derived from these declarations: the ranking of findings
(:func:`finding_order`), the report columns (:func:`column_table`), which columns do not
apply on a host and why (``n/a`` in the matrix), and the documented severities (a unit test
ties every id to ``host_audit``'s documentation and the README's findings table).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

SEVERITIES = ("critical", "high", "medium", "low", "info")
SEVERITY_RANK = dict((name, index) for index, name in enumerate(SEVERITIES))

PLAYBOOK_TUNE = "gpuhost.tuning.tune"
PLAYBOOK_REBOOT = "gpuhost.tuning.reboot_verify"

_COLUMNS = {}
_CHECKS = {}


class Column(object):
    """One report column. ``applies(facts, wanted)`` returns None when the column's checks
    apply on this host, else the reason they do not (shown as ``n/a`` with that reason; its
    checks are then not run). ``note(facts)`` returns a remark shown even when the column
    passes, or None."""

    def __init__(self, key, label, position, applies=None, note=None):
        self.key = key
        self.label = label
        self.position = position
        self.applies = applies
        self.note = note
        self.checks = []

    def not_applicable(self, facts, wanted):
        return self.applies(facts, wanted) if self.applies is not None else None

    def remark(self, facts):
        return self.note(facts) if self.note is not None else None


class Check(object):
    """One finding id. ``severity`` is a name from :data:`SEVERITIES`, or a function of the
    finding (the dict :func:`found` made) returning one; ``severities`` lists every severity
    the check can give (the documented ones; the first is its usual one). ``order`` ranks it
    among the findings of one severity (lower first; unique). ``applies`` narrows the
    column's own condition for this check alone (None or a reason, like the column's)."""

    def __init__(self, fid, column, severity, order, evaluate, severities=None, applies=None):
        self.id = fid
        self.column = column
        self.severity = severity
        self.severities = tuple(severities or (severity,))
        self.order = order
        self.evaluate = evaluate
        self.applies = applies

    def run(self, facts, wanted):
        """The findings of this check, each a complete finding dict (id and severity set)."""
        if self.applies is not None and self.applies(facts, wanted) is not None:
            return []
        out = []
        for item in self.evaluate(facts, wanted) or ():
            severity = item.pop("severity", None)
            if severity is None:
                severity = self.severity(item) if callable(self.severity) else self.severity
            if severity not in self.severities:
                raise ValueError("check %s gave severity %r, not one it declares (%s)"
                                 % (self.id, severity, ", ".join(self.severities)))
            finding = {"id": self.id, "severity": severity}
            finding.update(item)
            out.append(finding)
        return out


def column(key, label, position, applies=None, note=None):
    """Declare (register) a report column; returns it for the checks of its file."""
    old = _COLUMNS.get(key)
    if old is not None:
        raise ValueError("report column %s declared twice" % key)
    for other in _COLUMNS.values():
        if other.position == position:
            raise ValueError("report columns %s and %s share position %s"
                             % (other.key, key, position))
    col = Column(key, label, position, applies, note)
    _COLUMNS[key] = col
    return col


def check(fid, column, severity, order, severities=None, applies=None):
    """Decorator: register ``function(facts, wanted) -> iterable of found(...)`` as check
    ``fid`` in ``column``."""
    if not callable(severity) and severity not in SEVERITIES:
        raise ValueError("check %s: unknown severity %r" % (fid, severity))
    if callable(severity) and not severities:
        raise ValueError("check %s: a severity function needs the severities it gives"
                         % fid)
    for name in severities or ():
        if name not in SEVERITIES:
            raise ValueError("check %s: unknown severity %r" % (fid, name))

    def register(function):
        if fid in _CHECKS:
            raise ValueError("finding id %s registered twice" % fid)
        for other in _CHECKS.values():
            if other.order == order:
                raise ValueError("checks %s and %s share order %s" % (other.id, fid, order))
        item = Check(fid, column, severity, order, function, severities, applies)
        _CHECKS[fid] = item
        column.checks.append(item)
        column.checks.sort(key=lambda c: c.order)
        return function

    return register


def found(subject, current, expected, remedy, reboot_required=False, detail=None,
          severity=None):
    """What a check found: the finding without its id (the registry adds it and the
    severity, unless one of the check's declared ``severities`` is given here)."""
    out = {}
    if severity is not None:
        out["severity"] = severity
    out.update({
        "subject": subject,
        "current": current,
        "expected": expected,
        "remedy": remedy,
        "reboot_required": bool(reboot_required),
    })
    if detail:
        out["detail"] = detail
    return out


def columns():
    """Registered columns in report order."""
    return sorted(_COLUMNS.values(), key=lambda c: c.position)


def checks():
    """Registered checks in ranking order (within one severity)."""
    return sorted(_CHECKS.values(), key=lambda c: c.order)


def get(fid):
    return _CHECKS[fid]


def finding_order():
    """Every finding id, in the order findings of one severity are ranked."""
    return tuple(c.id for c in checks())


def column_table():
    """``((column, label, finding ids), ...)`` in report order: the reports' matrix."""
    return tuple((col.key, col.label, tuple(c.id for c in col.checks)) for col in columns())


def evaluate(facts, wanted):
    """Every finding of every check (unsorted), and ``{column: reason}`` of the columns that
    do not apply on this host (their checks are not run)."""
    out = []
    reasons = {}
    for col in columns():
        reason = col.not_applicable(facts, wanted)
        if reason is not None:
            reasons[col.key] = reason
            continue
        for item in col.checks:
            out.extend(item.run(facts, wanted))
    return out, reasons


def report_level(fleet_checks):
    """Register the column and finding id of every fleet check that has a column of its
    own (``platform.fleet_findings.fleet_check``): one host's audit cannot see the others, so the
    column
    is n/a there with the fleet check's note, and its finding id ranks by the fleet check's
    order. Declared once, in the fleet check's file."""
    for item in fleet_checks:
        if not item.column:
            continue
        label, position = item.column
        col = column(item.id, label, position, applies=item.host_level)
        check(item.id, col, severity=item.severities[0], order=item.order,
              severities=item.severities)(item.host_findings)


def limit(host):
    """`` -l <host>`` for a remedy's ansible-playbook line, or nothing."""
    return " -l %s" % host if host else ""
