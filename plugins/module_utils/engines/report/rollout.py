# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The summary of a rolling run across a fleet: which hosts are done, which stopped (and
why), which the run did not reach.

A host is ``done`` or ``stopped`` when the run recorded a result for it; every other host
of the play is ``not reached`` (a later batch that never started, because an earlier host
stopped the run with ``max_fail_percentage``, or a host that was unreachable). A result
whose status is none of these (a typo in a playbook, a newer writer) is ``unknown``, its
raw status named in the row's ``raw_status`` and reason: the run did reach that host.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import math
import os
import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import files

STATUSES = ("done", "stopped", "not reached")
# a result the run recorded whose status is none of STATUSES; counted and shown only when
# there is one (a summary without one is as it always was)
UNKNOWN = "unknown"

SERIAL_FORMS = ("a positive integer (2, or \"2\" from -e), a percentage from \"1%\" to "
                "\"100%\", or a non-empty list of those ([1, \"25%\"]: one canary, then "
                "a quarter of the fleet per batch)")
MAX_FAIL_FORMS = "a number from 0 to 100 (0, 25, \"25\" or \"25%\")"
_INT = re.compile(r"^[0-9]+$")
_PCT = re.compile(r"^([0-9]+)%$")


def _batch(value):
    """One batch size as Ansible's ``serial`` reads it, or None when it is not one of the
    accepted forms (Ansible reads 0, a negative number or a percentage over 100 as "every
    host at once", and gives an unexpected exception on other text)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if not isinstance(value, str):
        return None
    if _INT.match(value):
        return int(value) if int(value) > 0 else None
    match = _PCT.match(value)
    if match and 1 <= int(match.group(1)) <= 100:
        return "%d%%" % int(match.group(1))
    return None


def serial_batches(value, name="gpuhost_serial"):
    """``value`` (a play's ``serial``) as the list Ansible batches by: ints and ``"N%"``
    strings. Raises ValueError naming the value and the accepted forms (``SERIAL_FORMS``)
    for anything else, before any host is touched: 0, negative numbers, ``[]``, ``[0]``,
    ``"150%"``, ``"abc"``, a dict or a bool."""
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    batches = [_batch(item) for item in items]
    if not items or None in batches:
        if not items or not isinstance(value, (list, tuple)):
            what = repr(value)
        else:
            place = batches.index(None)
            what = "%r (position %d of %r)" % (items[place], place + 1, value)
        raise ValueError("%s: %s is not a batch size: give %s. Nothing was touched."
                         % (name, what, SERIAL_FORMS))
    return batches


def max_fail_percentage(value, name="gpuhost_max_fail_percentage"):
    """``value`` (a play's ``max_fail_percentage``) as a number from 0 to 100. Raises
    ValueError naming the value and the accepted forms (``MAX_FAIL_FORMS``)."""
    number = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and re.match(r"^[0-9]+(\.[0-9]+)?%?$", value):
        number = float(value.rstrip("%"))
        number = int(number) if number == int(number) else number
    if number is None or math.isnan(number) or not 0 <= number <= 100:
        raise ValueError("%s: %r is not a failure percentage: give %s. Nothing was touched."
                         % (name, value, MAX_FAIL_FORMS))
    return number


def summarize(hosts, results, title="rollout"):
    """``hosts``: every host of the play, in rollout order; ``results``: host ->
    ``{status: done|stopped, reason}`` for the hosts the run got to, with ``driver:
    {before, after}`` on a driver upgrade (role driver_upgrade). Returns the summary
    document ``{title, hosts: [{host, status, reason}], counts, finished}`` (rows carry
    ``driver`` when their result had one)."""
    rows = []
    seen = set()
    for host in list(hosts) + sorted(h for h in results if h not in hosts):
        if host in seen:
            continue
        seen.add(host)
        result = results.get(host)
        # no result, or one with no status (an unreachable host's): the run never got to it
        if not isinstance(result, dict) or result.get("status") in (None, "not reached"):
            rows.append({"host": host, "status": "not reached", "reason": None})
            continue
        if result.get("status") not in ("done", "stopped"):
            rows.append(_unknown(host, result))
            continue
        reason = result.get("reason")
        row = {"host": host, "status": result["status"],
               "reason": None if reason in (None, "") else str(reason)}
        driver = result.get("driver")
        if isinstance(driver, dict):
            row["driver"] = {"before": driver.get("before"), "after": driver.get("after")}
        rows.append(row)
    counts = dict((status, len([r for r in rows if r["status"] == status]))
                  for status in STATUSES)
    unknown = len([r for r in rows if r["status"] == UNKNOWN])
    if unknown:
        counts[UNKNOWN] = unknown
    return {"title": title, "hosts": rows, "counts": counts,
            "finished": counts["not reached"] == 0 and not unknown}


def _unknown(host, result):
    """The row of a result whose status is none of done, stopped, not reached: ``unknown``,
    with the raw status (kept as it came through a merge of summaries) and its reason."""
    status = result.get("status")
    raw = status
    if status == UNKNOWN and result.get("raw_status") is not None:
        raw = result["raw_status"]  # a merged summary's row: the status its run recorded
    raw = raw if isinstance(raw, str) else repr(raw)
    reason = result.get("reason")
    if status != UNKNOWN or not reason:
        said = "" if reason in (None, "") else ": %s" % reason
        reason = "the run recorded status %r, which is none of done, stopped%s" % (raw, said)
    return {"host": host, "status": UNKNOWN, "reason": str(reason), "raw_status": raw}


def headline(doc):
    counts = doc["counts"]
    text = "%s: %d done, %d stopped, %d not reached" % (
        doc["title"], counts["done"], counts["stopped"], counts["not reached"])
    if counts.get(UNKNOWN):
        text += ", %d unknown" % counts[UNKNOWN]
    return text


def lines(doc):
    """The summary as console lines: the headline, then one line per host."""
    out = [headline(doc)]
    width = max([len(r["host"]) for r in doc["hosts"]] or [0])
    for row in doc["hosts"]:
        text = "%-*s  %s" % (width, row["host"], row["status"])
        if row.get("driver"):
            text += " (driver %s)" % driver_change(row["driver"])
        if row["reason"]:
            text += ": %s" % row["reason"]
        out.append(text)
    return out


def driver_change(driver):
    """``580.95.05 -> 590.48.01``; ``?`` for a side not known (a host stopped before its
    boot has no after)."""
    return "%s -> %s" % (driver.get("before") or "?", driver.get("after") or "?")


def _md(text):
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def render_markdown(doc, generated_at=None):
    out = ["# %s" % headline(doc), ""]
    if generated_at:
        out += ["Generated %s. Hosts in rollout order." % generated_at, ""]
    drivers = any(row.get("driver") for row in doc["hosts"])
    if drivers:
        out += ["| Host | Status | Driver before -> after | Why |", "|---|---|---|---|"]
    else:
        out += ["| Host | Status | Why |", "|---|---|---|"]
    for row in doc["hosts"]:
        cells = [_md(row["host"]), row["status"]]
        if drivers:
            cells.append(_md(driver_change(row["driver"])) if row.get("driver") else "")
        cells.append(_md(row["reason"] or ""))
        out.append("| %s |" % " | ".join(cells))
    if not doc["finished"]:
        out += ["", "Hosts not reached were left as they were: fix what stopped the run, then "
                "run the same command again (hosts already done report nothing to change)."]
    if doc["counts"].get(UNKNOWN):
        out += ["", "Hosts with status unknown were reached, but their result is neither done "
                "nor stopped: read that host's output before running again."]
    return "\n".join(out) + "\n"


def report_files(doc, basename="rollout", generated_at=None):
    """``{filename: text}``: ``<basename>.md`` and ``<basename>.json``."""
    data = dict(doc)
    if generated_at:
        data["generated_at"] = generated_at
    return {basename + ".md": render_markdown(doc, generated_at),
            basename + ".json": json.dumps(data, indent=2, sort_keys=True) + "\n"}


def report_run(p, check_mode=False):
    """Module rollout_report: ``p`` its options. files.ReportError on a name that is no
    plain file name or a folder that cannot be written."""
    if os.path.basename(p["name"]) != p["name"] or not p["name"].strip("."):
        raise files.ReportError("rollout_report: name %r must be a plain file name (no "
                                "folder)" % p["name"])
    clash = files.report_name_clash(p["name"], p["hosts"])
    if clash:
        raise files.ReportError("rollout_report: name %r cannot be used: %s; pick another "
                                "name (the default is rollout); nothing was written"
                                % (p["name"], clash))
    doc = summarize(p["hosts"], p["results"], p["title"])
    paths, written = files.write_reports(
        "rollout_report", p["dest"], report_files(doc, p["name"], p["generated_at"] or files.now()),
        check_mode, "gpuhost_report_dir")
    return dict(changed=bool(written), hosts=doc["hosts"], counts=doc["counts"],
                finished=doc["finished"], lines=lines(doc), files=paths, written=written)
