# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``summary.md``: the hosts x severity table, every finding, stale hosts and the
AER change since the previous report, as Markdown."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.audit import SEVERITIES
from ansible_collections.gpuhost.tuning.plugins.module_utils.output.views import (
    counts,
    group_findings,
    hosts_order,
    marks,
    shown_order,
    worst,
)


def _md(text):
    text = "" if text is None else str(text)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _md_subjects(subjects):
    if len(subjects) == 1:
        return _md(subjects[0])
    return "%d: %s" % (len(subjects), _md(", ".join(subjects)))


def _current_md(finding):
    if finding.get("change") is None:
        return _md(finding["current"])
    return "%s (since the previous report: %s)" % (_md(finding["current"]),
                                                   _md(finding["change"]))


def render_markdown(documents, generated_at=None, stale=None):
    """One table of hosts x severity counts, then every finding (hosts worst first;
    identical findings on several subjects of a host are one row listing the subjects).
    ``stale`` (report_merge): ``[{host, collected_at, age, folder}]`` of the hosts whose
    newest result is old, listed in a section of their own."""
    docs = hosts_order(documents)
    total = sum(len(d["findings"]) for d in docs)
    lines = ["# GPU host audit", ""]
    lines.append("%d host(s), %d finding(s)%s. Severity: critical > high > medium > low > "
                 "info." % (len(docs), total, ", generated %s" % generated_at
                            if generated_at else ""))
    lines += ["", "| Host | worst | " + " | ".join(SEVERITIES) + " |",
              "|---|---|" + "---:|" * len(SEVERITIES)]
    for doc in docs:
        c = counts(doc["findings"])
        lines.append("| %s | %s | %s |" % (_md(doc["host"]), worst(doc["findings"]),
                                           " | ".join(str(c[s]) for s in SEVERITIES)))
    lines += ["", "## Findings", ""]
    compared = [d for d in docs if d.get("compared_with") is not None]
    if compared:
        lines += ["New since the previous report (new ones listed first): %s." % ", ".join(
            "%s %d (of %d, previous report %s)" % (
                _md(d["host"]), sum(1 for f in d["findings"] if f.get("new")),
                len(d["findings"]), _md(d["compared_with"])) for d in compared), ""]
    if not total:
        lines.append("No findings.")
    else:
        lines += ["| Host | Severity | Id | Subject | Current | Expected | Reboot | Remedy |",
                  "|---|---|---|---|---|---|---|---|"]
        for doc in docs:
            for row in group_findings(shown_order(doc["findings"])):
                f = row["finding"]
                words = marks(f)
                lines.append("| %s | %s | `%s`%s | %s | %s | %s | %s | %s |" % (
                    _md(doc["host"]), f["severity"], f["id"],
                    " **%s**" % ", ".join(words) if words else "",
                    _md_subjects(row["subjects"]),
                    _current_md(f), _md(f["expected"]),
                    "yes" if f.get("reboot_required") else "no", _md(row["remedy"])))
    if stale:
        lines += ["", "## Stale hosts (their newest result is older than the merge allows)", "",
                  "| Host | Audited at | Age | From |", "|---|---|---|---|"]
        for row in stale:
            lines.append("| %s |" % " | ".join(_md(c) for c in (
                row["host"], row["collected_at"], row["age"], row["folder"])))
    compared = [d for d in docs if d.get("aer_change")]
    if compared:
        lines += ["", "## PCIe errors since the previous report", "",
                  "| Host | Previous report | Device | AER change |", "|---|---|---|---|"]
        for doc in compared:
            change = doc["aer_change"]
            for address, text in sorted(change["devices"].items()) or [("-", "no device")]:
                cells = (doc["host"], change.get("since"), address, text)
                lines.append("| %s |" % " | ".join(_md(c) for c in cells))
    return "\n".join(lines) + "\n"
