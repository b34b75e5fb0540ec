# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""report_merge's reading: the per-host ``<host>.json`` of several report folders."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible_collections.gpuhost.tuning.plugins.module_utils import metrics
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


def folder_documents(folder, warnings):
    """``[(document, path)]``: the ``<host>.json`` audit reports in controller folder
    ``folder``, read bounded (``read_report_text``: regular files only, never a FIFO's
    wait). The other reports' files (``-tune.json``, ``-reboot.json``, JSON that is no host
    report at all) are passed over; a file that looks like a host report but cannot be used
    (unreadable, malformed, or named for another host than it names) is left out with a
    line in ``warnings``. ReportError when the folder cannot be listed."""
    try:
        names = sorted(os.listdir(folder))[:MERGE_FOLDER_MAX]
    except (IOError, OSError) as exc:
        raise ReportError("report_merge: cannot list the report folder %s: %s (pass folders "
                          "that audit_report wrote); nothing was written" % (folder, exc))
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


def stamp(doc):
    return metrics._epoch(doc.get("collected_at")) or 0
