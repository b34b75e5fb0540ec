# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""report_merge's reading: the per-host ``<host>.json`` of several report folders."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible_collections.gpuhost.tuning.plugins.module_utils.output import metrics
from ansible_collections.gpuhost.tuning.plugins.module_utils.output.files import (
    ReportError,
    read_report_text,
    safe_name,
)


MERGE_SKIP = ("-tune.json", "-reboot.json")  # the other reports' per-host files


MERGE_FOLDER_MAX = 100000  # entries of one folder looked at, at most


def age_text(seconds):
    seconds = max(0, int(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    if days:
        return "%dd %dh" % (days, hours)
    return "%dh %dm" % (hours, rest // 60)


def is_host_document(doc):
    return (isinstance(doc, dict) and isinstance(doc.get("host"), str)
            and isinstance(doc.get("facts"), dict) and isinstance(doc.get("findings"), list)
            and all(isinstance(f, dict) for f in doc["findings"])
            and isinstance(doc.get("checks"), dict))


def folder_names(folder):
    """The entries of controller folder ``folder`` a merge looks at (sorted, at most
    ``MERGE_FOLDER_MAX``). ReportError when it cannot be listed."""
    try:
        return sorted(os.listdir(folder))[:MERGE_FOLDER_MAX]
    except (IOError, OSError) as exc:
        raise ReportError("report_merge: cannot list the report folder %s: %s (pass folders "
                          "that audit_report wrote); nothing was written" % (folder, exc))


def _read_json(path, warnings):
    """``(document, mtime)`` of a report file, or ``(None, None)``: missing, or unreadable
    or not JSON (a line in ``warnings``)."""
    try:
        text = read_report_text(path)
        if text is None:
            return None, None
        return json.loads(text), os.stat(path).st_mtime
    except (ValueError, OSError) as exc:
        warnings.append("%s is not a readable JSON report (%s): left out of the merge"
                        % (path, exc))
        return None, None


def folder_documents(folder, warnings, names=None):
    """``[(document, path)]``: the ``<host>.json`` audit reports in controller folder
    ``folder``, read bounded (``read_report_text``: regular files only, never a FIFO's
    wait). The other reports' files (``-tune.json``, ``-reboot.json``, JSON that is no host
    report at all) are passed over; a file that looks like a host report but cannot be used
    (unreadable, malformed, or named for another host than it names) is left out with a
    line in ``warnings``. ReportError when the folder cannot be listed."""
    names = folder_names(folder) if names is None else names
    out = []
    for name in names:
        if (not name.endswith(".json") or name.startswith(".") or name.endswith(MERGE_SKIP)):
            continue
        path = os.path.join(folder, name)
        try:
            text = read_report_text(path)
            if text is None:
                continue
            doc = json.loads(text)
        except ValueError as exc:
            warnings.append("%s is not a readable JSON report (%s): left out of the merge"
                            % (path, exc))
            continue
        if not isinstance(doc, dict) or ("facts" not in doc and "findings" not in doc):
            continue  # another file (rollout.json, ...): not a host report
        if not is_host_document(doc):
            warnings.append("%s is not an audit report document (host, facts, findings, "
                            "checks): left out of the merge" % path)
            continue
        if name != "%s.json" % safe_name(doc["host"]):
            warnings.append("%s names host %r, whose report is %s.json: left out of the merge "
                            "(a copied or renamed file)" % (path, doc["host"],
                                                            safe_name(doc["host"])))
            continue
        out.append((doc, path))
    return out


TUNE_SUFFIX = "-tune.json"
TUNE_LISTS = ("rows", "findings_before", "findings_after", "failures")


def is_tune_document(doc):
    return (isinstance(doc, dict) and isinstance(doc.get("host"), str)
            and all(isinstance(doc.get(key), list) for key in TUNE_LISTS))


def tune_documents(folder, warnings, names=None):
    """``[(document, path, mtime)]``: the ``<host>-tune.json`` reports of tune_report in
    ``folder`` (as :func:`folder_documents`; they carry no time of their own, so a host's
    newest is the one written last)."""
    out = []
    for name in folder_names(folder) if names is None else names:
        if not name.endswith(TUNE_SUFFIX) or name.startswith("."):
            continue
        path = os.path.join(folder, name)
        doc, mtime = _read_json(path, warnings)
        if doc is None:
            continue
        if not is_tune_document(doc):
            warnings.append("%s is not a tune report document (host, rows, findings_before, "
                            "findings_after, failures): left out of the merge" % path)
        elif name != safe_name(doc["host"]) + TUNE_SUFFIX:
            warnings.append("%s names host %r, whose tune report is %s%s: left out of the "
                            "merge (a copied or renamed file)" % (
                                path, doc["host"], safe_name(doc["host"]), TUNE_SUFFIX))
        else:
            out.append((doc, path, mtime))
    return out


def is_rollout_summary(doc):
    rows = doc.get("hosts") if isinstance(doc, dict) else None
    return (isinstance(doc, dict) and isinstance(doc.get("title"), str)
            and isinstance(doc.get("counts"), dict) and isinstance(rows, list)
            and all(isinstance(r, dict) and isinstance(r.get("host"), str)
                    and isinstance(r.get("status"), str) for r in rows))


def rollout_documents(folder, warnings, names=None):
    """``[(basename, document, path)]``: the rollout summaries (``rollout_report``'s
    ``<name>.json``: title, hosts, counts) in ``folder``; other JSON is passed over."""
    out = []
    for name in folder_names(folder) if names is None else names:
        if (not name.endswith(".json") or name.startswith(".") or name.endswith(MERGE_SKIP)):
            continue
        path = os.path.join(folder, name)
        try:
            text = read_report_text(path)
            doc = json.loads(text) if text is not None else None
        except ValueError:
            continue  # folder_documents names it
        if isinstance(doc, dict) and "counts" in doc and "hosts" in doc and "title" in doc:
            if is_rollout_summary(doc):
                out.append((name[:-len(".json")], doc, path))
            else:
                warnings.append("%s is not a rollout summary (title, hosts: [{host, status}], "
                                "counts): left out of the merge" % path)
    return out


def stamp(doc):
    return metrics._epoch(doc.get("collected_at")) or 0
