# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Running the fleet checks of one report: each once, in order, over the documents; then
each document's findings ranked once (the host audit's ranking, ``audit.sort_findings``).
The report builds the documents, calls :func:`judge` once and renders what it returns."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.fleet import fleet_registry
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit.audit import (
    SEVERITY_RANK,
    sort_findings,
)


def _checked(item, host, findings):
    for finding in findings:
        if finding.get("id") != item.id or finding.get("severity") not in item.severities:
            raise ValueError("fleet check %s gave %s/%s for %s, not its id and one of its "
                             "severities (%s)" % (item.id, finding.get("id"),
                                                  finding.get("severity"), host,
                                                  ", ".join(item.severities)))
    return findings


def judge(documents, context, whole_fleet=True):
    """Run every fleet check over ``documents`` (report documents, changed in place) with
    ``context`` (``platform.fleet_findings.Context``); ``whole_fleet=False`` (a slice) runs only
    those
    that need no other host. Returns the documents."""
    added = dict((doc["host"], []) for doc in documents)
    for item in fleet_registry.fleet_checks():
        if item.needs_fleet and not whole_fleet:
            continue
        found, cells = item.rule(documents, context)
        for doc in documents:
            mine = _checked(item, doc["host"], found.get(doc["host"]) or [])
            added[doc["host"]].extend(mine)
            cell = cells.get(doc["host"])
            if cell is None:
                continue
            if "status" not in cell:
                worst = min(mine, key=lambda f: SEVERITY_RANK[f["severity"]])["severity"]
                cell = dict(cell, status=worst, count=len(mine))
                cell = dict((k, cell[k]) for k in ("label", "status", "count", "note"))
            doc.setdefault("checks", {})[item.id] = cell
    for doc in documents:
        if added[doc["host"]]:
            doc["findings"] = sort_findings(list(doc.get("findings") or []) +
                                            added[doc["host"]])
    return documents


def host_audit_of(doc):
    """The host_audit result a report document was made from: its facts, findings and
    columns with what every fleet check added taken off, so the merge judges the union of
    the folders as one run over those hosts would."""
    findings, checks = doc["findings"], doc["checks"]
    for item in fleet_registry.fleet_checks():
        findings, checks = item.forget(dict(doc, findings=findings, checks=checks))
    audit = dict(doc["facts"])
    audit.update(findings=findings, checks=checks, collected_at=doc.get("collected_at"),
                 duration_s=doc.get("duration_s"), root=doc.get("root"))
    return audit
