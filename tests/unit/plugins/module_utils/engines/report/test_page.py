"""engines/report/page.py: index.html, self-contained and escaped (moved from test_report.py), and
its hosts x checks matrix with the columns grouped by subject."""

import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import report
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import documents, page


def test_every_column_is_in_one_subject_group():
    groups = page.column_groups()
    assert [g["label"] for g in groups] == ["GPU", "PCIe", "CPU", "Kernel and boot",
                                            "Containers and VMs", "Fleet"]
    shown = [c["key"] for g in groups for c in g["columns"]]
    assert sorted(shown) == sorted(check for check, _label, _ids in audit.CHECKS)
    listed = [key for _label, keys in page.GROUPS for key in keys]
    assert len(listed) == len(set(listed))
    assert [c["key"] for c in groups[-1]["columns"]] == ["fleet_drift"]


def test_a_column_in_no_group_still_shows_under_other(monkeypatch):
    monkeypatch.setattr(page, "GROUPS", page.GROUPS[1:])
    groups = page.column_groups()
    assert groups[-1]["label"] == page.OTHER and "gpu_driver" in [
        c["key"] for c in groups[-1]["columns"]]


def test_the_matrix_cells_follow_the_grouped_headings():
    doc = report.host_document("gpu01", {"findings": [], "checks": {
        "gpu_driver": {"label": "GPU driver", "status": "ok", "count": 0},
        "dkms": {"label": "DKMS", "status": "high", "count": 2}}})
    text = report.render_html([doc])
    matrix = text.split('<table class="matrix">')[1].split("</table>")[0]
    assert matrix.index(">GPU driver</span>") < matrix.index(">DKMS</span>")
    body = matrix.split("<tbody>")[1]
    assert body.index('title="GPU driver: ok"') < body.index('title="DKMS: high"')
    assert "word-break:break-all" not in text and "overflow-wrap:normal" in text


def test_html_is_self_contained_with_a_matrix_row_per_host(fleet):
    docs = [documents.host_document(h, a) for h, a in fleet.items()]
    html = page.render_html(docs, "now")
    assert "<script" not in html.lower()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    assert "<style>" in html
    matrix = html.split('<table class="matrix">')[1].split("</table>")[0]
    rows = re.findall(r'<td class="host"><a href="#host-([^"]+)">', matrix)
    assert rows == ["pve-gpu01", "h200-vm", "pve-gpu02"]  # worst first
    for host in fleet:
        assert 'id="host-%s"' % host in html
    # the seed's 8 GPUs and its root ports are in its GPU table, MRRS 512 marked bad
    assert html.count('<span class="bad">512</span>') == 16
    # ... and its 16 pcie_mrrs findings are one row: a count, the subjects on demand
    seed = html.split('id="host-pve-gpu01"')[1].split("<h2")[0]
    findings = seed.split('<table class="findings">')[1].split("</table>")[0]
    mrrs = [r for r in findings.split("<tr>") if ">pcie_mrrs<" in r]
    assert len(mrrs) == 1
    assert '<details class="subjects"><summary>16 subjects</summary>' in mrrs[0]
    assert mrrs[0].count("<div>0000:") == 16 and "bridge above 0000:01:00.0" in mrrs[0]
    assert "Findings (%d in " % len(fleet["pve-gpu01"]["findings"]) in seed
    assert 'class="s-critical"' in matrix


def test_html_escapes_text():
    item = {"id": "sysctl", "severity": "low", "subject": "<b>x</b>", "current": "a&b",
            "expected": "\"q\"", "remedy": "echo <script>", "reboot_required": False}
    html = page.render_html([documents.host_document("<host>", {"findings": [item]})])
    assert "<b>x</b>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html
    assert "echo <script>" not in html


# html_files: the fleet view (index.html) and one page per host

def _docs(fleet):
    docs = [documents.host_document(h, a, groups={h: ["gpuhosts", "rack_%s" % h[-1]]})
            for h, a in fleet.items()]
    docs.append(documents.not_audited_document(
        "pve-gpu09", {"status": "unreachable", "error": "Failed to connect to the host via "
                      "ssh: Connection timed out", "last_seen": "2026-12-04T03:10:00Z"},
        groups={"pve-gpu09": ["gpuhosts", "rack_9"]}, attempted_at="2026-12-05T03:10:00Z"))
    docs.append(documents.not_audited_document(
        "pve-gpu10", {"status": "failed", "error": "MODULE FAILURE", "last_seen": None}))
    return docs


def test_html_files_are_the_fleet_view_and_a_page_per_host(fleet):
    docs = _docs(fleet)
    files = page.html_files(docs, "2026-12-05 03:12:00Z", 4096)
    hosts = [doc["host"] for doc in docs]
    assert sorted(files) == sorted(["index.html"] + ["%s.html" % h for h in hosts])
    index = files["index.html"]
    for host in hosts:
        assert '<a href="%s.html">' % host in index
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", "".join(files.values()))
    # findings grouped by id: the seed's 16 pcie_mrrs findings are one row on 1 host
    table = index.split('<table class="fleet-findings">')[1].split("</table>")[0]
    (mrrs,) = [row for row in table.split("<tr>") if "<code>pcie_mrrs</code>" in row]
    assert '<td class="num">1</td><td class="num">16</td>' in mrrs
    assert '"pve-gpu01.html"><span class="nw">pve-gpu01</span></a> <span class="note">(16)' in mrrs
    # the seed's page: its findings grouped, each remedy a <pre> block, its GPU table
    seed = files["pve-gpu01.html"]
    assert '<a href="index.html">' in seed
    assert seed.count('<section class="finding ') < len(fleet["pve-gpu01"]["findings"])
    assert "<summary>16 subjects</summary>" in seed
    assert seed.count('<pre class="remedy"><code>') == seed.count('<section class="finding ')
    assert seed.count('<span class="bad">512</span>') == 16
    assert "<script" not in seed.lower()


def test_hosts_not_audited_come_first_with_their_status_error_and_last_seen(fleet):
    files = page.html_files(_docs(fleet), "now")
    index = files["index.html"]
    missing = index.split('<table class="missing">')[1].split("</table>")[0]
    assert missing.index("pve-gpu09") < missing.index("pve-gpu10")
    assert "Connection timed out" in missing and "never" in missing
    assert '<span class="nw">2026-12-04</span> <span class="nw">03:10:00Z</span>' in missing
    rows = index.split('<table class="hosts" id="hosts">')[1].split("<tbody>")[1]
    order = re.findall(r'<tr data-status="(\w+)"', rows)
    assert order[:2] == ["unreachable", "failed"] and set(order[2:]) == {"ok"}
    gone = files["pve-gpu09.html"]
    assert "Not audited this run" in gone and "Connection timed out" in gone
    assert "<h2>Findings" not in gone and "<h2>GPUs" not in gone


def test_the_host_list_is_a_static_list_without_script_and_filterable_with_it(fleet):
    index = page.html_files(_docs(fleet), "now")["index.html"]
    # the filter form is hidden until its script shows it; no row is ever hidden in the
    # markup: with script off the list is complete
    assert '<form class="filter" id="filter" hidden>' in index
    body = index.split('<table class="hosts" id="hosts">')[1].split("</table>")[0]
    assert " hidden" not in body
    seed = re.search(r'<tr data-status="ok" data-sevs="([^"]*)" data-ids="([^"]*)" '
                     r'data-groups="([^"]*)"><td><a href="pve-gpu01.html">', body)
    assert seed.group(1).split()[0] == "critical"
    assert "pcie_mrrs" in seed.group(2).split()
    assert seed.group(3) == "gpuhosts rack_1"
    assert '<option>rack_9</option>' in index and "<option>pcie_mrrs</option>" in index
    assert index.count("<script>") == 1


def test_a_host_named_like_a_fleet_file_never_replaces_it():
    docs = [documents.host_document(name, {"findings": []}) for name in ("index", "INDEX")]
    files = page.html_files(docs)
    assert sorted(files) == ["INDEX-host.html", "index-host.html", "index.html"]
    assert "GPU host audit</h1>" in files["index.html"]
    clash = docs + [documents.host_document("index-host", {"findings": []})]
    try:
        page.html_files(clash)
    except page.ReportError as exc:
        assert "'index' and 'index-host'" in str(exc) and "nothing was written" in str(exc)
    else:
        raise AssertionError("two hosts on one page")


def test_the_pages_escape_text_and_quote_links():
    item = {"id": "sysctl", "severity": "low", "subject": "<b>x</b>", "current": "a&b",
            "expected": "\"q\"", "remedy": "echo <script>", "reboot_required": False}
    files = page.html_files([documents.host_document("a b#<i>", {"findings": [item]})])
    name = page.page_name("a b#<i>")
    assert name == "a b#<i>.html"
    assert ('<a href="a%20b%23%3Ci%3E.html">a <span class="nw">b#&lt;i&gt;</span></a>'
            in files["index.html"])
    text = files[name]
    assert "<b>x</b>" not in text and "&lt;b&gt;x&lt;/b&gt;" in text
    assert "echo <script>" not in text and "<code>echo &lt;script&gt;</code>" in text
    assert "<i>" not in files["index.html"]
