# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``summary.md``: the hosts x severity table, the hosts not audited, every finding, stale
hosts and the AER change since the previous report, as Markdown (template
``templates.SUMMARY_MD``; what each cell says is made here)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit.audit import SEVERITIES
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit.text import group_remedy
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report.documents import (
    is_audited,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report.render import (
    escape_md,
    render,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report.views import (
    ceiling_view,
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
                   "reboot": f.get("reboot_required"),
                   # one remedy for every subject of the row that can be pasted as it is
                   "remedy": group_remedy(f.get("remedy") or "", f.get("subject"),
                                          row["subjects"])}


def _aer_rows(docs):
    for doc in docs:
        change = doc.get("aer_change")
        if not change:
            continue
        for address, text in sorted(change["devices"].items()) or [("-", "no device")]:
            yield (doc["host"], change.get("since"), address, text)


def _ceiling_hosts(docs):
    """``[{host, line, labels, rows}]`` of the hosts whose CUDA pass measured a ceiling."""
    out = []
    for doc in docs:
        view = ceiling_view(doc)
        if view:
            out.append(dict(view, host=doc["host"]))
    return out


def _one_line(text):
    return " ".join(str(text or "").split())


def not_audited_md(documents):
    """The section of the hosts a run could not audit (status, last good audit, Ansible's
    message), or "" when every host was audited."""
    docs = hosts_order(d for d in documents if not is_audited(d))
    if not docs:
        return ""
    lines = ["## Hosts not audited", "",
             "%d host(s) of the inventory have no audit in this report: their findings are "
             "unknown, not absent." % len(docs), "",
             "| Host | Status | Last good audit | Error |", "|---|---|---|---|"]
    for doc in docs:
        lines.append("| %s | %s | %s | %s |" % (
            escape_md(doc["host"]), escape_md(doc["status"]),
            escape_md(doc.get("last_seen") or "never"), escape_md(_one_line(doc.get("error")))))
    return "\n".join(lines) + "\n\n"


def render_markdown(documents, generated_at=None, stale=None):
    """One table of hosts x severity counts, the hosts not audited (:func:`not_audited_md`),
    then every finding (hosts worst first; identical findings on several subjects of a host
    are one row listing the subjects). ``stale`` (report_merge): ``[{host, collected_at, age,
    folder}]`` of the hosts whose newest result is old, listed in a section of their own."""
    documents = list(documents)
    docs = hosts_order(d for d in documents if is_audited(d))
    hosts = []
    for doc in docs:
        c = counts(doc["findings"])
        hosts.append({"host": doc["host"], "worst": worst(doc["findings"]),
                      "counts": [c[s] for s in SEVERITIES]})
    compared = ["%s %d (of %d, previous report %s)" % (
        escape_md(d["host"]), sum(1 for f in d["findings"] if f.get("new")),
        len(d["findings"]), escape_md(d["compared_with"]))
        for d in docs if d.get("compared_with") is not None]
    text = render("summary.md", docs=docs, generated_at=generated_at,
                  total=sum(len(d["findings"]) for d in docs), severities=SEVERITIES,
                  hosts=hosts, compared=compared, findings=list(_finding_rows(docs)),
                  stale=stale or [], aer=list(_aer_rows(docs)),
                  ceiling=_ceiling_hosts(docs))
    missing = not_audited_md(documents)
    if not missing:
        return text
    # right after the hosts table, before the findings: a dead host is read first
    head, mark, tail = text.partition("\n## Findings\n")
    if not mark:
        return text + "\n" + missing
    return head + "\n" + missing.rstrip("\n") + "\n" + mark + tail
