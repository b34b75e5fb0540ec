# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Audit reports: one JSON document per host, a Markdown summary and one self-contained
HTML page (inline CSS, no script, no network) with a hosts x checks matrix.

Plain functions from audit results to text; writing files is the caller's business.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import html
import json
import os
import re
import stat
import time
from collections.abc import Mapping

from ansible_collections.gpuhost.tuning.plugins.module_utils import gpuhealth
from ansible_collections.gpuhost.tuning.plugins.module_utils.fleet import base as fleet_base
from ansible_collections.gpuhost.tuning.plugins.module_utils.fleet import run as fleet_run
from ansible_collections.gpuhost.tuning.plugins.module_utils.hostfs import atomic_write
from ansible_collections.gpuhost.tuning.plugins.module_utils import metrics
from ansible_collections.gpuhost.tuning.plugins.module_utils.audit import (
    CHECKS,
    SCHEMA,
    SEVERITIES,
    SEVERITY_RANK,
)

FACT_KEYS = ("kernel", "cpu", "sysctl", "gpus", "nvidia", "char_devices", "char_majors", "dkms",
             "lxc", "errors", "pcie_aer") + gpuhealth.FACT_KEYS
STATUS_ORDER = SEVERITIES + ("ok", "n/a")


def host_document(host, audit):
    """The per-host JSON document: ``{schema, host, collected_at, facts, findings, checks}``."""
    audit = audit or {}
    return {
        "schema": SCHEMA,
        "host": host,
        "collected_at": audit.get("collected_at"),
        "root": audit.get("root"),
        "duration_s": audit.get("duration_s"),
        "facts": dict((key, audit.get(key)) for key in FACT_KEYS),
        "findings": audit.get("findings") or [],
        # a copy: the report's fleet checks never change the audit result it was given
        "checks": dict(audit.get("checks") or {}),
    }


PREVIOUS_MAX = 64 << 20  # bytes of a previous <host>.json read at most


def _previous_path(dest, host):
    return os.path.join(dest, "%s.json" % safe_name(host))


def _fstat_or_close(fd):
    try:
        return os.fstat(fd)
    except OSError:
        os.close(fd)
        raise


def _read_previous(path):
    """The text of a previous report, or None when there is none; ValueError naming the
    problem for one that is not a regular file or larger than ``PREVIOUS_MAX`` (opened
    without blocking: a FIFO there never hangs the report)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except (IOError, OSError) as exc:
        if not os.path.lexists(path):
            return None
        raise ValueError("cannot be read (%s)" % exc)
    if not stat.S_ISREG(_fstat_or_close(fd).st_mode):
        os.close(fd)
        raise ValueError("is not a regular file")
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(PREVIOUS_MAX + 1)
    if len(data) > PREVIOUS_MAX:
        raise ValueError("is larger than %d bytes" % PREVIOUS_MAX)
    return data.decode("utf-8")


def _ignored(warnings, path, why):
    if warnings is not None:
        warnings.append("previous report %s %s: ignored for the AER comparison (this run's "
                        "report replaces it)" % (path, why))


def previous_documents(dest, hosts, warnings=None):
    """``{host: document}`` of the ``<host>.json`` reports already in ``dest`` (the
    previous run's). A missing file or another host's report is left out; one that cannot
    be read or parsed, or is no report document, is left out with a line in ``warnings``
    naming the file: it never fails this run's reports."""
    out = {}
    for host in hosts:
        path = _previous_path(dest, host)
        try:
            text = _read_previous(path)
            if text is None:
                continue
            doc = json.loads(text)
        except ValueError as exc:
            _ignored(warnings, path, "is not a readable JSON report (%s)" % exc)
            continue
        if not isinstance(doc, dict) or not isinstance(doc.get("facts"), dict):
            _ignored(warnings, path, "is not a report document (no facts mapping)")
            continue
        if doc.get("host") == host:
            out[host] = doc
    return out


def _finding_key(finding):
    subject = finding.get("subject")
    return (finding.get("id"), "" if subject is None else str(subject))


def apply_seen(docs, previous, warnings=None, dest=None):
    """Mark every finding of each document that has a previous report ``new`` (true: its id
    and subject are not among that report's findings; false: seen before) and give the
    document ``compared_with`` (the previous report's ``collected_at``). The same audit
    written again (same ``collected_at``) keeps the marks that report carries, so writing
    the reports again changes nothing. Without a previous report nothing is marked; a
    malformed one marks nothing, with a line in ``warnings``, and never fails the report."""
    for doc in docs:
        prev = (previous or {}).get(doc["host"])
        if not prev:
            continue
        items = prev.get("findings")
        if not isinstance(items, list) or not all(isinstance(f, dict) for f in items):
            path = _previous_path(dest or ".", doc["host"])
            # one line per file: the AER comparison may have named it already
            if warnings is not None and not any(path in line for line in warnings):
                warnings.append("previous report %s: findings is not a list of findings: "
                                "every finding of this run is left unmarked (not new or "
                                "seen before)" % path)
            continue
        before = dict((_finding_key(f), f) for f in items)
        same = prev.get("collected_at") == doc.get("collected_at")
        if same and prev.get("compared_with") is None:
            continue        # that report compared nothing either
        marked = []
        for item in doc["findings"]:
            old = before.get(_finding_key(item))
            if same:
                new = True if old is None else bool(old.get("new"))
            else:
                new = old is None
            marked.append(dict(item, new=new))
        doc["findings"] = marked
        doc["compared_with"] = prev.get("compared_with") if same else prev.get("collected_at")
    return docs


def shown_order(findings):
    """A host's findings as the reports list them: new ones first, acknowledged ones last,
    each part in the audit's ranking."""
    def rank(item):
        if item.get("acknowledged"):
            return 2
        return 0 if item.get("new") else 1
    return sorted(findings or [], key=rank)


def _marks(finding):
    """The words the reports add to a finding's id: new, acknowledged."""
    out = []
    if finding.get("new"):
        out.append("new")
    if finding.get("acknowledged"):
        out.append("acknowledged")
    return out


def _current_md(finding):
    if finding.get("change") is None:
        return _md(finding["current"])
    return "%s (since the previous report: %s)" % (_md(finding["current"]),
                                                   _md(finding["change"]))


def render_json(document):
    return json.dumps(document, indent=2, sort_keys=False) + "\n"


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
        row["remedy"] = row["template"] if len(row["subjects"]) > 1 else row["finding"]["remedy"]
        del row["template"]
    return rows


def _order(documents):
    """Hosts worst first, then by name (natural order: gpu2 before gpu10)."""
    def key(doc):
        rank = SEVERITY_RANK.get(worst(doc["findings"]), len(SEVERITIES))
        parts = [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", doc["host"])]
        return (rank, [(0, p) if isinstance(p, int) else (1, p) for p in parts])
    return sorted(documents, key=key)


# ----------------------------------------------------------------------------- Markdown


def _md(text):
    text = "" if text is None else str(text)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _md_subjects(subjects):
    if len(subjects) == 1:
        return _md(subjects[0])
    return "%d: %s" % (len(subjects), _md(", ".join(subjects)))


def render_markdown(documents, generated_at=None, stale=None):
    """One table of hosts x severity counts, then every finding (hosts worst first;
    identical findings on several subjects of a host are one row listing the subjects).
    ``stale`` (report_merge): ``[{host, collected_at, age, folder}]`` of the hosts whose
    newest result is old, listed in a section of their own."""
    docs = _order(documents)
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
                marks = _marks(f)
                lines.append("| %s | %s | `%s`%s | %s | %s | %s | %s | %s |" % (
                    _md(doc["host"]), f["severity"], f["id"],
                    " **%s**" % ", ".join(marks) if marks else "",
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


# ----------------------------------------------------------------------------- HTML

CSS = """
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;
  color:#1d2330;background:#f4f6f9;margin:0;padding:20px 24px}
main{max-width:1340px;margin:0 auto}
h1{font-size:22px;margin:0 0 4px}
h2{font-size:18px;margin:28px 0 8px;padding-top:8px;border-top:2px solid #d5dbe5}
h3{font-size:14px;margin:16px 0 6px;color:#3b4456;text-transform:uppercase;
  letter-spacing:.04em}
p.meta{color:#5a6478;margin:0 0 14px}
table{border-collapse:collapse;width:100%;background:#fff;margin:0 0 8px;
  box-shadow:0 1px 2px rgba(0,0,0,.06)}
th,td{border:1px solid #dfe4ec;padding:5px 7px;text-align:left;vertical-align:top;
  overflow-wrap:anywhere}
th{background:#eef1f6;font-weight:600;font-size:12px;color:#3b4456}
table.matrix{table-layout:fixed}
table.matrix th{text-align:center;font-size:11.5px;line-height:1.2}
table.matrix th.host,table.matrix td.host{text-align:left;width:190px}
table.matrix td{text-align:center;font-weight:600;font-size:12px;padding:6px 3px}
table.findings{table-layout:fixed}
table.findings col.sev{width:78px} table.findings col.id{width:182px}
table.findings col.subj{width:178px} table.findings col.cur{width:190px}
table.findings col.exp{width:180px} table.findings col.rb{width:64px}
table.findings td{padding:4px 7px}
table.gpus{table-layout:fixed;font-size:12.5px}
code,.mono{font-family:"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:12px}
td.remedy{font-family:"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:11.5px;
  color:#263044}
.s-critical{background:#6a1b9a;color:#fff}
.s-high{background:#d32f2f;color:#fff}
.s-medium{background:#f57c00;color:#fff}
.s-low{background:#fdd835;color:#332b00}
.s-info{background:#bbdefb;color:#0d3c61}
.s-ok{background:#c8e6c9;color:#1b5e20}
.s-na{background:#eceff1;color:#78818f;font-weight:400}
.s-new{background:#1a4fa0;color:#fff}
.badge{display:inline-block;padding:1px 7px;border-radius:9px;font-size:11.5px;
  font-weight:600;white-space:nowrap}
.bad{color:#c62828;font-weight:600}
.good{color:#2e7d32}
.legend span{margin-right:6px}
.facts{display:grid;grid-template-columns:repeat(auto-fit,minmax(300px,1fr));gap:4px 18px;
  background:#fff;border:1px solid #dfe4ec;padding:8px 12px;margin-bottom:8px}
.facts div{white-space:normal}
.facts b{color:#3b4456}
.note{color:#5a6478;font-size:12px}
details.subjects summary{cursor:pointer;font-weight:600;color:#1a4fa0}
details.subjects div{font-size:11.5px}
a{color:#1a4fa0;text-decoration:none} a:hover{text-decoration:underline}
footer{color:#7a8397;font-size:12px;margin:30px 0 10px}
"""


def _e(text):
    return html.escape("" if text is None else str(text), quote=True)


def _cls(status):
    return "s-na" if status == "n/a" else "s-%s" % status


def _anchor(host):
    return "host-" + re.sub(r"[^A-Za-z0-9_.-]", "-", host)


def _gts(value):
    if value is None:
        return "?"
    return ("%g" % value)


def _link_text(link):
    link = link or {}
    cur = "%s GT/s x%s" % (_gts(link.get("speed_gts")), link.get("width") or "?")
    top = "%s GT/s x%s" % (_gts(link.get("max_speed_gts")), link.get("max_width") or "?")
    degraded = ((link.get("speed_gts") or 0) < (link.get("max_speed_gts") or 0)
                or (link.get("width") or 0) < (link.get("max_width") or 0))
    if link.get("speed_gts") is None and link.get("max_speed_gts") is None:
        return "<span class=\"note\">no PCIe link</span>"
    return '<span class="%s">%s</span> <span class="note">of %s</span>' % (
        "bad" if degraded else "good", _e(cur), _e(top))


def _size(value, want=None):
    if value is None:
        return '<span class="note">?</span>'
    cls = "bad" if want and value < want else ""
    return '<span class="%s">%d</span>' % (cls, value)


def _matrix(docs):
    out = ['<table class="matrix"><thead><tr><th class="host">Host</th><th>Worst</th>']
    for _check, label, _ids in CHECKS:
        out.append("<th>%s</th>" % _e(label))
    out.append("</tr></thead><tbody>")
    for doc in docs:
        w = worst(doc["findings"])
        out.append('<tr><td class="host"><a href="#%s">%s</a></td>'
                   '<td class="%s">%s</td>' % (_anchor(doc["host"]), _e(doc["host"]), _cls(w),
                                               _e(w)))
        checks = doc.get("checks") or {}
        for check, label, _ids in CHECKS:
            info = checks.get(check) or {"status": "n/a", "count": 0, "note": "not audited"}
            status = info.get("status", "n/a")
            text = status
            if info.get("count"):
                text = "%s %d" % (status, info["count"])
            title = "%s: %s" % (label, status)
            if info.get("note"):
                title += " (%s)" % info["note"]
            out.append('<td class="%s" title="%s">%s</td>' % (
                _cls(status), _e(title), _e(text)))
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _facts_block(doc):
    facts = doc["facts"]
    kern = facts.get("kernel") or {}
    cpu = facts.get("cpu") or {}
    nv = facts.get("nvidia") or {}
    idle = (cpu.get("cpuidle") or {})
    freq = (cpu.get("cpufreq") or {})
    items = [
        ("Kernel", "%s running%s" % (kern.get("running") or "?",
                                     "; next boot %s" % kern["next_boot"]
                                     if kern.get("next_boot") and kern.get("next_boot")
                                     != kern.get("running") else "")),
        ("Boot", "%s%s" % (kern.get("boot_tool") or "unknown",
                           " (%s)" % kern["configured_cmdline_source"]
                           if kern.get("configured_cmdline_source") else "")),
        ("CPU", "%s, %s online" % (cpu.get("model_name") or "?", cpu.get("online") or "?")),
        ("Idle / freq", "cpuidle %s, cpufreq %s" % (idle.get("driver") or "absent",
                                                    freq.get("driver") or "absent")),
        ("NVIDIA", "driver %s, %d GPU(s)" % (
            nv.get("driver_version") or "not loaded", len(facts.get("gpus") or []))),
        ("DKMS", ", ".join(
            "%s/%s %s: %s" % (e["name"], e["version"], e.get("kernel") or "-", e["state"])
            for e in facts.get("dkms") or []) or "none"),
    ]
    if facts.get("lxc"):
        items.append(("LXC", ", ".join("%s%s" % (c["vmid"], " (GPU)" if c.get("gpu") else "")
                                       for c in facts["lxc"])))
    notes = [(c.get("label"), c.get("note")) for c in (doc.get("checks") or {}).values()
             if c.get("note")]
    for label, note in notes:
        items.append((label, note))
    return '<div class="facts">%s</div>' % "".join(
        "<div><b>%s:</b> %s</div>" % (_e(k), _e(v)) for k, v in items)


def _findings_table(findings):
    if not findings:
        return '<p class="good">No findings.</p>'
    out = ['<table class="findings"><colgroup><col class="sev"><col class="id"><col class="subj">'
           '<col class="cur"><col class="exp"><col class="rb"><col></colgroup><thead><tr>'
           '<th>Severity</th><th>Id</th><th>Subject</th><th>Current</th><th>Expected</th>'
           '<th>Reboot</th><th>Remedy</th></tr></thead><tbody>']
    for row in group_findings(shown_order(findings)):
        f = row["finding"]
        detail = ""
        if len(row["subjects"]) == 1:
            subject = _e(row["subjects"][0])
            if f.get("detail"):
                detail = '<div class="note">%s</div>' % _e(f["detail"])
        else:
            subject = ('<details class="subjects"><summary>%d subjects</summary>%s</details>'
                       % (len(row["subjects"]), "".join(
                           "<div>%s%s</div>" % (_e(name), ' <span class="note">%s</span>'
                                                % _e(text) if text else "")
                           for name, text in row["details"])))
        out.append(
            '<tr><td><span class="badge %s">%s</span></td><td class="mono">%s</td>'
            '<td class="mono">%s</td><td>%s</td><td>%s</td><td>%s</td><td class="remedy">%s%s'
            '</td></tr>' % (
                _cls(f["severity"]), _e(f["severity"]), _e(f["id"]) + "".join(
                    ' <span class="badge s-%s">%s</span>' % (
                        "new" if mark == "new" else "na", mark) for mark in _marks(f)),
                subject,
                _e(f["current"]) + ('<div class="note">since the previous report: %s</div>'
                                    % _e(f["change"]) if f.get("change") is not None else ""),
                _e(f["expected"]), "yes" if f.get("reboot_required") else "",
                _e(row["remedy"]), detail))
    out.append("</tbody></table>")
    return "".join(out)


def _gpu_table(gpus, want_mrrs):
    if not gpus:
        return '<p class="note">No NVIDIA GPU found.</p>'
    out = ['<table class="gpus"><colgroup><col style="width:112px"><col style="width:88px">'
           '<col style="width:100px"><col style="width:72px"><col style="width:58px">'
           '<col style="width:62px"><col style="width:78px"><col style="width:190px"><col>'
           '</colgroup><thead><tr>'
           '<th>Address</th><th>Device</th><th>Driver</th><th>Owner</th><th>NUMA</th><th>MRRS</th>'
           '<th>MPS / cap</th><th>Link</th><th>Upstream bridges (MRRS, link)</th></tr></thead>'
           '<tbody>']
    for gpu in gpus:
        ups = []
        for b in gpu.get("upstream") or []:
            ups.append('<span class="mono">%s</span> %s B, %s' % (
                _e(b["address"]), _size(b.get("max_read_request_size"), want_mrrs),
                _link_text(b.get("link"))))
        upstream = "<br>".join(ups) or '<span class="note">host bridge (no root port)</span>'
        mps = "%s / %s" % (gpu.get("max_payload_size") or "?",
                           gpu.get("max_payload_size_supported") or "?")
        out.append(
            '<tr><td class="mono">%s</td><td class="mono">%s:%s</td><td>%s</td><td>%s</td>'
            '<td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>' % (
                _e(gpu["address"]), _e(gpu.get("vendor")), _e(gpu.get("device")),
                _e(gpu.get("driver") or "none"), _e(gpu.get("owner") or "host"),
                _e(gpu.get("numa_node")),
                _size(gpu.get("max_read_request_size"), want_mrrs), _e(mps),
                _link_text(gpu.get("link")), upstream))
    out.append("</tbody></table>")
    return "".join(out)


def _aer_change_table(change):
    rows = sorted(change["devices"].items())
    since = change.get("since") or "time unknown"
    out = ["<h3>PCIe errors since the previous report (%s)</h3>" % _e(since)]
    if not rows:
        return out[0] + '<p class="note">No device to compare with.</p>'
    out.append('<table class="aer"><thead><tr><th>Device</th><th>AER change</th></tr>'
               '</thead><tbody>')
    for address, text in rows:
        out.append('<tr><td class="mono">%s</td><td class="%s">%s</td></tr>' % (
            _e(address), "" if text == "no change" else "bad", _e(text)))
    out.append("</tbody></table>")
    return "".join(out)


def render_html(documents, generated_at=None, want_mrrs=4096, title="GPU host audit",
                stale=None):
    """One self-contained page: totals, the hosts x checks matrix, then per host its facts,
    findings and GPU table (``stale`` as for :func:`render_markdown`)."""
    docs = _order(documents)
    totals = dict((s, 0) for s in SEVERITIES)
    for doc in docs:
        for key, value in counts(doc["findings"]).items():
            totals[key] += value
    parts = ['<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width,initial-scale=1">',
             "<title>%s</title><style>%s</style></head><body><main>" % (_e(title), CSS),
             "<h1>%s</h1>" % _e(title)]
    parts.append('<p class="meta">%d host(s)%s. Findings: %s</p>' % (
        len(docs), ", generated %s" % _e(generated_at) if generated_at else "",
        " ".join('<span class="badge %s">%s %d</span>' % (_cls(s), s, totals[s])
                 for s in SEVERITIES)))
    if stale:
        parts.append('<h3>Stale hosts (their newest result is older than the merge allows)'
                     '</h3><table class="stale"><thead><tr><th>Host</th><th>Audited at</th>'
                     '<th>Age</th><th>From</th></tr></thead><tbody>%s</tbody></table>' % "".join(
                         '<tr><td><a href="#%s">%s</a></td><td>%s</td><td class="bad">%s</td>'
                         '<td class="mono">%s</td></tr>' % (
                             _anchor(row["host"]), _e(row["host"]), _e(row["collected_at"]),
                             _e(row["age"]), _e(row["folder"])) for row in stale))
    parts.append("<h3>Hosts x checks (worst severity; hover a cell for details)</h3>")
    parts.append(_matrix(docs))
    parts.append('<p class="legend note">%s</p>' % " ".join(
        '<span class="badge %s">%s</span>' % (_cls(s), s) for s in STATUS_ORDER))
    for doc in docs:
        parts.append('<h2 id="%s">%s <span class="badge %s">%s</span></h2>' % (
            _anchor(doc["host"]), _e(doc["host"]), _cls(worst(doc["findings"])),
            _e(worst(doc["findings"]))))
        parts.append(_facts_block(doc))
        grouped = len(group_findings(doc["findings"]))
        fresh = sum(1 for f in doc["findings"] if f.get("new"))
        parts.append("<h3>Findings (%d%s%s)</h3>" % (
            len(doc["findings"]), " in %d rows" % grouped
            if grouped != len(doc["findings"]) else "",
            ", %d new since %s" % (fresh, _e(doc["compared_with"]))
            if doc.get("compared_with") is not None else ""))
        parts.append(_findings_table(doc["findings"]))
        if doc.get("aer_change"):
            parts.append(_aer_change_table(doc["aer_change"]))
        parts.append("<h3>GPUs</h3>")
        parts.append(_gpu_table(doc["facts"].get("gpus") or [], want_mrrs))
    parts.append("<footer>gpuhost.tuning audit report, schema %d. Read-only: nothing on the "
                 "hosts was changed.</footer></main></body></html>" % SCHEMA)
    return "\n".join(parts) + "\n"


# what a host's file name cannot hold: a folder separator, a backslash, NUL or any other
# control character (a line break in a file name)
_UNSAFE = re.compile(r"[/\\\x00-\x1f\x7f]")
_NAME_MAX = 200  # bytes; with the longest suffix (-reboot.json) under NAME_MAX (255)


def safe_name(host):
    """The base of a host's report file names. A name that is already safe (no ``/``,
    backslash or control character, no leading dot, not too long) is itself; any other
    gets its unsafe characters as ``_`` and a short hash of the whole name, so two hosts
    never share a file (``a/b`` and ``a_b`` would)."""
    host = str(host)
    name = _UNSAFE.sub("_", host).lstrip(".")
    if name == host and name and len(name.encode("utf-8", "backslashreplace")) <= _NAME_MAX:
        return name
    digest = hashlib.sha256(host.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    while len(name.encode("utf-8", "backslashreplace")) > _NAME_MAX:
        name = name[:-1]
    return "%s-%s" % (name or "_", digest)


def check_file_names(hosts, what="report"):
    """Raise ReportError when two of ``hosts`` would write one file (a hash collision, or
    a host named like another's hashed name), naming both: never one report silently
    over another."""
    seen = {}
    for host in hosts:
        name = safe_name(host)
        if name in seen and seen[name] != host:
            raise ReportError("hosts %r and %r would both write the %s %s: rename one of "
                              "them in the inventory; nothing was written"
                              % (seen[name], host, what, name))
        seen[name] = host


FLEET_FILES = ("summary.md", "index.html", "gpuhost.prom")


def report_files(audits, generated_at=None, want_mrrs=4096, previous=None, warnings=None,
                 dest=None, fleet=True, stale=None, docs=None):
    """``{filename: text}`` for ``audits`` (host -> audit result): one JSON per host,
    ``summary.md``, ``index.html`` and ``gpuhost.prom`` (Prometheus text format, every
    host of the run). ``previous`` (host -> its last report document,
    :func:`previous_documents`) adds the AER change since then (the fleet check
    ``pcie_aer_change``; a malformed one is a line in ``warnings``). ``docs``: the
    documents :func:`report_documents` already made of them (the fleet checks are run once
    per report).

    ``fleet=False`` (a slice of a sliced job): only the per-host JSON, each with the host's
    own verdict (no fleet drift: a slice sees part of the fleet), for report_merge to
    combine; nothing a second slice writing the same folder overwrites."""
    check_file_names(audits)
    if docs is None:
        docs = report_documents(audits, previous, warnings, dest, fleet)
    files = {}
    for doc in docs:
        files["%s.json" % safe_name(doc["host"])] = render_json(doc)
    if not fleet:
        return files
    files["summary.md"] = render_markdown(docs, generated_at, stale)
    files["index.html"] = render_html(docs, generated_at, want_mrrs, stale=stale)
    files["gpuhost.prom"] = metrics.audit_text(judged_audits(audits, docs))
    return files


def report_documents(audits, previous=None, warnings=None, dest=None, fleet=True):
    """The per-host documents as written: the fleet checks run once over them
    (module_utils/fleet; a slice, ``fleet=False``, only those that need no other host), then
    the new / seen-before marks against ``previous``."""
    docs = [host_document(host, audit) for host, audit in audits.items()]
    context = fleet_base.Context(previous, warnings,
                                 lambda host: _previous_path(dest or ".", host))
    fleet_run.judge(docs, context, whole_fleet=fleet)
    return apply_seen(docs, previous, warnings, dest)


def judged_documents(audits):
    """The per-host documents with the fleet checks applied (no previous report)."""
    return report_documents(audits)


def judged_audits(audits, docs=None):
    """``audits`` with each host's findings and check columns as the reports show them
    (fleet drift included), so the metrics say what the reports say."""
    docs = judged_documents(audits) if docs is None else docs
    out = dict(audits)
    for doc in docs:
        out[doc["host"]] = dict(audits.get(doc["host"]) or {}, findings=doc["findings"],
                                checks=doc["checks"])
    return out


# ---------------------------------------------------------------------------------------
# tune reports: <host>-tune.md and <host>-tune.json from module host_tune's results

TUNE_KEYS = ("host", "root", "check_mode", "snapshot", "rows", "findings_before",
             "findings_after", "verified", "failures")


def tune_document(host, result):
    """What ``<host>-tune.json`` holds for one host_tune result (a result without rows, as
    from a module that crashed or a host that failed before it, becomes a failure)."""
    result = result if isinstance(result, dict) else {}
    doc = {"host": host, "root": result.get("root"),
           "check_mode": bool(result.get("check_mode")),
           "snapshot": result.get("snapshot") or "not taken",
           "rows": list(result.get("rows") or []),
           "findings_before": list(result.get("findings_before") or []),
           "findings_after": list(result.get("findings_after") or []),
           "verified": bool(result.get("verified")),
           "failures": list(result.get("failures") or [])}
    if "rows" not in result and not doc["failures"]:
        doc["failures"] = ["host_tune returned no result: %s" % (
            result.get("msg") or "the host was not tuned in this play")]
    return doc


def _cell(value):
    return "-" if value is None else str(value)


def render_tune_markdown(doc):
    """The before -> after table of one host, as Markdown (the text the role prints)."""
    out = ["# Tuning of %s%s" % (doc["host"], " (check mode: planned, nothing changed)"
                                 if doc["check_mode"] else ""),
           "",
           "- root: `%s`" % doc["root"],
           "- snapshot: %s" % doc["snapshot"],
           "- managed findings before: %d, after: %s" % (
               len(doc["findings_before"]),
               len(doc["findings_after"]) if doc["verified"] else "not verified"),
           "- result: %s" % ("FAILED: " + "; ".join(doc["failures"]) if doc["failures"]
                             else "ok"),
           "",
           "| part | item | before | after | status | note |",
           "| --- | --- | --- | --- | --- | --- |"]
    for r in doc["rows"]:
        note = str(r.get("note") or "").replace("|", "/").replace("\n", " ")
        out.append("| %s | %s | %s | %s | %s | %s |" % (
            r["part"], r["item"], _cell(r.get("before")), _cell(r.get("after")), r["status"],
            note))
    if doc["findings_after"]:
        out += ["", "## Managed findings that remain", ""]
        for f in doc["findings_after"]:
            out.append("- %s %s: %s (want %s)" % (f["id"], f["subject"], f["current"],
                                                  f["expected"]))
    return "\n".join(out) + "\n"


def tune_files(results):
    """``{filename: text}`` for ``results`` (host -> host_tune result): ``<host>-tune.md``
    and ``<host>-tune.json`` per host."""
    check_file_names(results, "tune report")
    files = {}
    for host in sorted(results):
        doc = tune_document(host, results[host])
        files["%s-tune.md" % safe_name(host)] = render_tune_markdown(doc)
        files["%s-tune.json" % safe_name(host)] = json.dumps(doc, indent=4,
                                                             sort_keys=True) + "\n"
    return files


def _same_bytes(path, data):
    """Whether ``path`` is a regular file holding exactly ``data``; opened without blocking
    and read no further than ``data`` is long, so a FIFO or a huge file there is simply
    not the same (the atomic write then replaces it)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except (IOError, OSError):
        return False
    info = _fstat_or_close(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size != len(data):
        os.close(fd)
        return False
    with os.fdopen(fd, "rb") as handle:
        return handle.read(len(data) + 1) == data


def write_files(dest, files, check_mode=False):
    """Write report ``files`` (name -> text) into the controller folder ``dest``.

    Atomic per file; a file whose bytes are already there is not rewritten (a re-run leaves
    mtimes alone). Returns ``(paths, written)``; in check mode nothing is created."""
    if not check_mode and not os.path.isdir(dest):
        # exist_ok: the slices of a sliced job may create one folder at the same moment
        os.makedirs(dest, 0o755, exist_ok=True)
    paths, written = [], []
    for name in sorted(files):
        path = os.path.join(dest, name)
        # a lone surrogate (a name decoded with surrogateescape) is written as the text
        # \udcff: never a failed report, never invalid UTF-8
        data = files[name].encode("utf-8", "backslashreplace")
        paths.append(path)
        if _same_bytes(path, data):
            continue
        written.append(path)
        if not check_mode:
            atomic_write(path, data, mode=0o644)
    return paths, written


class ReportError(Exception):
    """A report module cannot make or write its files; the message says what to do."""


def now():
    """The controller's UTC time as the reports print it."""
    return time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime())


def write_reports(module, dest, files, check_mode, setting):
    """``write_files`` for report module ``module``: ``(paths, written)``; a folder that
    cannot be written raises ReportError naming it and the role ``setting`` that picks
    another."""
    try:
        return write_files(dest, files, check_mode)
    except (IOError, OSError) as exc:
        raise ReportError("%s: cannot write reports in %s: %s (pick a writable folder with %s)"
                          % (module, dest, exc, setting))


# --- the report modules: each one call, its options in, its result out -------------------

def _malformed(audits, generated, exc):
    """Which host's audit the reports cannot be made from, and the missing or mistyped key."""
    for host in sorted(audits):
        try:
            report_files({host: audits[host]}, generated, 4096)
            judged_audits({host: audits[host]})
        except (KeyError, TypeError, AttributeError, ValueError) as one:
            return "the audit of %s is malformed (%s: %s)" % (host, type(one).__name__, one)
    return "the audits are malformed together (%s: %s)" % (type(exc).__name__, exc)


def registered(raw_vars, hosts, result_var):
    """``{host: value}``: each host's variable ``result_var`` as registered (None where the
    host has none). ``raw_vars(host)`` gives a host's variables as stored, nothing templated
    (the report action plugins pass Ansible's ``hostvars.raw_get``), so the results of a
    whole fleet are read without being templated or sent anywhere."""
    out = {}
    for host in hosts:
        data = raw_vars(host)
        value = data.get(result_var) if isinstance(data, Mapping) else None
        out[host] = value if isinstance(value, Mapping) else None
    return out


def registered_audits(raw_vars, hosts, result_var):
    """``{host: audit}`` from each host's registered host_audit result (:func:`registered`).
    ReportError names the hosts without one."""
    audits, missing = {}, []
    for host, value in registered(raw_vars, hosts, result_var).items():
        audit = value.get("audit") if value is not None else None
        if isinstance(audit, Mapping):
            audits[host] = audit
        else:
            missing.append(host)
    if missing:
        raise ReportError(
            "audit_report: no host_audit result in variable %r of %s (register the result of "
            "gpuhost.tuning.host_audit under that name on every host listed in 'hosts'); "
            "nothing was written" % (result_var, ", ".join(missing)))
    return audits


def audit_report_run(p, check_mode=False):
    """Module audit_report: ``p`` its options (all given). ReportError on a value that is no
    host_audit result or a folder that cannot be written."""
    audits = p["audits"]
    bad = [host for host, value in audits.items()
           if not isinstance(value, dict) or "findings" not in value]
    if bad:
        raise ReportError("audit_report: no audit result for %s (pass the 'audit' value "
                          "host_audit returned for each host)" % ", ".join(sorted(bad)))
    paths, written, warnings = [], [], []
    generated = p["generated_at"] or now()
    try:
        # made before anything is written: a malformed audit is a message, no files
        fleet = p.get("fleet_files", True)
        previous = previous_documents(p["dest"], audits, warnings)
        check_file_names(audits)
        docs = report_documents(audits, previous, warnings, p["dest"], fleet)
        files = report_files(audits, generated, p["mrrs_size"], fleet=fleet, docs=docs)
        # the per-host metrics say what the reports say (fleet drift, new since the last)
        judged = judged_audits(audits, docs)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise ReportError("audit_report: %s (pass the 'audit' value host_audit returned for "
                          "each host); nothing was written" % _malformed(audits, generated, exc))
    if p["write"]:
        paths, written = write_reports("audit_report", p["dest"], files, check_mode,
                                       "gpuhost_audit_report_dir")
    audits = judged
    summary = {}
    for host, audit in audits.items():
        entry = counts(audit["findings"])
        entry["worst"] = worst(audit["findings"])
        summary[host] = entry
    per_host = dict((host, metrics.audit_text({host: audit})) for host, audit in audits.items())
    out = dict(changed=bool(written), files=paths, written=written,
               index=os.path.join(p["dest"], "index.html"), summary=summary, metrics=per_host)
    if warnings:
        out["warnings"] = warnings
    return out


def registered_tunes(raw_vars, hosts, result_var):
    """``{host: result}`` from each host's registered host_tune result (:func:`registered`);
    a host without one gets ``{}``, which its report calls no host_tune result."""
    return dict((host, value if value is not None else {})
                for host, value in registered(raw_vars, hosts, result_var).items())


def tune_report_run(p, check_mode=False):
    """Module tune_report: ``p`` its options. ReportError on a folder that cannot be
    written."""
    results = p["results"]
    files = tune_files(results)
    paths, written = write_reports("tune_report", p["dest"], files, check_mode,
                                   "gpuhost_tune_report_dir")
    tables, failed = {}, []
    for host in sorted(results):
        tables[host] = files["%s-tune.md" % safe_name(host)].splitlines()
        if tune_document(host, results[host])["failures"]:
            failed.append(host)
    return dict(changed=bool(written), files=paths, written=written, tables=tables,
                failed_hosts=failed)


def reboot_report_run(p, check_mode=False):
    """Module reboot_report: ``p`` its options. ReportError on a document that lacks a key
    or a folder that cannot be written."""
    try:
        files = reboot_files(p["host"], p["report"])
    except (KeyError, TypeError) as exc:
        raise ReportError("reboot_report: the report document lacks %s" % exc)
    paths, written = write_reports("reboot_report", p["dest"], files, check_mode,
                                   "gpuhost_report_dir")
    return dict(changed=bool(written), files=paths, written=written)


# --- reboot_verify: <host>-reboot.json and .md -------------------------------------------

def _text(value):
    """A value as the reports print it (None and booleans as Python spells them)."""
    return "%s" % (value,)


def _joined(items, sep=", "):
    return sep.join(_text(x) for x in items or [])


def render_reboot_markdown(doc):
    """The Markdown page of one reboot_verify report document (role reboot_verify)."""
    before, after, reboot = doc["before"], doc["after"], doc["reboot"]
    out = ["# %s: reboot_verify %s" % (doc["host"], doc["result"].upper()), ""]
    if doc.get("failure"):
        out += ["**Stopped at:** %s" % doc["failure"], ""]
    out += ["| | before | after |", "|---|---|---|",
            "| running kernel | %s | %s |" % (before["running_kernel"],
                                              after["running_kernel"] or "-"),
            "| next boot | %s | %s |" % (before["next_boot_kernel"],
                                         reboot["expected_kernel"] or "-"),
            "| command line | `%s` | `%s` |" % (before["cmdline"], after["cmdline"] or "-"),
            "| audit | %s | %s |" % (before["audit"], after["audit"] or "-"), ""]
    line = "Reboot: %s" % reboot["note"]
    if reboot.get("required") is not None:
        line += " (required: %s)" % reboot["required"]
    out += [line, ""]
    up = doc.get("upgrade")
    if up:
        dkms = ", ".join("%s/%s %s" % (d["name"], d["version"], d["state"])
                         for d in up.get("dkms") or []) or "nothing"
        out += ["## Kernel upgrade",
                "- target %s, packages %s" % (up["target"], _joined(up.get("packages"))),
                "- DKMS modules %s; for the target: %s" % (
                    _joined(up.get("dkms_modules")) or "none", dkms),
                "- next boot (%s%s): %s" % (up["next_boot_method"],
                                            ", trial" if up.get("trial") else "",
                                            _joined(up.get("next_boot_commands"), "; ")
                                            or "already set")]
        out += ["- skipped: %s" % s for s in up.get("skipped") or []]
    bc = doc.get("boot_config")
    if bc:
        out += ["## Boot configuration",
                "- %s: `%s` (changed: %s)" % (bc["tool"], bc["cmdline_after"],
                                              bc["cmdline_changed"]),
                "- %s changed: %s" % (bc["modprobe_file"], bc["modprobe_changed"]),
                "- initramfs regenerated: %s; refreshed: %s" % (
                    _joined(bc.get("initramfs_regenerated")) or "none",
                    _joined(bc.get("refreshed"), "; ") or "nothing")]
        out += ["- skipped: %s" % s for s in bc.get("skipped") or []]
    if doc.get("checks"):
        out += ["## Checks", "| check | status | detail |", "|---|---|---|"]
        out += ["| %s | %s | %s |" % (c["name"], c["status"], c["detail"])
                for c in doc["checks"]]
    gate = doc.get("vfio_initramfs")
    if gate:
        out += ["## VM GPUs in the next initramfs (%s)" % gate.get("kernel"),
                "- %s" % ("every GPU a VM passes through is bound to vfio-pci there"
                          if gate.get("ok") else "refused: " + _joined(gate.get("problems"), "; "))]
    if doc.get("vms"):
        out += ["## VMs",
                "| VM | name | ran before | onboot | started | status | GPUs bound | problems |",
                "|---|---|---|---|---|---|---|---|"]
        out += ["| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            v["vmid"], v.get("name") or "-", v["running_before"], v["onboot"], v["started"],
            v.get("status") or "-", _joined("%s %s" % (g["address"], g["driver"] or "no driver")
                                            for g in v.get("gpus") or []) or "-",
            _joined(v.get("problems"), "; ")) for v in doc["vms"]]
    if doc.get("containers"):
        out += ["## Containers",
                "| CT | GPU | ran before | onboot | rules added | rules removed | restarted "
                "| GPUs | problems |",
                "|---|---|---|---|---|---|---|---|---|"]
        out += ["| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            c["vmid"], c["gpu"], c["running_before"], c["onboot"],
            _joined(c.get("rules_added")), _joined(c.get("rules_removed")), c["started"],
            c["gpus"], _joined(c.get("problems"), "; ")) for c in doc["containers"]]
    cuda_lines = _cuda_lines(doc)
    if cuda_lines:
        out += ["## CUDA"] + cuda_lines
    return "\n".join(out) + "\n"


def _cuda_line(where, probe):
    init = probe.get("init") if "init" in probe else probe
    init = init or {}
    if init.get("code") is None:
        text = "not initialised"
    else:
        text = "cuInit %s %s" % (init["code"], init.get("name"))
    devices = probe.get("devices")
    if devices is not None:
        text += ", %s GPU(s)" % devices
    problem = probe.get("failure") or probe.get("error")
    if problem:
        text += ": %s" % problem
        if probe.get("cause") and probe["cause"] not in problem:
            text += "; cause: %s" % probe["cause"]
    return "- %s: %s" % (where, text)


def _cuda_lines(doc):
    """One line per place CUDA was proved (host, each container), or none."""
    out = []
    if doc.get("cuda_host"):
        out.append(_cuda_line("host", doc["cuda_host"]))
    for c in doc.get("containers") or []:
        if c.get("cuda"):
            out.append(_cuda_line("CT %s" % c["vmid"], c["cuda"]))
    return out


def reboot_files(host, doc):
    """``{name: text}`` of one host's reboot_verify report: ``<host>-reboot.json`` (the
    document, in its key order) and ``<host>-reboot.md``."""
    name = safe_name(host)
    return {"%s-reboot.json" % name: json.dumps(doc, indent=4, separators=(",", ": ")) + "\n",
            "%s-reboot.md" % name: render_reboot_markdown(doc)}


# --- report_merge: the per-host JSON of several report folders as one fleet report -------

MERGE_SKIP = ("-tune.json", "-reboot.json")  # the other reports' per-host files
MERGE_FOLDER_MAX = 100000  # entries of one folder looked at, at most


def _age_text(seconds):
    seconds = max(0, int(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    if days:
        return "%dd %dh" % (days, hours)
    return "%dh %dm" % (hours, rest // 60)


def _is_host_document(doc):
    return (isinstance(doc, dict) and isinstance(doc.get("host"), str)
            and isinstance(doc.get("facts"), dict) and isinstance(doc.get("findings"), list)
            and all(isinstance(f, dict) for f in doc["findings"])
            and isinstance(doc.get("checks"), dict))


def folder_documents(folder, warnings):
    """``[(document, path)]``: the ``<host>.json`` audit reports in controller folder
    ``folder``, read bounded (``_read_previous``: regular files only, never a FIFO's
    wait). The other reports' files (``-tune.json``, ``-reboot.json``, JSON that is no host
    report at all) are passed over; a file that looks like a host report but cannot be used
    (unreadable, malformed, or named for another host than it names) is left out with a
    line in ``warnings``. ReportError when the folder cannot be listed."""
    try:
        names = sorted(os.listdir(folder))[:MERGE_FOLDER_MAX]
    except (IOError, OSError) as exc:
        raise ReportError("report_merge: cannot list the report folder %s: %s (pass folders "
                          "that audit_report wrote); nothing was written" % (folder, exc))
    out = []
    for name in names:
        if (not name.endswith(".json") or name.startswith(".") or name.endswith(MERGE_SKIP)):
            continue
        path = os.path.join(folder, name)
        try:
            text = _read_previous(path)
            if text is None:
                continue
            doc = json.loads(text)
        except ValueError as exc:
            warnings.append("%s is not a readable JSON report (%s): left out of the merge"
                            % (path, exc))
            continue
        if not isinstance(doc, dict) or ("facts" not in doc and "findings" not in doc):
            continue  # another file (rollout.json, ...): not a host report
        if not _is_host_document(doc):
            warnings.append("%s is not an audit report document (host, facts, findings, "
                            "checks): left out of the merge" % path)
            continue
        if name != "%s.json" % safe_name(doc["host"]):
            warnings.append("%s names host %r, whose report is %s.json: left out of the merge "
                            "(a copied or renamed file)" % (path, doc["host"],
                                                            safe_name(doc["host"])))
            continue
        out.append((doc, path))
    return out


host_audit_of = fleet_run.host_audit_of


def _stamp(doc):
    return metrics._epoch(doc.get("collected_at")) or 0


def merge_run(p, check_mode=False, clock=time.time):
    """Module report_merge: ``p`` its options (``folders``, ``dest``, ``stale_hours``,
    ``generated_at``, ``mrrs_size``). Every host's newest report among the folders (by
    ``collected_at``; a later folder wins a tie), the fleet checks over their union, and the
    reports written in ``dest`` as one run over all of them would write them. Folders with no
    host report (an empty slice) add nothing; none at all writes nothing and is no failure."""
    warnings = []
    found = {}
    for folder in p["folders"]:
        for doc, path in folder_documents(folder, warnings):
            found.setdefault(doc["host"], []).append((doc, path))
    if not found:
        out = dict(changed=False, files=[], written=[], hosts={}, stale=[],
                   index=None, msg="no host report in %s: nothing to merge, nothing written"
                   % ", ".join(p["folders"]))
        if warnings:
            out["warnings"] = warnings
        return out
    chosen, audits, previous, hosts, stale = {}, {}, {}, {}, []
    now_s = clock()
    limit_s = p["stale_hours"] * 3600.0
    dest_previous = previous_documents(p["dest"], list(found), warnings)
    for host in sorted(found):
        # stable sort: the last folder given wins a tie
        entries = sorted(found[host], key=lambda entry: _stamp(entry[0]))
        doc, path = entries[-1]
        chosen[host] = doc
        audits[host] = host_audit_of(doc)
        if doc.get("aer_change") is not None:
            previous[host] = doc  # its own comparison, passed on as it was
        else:
            older = [d for d, _p in entries[:-1] if _stamp(d) < _stamp(doc)]
            mine = dest_previous.get(host)
            if mine is not None and _stamp(mine) <= _stamp(doc):
                older.append(mine)
            if older:
                previous[host] = max(older, key=_stamp)
        age = now_s - _stamp(doc) if _stamp(doc) else None
        is_stale = age is None or age > limit_s
        hosts[host] = {"from": path, "collected_at": doc.get("collected_at"),
                       "age_s": None if age is None else int(age), "stale": is_stale}
        if is_stale:
            stale.append({"host": host, "collected_at": doc.get("collected_at") or "unknown",
                          "age": "unknown" if age is None else _age_text(age),
                          "folder": os.path.dirname(path)})
    generated = p.get("generated_at") or now()
    try:
        files = report_files(audits, generated, p["mrrs_size"], previous, warnings,
                             p["dest"], stale=stale)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise ReportError("report_merge: %s; nothing was written" % _merge_malformed(
            audits, hosts, generated, exc))
    paths, written = write_reports("report_merge", p["dest"], files, check_mode,
                                   "gpuhost_merge_dest")
    out = dict(changed=bool(written), files=paths, written=written, hosts=hosts,
               stale=[row["host"] for row in stale],
               index=os.path.join(p["dest"], "index.html"))
    if warnings:
        out["warnings"] = warnings
    return out


def _merge_malformed(audits, hosts, generated, exc):
    """Which file the merged reports cannot be made from, and the bad key."""
    for host in sorted(audits):
        try:
            report_files({host: audits[host]}, generated, 4096)
        except (KeyError, TypeError, AttributeError, ValueError) as one:
            return "the report %s is malformed (%s: %s): remove it or audit %s again" % (
                hosts[host]["from"], type(one).__name__, one, host)
    return "the reports are malformed together (%s: %s)" % (type(exc).__name__, exc)
