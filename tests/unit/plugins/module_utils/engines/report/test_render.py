"""The report templates (engines/report/templates.py) rendered with Jinja2
(engines/report/render.py):
what needs Jinja2 and what does not, and the message where it is absent."""

import subprocess
import sys

from conftest import LINKS

SCRIPT = r"""
import sys
sys.path[:0] = [sys.argv[1]]
sys.modules["jinja2"] = None          # import jinja2 raises ImportError from here on
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import report
doc = report.host_document("gpu01", {"findings": [], "checks": {}})
assert report.render_json(doc).startswith("{")   # the host-side program's part: no Jinja2
try:
    report.render_markdown([doc])
except report.ReportError as exc:
    print("REFUSED", exc)
"""


def test_documents_need_no_jinja2_and_rendering_without_it_says_where_to_run():
    proc = subprocess.run([sys.executable, "-c", SCRIPT, LINKS], capture_output=True,
                          text=True, check=True)
    assert proc.stdout.startswith("REFUSED the reports are rendered with Jinja2")
    assert "run the report modules on the Ansible controller" in proc.stdout


def test_templates_render_a_report_of_no_host():
    from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import report
    text = report.render_markdown([], "2026-01-01 00:00:00Z")
    assert text.startswith("# GPU host audit\n\n0 host(s), 0 finding(s), generated 2026")
    assert text.endswith("No findings.\n")
    page = report.render_html([], None)
    assert page.startswith("<!DOCTYPE html>") and page.endswith("</html>\n")


def test_words_with_punctuation_inside_are_kept_whole_and_escaped():
    from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import render
    assert render.escape_words("kernel 6.8.12-9-pve, next <b>") == (
        'kernel <span class="nw">6.8.12-9-pve,</span> next <span class="nw">&lt;b&gt;</span>')
    assert render.escape_words(None) == "" and render.escape_words("a - b") == "a - b"
    assert render.escape_words('x "/etc/a&b"') == (
        'x <span class="nw">&quot;/etc/a&amp;b&quot;</span>')
    assert render.status_class('high" onload="x') == "s-highonloadx"


def test_a_long_word_is_escaped_in_linear_time():
    # an error message can hold a huge word (a module's output without a space): the words
    # are found first and then looked into; a pattern finding them in one go backtracked
    # quadratically (a 200,000-character word took minutes)
    import time
    from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import render
    start = time.monotonic()
    text = render.escape_words("x" * 2000000 + " a-b " + "y" * 1000000 + "-")
    assert time.monotonic() - start < 2
    assert ' <span class="nw">a-b</span> ' in text and text.endswith("y-")
