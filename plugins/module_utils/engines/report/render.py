# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rendering the report templates (``templates.py``) with Jinja2.

Jinja2 is imported when a report is rendered, not when this file is: the host-side program
that ``audit_timer`` installs and ``host_audit`` import the report documents' code and
never render, and need no Jinja2 there. Every Ansible controller has it (ansible-core
requires it), and the report modules render in the controller's process (action plugins;
``rollout_report`` and ``reboot_report``, delegated to localhost, render no template).
Rendering where it is absent is a ReportError saying so, not a traceback.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import html
import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import (
    page_templates,
    templates,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report.files import ReportError

SOURCES = {"summary.md": templates.SUMMARY_MD, "index.html": templates.INDEX_HTML,
           "fleet.html": page_templates.FLEET_HTML, "host.html": page_templates.HOST_HTML}
_ENV = []


def escape_html(text):
    """Text for HTML (attribute values included); None is empty."""
    return html.escape("" if text is None else str(text), quote=True)


# A word with a character inside it where a browser may break a line (``6.8.12-9-pve``,
# ``/etc/kernel/cmdline``, ``2026-12-05T03:10:00Z``, ``pve-gpu01``): kept on one line. Words
# are found first and then looked into (linear in the text: a pattern that finds such a
# word in one go backtracks quadratically on a long word without punctuation).
_WORD = re.compile(r"\S{3,}")
_PUNCT = re.compile(r"[^\w\s]")


def escape_words(text):
    """Text for HTML, each word that holds punctuation inside it (after escaping) in a
    ``<span class="nw">`` (no line break inside: the page's CSS), so that a kernel
    version, a path or a host name is never split at its hyphens or slashes."""
    text = escape_html(text)
    if not _PUNCT.search(text):
        return text
    return _WORD.sub(_kept_whole, text)


def _kept_whole(found):
    word = found.group(0)
    if _PUNCT.search(word, 1, len(word) - 1):
        return '<span class="nw">%s</span>' % word
    return word


def escape_md(text):
    """Text for a Markdown table cell: no ``|`` or line break ends the cell."""
    text = "" if text is None else str(text)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def status_class(status):
    """The CSS class of a severity or status (``n/a`` -> ``s-na``)."""
    return "s-na" if status == "n/a" else "s-%s" % re.sub(r"[^a-z]", "", str(status))


def anchor(host):
    """The id of a host's section in the page."""
    return "host-" + re.sub(r"[^A-Za-z0-9_.-]", "-", host)


def environment():
    """The Jinja2 environment of the report templates (made once per process)."""
    if not _ENV:
        try:
            import jinja2
        except ImportError as exc:
            raise ReportError("the reports are rendered with Jinja2, which is not importable "
                              "here (%s): run the report modules on the Ansible controller "
                              "(their action plugins do), where ansible-core brings it" % exc)
        env = jinja2.Environment(loader=jinja2.DictLoader(SOURCES), autoescape=False,
                                 trim_blocks=True, keep_trailing_newline=True,
                                 undefined=jinja2.StrictUndefined)
        env.filters.update(h=escape_html, w=escape_words, md=escape_md, cls=status_class,
                           anchor=anchor)
        _ENV.append(env)
    return _ENV[0]


def render(name, **context):
    """Template ``name`` (``summary.md``, ``index.html``) rendered with ``context``."""
    return environment().get_template(name).render(**context)
