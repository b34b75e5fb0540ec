# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""report_merge's tune and rollout part: the tune reports and rollout summaries of several
folders (the slices of a sliced job) as one run over all their hosts writes them.

- Tune: each host's newest ``<host>-tune.json`` (written last; a later folder wins a tie;
  a modification time in the future ranks below every past one, with a warning),
  written again with its ``<host>-tune.md``, and ``tune-summary.md``: one row per host.
- Rollout: per summary name (``rollout.json``, or the ``name`` rollout_report was given),
  each host's row from the newest summary that lists it (``generated_at``; a later folder
  wins a tie; a date in the future ranks below every past one, with a warning:
  ``merge.trusted_time``), in the slices' rollout order, counted again.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import metrics, rollout
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report.merge import (
    trusted_time,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report.files import (
    TUNE_SUMMARY,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report.tune_doc import (
    result_text,
    tune_document,
    tune_files,
)


def newest_tunes(entries, now_s=None, warnings=None):
    """``{host: (document, path)}`` of ``{host: [(document, path, mtime, folder index)]}``
    (a modification time in the future: ``merge.trusted_time``)."""
    now_s = time.time() if now_s is None else now_s
    warnings = [] if warnings is None else warnings
    out = {}
    for host, found in sorted(entries.items()):
        ranked = [(trusted_time(mtime, None, now_s, path, _utc(mtime), warnings), index, doc,
                   path) for doc, path, mtime, index in found]
        _rank, _index, doc, path = max(ranked, key=lambda e: (e[0], e[1]))
        out[host] = (doc, path)
    return out


def _utc(seconds):
    try:
        return time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(seconds))
    except (ValueError, OverflowError, OSError):
        return "%r (Unix time)" % seconds


def _md(text):
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def tune_summary(chosen, generated_at):
    """``tune-summary.md``: every host's newest tune result and the folder it came from."""
    docs = dict((host, tune_document(host, doc)) for host, (doc, _path) in chosen.items())
    failed = sorted(h for h, d in docs.items() if d["failures"])
    lines = ["# GPU host tuning: %d host(s), %d failed" % (len(docs), len(failed)), "",
             "Generated %s from the newest tune report of each host." % generated_at, "",
             "| Host | Result | Managed findings before | after | Snapshot | Report |",
             "|---|---|---:|---:|---|---|"]
    for host in sorted(docs, key=lambda h: (h not in failed, h)):
        doc = docs[host]
        lines.append("| %s | %s | %d | %s | %s | %s |" % (
            _md(host), _md(result_text(doc, planned=True)),
            len(doc["findings_before"]),
            len(doc["findings_after"]) if doc["verified"] else "not verified",
            _md(doc["snapshot"]), _md(chosen[host][1])))
    return "\n".join(lines) + "\n", failed


def tune_merge_files(entries, generated_at, now_s=None, warnings=None):
    """``({filename: text}, {hosts: {host: from}, failed: [host]})`` of the tune part."""
    chosen = newest_tunes(entries, now_s, warnings)
    files = tune_files(dict((host, doc) for host, (doc, _path) in chosen.items()))
    files[TUNE_SUMMARY], failed = tune_summary(chosen, generated_at)
    return files, {"hosts": dict((h, path) for h, (_doc, path) in sorted(chosen.items())),
                   "failed": failed, "summary": TUNE_SUMMARY}


def rollout_merge_files(entries, generated_at, now_s=None, warnings=None):
    """``({filename: text}, {name: counts})`` of ``{name: [(document, path, folder
    index)]}``: one summary per name over every folder's hosts."""
    now_s = time.time() if now_s is None else now_s
    warnings = [] if warnings is None else warnings
    files, counts = {}, {}
    for name in sorted(entries):
        found = entries[name]
        keyed = []
        for entry in found:
            doc, path, index = entry
            when = doc.get("generated_at")
            trust = trusted_time(metrics.epoch(when), None, now_s, path, when, warnings)[0]
            keyed.append(((trust, str(when or ""), index), entry))
        ranked = [entry for _key, entry in sorted(keyed, key=lambda k: k[0])]
        order, results = [], {}
        for doc, _path, _index in sorted(found, key=lambda e: e[2]):
            order += [row["host"] for row in doc["hosts"] if row["host"] not in order]
        for doc, _path, _index in ranked:          # newest last: its rows win
            for row in doc["hosts"]:
                results[row["host"]] = dict((key, row.get(key))
                                            for key in ("status", "reason", "raw_status"))
        doc = rollout.summarize(order, results, ranked[-1][0]["title"])
        files.update(rollout.report_files(doc, name, generated_at))
        counts[name] = doc["counts"]
    return files, counts
