# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the summary and the HTML page show of the documents, in the same order and
grouping: hosts worst first, findings new first, identical findings as one row."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit.audit import (
    SEVERITIES,
    SEVERITY_RANK,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import text
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.ceiling import ceiling


STATUS_ORDER = SEVERITIES + ("ok", "n/a")


def shown_order(findings):
    """A host's findings as the reports list them: new ones first, acknowledged ones last,
    each part in the audit's ranking."""
    def rank(item):
        if item.get("acknowledged"):
            return 2
        return 0 if item.get("new") else 1
    return sorted(findings or [], key=rank)


def marks(finding):
    """The words the reports add to a finding's id: new, acknowledged."""
    out = []
    if finding.get("new"):
        out.append("new")
    if finding.get("acknowledged"):
        out.append("acknowledged")
    return out


def counts(findings):
    out = dict((name, 0) for name in SEVERITIES)
    for item in findings or []:
        out[item["severity"]] = out.get(item["severity"], 0) + 1
    return out


def worst(findings):
    if not findings:
        return "ok"
    return min(findings, key=lambda f: SEVERITY_RANK.get(f["severity"], 99))["severity"]


def group_findings(findings):
    """Findings of one host as report rows: findings with the same id, severity, current
    and expected value (and the same remedy up to their subject) become one row listing
    their subjects, in the order of the first of each. Each row is ``{finding, subjects,
    details, remedy}``: ``details`` pairs each subject with its own detail text, ``remedy``
    has ``<subject>`` in place of the subject when the row holds several."""
    rows = []
    index = {}
    for item in findings or []:
        subject = "" if item.get("subject") is None else str(item["subject"])
        remedy = "" if item.get("remedy") is None else str(item["remedy"])
        template = remedy.replace(subject, "<subject>") if subject else remedy
        key = (item.get("id"), item.get("severity"), str(item.get("current")),
               str(item.get("expected")), template, bool(item.get("reboot_required")),
               item.get("change"), bool(item.get("new")), bool(item.get("acknowledged")))
        if key not in index:
            index[key] = len(rows)
            rows.append({"finding": item, "subjects": [], "details": [],
                         "template": template})
        row = rows[index[key]]
        row["subjects"].append(subject)
        row["details"].append((subject, item.get("detail")))
    for row in rows:
        # several subjects: one command that covers them all (engines.audit.text.group_remedy),
        # never
        # the template's <subject>
        row["remedy"] = (text.group_remedy(row["finding"].get("remedy") or "",
                                           row["finding"].get("subject"), row["subjects"])
                         if len(row["subjects"]) > 1 else row["finding"]["remedy"])
        del row["template"]
    return rows


def hosts_order(documents):
    """Hosts worst first, then by name (natural order: gpu2 before gpu10)."""
    def key(doc):
        rank = SEVERITY_RANK.get(worst(doc["findings"]), len(SEVERITIES))
        parts = [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", doc["host"])]
        return (rank, [(0, p) if isinstance(p, int) else (1, p) for p in parts])
    return sorted(documents, key=key)


def fleet_findings(docs, worst_hosts=5):
    """The fleet view's rows: one per finding id, ``{id, severity, hosts, count, worst:
    [(host, count)], more}``: its worst severity on any host, how many hosts have it and
    how many findings it is in all, its ``worst_hosts`` worst hosts (by that finding's
    worst severity on them, then how many they have, then name); rows worst first, then
    by the number of hosts."""
    found = {}
    for doc in docs:
        mine = {}
        for item in doc.get("findings") or []:
            rank = SEVERITY_RANK.get(item.get("severity"), len(SEVERITIES))
            best, number = mine.get(item.get("id"), (rank, 0))
            mine[item.get("id")] = (min(best, rank), number + 1)
        for ident, (rank, number) in mine.items():
            found.setdefault(ident, []).append((rank, -number, doc["host"]))
    rows = []
    for ident, hosts in found.items():
        hosts.sort()
        rank = hosts[0][0]
        rows.append({"id": ident, "severity": SEVERITIES[rank] if rank < len(SEVERITIES)
                     else "info", "rank": rank, "hosts": len(hosts),
                     "count": -sum(number for _rank, number, _host in hosts),
                     "worst": [(host, -number) for _rank, number, host in hosts[:worst_hosts]],
                     "more": max(0, len(hosts) - worst_hosts)})
    rows.sort(key=lambda row: (row["rank"], -row["hosts"], str(row["id"])))
    return rows


def ceiling_view(doc):
    """What the reports show of a host's compute and memory ceiling (the CUDA pass with
    ``cuda_ceiling``): ``{line, labels, rows}`` (subjects/ceiling/ceiling.py: the one-line
    answer and per GPU ``achieved / table / node best``), or None when no GPU has one."""
    facts = (doc or {}).get("facts") or {}
    line = ceiling.verdict(facts, doc.get("findings"))
    if line is None:
        return None
    rows = ceiling.report_rows(facts)
    return {"line": line, "labels": [label for label, _text in rows[0]["cells"]],
            "rows": rows}
