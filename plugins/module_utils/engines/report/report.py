# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The report modules (audit_report, tune_report, reboot_report, report_merge): each one
call, its options in, its result out. What they make lives in module_utils/output: the
per-host documents (``documents``), the fleet checks run once over them (module_utils/fleet),
the rendering (``summary``, ``page``, ``tune``, ``reboot``), reading merged folders
(``merge``) and writing files (``files``). The names the modules, plugins and the host-side
program use are imported here.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import time
from collections.abc import Mapping

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import metrics
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.fleet import fleet_run
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report.documents import (  # noqa: F401
    STATUSES,
    attempt_time,
    fact_keys,
    host_document,
    is_audited,
    is_not_audited,
    judged_audits,
    judged_documents,
    last_seen,
    previous_documents,
    previous_path,
    render_json,
    report_documents,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report.files import (  # noqa: F401
    FLEET_FILES,
    ReportError,
    check_file_names,
    host_file,
    now,
    safe_name,
    write_files,
    write_reports,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import merge, merged
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report.merge import (  # noqa: F401
    age_text,
    folder_documents,
    folder_entries,
    folder_names,
    is_host_document,
    rollout_documents,
    stamp,
    trusted_time,
    tune_documents,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report.page import (  # noqa: F401
    html_files,
    render_html,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report.reboot import (  # noqa: F401
    reboot_files,
    render_reboot_markdown,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report.summary import (
    render_markdown,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report.tune_doc import (  # noqa: F401
    TUNE_KEYS,
    render_tune_markdown,
    tune_document,
    tune_files,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report.views import (  # noqa: F401
    counts,
    group_findings,
    worst,
)


# what the report modules, action plugins, rollout_report and the host-side program use
__all__ = [
    "age_text", "audit_report_run", "check_file_names", "counts", "fact_keys", "FLEET_FILES",
    "folder_documents", "folder_names", "group_findings", "host_audit_of", "host_document",
    "inventory_groups", "is_audited", "is_host_document", "is_not_audited", "judged_audits",
    "judged_documents", "merge_run", "now", "previous_documents", "reboot_files",
    "reboot_report_run", "registered",
    "registered_audits", "registered_tunes", "render_html", "render_json", "render_markdown",
    "render_reboot_markdown", "render_tune_markdown", "report_documents", "report_files",
    "ReportError", "rollout_documents", "safe_name", "stamp", "STATUSES", "tune_document",
    "tune_documents", "tune_files", "TUNE_KEYS", "tune_report_run", "worst", "write_files",
    "write_reports",
]


def report_files(audits, generated_at=None, mrrs_size=4096, previous=None, warnings=None,
                 dest=None, fleet=True, stale=None, docs=None, groups=None):
    """``{filename: text}`` for ``audits`` (host -> audit result, or ``{status, error}`` for
    a host not audited: :func:`is_not_audited`): one JSON per host, ``summary.md``,
    ``index.html`` and ``gpuhost.prom`` (Prometheus text format, every host of the run:
    ``gpuhost_host_up`` 0 for one not audited). ``groups``: host -> inventory groups.
    ``previous`` (host -> its last report document, :func:`previous_documents`) adds the
    AER change since then (the fleet check ``pcie_aer_change``; a malformed one is a line
    in ``warnings``). ``docs``: the
    documents :func:`report_documents` already made of them (the fleet checks are run once
    per report).

    ``fleet=False`` (a slice of a sliced job): only the per-host JSON, each with the host's
    own verdict (no fleet drift: a slice sees part of the fleet), for report_merge to
    combine; nothing a second slice writing the same folder overwrites."""
    check_file_names(audits)
    if docs is None:
        docs = report_documents(audits, previous, warnings, dest, fleet, groups,
                                attempt_time(generated_at))
    files = {}
    for doc in docs:
        files[host_file(doc["host"], "audit")] = render_json(doc)
    if not fleet:
        return files
    summary_md, _index_html, prom = FLEET_FILES
    files[summary_md] = render_markdown(docs, generated_at, stale)
    # index.html (the fleet view) and one page per host
    files.update(html_files(docs, generated_at, mrrs_size, stale=stale))
    files[prom] = metrics.audit_text(judged_audits(audits, docs), docs,
                                     metrics.epoch(attempt_time(generated_at)))
    return files


def _malformed(audits, generated, exc):
    """Which host's audit the reports cannot be made from, and the missing or mistyped key."""
    for host in sorted(audits):
        try:
            report_files({host: audits[host]}, generated, 4096)
            judged_audits({host: audits[host]})
        except (KeyError, TypeError, AttributeError, ValueError) as one:
            return "the audit of %s is malformed (%s: %s)" % (host, type(one).__name__, one)
    return "the audits are malformed together (%s: %s)" % (type(exc).__name__, exc)


def registered(raw_vars, hosts, result_var):
    """``{host: value}``: each host's variable ``result_var`` as registered (None where the
    host has none). ``raw_vars(host)`` gives a host's variables as stored, nothing templated
    (the report action plugins pass Ansible's ``hostvars.raw_get``), so the results of a
    whole fleet are read without being templated or sent anywhere."""
    out = {}
    for host in hosts:
        data = raw_vars(host)
        value = data.get(result_var) if isinstance(data, Mapping) else None
        out[host] = value if isinstance(value, Mapping) else None
    return out


# a host of the play without any result in the variable: it failed (or was unreachable)
# in an earlier task, which Ansible printed; the variable cannot say which
NO_RESULT = ("no host_audit result: the host failed or was unreachable in a task before the "
             "audit (see that task's error in the play's output)")


def host_status(value):
    """``{status, error}`` of a host whose registered host_audit result ``value`` (None:
    none) holds no audit: ``unreachable`` (its connection failed: the task has
    ``ignore_unreachable``), ``skipped``, or ``failed`` (the module failed, or no result)."""
    if value is None:
        return {"status": "failed", "error": NO_RESULT}
    message = " ".join(str(value.get("msg") or "").split())
    if value.get("unreachable"):
        return {"status": "unreachable", "error": message or "unreachable"}
    if value.get("skipped"):
        return {"status": "skipped",
                "error": message or str(value.get("skip_reason") or "skipped")}
    return {"status": "failed", "error": message or "host_audit failed with no message"}


def registered_audits(raw_vars, hosts, result_var):
    """``{host: audit}`` from each host's registered host_audit result (:func:`registered`);
    a host with no audit in it (unreachable, failed, skipped, or no result at all) maps to
    ``{status, error}`` (:func:`host_status`), so every host of ``hosts`` is reported.
    ReportError when no host has the variable at all (a misspelled ``result_var``)."""
    found = registered(raw_vars, hosts, result_var)
    if found and all(value is None for value in found.values()):
        raise ReportError(
            "audit_report: no host_audit result in variable %r of any host (%s) (register "
            "the result of gpuhost.tuning.host_audit under that name); nothing was written"
            % (result_var, ", ".join(sorted(found))))
    audits = {}
    for host, value in found.items():
        audit = value.get("audit") if value is not None else None
        if isinstance(audit, Mapping) and not value.get("failed"):
            audits[host] = audit
        else:
            audits[host] = host_status(value)
    return audits


def inventory_groups(raw_vars, hosts):
    """``{host: [group, ...]}``: each host's inventory groups (``group_names``, as Ansible
    stores it: no templating)."""
    out = {}
    for host in hosts:
        data = raw_vars(host)
        names = data.get("group_names") if isinstance(data, Mapping) else None
        out[host] = sorted(str(n) for n in names) if isinstance(names, (list, tuple)) else []
    return out


def audit_report_run(p, check_mode=False):
    """Module audit_report: ``p`` its options (all given). ReportError on a value that is no
    host_audit result or a folder that cannot be written."""
    audits = p["audits"]
    bad = [host for host, value in audits.items()
           if not isinstance(value, dict) or ("findings" not in value
                                              and not is_not_audited(value))]
    if bad:
        raise ReportError("audit_report: no audit result for %s (pass the 'audit' value "
                          "host_audit returned for each host, or {status, error} with status "
                          "%s for a host not audited)"
                          % (", ".join(sorted(bad)), ", ".join(STATUSES[1:])))
    paths, written, warnings = [], [], []
    generated = p["generated_at"] or now()
    try:
        # made before anything is written: a malformed audit is a message, no files
        fleet = p.get("fleet_files", True)
        previous = previous_documents(p["dest"], audits, warnings)
        check_file_names(audits)
        docs = report_documents(audits, previous, warnings, p["dest"], fleet,
                                p.get("groups"), attempt_time(generated))
        files = report_files(audits, generated, p["mrrs_size"], fleet=fleet, docs=docs)
        # the per-host metrics say what the reports say (fleet drift, new since the last)
        judged = judged_audits(audits, docs)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise ReportError("audit_report: %s (pass the 'audit' value host_audit returned for "
                          "each host); nothing was written" % _malformed(audits, generated, exc))
    if p["write"]:
        paths, written = write_reports("audit_report", p["dest"], files, check_mode,
                                       "gpuhost_audit_report_dir")
    summary = {}
    for host, audit in judged.items():
        entry = counts(audit["findings"])
        entry["worst"] = worst(audit["findings"])
        summary[host] = entry
    docs_of = dict((doc["host"], doc) for doc in docs)
    now_s = metrics.epoch(attempt_time(generated))
    per_host = dict((host, metrics.audit_text({host: audit}, [docs_of[host]], now_s))
                    for host, audit in judged.items())
    missing = dict((doc["host"], dict((k, doc[k]) for k in ("status", "error", "last_seen")))
                   for doc in docs if not is_audited(doc))
    out = dict(changed=bool(written), files=paths, written=written,
               index=os.path.join(p["dest"], FLEET_FILES[1]), summary=summary, metrics=per_host,
               not_audited=missing)
    if warnings:
        out["warnings"] = warnings
    return out


def registered_tunes(raw_vars, hosts, result_var):
    """``{host: result}`` from each host's registered host_tune result (:func:`registered`);
    a host without one gets ``{}``, which its report calls no host_tune result."""
    return dict((host, value if value is not None else {})
                for host, value in registered(raw_vars, hosts, result_var).items())


def tune_report_run(p, check_mode=False):
    """Module tune_report: ``p`` its options. ReportError on a folder that cannot be
    written."""
    results = p["results"]
    files = tune_files(results)
    paths, written = write_reports("tune_report", p["dest"], files, check_mode,
                                   "gpuhost_tune_report_dir")
    tables, failed = {}, []
    for host in sorted(results):
        tables[host] = files[host_file(host, "tune")].splitlines()
        if tune_document(host, results[host])["failures"]:
            failed.append(host)
    return dict(changed=bool(written), files=paths, written=written, tables=tables,
                failed_hosts=failed)


def reboot_report_run(p, check_mode=False):
    """Module reboot_report: ``p`` its options. ReportError on a document that lacks a key
    or a folder that cannot be written."""
    try:
        files = reboot_files(p["host"], p["report"])
    except (KeyError, TypeError) as exc:
        raise ReportError("reboot_report: the report document lacks %s" % exc)
    paths, written = write_reports("reboot_report", p["dest"], files, check_mode,
                                   "gpuhost_report_dir")
    return dict(changed=bool(written), files=paths, written=written)


host_audit_of = fleet_run.host_audit_of  # report_merge's reading, from the fleet registry


def merge_run(p, check_mode=False, clock=time.time):
    """Module report_merge: ``p`` its options (``folders``, ``dest``, ``stale_hours``,
    ``generated_at``, ``mrrs_size``). Every host's newest report among the folders (by
    ``collected_at``; a later folder wins a tie), the fleet checks over their union, and the
    reports written in ``dest`` as one run over all of them would write them; the same for
    the tune reports and rollout summaries in them (``engines.report.merged``). Folders with no
    report (an empty slice) add nothing; none at all writes nothing and is no failure."""
    warnings = []
    found, tunes, rollouts, read = {}, {}, {}, []
    for index, folder in enumerate(p["folders"]):
        entries = folder_entries(folder, warnings)
        read.append(entries)
        for doc, path, mtime in folder_documents(folder, warnings, entries=entries):
            found.setdefault(doc["host"], []).append((doc, path, mtime))
        for doc, path, mtime in tune_documents(folder, warnings, entries=entries):
            tunes.setdefault(doc["host"], []).append((doc, path, mtime, index))
    # a rollout summary named like one of these hosts' files would replace it
    merged_hosts = sorted(set(found) | set(tunes))
    for index, folder in enumerate(p["folders"]):
        for name, doc, path in rollout_documents(folder, warnings, entries=read[index],
                                                 hosts=merged_hosts):
            rollouts.setdefault(name, []).append((doc, path, index))
    generated = p.get("generated_at") or now()
    now_s = clock()
    if not (found or tunes or rollouts):
        out = dict(changed=False, files=[], written=[], hosts={}, stale=[],
                   index=None, msg="no host report in %s: nothing to merge, nothing written"
                   % ", ".join(p["folders"]))
        if warnings:
            out["warnings"] = warnings
        return out
    files, out = {}, dict(hosts={}, stale=[], index=None)
    if found:
        files, out = _merge_audits(p, found, warnings, generated, now_s)
    if tunes:
        more, out["tune"] = merged.tune_merge_files(tunes, generated, now_s, warnings)
        files.update(more)
    if rollouts:
        more, out["rollout"] = merged.rollout_merge_files(rollouts, generated, now_s,
                                                          warnings)
        files.update(more)
    paths, written = write_reports("report_merge", p["dest"], files, check_mode,
                                   "gpuhost_merge_dest")
    out.update(changed=bool(written), files=paths, written=written)
    if warnings:
        out["warnings"] = warnings
    return out


def _merge_audits(p, found, warnings, generated, now_s):
    """The audit part of :func:`merge_run`: ``(files, result keys)``. A host's newest
    report is the one with the latest trusted ``collected_at`` (``merge.trusted_time``: one
    dated in the future ranks below every report dated in the past, by its file's
    modification time, which gives its age too)."""
    chosen, audits, previous, hosts, stale, groups = {}, {}, {}, {}, [], {}
    limit_s = p["stale_hours"] * 3600.0
    dest_previous = previous_documents(p["dest"], list(found), warnings)
    for host in sorted(found):
        ranked = []
        for doc, path, mtime in found[host]:
            trusted, when = trusted_time(stamp(doc), mtime, now_s, path,
                                         doc.get("collected_at"), warnings)
            ranked.append(((trusted, when), doc, path))
        # stable sort: the last folder given wins a tie
        ranked.sort(key=lambda entry: entry[0])
        (trusted, when), doc, path = ranked[-1]
        seen_path = path
        chosen[host] = doc
        groups[host] = doc.get("groups") or []
        if not is_audited(doc):
            # its age and staleness are those of its newest good audit
            audits[host], seen_path = _not_audited_entry(
                doc, ranked, dest_previous.get(host), previous_path(p["dest"], host))
            when = metrics.epoch(audits[host]["last_seen"]) or 0
            seen_path = seen_path or path
        else:
            audits[host] = host_audit_of(doc)
            against = _compared_with(doc, ranked, dest_previous.get(host), now_s)
            if against is not None:
                previous[host] = against
        age = max(0, now_s - when) if when else None
        is_stale = age is None or age > limit_s
        seen = doc.get("collected_at") if is_audited(doc) else audits[host]["last_seen"]
        hosts[host] = {"from": path, "collected_at": doc.get("collected_at"),
                       "age_s": None if age is None else int(age), "stale": is_stale}
        if is_stale:
            stale.append({"host": host, "collected_at": seen or "unknown",
                          "age": "unknown" if age is None else age_text(age),
                          "folder": os.path.dirname(seen_path)})
    try:
        files = report_files(audits, generated, p["mrrs_size"], previous, warnings,
                             p["dest"], stale=stale, groups=groups)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise ReportError("report_merge: %s; nothing was written" % _merge_malformed(
            audits, hosts, generated, exc))
    return files, dict(hosts=hosts, stale=[row["host"] for row in stale],
                       index=os.path.join(p["dest"], FLEET_FILES[1]))


def _not_audited_entry(doc, ranked, mine, mine_path):
    """What a merge reports of a host whose newest document says it was not audited:
    ``(entry, path)``, the entry that document's status and error, and when the host was
    last audited well, the newest that any of the folders' documents (``ranked``) or
    ``dest``'s own (``mine``, at ``mine_path``) say; ``path`` the file that says it
    (None: never audited)."""
    seen = [(last_seen(d), path) for _when, d, path in ranked]
    seen = [(text, path) for text, path in seen + [(last_seen(mine), mine_path)]
            if metrics.epoch(text) is not None]
    newest, path = max(seen, key=lambda e: metrics.epoch(e[0])) if seen else (None, None)
    status = doc.get("status") if doc.get("status") in STATUSES[1:] else "failed"
    return {"status": status, "error": str(doc.get("error") or ""),
            "collected_at": doc.get("collected_at"), "last_seen": newest}, path


def _compared_with(doc, ranked, mine, now_s):
    """The report the AER comparison of audited ``doc`` is made against, or None: its own
    (``aer_change`` passed on as it was), else the newest earlier audited report whose date
    is trusted, among the folders' (``ranked``) and ``dest``'s own (``mine``)."""
    if doc.get("aer_change") is not None:
        return doc
    older = [d for (trusted, _w), d, _p in ranked[:-1]
             if trusted and stamp(d) < stamp(doc) and is_audited(d)]
    if (mine is not None and is_audited(mine) and stamp(mine) <= stamp(doc)
            and stamp(mine) <= now_s + merge.CLOCK_SKEW_S):
        older.append(mine)
    return max(older, key=stamp) if older else None


def _merge_malformed(audits, hosts, generated, exc):
    """Which file the merged reports cannot be made from, and the bad key."""
    for host in sorted(audits):
        try:
            report_files({host: audits[host]}, generated, 4096)
        except (KeyError, TypeError, AttributeError, ValueError) as one:
            return "the report %s is malformed (%s: %s): remove it or audit %s again" % (
                hosts[host]["from"], type(one).__name__, one, host)
    return "the reports are malformed together (%s: %s)" % (type(exc).__name__, exc)
