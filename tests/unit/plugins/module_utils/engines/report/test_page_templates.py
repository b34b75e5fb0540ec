"""engines/report/page_templates.py: the fleet view and host page templates fetch nothing, script
only the fleet view's filter, and set no fixed width and no break inside a word (the
templates' parsing and filters: test_templates.py, which covers every template by name)."""

import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import page_templates


def test_the_new_pages_fetch_nothing_and_script_only_the_filter():
    text = (page_templates.FLEET_HTML + page_templates.HOST_HTML + page_templates.PAGE_CSS
            + page_templates.FILTER_JS)
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", text)
    assert "url(" not in page_templates.PAGE_CSS and "@import" not in page_templates.PAGE_CSS
    assert "<script" not in page_templates.HOST_HTML.lower()
    assert page_templates.FLEET_HTML.lower().count("<script") == 1
    script = page_templates.FILTER_JS
    assert "fetch(" not in script and "XMLHttpRequest" not in script


def test_no_fixed_width_and_no_break_anywhere_in_the_new_pages():
    # the former page's fixed column widths (872 px in all) collapsed the Remedy column
    # below 1,100 px; overflow-wrap:anywhere let a column shrink under its longest word
    css = page_templates.PAGE_CSS + page_templates.FLEET_HTML + page_templates.HOST_HTML
    assert "table-layout:fixed" not in css and "<col " not in css
    assert not re.search(r"(^|[;{\s])width:\d+px", css)
    assert "anywhere" not in css and "break-all" not in css
    # a remedy keeps its command whole on one line and scrolls inside its own box
    (rule,) = re.findall(r"pre\.remedy\{([^}]*)\}", page_templates.PAGE_CSS)
    assert "white-space:pre" in rule and "overflow-x:auto" in rule
