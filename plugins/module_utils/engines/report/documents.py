# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The per-host report document (``<host>.json``): what it holds, derived from the
audit result, and its comparison with the host's previous report (new / seen before)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import time

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit.audit import SCHEMA
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import bounded
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import fleet_findings
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.fleet import fleet_run
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import metrics
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report.files import (
    read_report_text,
    safe_name,
)


# what a host_audit result holds besides its facts: the run (document fields of their own)
# and the verdict. Every other key of the result is a fact and goes into ``facts``.
RUN_KEYS = ("collected_at", "root", "duration_s")
VERDICT_KEYS = ("findings", "checks")
# Every inventory host of a run has a document; ``status`` says whether it was audited
# (``ok``) or why not: its connection failed (``unreachable``), a task failed before or in
# the audit (``failed``) or the audit was skipped on it (``skipped``). A host not audited
# has ``error`` (Ansible's message), empty facts, findings and checks, and ``last_seen``
# (the ``collected_at`` of its newest good audit, from its previous document).
STATUSES = ("ok", "unreachable", "failed", "skipped")
STAMP = "%Y-%m-%dT%H:%M:%SZ"  # host_audit's collected_at


def is_not_audited(value):
    """Whether ``value`` (an entry of a report's ``audits``) stands for a host that was not
    audited: ``{status, error[, last_seen, collected_at]}``, a status other than ``ok``."""
    return (isinstance(value, dict) and "findings" not in value
            and value.get("status") in STATUSES[1:])


def is_audited(doc):
    """Whether report document ``doc`` holds an audit (one written before a document had a
    ``status`` did)."""
    return doc.get("status", "ok") == "ok"


def attempt_time(generated_at=None):
    """When a run tried the hosts it could not audit (its ``collected_at``): the report's
    ``generated_at`` in host_audit's format, or now."""
    when = metrics.epoch(generated_at)
    return time.strftime(STAMP, time.gmtime(time.time() if when is None else when))


def last_seen(previous):
    """When a host was last audited well, from its previous document (None: never)."""
    if not isinstance(previous, dict):
        return None
    if is_audited(previous):
        return previous.get("collected_at")
    return previous.get("last_seen")


def _groups(groups, host):
    names = (groups or {}).get(host) or []
    return sorted(str(name) for name in names if str(name) != "all")


def fact_keys(audit):
    """The facts of a host_audit result, in the result's order: every key but the run's and
    the verdict's (so a fact the audit gains is in ``<host>.json`` with no list to keep)."""
    return [key for key in audit if key not in RUN_KEYS + VERDICT_KEYS]


def host_document(host, audit, groups=None):
    """The per-host JSON document of an audited host: ``{schema, host, collected_at, root,
    duration_s, facts, findings, checks, status, error, last_seen, groups}``."""
    audit = audit or {}
    doc = {"schema": SCHEMA, "host": host}
    doc.update((key, audit.get(key)) for key in RUN_KEYS)
    doc["facts"] = dict((key, audit[key]) for key in fact_keys(audit))
    doc["findings"] = audit.get("findings") or []
    # a copy: the report's fleet checks never change the audit result it was given
    doc["checks"] = dict(audit.get("checks") or {})
    doc.update(status="ok", error="", last_seen=doc["collected_at"],
               groups=_groups(groups, host))
    return doc


def not_audited_document(host, entry, previous=None, groups=None, attempted_at=None):
    """The document of a host this run did not audit (``entry``: ``{status, error}``, as
    :func:`is_not_audited`): its status and Ansible's message, no facts or findings,
    ``collected_at`` when it was tried (``attempted_at``) and ``last_seen`` from the entry
    (a merge passes it on) or its ``previous`` document."""
    seen = entry["last_seen"] if "last_seen" in entry else last_seen(previous)
    doc = {"schema": SCHEMA, "host": host,
           "collected_at": entry.get("collected_at") or attempted_at or attempt_time(),
           "root": None, "duration_s": None, "facts": {}, "findings": [], "checks": {},
           "status": entry["status"], "error": str(entry.get("error") or ""),
           "last_seen": seen, "groups": _groups(groups, host)}
    return doc


def previous_path(dest, host):
    return os.path.join(dest, "%s.json" % safe_name(host))


def _ignored(warnings, path, why):
    if warnings is not None:
        warnings.append("previous report %s %s: ignored for the AER comparison (this run's "
                        "report replaces it)" % (path, why))


def previous_documents(dest, hosts, warnings=None):
    """``{host: document}`` of the ``<host>.json`` reports already in ``dest`` (the
    previous run's). A missing file or another host's report is left out; one that cannot
    be read or parsed, or is no report document, is left out with a line in ``warnings``
    naming the file: it never fails this run's reports."""
    out = {}
    for host in hosts:
        path = previous_path(dest, host)
        try:
            text = read_report_text(path)
            if text is None:
                continue
            doc = bounded.json_loads(text)
        except ValueError as exc:
            _ignored(warnings, path, "is not a readable JSON report (%s)" % exc)
            continue
        if not isinstance(doc, dict) or not isinstance(doc.get("facts"), dict):
            _ignored(warnings, path, "is not a report document (no facts mapping)")
            continue
        if doc.get("host") == host:
            out[host] = doc
    return out


def _finding_key(finding):
    subject = finding.get("subject")
    return (finding.get("id"), "" if subject is None else str(subject))


def apply_seen(docs, previous, warnings=None, dest=None):
    """Mark every finding of each document that has a previous report ``new`` (true: its id
    and subject are not among that report's findings; false: seen before) and give the
    document ``compared_with`` (the previous report's ``collected_at``). The same audit
    written again (same ``collected_at``) keeps the marks that report carries, so writing
    the reports again changes nothing. Without a previous report nothing is marked; a
    malformed one marks nothing, with a line in ``warnings``, and never fails the report."""
    for doc in docs:
        prev = (previous or {}).get(doc["host"])
        if not prev:
            continue
        items = prev.get("findings")
        if not isinstance(items, list) or not all(isinstance(f, dict) for f in items):
            path = previous_path(dest or ".", doc["host"])
            # one line per file: the AER comparison may have named it already
            if warnings is not None and not any(path in line for line in warnings):
                warnings.append("previous report %s: findings is not a list of findings: "
                                "every finding of this run is left unmarked (not new or "
                                "seen before)" % path)
            continue
        before = dict((_finding_key(f), f) for f in items)
        same = prev.get("collected_at") == doc.get("collected_at")
        if same and prev.get("compared_with") is None:
            continue        # that report compared nothing either
        marked = []
        for item in doc["findings"]:
            old = before.get(_finding_key(item))
            if same:
                new = True if old is None else bool(old.get("new"))
            else:
                new = old is None
            marked.append(dict(item, new=new))
        doc["findings"] = marked
        doc["compared_with"] = prev.get("compared_with") if same else prev.get("collected_at")
    return docs


def render_json(document):
    return json.dumps(document, indent=2, sort_keys=False) + "\n"


def report_documents(audits, previous=None, warnings=None, dest=None, fleet=True,
                     groups=None, attempted_at=None):
    """The per-host documents as written: the fleet checks run once over the audited ones
    (module_utils/fleet; a slice, ``fleet=False``, only those that need no other host), then
    the new / seen-before marks against ``previous`` (its audited documents only); then a
    document for each host not audited (:func:`not_audited_document`). ``groups``: host ->
    its inventory group names."""
    previous = previous or {}
    audited = dict((host, doc) for host, doc in previous.items() if is_audited(doc))
    docs = [host_document(host, audit, groups) for host, audit in audits.items()
            if not is_not_audited(audit)]
    context = fleet_findings.Context(audited, warnings,
                                     lambda host: previous_path(dest or ".", host))
    fleet_run.judge(docs, context, whole_fleet=fleet)
    docs = apply_seen(docs, audited, warnings, dest)
    docs.extend(not_audited_document(host, audit, previous.get(host), groups, attempted_at)
                for host, audit in audits.items() if is_not_audited(audit))
    return docs


def judged_documents(audits):
    """The per-host documents with the fleet checks applied (no previous report)."""
    return report_documents(audits)


def judged_audits(audits, docs=None):
    """``audits`` with each host's findings and check columns as the reports show them
    (fleet drift included), so the metrics say what the reports say."""
    docs = judged_documents(audits) if docs is None else docs
    out = dict((host, audit) for host, audit in audits.items() if not is_not_audited(audit))
    for doc in docs:
        if doc["host"] in out:
            out[doc["host"]] = dict(audits.get(doc["host"]) or {}, findings=doc["findings"],
                                    checks=doc["checks"])
    return out
