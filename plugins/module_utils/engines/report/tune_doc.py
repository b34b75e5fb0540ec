# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tune reports: ``<host>-tune.md`` and ``<host>-tune.json`` from module host_tune's
results."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report.documents import (
    STATUSES,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report.files import (
    check_file_names,
    host_file,
)


TUNE_KEYS = ("host", "root", "check_mode", "snapshot", "rows", "findings_before",
             "findings_after", "verified", "failures", "status", "error")


def _one_line(text):
    return " ".join(str(text or "").split())


def tune_status(result, failures):
    """``(status, error)`` of a host's tune (``documents.STATUSES``): ``unreachable`` or
    ``skipped`` as Ansible registered it, ``failed`` with a failure (no result at all: the
    host failed before host_tune, e.g. refused as a guest), else ``ok``. A document read
    back (report_merge) keeps its own."""
    if result.get("status") in STATUSES:
        return result["status"], _one_line(result.get("error"))
    if result.get("unreachable"):
        return "unreachable", _one_line(result.get("msg")) or "unreachable"
    if result.get("skipped"):
        return "skipped", _one_line(result.get("skip_reason") or result.get("msg")) or "skipped"
    if failures:
        return "failed", _one_line("; ".join(str(f) for f in failures))
    return "ok", ""


def tune_document(host, result):
    """What ``<host>-tune.json`` holds for one host_tune result (a result without rows, as
    from a module that crashed or a host that failed before it, becomes a failure)."""
    result = result if isinstance(result, dict) else {}
    doc = {"host": host, "root": result.get("root"),
           "check_mode": bool(result.get("check_mode")),
           "snapshot": result.get("snapshot") or "not taken",
           "rows": list(result.get("rows") or []),
           "findings_before": list(result.get("findings_before") or []),
           "findings_after": list(result.get("findings_after") or []),
           "verified": bool(result.get("verified")),
           "failures": list(result.get("failures") or [])}
    if "rows" not in result and not doc["failures"]:
        doc["failures"] = ["host_tune returned no result: %s" % (
            result.get("msg") or "the host was not tuned in this play")]
    doc["status"], doc["error"] = tune_status(result, doc["failures"])
    return doc


def result_text(doc, planned=False):
    """A host's tune result in a few words: ``ok`` (with ``planned``, ``planned (check
    mode)`` for a check-mode run), or its status in capitals and why (``UNREACHABLE:
    ...``, ``FAILED: ...``)."""
    status = doc.get("status") or ("failed" if doc["failures"] else "ok")
    if status == "ok" and not doc["failures"]:
        return "planned (check mode)" if planned and doc["check_mode"] else "ok"
    if status == "ok":
        status = "failed"
    return "%s: %s" % (status.upper(), doc.get("error") or "; ".join(doc["failures"]))


def _cell(value):
    return "-" if value is None else str(value)


def render_tune_markdown(doc):
    """The before -> after table of one host, as Markdown (the text the role prints)."""
    out = ["# Tuning of %s%s" % (doc["host"], " (check mode: planned, nothing changed)"
                                 if doc["check_mode"] else ""),
           "",
           "- root: `%s`" % doc["root"],
           "- snapshot: %s" % doc["snapshot"],
           "- managed findings before: %d, after: %s" % (
               len(doc["findings_before"]),
               len(doc["findings_after"]) if doc["verified"] else "not verified"),
           "- result: %s" % result_text(doc),
           "",
           "| part | item | before | after | status | note |",
           "| --- | --- | --- | --- | --- | --- |"]
    for r in doc["rows"]:
        note = str(r.get("note") or "").replace("|", "/").replace("\n", " ")
        out.append("| %s | %s | %s | %s | %s | %s |" % (
            r["part"], r["item"], _cell(r.get("before")), _cell(r.get("after")), r["status"],
            note))
    if doc["findings_after"]:
        out += ["", "## Managed findings that remain", ""]
        for f in doc["findings_after"]:
            out.append("- %s %s: %s (want %s)" % (f["id"], f["subject"], f["current"],
                                                  f["expected"]))
    return "\n".join(out) + "\n"


def tune_files(results):
    """``{filename: text}`` for ``results`` (host -> host_tune result): ``<host>-tune.md``
    and ``<host>-tune.json`` per host."""
    check_file_names(results, "tune report")
    files = {}
    for host in sorted(results):
        doc = tune_document(host, results[host])
        files[host_file(host, "tune", 0)] = render_tune_markdown(doc)
        files[host_file(host, "tune", 1)] = json.dumps(doc, indent=4, sort_keys=True) + "\n"
    return files
