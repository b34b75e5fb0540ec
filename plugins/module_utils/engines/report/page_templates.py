# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The templates of the report's pages (Jinja2, rendered by :mod:`.render`): the fleet
view ``FLEET_HTML`` (``index.html``) with its filter script ``FILTER_JS``, a host's page
``HOST_HTML``, and their CSS ``PAGE_CSS``. Python strings for the reason ``templates.py``
gives (they travel with module_utils); the view model is made in ``page.py``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# The pages of ``page.html_files``: ``index.html`` (the fleet view) and one page per host.
# Nothing has a fixed width: tables lay out on their content (a column is never narrower
# than its longest word: words break only where they would not fit a line on their own),
# wide ones scroll inside their own box, and a remedy is a <pre> block that keeps the
# command whole and scrolls when long. From 800 px to 2,560 px nothing collapses.
PAGE_CSS = """
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%;text-size-adjust:100%}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;
  color:#1d2330;background:#f4f6f9;margin:0;padding:16px clamp(10px,2vw,28px)}
main{max-width:1600px;margin:0 auto}
h1{font-size:22px;margin:0 0 4px;overflow-wrap:break-word}
h2{font-size:18px;margin:26px 0 8px;padding-top:8px;border-top:2px solid #d5dbe5}
h3{font-size:13px;margin:14px 0 6px;color:#3b4456;text-transform:uppercase;
  letter-spacing:.04em}
p{overflow-wrap:break-word}
p.meta{color:#5a6478;margin:0 0 12px}
nav{margin:0 0 8px}
.wide{overflow-x:auto;margin:0 0 8px;max-width:100%}
table{border-collapse:collapse;width:100%;background:#fff;
  box-shadow:0 1px 2px rgba(0,0,0,.06)}
th,td{border:1px solid #dfe4ec;padding:5px 8px;text-align:left;vertical-align:top;
  overflow-wrap:break-word;word-break:normal;hyphens:manual}
th{background:#eef1f6;font-weight:600;font-size:12px;color:#3b4456}
td.num,th.num{text-align:right;white-space:nowrap}
code,pre,.mono{font-family:"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:12px}
pre.remedy{margin:6px 0 0;padding:6px 9px;background:#f1f3f7;border:1px solid #dfe4ec;
  border-radius:4px;overflow-x:auto;white-space:pre;color:#263044;max-width:100%}
.s-critical{background:#6a1b9a;color:#fff}
.s-high{background:#d32f2f;color:#fff}
.s-medium{background:#f57c00;color:#fff}
.s-low{background:#fdd835;color:#332b00}
.s-info{background:#bbdefb;color:#0d3c61}
.s-ok{background:#c8e6c9;color:#1b5e20}
.s-na{background:#eceff1;color:#78818f;font-weight:400}
.s-new{background:#1a4fa0;color:#fff}
.s-unreachable,.s-failed{background:#37474f;color:#fff}
.s-skipped{background:#cfd8dc;color:#263238}
.badge{display:inline-block;padding:1px 7px;border-radius:9px;font-size:11.5px;
  font-weight:600;white-space:nowrap}
.badges .badge{margin:0 4px 2px 0}
.bad{color:#c62828;font-weight:600}
.good{color:#2e7d32}
.note{color:#5a6478;font-size:12px}
.msg{overflow-wrap:break-word}
.nw{white-space:nowrap}
tr.why td{border-top:0;color:#5a6478;font-size:12.5px;padding-top:0}
.facts{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,320px),1fr));
  gap:4px 18px;background:#fff;border:1px solid #dfe4ec;padding:8px 12px;margin-bottom:8px}
.facts div{overflow-wrap:break-word;min-width:0}
.facts b{color:#3b4456}
.checks{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,210px),1fr));
  gap:4px 8px;margin:0 0 8px}
.check{display:flex;justify-content:space-between;align-items:baseline;gap:8px;
  background:#fff;border:1px solid #dfe4ec;padding:3px 8px;min-width:0}
.finding{background:#fff;border:1px solid #dfe4ec;border-left:5px solid #90a4ae;
  padding:8px 12px;margin:0 0 8px;min-width:0}
.finding.f-critical{border-left-color:#6a1b9a} .finding.f-high{border-left-color:#d32f2f}
.finding.f-medium{border-left-color:#f57c00} .finding.f-low{border-left-color:#fdd835}
.finding.f-info{border-left-color:#64b5f6}
.finding header{display:flex;flex-wrap:wrap;gap:4px 10px;align-items:baseline}
.finding header code{font-weight:600;font-size:13px}
.finding dl{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:2px 14px;
  margin:6px 0 0}
.finding dt{color:#5a6478;font-size:12px;padding-top:1px}
.finding dd{margin:0;overflow-wrap:break-word;min-width:0}
.error{background:#fff3f3;border:1px solid #e8b4b4;padding:8px 12px;margin:0 0 10px;
  overflow-wrap:break-word}
details.subjects summary{cursor:pointer;font-weight:600;color:#1a4fa0}
details.subjects div{font-size:11.5px}
form.filter{display:flex;flex-wrap:wrap;gap:6px 14px;align-items:center;background:#fff;
  border:1px solid #dfe4ec;padding:8px 12px;margin:0 0 8px}
form.filter label{display:flex;gap:6px;align-items:center;white-space:nowrap}
form.filter select{max-width:100%;font:inherit}
a{color:#1a4fa0;text-decoration:none} a:hover{text-decoration:underline}
footer{color:#7a8397;font-size:12px;margin:30px 0 10px}
"""

# The fleet view's filter: plain script in the page (no external asset). Without script
# the form stays hidden and the host list is the whole static list.
FILTER_JS = """
(function () {
  var form = document.getElementById("filter");
  var rows = document.querySelectorAll("#hosts tbody tr");
  var shown = document.getElementById("shown");
  if (!form || !rows) { return; }
  form.hidden = false;
  function has(list, value) {
    return !value || (" " + (list || "") + " ").indexOf(" " + value + " ") >= 0;
  }
  function apply() {
    var want = {}, count = 0, i, d, on;
    ["group", "severity", "finding", "status"].forEach(function (name) {
      want[name] = form.elements[name].value;
    });
    for (i = 0; i < rows.length; i++) {
      d = rows[i].dataset;
      on = has(d.groups, want.group) && has(d.sevs, want.severity) &&
        has(d.ids, want.finding) && has(d.status, want.status);
      rows[i].hidden = !on;
      if (on) { count++; }
    }
    shown.textContent = count + " of " + rows.length + " host(s) shown";
  }
  form.addEventListener("change", apply);
  form.addEventListener("reset", function () { setTimeout(apply, 0); });
  apply();
})();
"""

FLEET_HTML = """\
<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<title>{{ title|h }}</title><style>{{ css }}</style></head><body><main>
<h1>{{ title|w }}</h1>
<p class="meta">{{ hosts|length }} host(s):\
{% for name, number in status_counts %} {{ name }} {{ number }}\
{%- if not loop.last %},{% endif %}{% endfor %}
{%- if generated_at %}; generated {{ generated_at|w }}{% endif %}.</p>
<p class="badges">Findings: \
{% for s in severities %}<span class="badge {{ s|cls }}">{{ s }} {{ totals[s] }}</span> \
{% endfor %}</p>
{% if missing %}
<h2 id="not-audited">Hosts not audited this run ({{ missing|length }})</h2>
<div class="wide"><table class="missing"><thead><tr><th>Host</th><th>Status</th>\
<th>Last good audit</th></tr></thead><tbody>
{% for row in missing %}
<tr><td><a href="{{ row.href|h }}">{{ row.host|w }}</a></td>\
<td><span class="badge {{ row.status|cls }}">{{ row.status|w }}</span></td>\
<td>{{ (row.last_seen or "never")|w }}</td></tr>
<tr class="why"><td colspan="3" class="msg">{{ row.error|w }}</td></tr>
{% endfor %}
</tbody></table></div>
{% endif %}
{% if stale %}
<h2>Stale hosts (their newest result is older than the merge allows)</h2>
<div class="wide"><table class="stale"><thead><tr><th>Host</th><th>Audited at</th>\
<th>Age</th><th>From</th></tr></thead><tbody>
{% for row in stale %}
<tr><td><a href="{{ row.href|h }}">{{ row.host|w }}</a></td>\
<td>{{ row.collected_at|w }}</td>\
<td class="bad">{{ row.age|w }}</td><td class="mono">{{ row.folder|w }}</td></tr>
{% endfor %}
</tbody></table></div>
{% endif %}
<h2 id="findings">Findings across the fleet ({{ findings|length }} kind(s))</h2>
{% if not findings %}
<p class="good">No findings.</p>
{% else %}
<div class="wide"><table class="fleet-findings"><thead><tr><th>Severity</th><th>Finding</th>\
<th class="num">Hosts</th><th class="num">Findings</th><th>Worst hosts</th></tr></thead><tbody>
{% for row in findings %}
<tr><td><span class="badge {{ row.severity|cls }}">{{ row.severity|w }}</span></td>\
<td><code>{{ row.id|h }}</code></td><td class="num">{{ row.hosts }}</td>\
<td class="num">{{ row.count }}</td><td>\
{% for host in row.worst %}<a href="{{ host.href|h }}">{{ host.host|w }}</a>\
{% if host.count > 1 %} <span class="note">({{ host.count }})</span>{% endif %}\
{% if not loop.last %}, {% endif %}{% endfor %}\
{% if row.more %} <span class="note">and {{ row.more }} more</span>{% endif %}</td></tr>
{% endfor %}
</tbody></table></div>
{% endif %}
<h2 id="host-list">Hosts</h2>
<form class="filter" id="filter" hidden>\
<label>Group <select name="group"><option value="">any</option>\
{% for name in choices.groups %}<option>{{ name|h }}</option>{% endfor %}</select></label>\
<label>Severity <select name="severity"><option value="">any</option>\
{% for name in severities %}<option>{{ name }}</option>{% endfor %}</select></label>\
<label>Finding <select name="finding"><option value="">any</option>\
{% for name in choices.ids %}<option>{{ name|h }}</option>{% endfor %}</select></label>\
<label>Status <select name="status"><option value="">any</option>\
{% for name in choices.statuses %}<option>{{ name|h }}</option>{% endfor %}</select></label>\
<button type="reset">Show all</button> <span class="note" id="shown"></span></form>
<div class="wide"><table class="hosts" id="hosts"><thead><tr><th>Host</th><th>Status</th>\
<th>Worst</th><th>Findings</th><th>Groups</th><th>Last good audit</th></tr></thead><tbody>
{% for row in hosts %}
<tr data-status="{{ row.status|h }}" data-sevs="{{ row.sevs|join(" ")|h }}" \
data-ids="{{ row.ids|join(" ")|h }}" data-groups="{{ row.groups|join(" ")|h }}">\
<td><a href="{{ row.href|h }}">{{ row.host|w }}</a></td>\
<td><span class="badge {{ row.status|cls }}"{% if row.error %} title="{{ row.error|h }}"\
{% endif %}>{{ row.status|w }}</span></td>\
<td>{% if row.status == "ok" %}<span class="badge {{ row.worst|cls }}">{{ row.worst|w }}</span>\
{% endif %}</td><td class="badges">\
{% for name, number in row.counts %}{% if not loop.first %} {% endif %}\
<span class="badge {{ name|cls }}">{{ name }} {{ number }}</span>{% endfor %}</td>\
<td>{{ row.groups|join(", ")|w }}</td><td>{{ (row.last_seen or "never")|w }}</td></tr>
{% endfor %}
</tbody></table></div>
<footer>gpuhost.tuning audit report, schema {{ schema }}. Read-only: nothing on the hosts \
was changed.</footer></main><script>{{ script }}</script></body></html>
"""

HOST_HTML = """\
{%- macro link(l) -%}\
{%- if l.none -%}\
<span class="note">no PCIe link</span>\
{%- else -%}\
<span class="{{ "bad" if l.degraded else "good" }}">{{ l.current|w }}</span> \
<span class="note">of {{ l.top|w }}</span>\
{%- endif -%}\
{%- endmacro -%}\

{%- macro size(s) -%}\
{%- if s.value is none -%}\
<span class="note">?</span>\
{%- else -%}\
<span class="{{ "bad" if s.bad else "" }}">{{ "%d"|format(s.value) }}</span>\
{%- endif -%}\
{%- endmacro -%}\

<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<title>{{ doc.host|h }}: {{ title|h }}</title><style>{{ css }}</style></head><body><main>
<nav><a href="index.html">&larr; Fleet view</a></nav>
<h1>{{ doc.host|w }} <span class="badge {{ doc.status|cls }}">{{ doc.status|w }}</span>\
{% if doc.status == "ok" %} <span class="badge {{ doc.worst|cls }}">{{ doc.worst|w }}</span>\
{% endif %}</h1>
<p class="meta">\
{% if doc.status == "ok" %}Audited {{ (doc.collected_at or "?")|w }}\
{% else %}Not audited this run (tried {{ (doc.collected_at or "?")|w }}); last good audit \
{{ (doc.last_seen or "never")|w }}{% endif %}\
{% if doc.groups %}; groups {{ doc.groups|join(", ")|w }}{% endif %}\
{% if generated_at %}; report generated {{ generated_at|w }}{% endif %}.</p>
{% if doc.error %}
<div class="error"><b>{{ doc.status|w }}:</b> {{ doc.error|w }}</div>
{% endif %}
{% if doc.facts %}
<div class="facts">\
{% for key, value in doc.facts %}<div><b>{{ key|w }}:</b> {{ value|w }}</div>{% endfor %}\
</div>
{% endif %}
{% if doc.checks %}
<h2>Checks</h2>
{% for group in doc.checks %}
<h3>{{ group.label|w }}</h3>
<div class="checks">\
{% for cell in group.cells %}<div class="check" title="{{ cell.title|h }}">\
<span>{{ cell.label|w }}</span><span class="badge {{ cell.status|cls }}">{{ cell.text|w }}\
</span></div>{% endfor %}</div>
{% endfor %}
{% endif %}
{% if doc.status == "ok" %}
<h2>Findings ({{ doc.count }}
{%- if doc.rows|length != doc.count %} in {{ doc.rows|length }} rows{% endif %}
{%- if doc.compared_with is not none %}, {{ doc.fresh }} new since \
{{ doc.compared_with|w }}{% endif %})</h2>
{% if not doc.rows %}
<p class="good">No findings.</p>
{% endif %}
{% for row in doc.rows %}
<section class="finding f-{{ row.severity|h }}"><header>\
<span class="badge {{ row.severity|cls }}">{{ row.severity|w }}</span>\
<code>{{ row.id|h }}</code>\
{% for mark in row.marks %}<span class="badge s-{{ "new" if mark == "new" else "na" }}">\
{{ mark }}</span>{% endfor %}\
{% if row.reboot %}<span class="badge s-na">reboot required</span>{% endif %}</header>
<dl><dt>Subject</dt><dd class="mono">\
{% if row.subjects|length == 1 %}{{ row.subjects[0]|w }}\
{% else %}<details class="subjects"><summary>{{ row.subjects|length }} subjects</summary>\
{% for name, text in row.details %}<div>{{ name|w }}\
{% if text %} <span class="note">{{ text|w }}</span>{% endif %}</div>{% endfor %}\
</details>{% endif %}</dd>
<dt>Current</dt><dd>{{ row.current|w }}\
{% if row.change is not none %}<div class="note">since the previous report: \
{{ row.change|w }}</div>{% endif %}</dd>
<dt>Expected</dt><dd>{{ row.expected|w }}</dd>\
{% if row.subjects|length == 1 and row.detail %}<dt>Detail</dt><dd class="note">\
{{ row.detail|w }}</dd>{% endif %}</dl>
{% if row.remedy %}<pre class="remedy"><code>{{ row.remedy|h }}</code></pre>{% endif %}
</section>
{% endfor %}
{% endif %}
{% if doc.aer_change %}
<h2>PCIe errors since the previous report ({{ (doc.aer_change.since or "time unknown")|h }})\
</h2>
{% if not doc.aer_change.rows %}
<p class="note">No device to compare with.</p>
{% else %}
<div class="wide"><table class="aer"><thead><tr><th>Device</th><th>AER change</th></tr>\
</thead><tbody>
{% for address, text in doc.aer_change.rows %}
<tr><td class="mono">{{ address|w }}</td>\
<td class="{{ "" if text == "no change" else "bad" }}">{{ text|w }}</td></tr>
{% endfor %}
</tbody></table></div>
{% endif %}
{% endif %}
{% if doc.status == "ok" %}
<h2>GPUs</h2>
{% if not doc.gpus %}
<p class="note">No NVIDIA GPU found.</p>
{% else %}
<div class="wide"><table class="gpus"><thead><tr><th>Address</th><th>Device</th>\
<th>Driver</th><th>Owner</th><th>NUMA</th><th>MRRS</th><th>MPS / cap</th><th>Link</th>\
<th>Upstream bridges (MRRS, link)</th></tr></thead><tbody>
{% for gpu in doc.gpus %}
<tr><td class="mono">{{ gpu.address|w }}</td><td class="mono">{{ gpu.device|w }}</td>\
<td>{{ gpu.driver|w }}</td><td>{{ gpu.owner|w }}</td><td>{{ gpu.numa|w }}</td>\
<td>{{ size(gpu.mrrs) }}</td><td>{{ gpu.mps|w }}</td><td>{{ link(gpu.link) }}</td><td>\
{% for up in gpu.upstream %}{% if not loop.first %}<br>{% endif %}\
<span class="mono">{{ up.address|w }}</span> {{ size(up.mrrs) }} B, {{ link(up.link) }}\
{% else %}<span class="note">host bridge (no root port)</span>{% endfor %}</td></tr>
{% endfor %}
</tbody></table></div>
{% endif %}
{% endif %}
{% if doc.ceiling %}
<h2 id="ceiling">Compute and memory ceiling</h2>
<p>{{ doc.ceiling.line|w }}</p>
<p class="note">Per GPU: achieved / model table (the healthy figure of the same probe path, \
else the datasheet: ds) / node best (% of datasheet). What the GPU delivers, not what the \
workload's own kernels reach.</p>
<div class="wide"><table class="ceiling"><thead><tr><th>GPU</th><th>Bus</th><th>Model</th>\
{% for label in doc.ceiling.labels %}<th>{{ label|w }}</th>{% endfor %}</tr></thead><tbody>
{% for row in doc.ceiling.rows %}
<tr><td class="num">{{ row.index }}</td><td class="mono">{{ row.bus_id|w }}</td>\
<td>{{ row.model|w }}</td>\
{% for label, text in row.cells %}<td class="{{ "bad" if text.startswith("failed") else "" }}">\
{{ text|w }}</td>{% endfor %}</tr>
{% endfor %}
</tbody></table></div>
{% endif %}
<footer>gpuhost.tuning audit report, schema {{ schema }}. Read-only: nothing on the hosts \
was changed.</footer></main></body></html>
"""
