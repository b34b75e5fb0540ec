# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``summary.md``: the hosts x severity table, every finding, stale hosts and the AER
change since the previous report, as Markdown (template ``templates.SUMMARY_MD``; what each
cell says is made here)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.checks.run import SEVERITIES
from ansible_collections.gpuhost.tuning.plugins.module_utils.output.render import (
    escape_md,
    render,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.output.views import (
    counts,
    group_findings,
    hosts_order,
    marks,
    shown_order,
    worst,
)


def _md_subjects(subjects):
    if len(subjects) == 1:
        return escape_md(subjects[0])
    return "%d: %s" % (len(subjects), escape_md(", ".join(subjects)))


def _current_md(finding):
    if finding.get("change") is None:
        return escape_md(finding["current"])
    return "%s (since the previous report: %s)" % (escape_md(finding["current"]),
                                                   escape_md(finding["change"]))


def _finding_rows(docs):
    for doc in docs:
        for row in group_findings(shown_order(doc["findings"])):
            f = row["finding"]
            yield {"host": doc["host"], "severity": f["severity"], "id": f["id"],
                   "marks": marks(f), "subjects": _md_subjects(row["subjects"]),
                   "current": _current_md(f), "expected": f["expected"],
                   "reboot": f.get("reboot_required"), "remedy": row["remedy"]}


def _aer_rows(docs):
    for doc in docs:
        change = doc.get("aer_change")
        if not change:
            continue
        for address, text in sorted(change["devices"].items()) or [("-", "no device")]:
            yield (doc["host"], change.get("since"), address, text)


def render_markdown(documents, generated_at=None, stale=None):
    """One table of hosts x severity counts, then every finding (hosts worst first;
    identical findings on several subjects of a host are one row listing the subjects).
    ``stale`` (report_merge): ``[{host, collected_at, age, folder}]`` of the hosts whose
    newest result is old, listed in a section of their own."""
    docs = hosts_order(documents)
    hosts = []
    for doc in docs:
        c = counts(doc["findings"])
        hosts.append({"host": doc["host"], "worst": worst(doc["findings"]),
                      "counts": [c[s] for s in SEVERITIES]})
    compared = ["%s %d (of %d, previous report %s)" % (
        escape_md(d["host"]), sum(1 for f in d["findings"] if f.get("new")),
        len(d["findings"]), escape_md(d["compared_with"]))
        for d in docs if d.get("compared_with") is not None]
    return render("summary.md", docs=docs, generated_at=generated_at,
                  total=sum(len(d["findings"]) for d in docs), severities=SEVERITIES,
                  hosts=hosts, compared=compared, findings=list(_finding_rows(docs)),
                  stale=stale or [], aer=list(_aer_rows(docs)))
