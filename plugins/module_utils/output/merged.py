# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""report_merge's tune and rollout part: the tune reports and rollout summaries of several
folders (the slices of a sliced job) as one run over all their hosts writes them.

- Tune: each host's newest ``<host>-tune.json`` (written last; a later folder wins a tie),
  written again with its ``<host>-tune.md``, and ``tune-summary.md``: one row per host.
- Rollout: per summary name (``rollout.json``, or the ``name`` rollout_report was given),
  each host's row from the newest summary that lists it (``generated_at``; a later folder
  wins a tie), in the slices' rollout order, counted again.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.output import rollout
from ansible_collections.gpuhost.tuning.plugins.module_utils.output.tune import (
    tune_document,
    tune_files,
)

TUNE_SUMMARY = "tune-summary.md"


def newest_tunes(entries):
    """``{host: (document, path)}`` of ``{host: [(document, path, mtime, folder index)]}``."""
    out = {}
    for host, found in entries.items():
        doc, path, _mtime, _index = max(found, key=lambda e: (e[2], e[3]))
        out[host] = (doc, path)
    return out


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
            _md(host), _md("FAILED: " + "; ".join(doc["failures"])) if doc["failures"]
            else ("planned (check mode)" if doc["check_mode"] else "ok"),
            len(doc["findings_before"]),
            len(doc["findings_after"]) if doc["verified"] else "not verified",
            _md(doc["snapshot"]), _md(chosen[host][1])))
    return "\n".join(lines) + "\n", failed


def tune_merge_files(entries, generated_at):
    """``({filename: text}, {hosts: {host: from}, failed: [host]})`` of the tune part."""
    chosen = newest_tunes(entries)
    files = tune_files(dict((host, doc) for host, (doc, _path) in chosen.items()))
    files[TUNE_SUMMARY], failed = tune_summary(chosen, generated_at)
    return files, {"hosts": dict((h, path) for h, (_doc, path) in sorted(chosen.items())),
                   "failed": failed, "summary": TUNE_SUMMARY}


def rollout_merge_files(entries, generated_at):
    """``({filename: text}, {name: counts})`` of ``{name: [(document, path, folder
    index)]}``: one summary per name over every folder's hosts."""
    files, counts = {}, {}
    for name in sorted(entries):
        found = entries[name]
        ranked = sorted(found, key=lambda e: (str(e[0].get("generated_at") or ""), e[2]))
        order, results = [], {}
        for doc, _path, _index in sorted(found, key=lambda e: e[2]):
            order += [row["host"] for row in doc["hosts"] if row["host"] not in order]
        for doc, _path, _index in ranked:          # newest last: its rows win
            for row in doc["hosts"]:
                results[row["host"]] = {"status": row["status"], "reason": row.get("reason")}
        doc = rollout.summarize(order, results, ranked[-1][0]["title"])
        files.update(rollout.files(doc, name, generated_at))
        counts[name] = doc["counts"]
    return files, counts
