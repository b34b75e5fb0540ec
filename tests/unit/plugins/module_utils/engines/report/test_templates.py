"""engines/report/templates.py: the report templates as Python strings: each parses in the
reports' Jinja2 environment, uses only the filters it defines, and keeps the pages
self-contained (nothing fetched; the fleet view's only script is its own filter)."""

import re

import jinja2.meta
import jinja2.nodes
import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import (
    page_templates,
    render,
    templates,
)

NAMES = ("summary.md", "index.html", "fleet.html", "host.html")


def test_every_template_is_rendered_by_name():
    assert render.SOURCES == {"summary.md": templates.SUMMARY_MD,
                              "index.html": templates.INDEX_HTML,
                              "fleet.html": page_templates.FLEET_HTML,
                              "host.html": page_templates.HOST_HTML}


@pytest.mark.parametrize("name", NAMES)
def test_each_template_parses_and_uses_only_the_reports_filters(name):
    env = render.environment()
    tree = env.parse(render.SOURCES[name])
    used = set(node.name for node in tree.find_all(jinja2.nodes.Filter))
    assert {"h", "w", "md"} & used
    assert used <= set(env.filters), used - set(env.filters)
    assert jinja2.meta.find_undeclared_variables(tree)
    assert not list(jinja2.meta.find_referenced_templates(tree))   # one file each


@pytest.mark.parametrize("name", NAMES)
def test_the_templates_are_ascii(name):
    render.SOURCES[name].encode("ascii")
    templates.CSS.encode("ascii")
    page_templates.PAGE_CSS.encode("ascii")
    page_templates.FILTER_JS.encode("ascii")


def test_the_page_fetches_nothing_and_runs_no_script():
    text = templates.INDEX_HTML + templates.CSS
    assert "<script" not in text.lower()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", text)
    assert "url(" not in templates.CSS and "@import" not in templates.CSS


def test_the_matrix_headings_never_break_inside_a_word():
    # the column headings wrap at spaces only (issue 23: "Kerne l & boot" at 1400 px): the
    # matrix headings' rule turns off every way a browser breaks inside a word
    (rule,) = re.findall(r"table\.matrix th\{([^}]*)\}", templates.CSS)
    props = dict(p.strip().split(":", 1) for p in rule.split(";") if p.strip())
    assert props.get("overflow-wrap") == "normal"
    assert props.get("word-break") == "normal"
    assert props.get("hyphens") == "none"
