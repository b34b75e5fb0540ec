# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_recover reports (module recover_report): ``<host>-recover.json`` (the document as
role gpu_recover assembles it: ``root``, ``check_mode``, ``asked``, ``failure`` and
``result``, module gpu_recover's result) and ``<host>-recover.md``: per GPU its need, what
was done and each step's outcome, the containers stopped and started, and the verdict
(recovered, nothing to do, refused, marked for the gated reboot)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report.files import (
    ReportError,
    safe_name,
    write_reports,
)

SUFFIXES = ("-recover.json", "-recover.md")


def verdict(doc):
    """One line: what this host's run came to."""
    result = doc.get("result") or {}
    if doc.get("failure"):
        return "failed: %s" % doc["failure"]
    if result.get("refused"):
        return "refused: %s" % " | ".join(result["refused"])
    if result.get("reboot_needed"):
        return "needs the gated reboot%s: %s" % (
            " (run through reboot_verify)" if (doc.get("asked") or {}).get("reboot")
            else " (marked, not rebooted: gpuhost_recover_reboot is false)",
            " | ".join(result.get("reboot_reasons") or []))
    if result.get("problems"):
        return "recovered with problems: %s" % " | ".join(result["problems"])
    gpus = result.get("gpus") or []
    if not gpus:
        return "nothing to do: no GPU needs a reset"
    if doc.get("check_mode"):
        return "plan (check mode): nothing was run"
    return "recovered: %s" % ", ".join(g["address"] for g in gpus)


def render_markdown(host, doc):
    result = doc.get("result") or {}
    lines = ["# GPU recovery: %s" % host, "", "**%s**" % verdict(doc), "",
             "Root `%s`%s." % (doc.get("root"), ", check mode" if doc.get("check_mode") else "")]
    gpus = result.get("gpus") or []
    if gpus:
        lines += ["", "| GPU | need | evidence | action | result |",
                  "| --- | --- | --- | --- | --- |"]
        for gpu in gpus:
            lines.append("| %s | %s | %s | %s | %s |" % (
                gpu["address"], gpu.get("need"), "; ".join(gpu.get("evidence") or []) or "-",
                gpu.get("action"), gpu.get("result")))
        for gpu in gpus:
            lines += ["", "## %s" % gpu["address"], ""]
            if gpu.get("reason"):
                lines.append("- %s" % gpu["reason"])
            if gpu.get("stop") and not gpu.get("steps"):
                lines.append("- would stop container %s" % ", ".join(gpu["stop"]))
            for step in gpu.get("steps") or []:
                lines.append("- %s: %s - %s" % (step["step"], step["outcome"], step["detail"]))
    cts = result.get("containers") or []
    if cts:
        lines += ["", "## Containers", "", "| CT | ran before | stopped | started | CUDA |",
                  "| --- | --- | --- | --- | --- |"]
        for ct in cts:
            cuda = ct.get("cuda") or {}
            lines.append("| %s | %s | %s | %s | %s |" % (
                ct["vmid"], ct.get("running_before"), ct.get("stopped") or "-",
                ct.get("started"), ct.get("problem") or (
                    "%s GPU(s)" % cuda["devices"] if cuda else "-")))
    return "\n".join(lines) + "\n"


def recover_files(host, doc):
    """``{name: text}`` of one host's gpu_recover report."""
    name = safe_name(host)
    return {name + SUFFIXES[0]: json.dumps(dict(doc, host=host), indent=4, sort_keys=True,
                                           separators=(",", ": ")) + "\n",
            name + SUFFIXES[1]: render_markdown(host, doc)}


def recover_report_run(p, check_mode=False):
    """Module recover_report: ``p`` its options (``host``, ``report``, ``dest``)."""
    try:
        files = recover_files(p["host"], p["report"])
    except (KeyError, TypeError) as exc:
        raise ReportError("recover_report: the report document lacks %s" % exc)
    paths, written = write_reports("recover_report", p["dest"], files, check_mode,
                                   "gpuhost_recover_report_dir")
    return dict(changed=bool(written), files=paths, written=written)
