# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""report_merge's plan part: the plans that the slices of a sliced job wrote (one
``plan-<digest12>.json`` and its ``plan.json`` per slice folder) merged into ONE plan, as
one plan run over all their hosts would have made it, that ``gpuhost.tuning.apply`` applies.

- A plan is told apart by its content (``schema`` ``gpuhost.tuning/plan/1``), never by its
  file name; a folder's files holding one plan (``plan.json`` is a copy of
  ``plan-<digest12>.json``) are that one plan. A folder's plan is its newest (``created_at``):
  a folder reused by several plan runs keeps the older ``plan-<digest12>.json`` too.
- A plan whose digest does not match its content (edited by hand) or that is malformed is
  left out with a warning naming it; so is its folder's plan when the edited one is at least
  as new as the folder's newest good plan (an edit is never silently undone).
- Plans that disagree on ``collection_version`` or ``options`` (the tune parts, the wanted
  values' digest, ``serial``) cannot be one approval: no plan is merged (a warning naming
  both folders and what differs; the other report kinds still merge).
- A host in two plans: the newer plan's entry (a later folder wins a tie), named in a
  warning (one per two plans, naming their hosts). Entries are kept as planned (refused
  and unreachable hosts stay so).
- The merged plan: ``created_at`` the OLDEST slice plan's (apply's gpuhost_plan_max_age
  counts from when the first state was read), ``created_by`` the slices' makers,
  ``merged_by`` who merged, ``merged_from`` each slice plan's file name, digest, folder,
  ``created_at``, ``created_by`` and host count; groups and batches made again over the
  union (``planfile.grouped``, ``planfile.batches``), the digest computed again. One plan
  alone is written as it is (its digest unchanged).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import time

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.plan import apply_check
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.plan import plan_writer
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.plan import planfile
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import files
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import merge
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import report
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import bounded

NAME = "report_merge"
# what a file's text holds when it may be a plan (a JSON string, "/" escaped or not): the
# others are not parsed a second time (report.merge_run has read them)
MARKS = (planfile.SCHEMA, planfile.SCHEMA.replace("/", "\\/"))
ENTRY_KEYS = ("status", "changes", "fingerprint", "group", "refused", "reboot")
OPTION_KEYS = ("parts", "wanted_digest", "serial")


def malformed(doc):
    """Why plan ``doc`` (its digest matching) cannot be merged, or None."""
    hosts, options = doc.get("hosts"), doc.get("options")
    if not isinstance(hosts, dict) or not all(
            isinstance(e, dict) and all(k in e for k in ENTRY_KEYS) for e in hosts.values()):
        return "its hosts are not a mapping of host to entry (%s)" % ", ".join(ENTRY_KEYS)
    if not isinstance(options, dict) or not all(k in options for k in OPTION_KEYS):
        return "its options are not a mapping of %s" % ", ".join(OPTION_KEYS)
    if not isinstance(doc.get("batches"), list) or not all(
            isinstance(b, list) for b in doc["batches"]):
        return "its batches are not lists of hosts"
    if apply_check.created_epoch(doc.get("created_at")) is None:
        return "its created_at %r is no UTC time" % (doc.get("created_at"),)
    return None


def read_plan(path, warnings):
    """``(document, good)`` of file ``path`` when its content is a plan (``good``: its
    digest matches and it is well formed; else a line in ``warnings`` names it), else None.
    Read bounded (``files.read_report_text``, ``bounded.json_loads``); a file that cannot be
    read is passed over here (the report merge names it)."""
    try:
        text = files.read_report_text(path)
        if text is None or not any(mark in text for mark in MARKS):
            return None
        doc = bounded.json_loads(text)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict) or doc.get("schema") != planfile.SCHEMA:
        return None
    try:
        planfile.checked(doc, "the plan %s" % path)
    except ValueError as exc:
        warnings.append("%s: left out of the merged plan" % exc)
        return doc, False
    why = malformed(doc)
    if why:
        warnings.append("the plan %s is malformed (%s): left out of the merged plan"
                        % (path, why))
        return doc, False
    return doc, True


def _when(doc):
    return apply_check.created_epoch(doc.get("created_at")) or 0


def folder_plan(folder, warnings, left_out):
    """``(document, path)``: the newest good plan in controller folder ``folder``, or None
    (no plan, or its newest plan is edited or malformed: its path added to ``left_out``)."""
    good, bad = {}, []
    for name in merge.folder_names(folder):
        if not name.endswith(".json") or name.startswith("."):
            continue
        path = os.path.join(folder, name)
        found = read_plan(path, warnings)
        if found is None:
            continue
        doc, ok = found
        if ok:
            # plan.json and plan-<digest12>.json: one plan, named by its own file name
            good.setdefault(doc["digest"], (doc, path))
        else:
            bad.append((doc, path))
            left_out.append(path)
    newest = max(good.values(), key=lambda e: (_when(e[0]), e[1].endswith(
        planfile.file_name(e[0])))) if good else None
    worse = [path for doc, path in bad
             if newest is None or _when(doc) >= _when(newest[0])]
    if newest is not None and worse:
        warnings.append("the newest plan of %s was edited by hand or is malformed (%s): no "
                        "plan of that folder is merged (%s is not taken in its place)"
                        % (folder, ", ".join(worse), newest[1]))
        left_out.append(newest[1])
        return None
    return newest


def disagreement(plans):
    """Why ``plans`` (``[(document, path)]``) cannot be one approval, or None: two made by
    other collection versions or with other options (tune parts, wanted values, serial)."""
    first, first_path = plans[0]
    for doc, path in plans[1:]:
        differs = []
        if doc.get("collection_version") != first.get("collection_version"):
            differs.append("collection_version %s against %s" % (
                first.get("collection_version"), doc.get("collection_version")))
        for key in OPTION_KEYS:
            if doc["options"].get(key) != first["options"].get(key):
                differs.append("%s %s against %s" % (
                    "the wanted values (digest)" if key == "wanted_digest" else key,
                    _short(first["options"].get(key)), _short(doc["options"].get(key))))
        if differs:
            return ("the plans %s and %s cannot be one approval: %s; no plan was merged (make "
                    "the slices' plans again with one collection version and the same "
                    "options)" % (first_path, path, "; ".join(differs)))
    return None


def _names(hosts, most=20):
    """``hosts`` named, the first ``most`` of them and how many more."""
    more = len(hosts) - most
    return ", ".join(hosts[:most]) + (" and %d more" % more if more > 0 else "")


def _short(value):
    text = str(value)
    return text[:planfile.DIGEST_CHARS] if len(text) == 64 else text


def merged(plans, warnings, merged_by=None):
    """The plan document of ``plans`` (``[(document, path)]``, in the folders' order; one
    collection version and options): each host's entry from the newest plan holding it,
    groups and batches over the union, ``created_at`` the oldest plan's."""
    order, chosen, twice = [], {}, {}
    for doc, path in plans:
        hosts = [h for batch in doc["batches"] for h in batch if h in doc["hosts"]]
        hosts += sorted(h for h in doc["hosts"] if h not in hosts)
        for host in hosts:
            if host not in chosen:
                order.append(host)
                chosen[host] = (doc, path)
                continue
            other = chosen[host]
            if _when(doc) >= _when(other[0]):  # the newer plan's entry; a tie: the later
                chosen[host] = (doc, path)
            twice.setdefault((other[1], path), []).append(host)
    for (first, second), hosts in sorted(twice.items()):
        older, newer = [dict((p, d) for d, p in plans)[x] for x in (first, second)]
        warnings.append("%d host%s in the plans %s (made %s) and %s (made %s), the newer "
                        "one's entr%s merged (%s): %s" % (
                            len(hosts), " is" if len(hosts) == 1 else "s are", first,
                            older.get("created_at"), second, newer.get("created_at"),
                            "y" if len(hosts) == 1 else "ies",
                            second if _when(newer) >= _when(older) else first,
                            _names(hosts)))
    entries = dict((host, chosen[host][0]["hosts"][host]) for host in order)
    oldest = min((doc for doc, _p in plans), key=_when)
    makers = []
    for doc, _path in plans:
        if doc.get("created_by") not in makers:
            makers.append(doc.get("created_by"))
    options = plans[0][0]["options"]
    doc = {"schema": planfile.SCHEMA, "collection_version": plans[0][0].get("collection_version"),
           "created_at": oldest["created_at"],
           "created_by": ", ".join(str(m) for m in makers),
           "merged_by": merged_by or plan_writer.controller_user(),
           "merged_from": [{"file": planfile.file_name(d), "digest": d["digest"],
                            "folder": os.path.dirname(p), "created_at": d.get("created_at"),
                            "created_by": d.get("created_by"), "hosts": len(d["hosts"])}
                           for d, p in plans],
           "options": dict((k, options[k]) for k in OPTION_KEYS),
           "hosts": entries, "groups": planfile.grouped(order, entries),
           "batches": planfile.batches(order, options.get("serial"))}
    doc["digest"] = planfile.digest(doc)
    return doc


def merge_plans(folders, warnings, merged_by=None):
    """``(document or None, result)``: the plan merged of ``folders``' plans (None when no
    folder has a good one, or they disagree), and report_merge's ``plan`` key: ``digest``,
    ``hosts``, ``merged_from`` (the plan files taken), ``left_out`` (plan files left out),
    ``refused`` (why no plan was merged, when the plans disagree). ``(None, None)``: no
    folder holds any plan."""
    plans, left_out = [], []
    for folder in folders:
        found = folder_plan(folder, warnings, left_out)
        if found is not None and found[0]["digest"] not in [d["digest"] for d, _p in plans]:
            plans.append(found)
    if not plans and not left_out:
        return None, None
    result = {"merged_from": [path for _doc, path in plans], "left_out": left_out}
    if left_out:
        warnings.append("the merged plan leaves out %d plan file(s): %s"
                        % (len(left_out), ", ".join(left_out)))
    if not plans:
        return None, dict(result, refused="no good plan in %s" % ", ".join(folders))
    refused = disagreement(plans)
    if refused:
        warnings.append(refused)
        return None, dict(result, refused=refused)
    doc = plans[0][0] if len(plans) == 1 else merged(plans, warnings, merged_by)
    return doc, dict(result, digest=doc["digest"], hosts=len(doc["hosts"]),
                     headline=planfile.headline(doc))


def merge_run(p, check_mode=False, clock=time.time):
    """Module report_merge: the reports of ``p["folders"]`` merged (``report.merge_run``)
    and their plans (``merge_plans``), written into ``p["dest"]`` as plan_report writes a
    plan (``plan-<digest12>.json``, ``plan.json``, ``plan.md``, ``plan.html``)."""
    out = report.merge_run(p, check_mode, clock)
    warnings = out.pop("warnings", [])
    doc, result = merge_plans(p["folders"], warnings)
    if result is not None:
        out["plan"] = result
    if doc is not None:
        paths, written = files.write_reports(NAME, p["dest"], plan_writer.plan_files(doc),
                                             check_mode, "gpuhost_merge_dest")
        result["file"] = [path for path in paths if path.endswith(planfile.file_name(doc))][0]
        out.pop("msg", None)
        out.update(files=out["files"] + paths, written=out["written"] + written,
                   changed=bool(out["written"] or written))
    if warnings:
        out["warnings"] = warnings
    return out
