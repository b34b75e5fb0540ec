# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""report_merge's reading: the per-host ``<host>.json`` of several report folders."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import bounded
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import metrics
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report.files import (
    HOST_FILES,
    ReportError,
    host_file,
    read_report_text,
    report_name_clash,
)


MERGE_FOLDER_MAX = 100000  # entries of one folder looked at, at most

# A document dated up to this far ahead of the controller's clock is trusted: hosts and
# controller kept by NTP differ by seconds, and a host audited while the controller's clock
# lags a little is still "now". A later date (2099, a host whose clock is wrong) is not
# trusted as newest: the merge says so, and the file's modification time takes its place.
CLOCK_SKEW_S = 300


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


def folder_entries(folder, warnings, names=None):
    """``[(name, path, document, mtime)]``: every ``*.json`` of controller folder ``folder``
    (no hidden file), each read once, bounded (``read_report_text``: a regular file of at
    most 64 MiB, never a FIFO's wait; ``bounded.json_loads``: at most 64 deep, no NaN). What
    the merge takes from them is decided by each document's content, never by its file
    name's suffix (a host may be named ``lab-tune`` or ``db-reboot``). A file that cannot
    be read or parsed is left out with a line in ``warnings`` naming it."""
    out = []
    for name in folder_names(folder) if names is None else names:
        if not name.endswith(".json") or name.startswith("."):
            continue
        path = os.path.join(folder, name)
        try:
            text = read_report_text(path)
            if text is None:
                continue
            doc = bounded.json_loads(text)
            mtime = os.stat(path).st_mtime
        except (ValueError, OSError) as exc:
            warnings.append("%s is not a readable JSON report (%s): left out of the merge"
                            % (path, exc))
            continue
        out.append((name, path, doc, mtime))
    return out


def _entries(folder, warnings, names, entries):
    return folder_entries(folder, warnings, names) if entries is None else entries


def _looks_like_audit(doc):
    return isinstance(doc, dict) and ("facts" in doc or "findings" in doc)


def folder_documents(folder, warnings, names=None, entries=None):
    """``[(document, path, mtime)]``: the audit reports (``<host>.json``: host, facts,
    findings, checks) in controller folder ``folder`` (:func:`folder_entries`, or its
    ``entries`` already read). The other reports' documents and JSON that is no report are
    passed over; a file that looks like a host report but cannot be used (malformed, or
    named for another host than it names) is left out with a line in ``warnings``.
    ReportError when the folder cannot be listed."""
    out = []
    for name, path, doc, mtime in _entries(folder, warnings, names, entries):
        if not _looks_like_audit(doc):
            continue  # another report (tune, reboot, rollout) or no report at all
        if not is_host_document(doc):
            warnings.append("%s is not an audit report document (host, facts, findings, "
                            "checks): left out of the merge" % path)
            continue
        if name != host_file(doc["host"], "audit"):
            warnings.append("%s names host %r, whose report is %s: left out of the merge "
                            "(a copied or renamed file)" % (path, doc["host"],
                                                            host_file(doc["host"], "audit")))
            continue
        out.append((doc, path, mtime))
    return out


TUNE_LISTS = ("rows", "findings_before", "findings_after", "failures")


def is_tune_document(doc):
    return (isinstance(doc, dict) and isinstance(doc.get("host"), str)
            and all(isinstance(doc.get(key), list) for key in TUNE_LISTS))


def _looks_like_tune(name, doc):
    """A tune report by its content (one of its lists), or JSON that is no report of any
    kind in a file named as tune_report names its files (named in a warning, not passed
    over: a ``<host>-tune.json`` holding ``{}`` is a broken tune report)."""
    if not isinstance(doc, dict) or _looks_like_audit(doc) or _looks_like_rollout(doc):
        return False
    if any(key in doc for key in TUNE_LISTS):
        return True
    return name.endswith(HOST_FILES["tune"][1]) and not _looks_like_reboot(doc)


def _looks_like_rollout(doc):
    return isinstance(doc, dict) and all(key in doc for key in ("counts", "hosts", "title"))


def _looks_like_reboot(doc):
    return isinstance(doc, dict) and all(key in doc for key in ("before", "after", "reboot"))


def tune_documents(folder, warnings, names=None, entries=None):
    """``[(document, path, mtime)]``: the tune reports of tune_report (``<host>-tune.json``:
    host, rows, findings_before, findings_after, failures) in ``folder`` (as
    :func:`folder_documents`; they carry no time of their own, so a host's newest is the
    one written last)."""
    out = []
    for name, path, doc, mtime in _entries(folder, warnings, names, entries):
        if not _looks_like_tune(name, doc):
            continue
        if not is_tune_document(doc):
            warnings.append("%s is not a tune report document (host, rows, findings_before, "
                            "findings_after, failures): left out of the merge" % path)
        elif name != host_file(doc["host"], "tune", 1):
            warnings.append("%s names host %r, whose tune report is %s: left out of the "
                            "merge (a copied or renamed file)" % (
                                path, doc["host"], host_file(doc["host"], "tune", 1)))
        else:
            out.append((doc, path, mtime))
    return out


def is_rollout_summary(doc):
    rows = doc.get("hosts") if isinstance(doc, dict) else None
    return (isinstance(doc, dict) and isinstance(doc.get("title"), str)
            and isinstance(doc.get("counts"), dict) and isinstance(rows, list)
            and all(isinstance(r, dict) and isinstance(r.get("host"), str)
                    and isinstance(r.get("status"), str) for r in rows))


def rollout_documents(folder, warnings, names=None, entries=None, hosts=()):
    """``[(basename, document, path)]``: the rollout summaries (``rollout_report``'s
    ``<name>.json``: title, hosts, counts) in ``folder``; other JSON is passed over. One
    whose name clashes with the fleet files or the per-host files of ``hosts``
    (``files.report_name_clash``: a ``summary.json`` written before such names were refused
    would make a ``summary.md``) is left out with a line in ``warnings``."""
    out = []
    for name, path, doc, _mtime in _entries(folder, warnings, names, entries):
        if not _looks_like_rollout(doc) or _looks_like_audit(doc):
            continue
        if not is_rollout_summary(doc):
            warnings.append("%s is not a rollout summary (title, hosts: [{host, status}], "
                            "counts): left out of the merge" % path)
            continue
        clash = report_name_clash(name[:-len(".json")], hosts)
        if clash:
            warnings.append("%s is a rollout summary whose name cannot be merged: %s; left "
                            "out of the merge (write it again with another rollout_report "
                            "name)" % (path, clash))
            continue
        out.append((name[:-len(".json")], doc, path))
    return out


def stamp(doc):
    return metrics.epoch(doc.get("collected_at")) or 0


def trusted_time(when, mtime, now_s, path, what, warnings):
    """``(trusted, seconds)``: how a merge ranks a report dated ``when`` (Unix time, 0 or
    None for no date) whose file ``path`` was modified at ``mtime``. A date no more than
    ``CLOCK_SKEW_S`` ahead of ``now_s`` is trusted; a later one is named in ``warnings``
    (the file, its date ``what``) and the file's modification time stands in (0 when that
    is in the future too). A trusted report always ranks above an untrusted one."""
    limit = now_s + CLOCK_SKEW_S
    if not when:
        return False, 0
    if when <= limit:
        return True, when
    warnings.append("%s is dated %s, more than %d minutes ahead of this controller's clock: "
                    "its date is not trusted (every report dated in the past ranks above it); "
                    "fix the clock that wrote it and report again"
                    % (path, what, CLOCK_SKEW_S // 60))
    return False, mtime if mtime is not None and mtime <= limit else 0
