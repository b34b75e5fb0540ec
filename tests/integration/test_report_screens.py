"""The HTML report (engines/report/page.py html_files) on screens from 800 to 1,920 px, measured in
headless Chromium (Debian's chromium package, installed by the integration tier's set-up:
Makefile INTEGRATION_PKGS).

The pages are made from the fixture hosts' real audits (tests/fixtures/hosts.py: the seed
host before tuning, the tuned host, the H200 VM host) and two hosts a run could not audit
(Ansible's own unreachable and failed messages). At each width a copy of each page with a
measuring script appended is loaded with ``--dump-dom``; the script writes what it measured
(getBoundingClientRect / Range widths) into the DOM as JSON:

- the page never scrolls sideways (documentElement.scrollWidth <= the window);
- no table cell is narrower than its longest word, none overflows, none collapses;
- no word outside a code block is split across two lines;
- each remedy is a <pre> block holding the whole command on one line, scrolling when long;
- the fleet view's filter works (with script) and is hidden without it.

A screenshot of both pages at each width goes to tests/output/report-screens/ (to look at;
docs/images/audit-report.png is the fleet view at 1,400 px). 15 s on a 2-core machine (26 s
with the machine loaded by other jobs; --durations: 3-7 s per width).
"""

import html
import json
import os
import re
import shutil
import subprocess

import pytest
from fixtures import hosts

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import documents, page

# One pytest-xdist worker runs this file (--dist loadgroup): the pages are made once.
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("report_screens")]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHOTS = os.path.join(REPO, "tests", "output", "report-screens")
WIDTHS = (800, 1024, 1400, 1920)
UNREACHABLE = ("Failed to connect to the host via ssh: ssh: connect to host 10.20.0.8 port "
               "22: Connection timed out")
FAILED = ("MODULE FAILURE: gpuhost.tuning.host_audit could not read "
          "/sys/bus/pci/devices/0000:41:00.0/config: [Errno 5] Input/output error")

# Appended to a copy of a page (the fleet view has its own filter script; a host page none).
MEASURE = r"""
(function () {
  var out = {viewport: window.innerWidth,
             pageWidth: document.documentElement.scrollWidth,
             broken: [], overflow: [], narrow: [], scrolling: [], remedies: [],
             cells: 0, words: 0, filter: null};
  function tokens(node, each) {
    var re = /\S+/g, m;
    while ((m = re.exec(node.data))) {
      var range = document.createRange();
      range.setStart(node, m.index);
      range.setEnd(node, m.index + m[0].length);
      each(m[0], range);
    }
  }
  function lines(range) {
    var tops = [];
    Array.prototype.forEach.call(range.getClientRects(), function (r) {
      if (r.width > 0 && r.height > 0 &&
          tops.every(function (t) { return Math.abs(t - r.top) > 2; })) { tops.push(r.top); }
    });
    return tops.length;
  }
  var walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  var node;
  while ((node = walker.nextNode())) {
    if (node.parentElement.closest("pre,script,style,select,option,#measured")) { continue; }
    tokens(node, function (word, range) {
      out.words++;
      if (lines(range) > 1) { out.broken.push(word); }
    });
  }
  document.querySelectorAll("td,th").forEach(function (cell) {
    out.cells++;
    var style = getComputedStyle(cell);
    var room = cell.clientWidth - parseFloat(style.paddingLeft) -
      parseFloat(style.paddingRight);
    var text = cell.textContent.trim().slice(0, 60);
    if (cell.scrollWidth > cell.clientWidth + 1) { out.overflow.push(text); }
    var walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT), n, widest = 0;
    while ((n = walk.nextNode())) {
      if (n.parentElement.closest("details:not([open]) > div")) { continue; }
      tokens(n, function (word, range) {
        widest = Math.max(widest, range.getBoundingClientRect().width);
      });
    }
    if (room < 16 || widest > room + 1) {
      out.narrow.push({text: text, room: Math.round(room), word: Math.round(widest)});
    }
  });
  document.querySelectorAll(".wide").forEach(function (box) {
    if (box.scrollWidth > box.clientWidth + 1) {
      out.scrolling.push(box.firstElementChild.className);
    }
  });
  document.querySelectorAll("pre.remedy").forEach(function (pre) {
    var style = getComputedStyle(pre);
    var code = pre.querySelector("code");
    out.remedies.push({text: pre.textContent, overflowX: style.overflowX,
      whiteSpace: style.whiteSpace,
      lines: Math.round(code.getBoundingClientRect().height / parseFloat(style.lineHeight)),
      right: pre.getBoundingClientRect().right});
  });
  var form = document.getElementById("filter");
  if (form) {
    var rows = document.querySelectorAll("#hosts tbody tr");
    var shown = function () {
      return Array.prototype.filter.call(rows, function (r) { return !r.hidden; }).length;
    };
    var all = shown();
    form.elements.severity.value = "critical";
    form.dispatchEvent(new Event("change"));
    var critical = shown();
    form.elements.severity.value = "";
    form.elements.status.value = "unreachable";
    form.dispatchEvent(new Event("change"));
    out.filter = {visible: !form.hidden, rows: rows.length, all: all, critical: critical,
                  unreachable: shown()};
    form.elements.status.value = "";
    form.dispatchEvent(new Event("change"));
  }
  var pre = document.createElement("pre");
  pre.id = "measured";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
"""


def _chromium():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    subprocess.run([os.path.join(REPO, "scripts/apt-ensure.sh"), "chromium"], check=True,
                   timeout=900)
    return shutil.which("chromium")


def _args(profile, width, height=1600):
    return ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--hide-scrollbars", "--user-data-dir=%s" % profile,
            "--window-size=%d,%d" % (width, height)]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """The report's files, written to a folder: ``(folder, files, documents)``."""
    work = tmp_path_factory.mktemp("screens")
    wanted = hosts.common_wanted()
    docs = []
    for name, build in (("pve-gpu01.dc1.example.net", hosts.seed_host),
                        ("pve-gpu02.dc1.example.net", hosts.tuned_host),
                        ("h200-vm.dc1.example.net", hosts.vm_host)):
        root = work / name
        root.mkdir()
        build(str(root))
        doc = documents.host_document(name, audit.audit(str(root), dict(wanted, host=name)),
                                      groups={name: ["gpuhosts", "rack_07"]})
        docs.append(doc)
    for name, status, error in (("pve-gpu03.dc1.example.net", "unreachable", UNREACHABLE),
                                ("pve-gpu04.dc1.example.net", "failed", FAILED)):
        docs.append(documents.not_audited_document(
            name, {"status": status, "error": error, "last_seen": "2026-12-04T03:10:00Z"},
            groups={name: ["gpuhosts", "rack_08"]}, attempted_at="2026-12-05T03:10:00Z"))
    files = page.html_files(docs, "2026-12-05 03:12:00Z", 4096)
    folder = work / "report"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder, files, docs


@pytest.fixture(scope="module")
def browser():
    path = _chromium()
    assert path, "chromium is not installed (scripts/apt-ensure.sh chromium)"
    return path


def measure(browser, path, width, profile):
    copy = path.parent / ("measured-" + path.name)
    text = path.read_text(encoding="utf-8")
    copy.write_text(text.replace("</body>", "<script>%s</script></body>" % MEASURE),
                    encoding="utf-8")
    dom = subprocess.run([browser] + _args(profile, width) + ["--dump-dom", copy.as_uri()],
                         capture_output=True, text=True, check=False, timeout=120)
    found = re.search(r'<pre id="measured">([^<]*)</pre>', dom.stdout)
    assert found, dom.stderr[-2000:]
    return json.loads(html.unescape(found.group(1)))


def screenshot(browser, path, width, profile, name):
    os.makedirs(SHOTS, exist_ok=True)
    shot = os.path.join(SHOTS, "%s-%d.png" % (name, width))
    if os.path.exists(shot):
        os.unlink(shot)
    proc = subprocess.run([browser] + _args(profile, width, 1400) +
                          ["--screenshot=%s" % shot, path.as_uri()],
                          capture_output=True, text=True, check=False, timeout=120)
    assert os.path.exists(shot), proc.stderr[-2000:]
    with open(shot, "rb") as handle:
        png = handle.read(24)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(png[16:20], "big") == width
    return shot


def _check(measured, width):
    """What holds on every page at every width."""
    assert measured["viewport"] == width
    assert measured["pageWidth"] <= width, "the page scrolls sideways"
    assert measured["words"] > 100 and measured["cells"] > 10
    assert measured["broken"] == [], "words split across lines"
    assert measured["overflow"] == [], "cells whose content overflows"
    assert measured["narrow"] == [], "cells narrower than their longest word"
    for remedy in measured["remedies"]:
        assert remedy["whiteSpace"] == "pre" and remedy["overflowX"] == "auto"
        assert remedy["lines"] == 1 and remedy["right"] <= width


@pytest.mark.parametrize("width", WIDTHS)
def test_fleet_view_and_host_page_fit_every_width(report, browser, tmp_path, width):
    folder, files, docs = report
    seed = page.page_name("pve-gpu01.dc1.example.net")
    fleet = measure(browser, folder / "index.html", width, tmp_path / "profile")
    _check(fleet, width)
    # the tables of the fleet view fit without scrolling even at 800 px
    assert fleet["scrolling"] == []
    assert fleet["filter"] == {"visible": True, "rows": len(docs), "all": len(docs),
                               "critical": 1, "unreachable": 1}
    host = measure(browser, folder / seed, width, tmp_path / "profile")
    _check(host, width)
    # the GPU table is the one that may scroll inside its own box, and only when narrow
    assert set(host["scrolling"]) <= ({"gpus"} if width < 1024 else set())
    # every remedy of the seed host is shown whole, one command per block
    remedies = [f["remedy"] for f in docs[0]["findings"]]
    assert len(host["remedies"]) > 10
    for shown in host["remedies"]:
        assert "\n" not in shown["text"]
        # a finding's own remedy, or one loop over the subjects of a grouped row: never a
        # placeholder
        assert "<subject>" not in shown["text"]
        assert shown["text"] in remedies or shown["text"].startswith("for s in ")
    screenshot(browser, folder / "index.html", width, tmp_path / "profile", "fleet")
    screenshot(browser, folder / seed, width, tmp_path / "profile", "host")


def test_the_old_layout_would_fail_the_measure(report, browser, tmp_path):
    """The measure can fail: the former single page (fixed column widths) at 800 px has
    collapsed cells and words split across lines."""
    _folder, _files, docs = report
    old = tmp_path / "old.html"
    old.write_text(page.render_html(docs[:3], "now"), encoding="utf-8")
    measured = measure(browser, old, 800, tmp_path / "profile")
    assert measured["broken"] and measured["narrow"]
