"""plan.html at 1,000 hosts (engines/plan/planfile.py html), read in headless Chromium at a
narrow and a wide screen (issue 40: "plan.html readable at 1,000 hosts").

The plan is made from real host_tune check-mode results (the tune engine on the fixture
hosts of tests/fixtures/hosts.py: the seed host, the already tuned host) and the messages
Ansible gives for a host it cannot reach and for a guest host_tune refuses: 993 hosts that
would get the seed host's changes, 3 tuned by hand since (nothing or less to change), 2
refused, 2 unreachable (one group: Ansible's message names each host's address). The
measuring script of test_report_screens.py (Chromium ``--dump-dom`` with a script appended)
says what a reader sees:

- the page never scrolls sideways, and no word outside a code block is split;
- the groups come outliers first: the first section on the page is a group of few hosts,
  the 993-host group is the last, its host list collapsed (a reader scrolls past one line,
  not 993), the few hosts' lists open;
- the whole page is small (under 1 MB) and Chromium lays it out in seconds.
"""

import json
import re
import subprocess
import time

import pytest
from fixtures import hosts
from test_report_screens import MEASURE, _args, _chromium

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.plan import planfile
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import tune

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("report_screens")]

HOSTS = 1000
UNREACHABLE = ("Failed to connect to the host via ssh: ssh: connect to host 10.20.{n}.8 port "
               "22: Connection timed out")
REFUSED = ("{host}: tune pass not started: {host} is a VM guest (kvm): host_tune tunes the "
           "Proxmox host, not its guests (host_tune: guest warn or allow)")

# What the page itself says about its sections, beside MEASURE's words and widths.
SECTIONS = r"""
(function () {
  var out = [];
  document.querySelectorAll("section").forEach(function (s) {
    var d = s.querySelector("details");
    out.push({kind: s.className, hosts: s.querySelectorAll(".hosts span").length,
              open: d.open, top: Math.round(s.getBoundingClientRect().top)});
  });
  var pre = document.createElement("pre");
  pre.id = "sections";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
"""


@pytest.fixture(scope="module")
def browser():
    path = _chromium()
    assert path, "chromium is not installed (scripts/apt-ensure.sh chromium)"
    return path


def _name(index):
    return "pve-gpu%04d.rack%02d.dc1.example.net" % (index, index // 40)


@pytest.fixture(scope="module")
def plan_page(tmp_path_factory):
    work = tmp_path_factory.mktemp("plan-screens")
    results = {}
    for label, build in (("seed", hosts.seed_host), ("tuned", hosts.tuned_host)):
        root = work / label
        root.mkdir()
        build(str(root))
        results[label] = tune.tune_run(hosts.as_wanted({"root": str(root), "host": label}),
                                       check_mode=True)
    assert [r for r in results["seed"]["rows"] if r["status"] in ("changed", "planned")]
    plan = {}
    for index in range(1, HOSTS + 1):
        host = _name(index)
        if index in (17, 512, 933):
            plan[host] = results["tuned"]
        elif index in (250, 751):
            plan[host] = {"failed": True, "msg": REFUSED.format(host=host)}
        elif index in (404, 808):
            plan[host] = {"unreachable": True, "msg": UNREACHABLE.format(n=index % 250)}
        else:
            plan[host] = results["seed"]
    doc = planfile.build(plan, {"collection_version": "0.2.0",
                                "created_at": "2026-12-05T20:30:00Z",
                                "created_by": "ops@ctl01", "hosts": sorted(plan),
                                "parts": ["snapshot", "sysctl", "cpuidle", "pcie",
                                          "boot_service"],
                                "wanted": hosts.common_wanted(), "serial": ["1", "5%", "25%"]})
    page = work / "plan.html"
    page.write_text(planfile.html(doc), encoding="utf-8")
    return page, doc


def _dump(chromium, page, width, profile, script, marker):
    copy = page.parent / ("measured-%s-%d.html" % (marker, width))
    copy.write_text(page.read_text(encoding="utf-8").replace(
        "</body>", "<script>%s</script></body>" % script), encoding="utf-8")
    start = time.monotonic()
    dom = subprocess.run([chromium] + _args(profile, width) + ["--dump-dom", copy.as_uri()],
                         capture_output=True, text=True, check=False, timeout=120)
    seconds = time.monotonic() - start
    found = re.search(r'<pre id="%s">([^<]*)</pre>' % marker, dom.stdout)
    assert found, dom.stderr[-2000:]
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&")
                      .replace("&lt;", "<").replace("&gt;", ">")), seconds


@pytest.mark.parametrize("width", (800, 1400))
def test_a_thousand_host_plan_reads_at_every_width(plan_page, browser, tmp_path, width):
    page, doc = plan_page
    assert page.stat().st_size < 1024 * 1024
    measured, seconds = _dump(browser, page, width, tmp_path / "profile", MEASURE, "measured")
    assert measured["viewport"] == width
    assert measured["pageWidth"] <= width, "the page scrolls sideways"
    assert measured["broken"] == [], "words split across lines"
    assert seconds < 60, "Chromium took %.1f s to lay the plan out" % seconds
    sections, _seconds = _dump(browser, page, width, tmp_path / "profile", SECTIONS, "sections")
    sizes = [s["hosts"] for s in sections]
    assert sizes == [2, 2, 3, HOSTS - 7]    # unreachable, refused guests, tuned by hand
    assert sizes == sorted(sizes), "outliers first: the fewest hosts first"
    assert [s["top"] for s in sections] == sorted(s["top"] for s in sections)
    # the big group's 993 names stay folded; the outliers' few are open to read
    assert sections[-1]["open"] is False and sections[-1]["kind"] == "many"
    assert all(s["open"] for s in sections[:-1])
    assert {s["kind"] for s in sections[:-1]} <= {"few", "refused"}
    assert len(doc["groups"]) == len(sections)
