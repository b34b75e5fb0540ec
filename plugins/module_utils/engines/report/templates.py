# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The report templates (Jinja2): ``summary.md`` and ``index.html``, with the page's CSS.

They are Python strings, not template files, so that they travel wherever the rendering
code does (a module's AnsiballZ zip carries module_utils' ``.py`` files only). Rendering
them (:mod:`.render`) needs Jinja2, which every Ansible controller has; the report modules
render in the controller's process. The view model (what each cell says, escaped by the
``h`` and ``md`` filters) is made in ``summary.py`` and ``page.py``; the templates hold the
layout. Whitespace is the templates' own: ``{%- -%}`` strips it where markup runs on one
line.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

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
table.matrix th{text-align:center;font-size:11.5px;line-height:1.2;overflow-wrap:normal;
  word-break:normal;hyphens:none;-webkit-hyphens:none}
table.matrix th.host,table.matrix td.host{text-align:left;width:190px}
table.matrix th.worst{width:64px}
table.matrix th.group{background:#e3e8f0;border-bottom:2px solid #c3cbd8;font-size:12px}
table.matrix th.col{vertical-align:bottom;padding:6px 2px}
table.matrix th.col span{display:inline-block;writing-mode:vertical-rl;
  transform:rotate(180deg);white-space:nowrap}
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

SUMMARY_MD = """\
# GPU host audit

{{ docs|length }} host(s), {{ total }} finding(s)
{%- if generated_at %}, generated {{ generated_at }}{% endif %}. Severity: critical > high > \
medium > low > info.

| Host | worst | {{ severities|join(" | ") }} |
|---|---|{{ "---:|" * severities|length }}
{% for row in hosts %}
| {{ row.host|md }} | {{ row.worst }} | {{ row.counts|join(" | ") }} |
{% endfor %}

## Findings

{% if compared %}
New since the previous report (new ones listed first): {{ compared|join(", ") }}.

{% endif %}
{% if not total %}
No findings.
{% else %}
| Host | Severity | Id | Subject | Current | Expected | Reboot | Remedy |
|---|---|---|---|---|---|---|---|
{% for row in findings %}
| {{ row.host|md }} | {{ row.severity }} | `{{ row.id }}`
{%- if row.marks %} **{{ row.marks|join(", ") }}**{% endif %} | {{ row.subjects }} | \
{{ row.current }} | {{ row.expected|md }} | {{ "yes" if row.reboot else "no" }} | \
{{ row.remedy|md }} |
{% endfor %}
{% endif %}
{% if stale %}

## Stale hosts (their newest result is older than the merge allows)

| Host | Audited at | Age | From |
|---|---|---|---|
{% for row in stale %}
| {{ row.host|md }} | {{ row.collected_at|md }} | {{ row.age|md }} | {{ row.folder|md }} |
{% endfor %}
{% endif %}
{% if aer %}

## PCIe errors since the previous report

| Host | Previous report | Device | AER change |
|---|---|---|---|
{% for cells in aer %}
| {{ cells|map("md")|join(" | ") }} |
{% endfor %}
{% endif %}
{% if ceiling %}

## Compute and memory ceiling

Per GPU: achieved / model table (healthy figure of the same probe path, else the datasheet: \
ds) / node best (% of datasheet). What the GPU delivers, not the workload's own kernels.
{% for host in ceiling %}

**{{ host.host|md }}**: {{ host.line|md }}

| GPU | Bus | Model | {{ host.labels|map("md")|join(" | ") }} |
|---|---|---|{{ "---|" * host.labels|length }}
{% for row in host.rows %}
| {{ row.index }} | {{ row.bus_id|md }} | {{ row.model|md }} | \
{{ row.cells|map("last")|map("md")|join(" | ") }} |
{% endfor %}
{% endfor %}
{% endif %}
"""

INDEX_HTML = """\
{%- macro link(l) -%}\
{%- if l.none -%}\
<span class="note">no PCIe link</span>\
{%- else -%}\
<span class="{{ "bad" if l.degraded else "good" }}">{{ l.current|h }}</span> \
<span class="note">of {{ l.top|h }}</span>\
{%- endif -%}\
{%- endmacro -%}\

{%- macro size(s) -%}\
{%- if s.value is none -%}\
<span class="note">?</span>\
{%- else -%}\
<span class="{{ "bad" if s.bad else "" }}">{{ "%d"|format(s.value) }}</span>\
{%- endif -%}\
{%- endmacro -%}\

{%- macro stale_table(stale) -%}\
<h3>Stale hosts (their newest result is older than the merge allows)</h3>\
<table class="stale"><thead><tr><th>Host</th><th>Audited at</th><th>Age</th><th>From</th>\
</tr></thead><tbody>\
{%- for row in stale -%}\
<tr><td><a href="#{{ row.host|anchor }}">{{ row.host|h }}</a></td>\
<td>{{ row.collected_at|h }}</td><td class="bad">{{ row.age|h }}</td>\
<td class="mono">{{ row.folder|h }}</td></tr>\
{%- endfor -%}\
</tbody></table>\
{%- endmacro -%}\

{%- macro matrix(groups, docs) -%}\
<table class="matrix"><thead><tr><th class="host" rowspan="2">Host</th>\
<th class="worst" rowspan="2">Worst</th>\
{%- for group in groups -%}\
<th class="group" colspan="{{ group.columns|length }}">{{ group.label|h }}</th>\
{%- endfor -%}\
</tr><tr>\
{%- for group in groups -%}\
{%- for col in group.columns -%}\
<th class="col" title="{{ col.label|h }}"><span>{{ col.label|h }}</span></th>\
{%- endfor -%}\
{%- endfor -%}\
</tr></thead><tbody>\
{%- for doc in docs -%}\
<tr><td class="host"><a href="#{{ doc.host|anchor }}">{{ doc.host|h }}</a></td>\
<td class="{{ doc.worst|cls }}">{{ doc.worst|h }}</td>\
{%- for cell in doc.cells -%}\
<td class="{{ cell.status|cls }}" title="{{ cell.title|h }}">{{ cell.text|h }}</td>\
{%- endfor -%}\
</tr>\
{%- endfor -%}\
</tbody></table>\
{%- endmacro -%}\

{%- macro facts(items) -%}\
<div class="facts">\
{%- for key, value in items -%}\
<div><b>{{ key|h }}:</b> {{ value|h }}</div>\
{%- endfor -%}\
</div>\
{%- endmacro -%}\

{%- macro findings_table(rows) -%}\
{%- if not rows -%}\
<p class="good">No findings.</p>\
{%- else -%}\
<table class="findings"><colgroup><col class="sev"><col class="id"><col class="subj">\
<col class="cur"><col class="exp"><col class="rb"><col></colgroup><thead><tr>\
<th>Severity</th><th>Id</th><th>Subject</th><th>Current</th><th>Expected</th>\
<th>Reboot</th><th>Remedy</th></tr></thead><tbody>\
{%- for row in rows -%}\
<tr><td><span class="badge {{ row.severity|cls }}">{{ row.severity|h }}</span></td>\
<td class="mono">{{ row.id|h }}\
{%- for mark in row.marks %} <span class="badge s-{{ "new" if mark == "new" else "na" }}">\
{{- mark }}</span>{% endfor -%}\
</td><td class="mono">\
{%- if row.subjects|length == 1 -%}\
{{ row.subjects[0]|h }}\
{%- else -%}\
<details class="subjects"><summary>{{ row.subjects|length }} subjects</summary>\
{%- for name, text in row.details -%}\
<div>{{ name|h }}{% if text %} <span class="note">{{ text|h }}</span>{% endif %}</div>\
{%- endfor -%}\
</details>\
{%- endif -%}\
</td><td>{{ row.current|h }}\
{%- if row.change is not none -%}\
<div class="note">since the previous report: {{ row.change|h }}</div>\
{%- endif -%}\
</td><td>{{ row.expected|h }}</td><td>{{ "yes" if row.reboot else "" }}</td>\
<td class="remedy">{{ row.remedy|h }}\
{%- if row.subjects|length == 1 and row.detail -%}\
<div class="note">{{ row.detail|h }}</div>\
{%- endif -%}\
</td></tr>\
{%- endfor -%}\
</tbody></table>\
{%- endif -%}\
{%- endmacro -%}\

{%- macro aer_table(change) -%}\
<h3>PCIe errors since the previous report ({{ (change.since or "time unknown")|h }})</h3>\
{%- if not change.rows -%}\
<p class="note">No device to compare with.</p>\
{%- else -%}\
<table class="aer"><thead><tr><th>Device</th><th>AER change</th></tr></thead><tbody>\
{%- for address, text in change.rows -%}\
<tr><td class="mono">{{ address|h }}</td>\
<td class="{{ "" if text == "no change" else "bad" }}">{{ text|h }}</td></tr>\
{%- endfor -%}\
</tbody></table>\
{%- endif -%}\
{%- endmacro -%}\

{%- macro gpu_table(gpus) -%}\
{%- if not gpus -%}\
<p class="note">No NVIDIA GPU found.</p>\
{%- else -%}\
<table class="gpus"><colgroup><col style="width:112px"><col style="width:88px">\
<col style="width:100px"><col style="width:72px"><col style="width:58px">\
<col style="width:62px"><col style="width:78px"><col style="width:190px"><col>\
</colgroup><thead><tr>\
<th>Address</th><th>Device</th><th>Driver</th><th>Owner</th><th>NUMA</th><th>MRRS</th>\
<th>MPS / cap</th><th>Link</th><th>Upstream bridges (MRRS, link)</th></tr></thead>\
<tbody>\
{%- for gpu in gpus -%}\
<tr><td class="mono">{{ gpu.address|h }}</td><td class="mono">{{ gpu.device|h }}</td>\
<td>{{ gpu.driver|h }}</td><td>{{ gpu.owner|h }}</td><td>{{ gpu.numa|h }}</td>\
<td>{{ size(gpu.mrrs) }}</td><td>{{ gpu.mps|h }}</td><td>{{ link(gpu.link) }}</td><td>\
{%- for up in gpu.upstream -%}\
{% if not loop.first %}<br>{% endif %}<span class="mono">{{ up.address|h }}</span> \
{{ size(up.mrrs) }} B, {{ link(up.link) }}\
{%- else -%}\
<span class="note">host bridge (no root port)</span>\
{%- endfor -%}\
</td></tr>\
{%- endfor -%}\
</tbody></table>\
{%- endif -%}\
{%- endmacro -%}\

<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<title>{{ title|h }}</title><style>{{ css }}</style></head><body><main>
<h1>{{ title|h }}</h1>
<p class="meta">{{ docs|length }} host(s)
{%- if generated_at %}, generated {{ generated_at|h }}{% endif %}. Findings: \
{% for s in severities %}{% if not loop.first %} {% endif %}\
<span class="badge {{ s|cls }}">{{ s }} {{ totals[s] }}</span>{% endfor %}</p>
{% if stale %}
{{ stale_table(stale) }}
{% endif %}
<h3>Hosts x checks (worst severity; hover a cell for details)</h3>
{{ matrix(groups, docs) }}
<p class="legend note">
{%- for s in statuses %}{% if not loop.first %} {% endif %}\
<span class="badge {{ s|cls }}">{{ s }}</span>{% endfor %}</p>
{% for doc in docs %}
<h2 id="{{ doc.host|anchor }}">{{ doc.host|h }} \
<span class="badge {{ doc.worst|cls }}">{{ doc.worst|h }}</span></h2>
{{ facts(doc.facts) }}
<h3>Findings ({{ doc.count }}
{%- if doc.rows|length != doc.count %} in {{ doc.rows|length }} rows{% endif %}
{%- if doc.compared_with is not none %}, {{ doc.fresh }} new since \
{{ doc.compared_with|h }}{% endif %})</h3>
{{ findings_table(doc.rows) }}
{% if doc.aer_change %}
{{ aer_table(doc.aer_change) }}
{% endif %}
<h3>GPUs</h3>
{{ gpu_table(doc.gpus) }}
{% endfor %}
<footer>gpuhost.tuning audit report, schema {{ schema }}. Read-only: nothing on the hosts \
was changed.</footer></main></body></html>
"""
