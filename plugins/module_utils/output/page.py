# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``index.html``: one self-contained page (inline CSS, no script, no network) with
the hosts x checks matrix, then per host its facts, findings and GPUs."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import html
import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.audit import (
    CHECKS,
    SCHEMA,
    SEVERITIES,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.output.views import (
    STATUS_ORDER,
    counts,
    group_findings,
    hosts_order,
    marks,
    shown_order,
    worst,
)


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
                        "new" if mark == "new" else "na", mark) for mark in marks(f)),
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
    docs = hosts_order(documents)
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
