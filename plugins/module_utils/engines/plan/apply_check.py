# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Applying a saved plan exactly: whether a host may be changed now (``check_host``), and
the apply report (``report``, ``markdown``).

A host is refused, before any change, for the first of: the plan was made by another
collection version; the plan is older than the allowed age; the host is not in the plan;
the plan refused the host; host_tune refuses it now; its planned change set moved (what
host_tune would change now is not exactly what the plan says, ``changeset.difference``).
A host that needs no change now has nothing to do (``nothing_to_do``) and is not refused.
The first two are the whole plan's (``check_plan``), so the apply refuses them once,
before any host is touched, as it refuses a plan whose digest does not match.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json
import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.plan import changeset
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (
    ValidationError,
)

SCHEMA = "gpuhost.tuning/apply/1"
# how many lines of a moved change set a refusal names (the apply report has them all)
MOVED_LINES = 3
# a host's status in the apply report, in the order the report lists them
STATUSES = ("refused", "failed", "differs", "applied", "nothing to do", "skipped",
            "not reached", "not in the plan")
NOTHING_TO_DO = ("nothing left to change: the plan was applied already, or the host reached "
                 "the wanted state another way")
# module apply_report's options and the ones each step needs (AnsibleModule's required_if)
RULES = dict(required_if=[["step", "load", ["plan", "inventory"]],
                          ["step", "write", ["hosts", "dest"]]])


def options():
    """The options of module ``apply_report`` (the controller's steps of playbook apply)."""
    return {
        "step": dict(type="str", required=True, choices=["load", "check", "write"]),
        "plan": dict(type="path"),
        "max_age": dict(type="float", default=24.0),
        "skip": dict(type="list", elements="str", default=[]),
        "inventory": dict(type="list", elements="str"),
        "plan_var": dict(type="str", default="__gpuhost_apply_plan"),
        "result_var": dict(type="str"),
        "status_var": dict(type="str", default="__gpuhost_apply_result"),
        "hosts": dict(type="list", elements="str"),
        "dest": dict(type="path"),
    }


def rules(p):
    """``max_age`` (gpuhost_plan_max_age) a number of hours above 0, ``plan`` a path."""
    if p.get("max_age") is None or p["max_age"] <= 0:
        raise ValidationError("max_age (gpuhost_plan_max_age) must be a number of hours above "
                              "0, not %r" % (p.get("max_age"),))
    if p.get("step") == "load" and not str(p.get("plan") or "").strip():
        raise ValidationError("plan (gpuhost_plan) must be the path of a plan file")


_ISO = re.compile(r"^(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:\.\d+)?"
                  r"(?:Z|[+-]00:?00)?$")


def created_epoch(created_at):
    """The plan's ``created_at`` (UTC ISO 8601: ``2026-12-05T17:10:00Z``) as seconds since
    the epoch, or None when it is not one."""
    match = _ISO.match(str(created_at or "").strip())
    if not match:
        return None
    try:
        when = datetime.datetime(*[int(g) for g in match.groups()])
    except ValueError:
        return None
    return (when - datetime.datetime(1970, 1, 1)).total_seconds()


def hours(seconds):
    """``seconds`` as hours the way a refusal prints them: ``26``, ``0.5``, ``24.3``."""
    value = round(seconds / 3600.0, 1)
    return ("%d" % value) if value == int(value) else ("%.1f" % value)


def check_plan(doc, now, max_age_s, version):
    """None, or why the whole plan ``doc`` cannot be applied: made by another collection
    version than ``version``, or older than ``max_age_s`` seconds at ``now`` (seconds since
    the epoch)."""
    made_by = doc.get("collection_version")
    if made_by != version:
        return ("the plan was made by gpuhost.tuning %s, this is %s: make a new plan"
                % (made_by, version))
    created = created_epoch(doc.get("created_at"))
    if created is None:
        return ("the plan's created_at %r is no UTC time: make a new plan"
                % (doc.get("created_at"),))
    age = now - created
    if age > max_age_s:
        return ("the plan is %s h old, gpuhost_plan_max_age is %s h: make a new plan"
                % (hours(age), hours(max_age_s)))
    return None


def check_planned(doc, host, now, max_age_s, version):
    """None, or why ``host`` is refused without looking at it: ``check_plan``, then the
    host is not in the plan, then the plan refused it."""
    whole = check_plan(doc, now, max_age_s, version)
    if whole:
        return whole
    entry = (doc.get("hosts") or {}).get(host)
    if entry is None:
        return "%s is not in the plan: make a new plan that covers it" % host
    if entry.get("refused"):
        return "the plan refused %s: %s" % (host, entry["refused"])
    return None


def nothing_to_do(tune_result_now):
    """Whether host_tune's check-mode result says the host needs no change now (so the
    apply has nothing to do there: a re-run after an interrupted apply goes on)."""
    return (isinstance(tune_result_now, dict) and changeset.refusal(tune_result_now) is None
            and not changeset.changes(tune_result_now))


def check_host(doc, host, tune_result_now, now, max_age_s, version):
    """None when the plan ``doc`` may be applied to ``host`` now, else the refusal text.

    ``tune_result_now`` is what host_tune returns in check mode right before the apply;
    ``now`` seconds since the epoch; ``max_age_s`` the oldest plan allowed, in seconds;
    ``version`` this collection's version. In order: ``check_planned`` (version, age, not
    in the plan, refused in the plan), host_tune refuses the host now, the change set
    moved since the plan (its first ``MOVED_LINES`` lines of ``changeset.difference``).
    A host that needs no change now is not refused (``nothing_to_do``): the apply leaves
    it as it is."""
    refused = check_planned(doc, host, now, max_age_s, version)
    if refused:
        return refused
    if not isinstance(tune_result_now, dict):
        return "%s: no check-mode result of host_tune to compare with the plan" % host
    reason = changeset.refusal(tune_result_now)
    if reason:
        return "%s cannot be tuned now: %s" % (host, reason)
    if nothing_to_do(tune_result_now):
        return None
    planned = doc["hosts"][host].get("changes") or []
    moved = changeset.difference(planned, tune_result_now)
    if not moved:
        return None
    lines = list(moved[:MOVED_LINES])
    if len(moved) > MOVED_LINES:
        lines.append("and %d more" % (len(moved) - MOVED_LINES))
    return "%s: %s" % (host, "; ".join(lines))


def _row(entry, status, reason=None, done=None):
    planned = (entry or {}).get("changes") or []
    row = {"status": status, "reason": reason, "planned": planned,
           "planned_summary": changeset.summary(planned) if planned else [],
           "done": None, "done_summary": None, "moved": []}
    if done is not None:
        row["done"] = done
        row["done_summary"] = changeset.summary(done) if done else []
        row["moved"] = changeset.difference(planned, done)
    return row


def host_row(entry, result):
    """One host's row of the apply report: ``entry`` its plan entry (None: not in the
    plan), ``result`` what the apply recorded (``{"status", "reason", "tune"}``: status
    applied, nothing to do, refused, failed or skipped, ``tune`` host_tune's real result)
    or None (not reached)."""
    if entry is None:
        return _row(None, "not in the plan", "not in the plan: not touched")
    if not result:
        return _row(entry, "not reached")
    status = result.get("status")
    if status == "skipped":
        return _row(entry, "skipped", result.get("reason") or "left out by gpuhost_plan_skip")
    if status == "refused":
        return _row(entry, "refused", result.get("reason"))
    if status == "nothing to do":
        return _row(entry, "nothing to do", NOTHING_TO_DO)
    tune = result.get("tune") if isinstance(result.get("tune"), dict) else None
    done = changeset.changes(tune) if tune is not None else None
    if status != "applied":
        return _row(entry, "failed", result.get("reason") or "failed", done)
    row = _row(entry, "applied", None, done if done is not None else [])
    if row["moved"]:
        row["status"] = "differs"
        row["reason"] = "done differs from the plan: %s" % "; ".join(row["moved"])
    return row


def report(doc, results, not_in_plan=(), generated_at=None, check_mode=False):
    """The apply report document of plan ``doc``: per host of the plan (and each inventory
    host of ``not_in_plan``, not touched) its planned change set, what the real run changed
    (``done``: the rows host_tune changed), and its status (``STATUSES``): applied,
    differs (done is not what was planned), nothing to do (no change needed any more),
    refused (why), failed (why), skipped, not reached. ``results``: host -> what the apply
    recorded (see ``host_row``); ``check_mode``: the apply ran with --check (done is what
    it would have done)."""
    results = results or {}
    planned = doc.get("hosts") or {}
    rows = {}
    for host in sorted(planned):
        rows[host] = host_row(planned[host], results.get(host))
    for host in sorted(not_in_plan):
        if host not in rows:
            rows[host] = host_row(None, None)
    counts = dict((status, 0) for status in STATUSES)
    for row in rows.values():
        counts[row["status"]] += 1
    out = {"schema": SCHEMA, "plan_digest": doc.get("digest"),
           "plan_created_at": doc.get("created_at"),
           "plan_created_by": doc.get("created_by"),
           "collection_version": doc.get("collection_version"),
           "hosts": rows, "counts": counts,
           "finished": counts["not reached"] == 0, "check_mode": bool(check_mode)}
    if generated_at:
        out["generated_at"] = generated_at
    return out


def json_text(rep):
    """The apply report document as the JSON file holds it."""
    return json.dumps(rep, indent=2, sort_keys=True) + "\n"


def lines(rep):
    """The console lines: the headline, then each host that needs a look (refused, failed,
    differs) with its reason."""
    out = [headline(rep)]
    for host in sorted(rep["hosts"]):
        row = rep["hosts"][host]
        if row["status"] in ("refused", "failed", "differs"):
            out.append("%s: %s: %s" % (host, row["status"], row["reason"]))
    return out


def _md(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def headline(rep):
    """One line: the counts of the apply report ``rep``."""
    counts = rep["counts"]
    parts = ["%d %s" % (counts[s], s) for s in STATUSES if counts.get(s)]
    return "apply of plan %s%s: %s" % ((rep.get("plan_digest") or "?")[:12],
                                       " (check mode, nothing changed)"
                                       if rep.get("check_mode") else "",
                                       ", ".join(parts) or "no host")


def markdown(rep):
    """The apply report as Markdown: the counts, then a table of every host (the hosts that
    need a look first), then each host's planned and done change set."""
    out = ["# Apply of plan %s" % (rep.get("plan_digest") or "?"), "",
           headline(rep) + ".", "",
           "Plan made %s by %s with gpuhost.tuning %s%s." % (
               rep.get("plan_created_at"), rep.get("plan_created_by"),
               rep.get("collection_version"),
               (", applied %s" % rep["generated_at"]) if rep.get("generated_at") else ""),
           "", "| host | status | planned | done | reason |", "| --- | --- | --- | --- | --- |"]
    order = dict((s, i) for i, s in enumerate(STATUSES))
    hosts = sorted(rep["hosts"], key=lambda h: (order[rep["hosts"][h]["status"]], h))
    for host in hosts:
        row = rep["hosts"][host]
        done = "" if row["done"] is None else str(len(row["done"]))
        out.append("| %s | %s | %d | %s | %s |" % (
            _md(host), row["status"], len(row["planned"]), done, _md(row["reason"] or "")))
    for host in hosts:
        row = rep["hosts"][host]
        if not row["planned"] and not row["done"]:
            continue
        out += ["", "## %s (%s)" % (host, row["status"]), "", "Planned:"]
        out += ["- %s" % line for line in row["planned_summary"]] or ["- nothing"]
        if row["done_summary"] is not None:
            out += ["", "Done:"]
            out += ["- %s" % line for line in row["done_summary"]] or ["- nothing"]
        if row["moved"]:
            out += ["", "Differs from the plan:"] + ["- %s" % line for line in row["moved"]]
    return "\n".join(out) + "\n"
