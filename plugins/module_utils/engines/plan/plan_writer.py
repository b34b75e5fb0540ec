# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Module plan_report (its module and its action plugin, run in the controller's process):
its options and their rules, and the run that builds the plan of every host's host_tune
check-mode result and writes it into ``dest``: ``plan-<digest12>.json`` (kept: a plan is
applied by that name), ``plan.json`` (a copy of the newest: a link would not survive being
copied as a job artifact), ``plan.md`` and ``plan.html``, each atomically."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import getpass
import json
import socket
import time

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.plan import planfile
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import files
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import report
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (
    ValidationError,
    fail,
)

NAME = "plan_report"
LATEST = ("plan.json", "plan.md", "plan.html")
RULES = dict(mutually_exclusive=[["results", "hosts"]], required_one_of=[["results", "hosts"]],
             required_together=[["hosts", "result_var"]])


def options():
    """The options of module ``plan_report``."""
    return {
        "results": dict(type="dict"),
        "hosts": dict(type="list", elements="str"),
        "result_var": dict(type="str"),
        "dest": dict(type="path", required=True),
        "serial": dict(type="raw"),
        "parts": dict(type="list", elements="str", default=[]),
        "wanted": dict(type="dict", default={}),
        "collection_version": dict(type="str"),
        "created_by": dict(type="str"),
    }


def rules(p):
    """``results`` a mapping (the action plugin reads it from ``hosts``), ``dest`` a path,
    ``serial`` one of the rollout's forms."""
    if p.get("results") is None and p.get("hosts") is not None:
        raise ValidationError("hosts and result_var are read from the play's variables by the "
                              "action plugin on the controller; pass results when running "
                              "the module itself")
    if not isinstance(p.get("results"), dict):
        fail("results", p.get("results"), "a mapping of host name to host_tune's result")
    if p.get("dest") in ("", None):
        fail("dest", p.get("dest"), "a folder path")
    if p.get("serial") not in (None, ""):
        try:
            planfile.batches([], p["serial"])
        except ValueError as exc:
            raise ValidationError(str(exc))


def registered_results(raw_vars, hosts, result_var):
    """``{host: result}``: each host's registered host_tune result, None where it has none
    (``report.registered``). ReportError when no host has one (a misspelled
    ``result_var``)."""
    found = report.registered(raw_vars, hosts, result_var)
    if found and all(value is None for value in found.values()):
        raise files.ReportError(
            "%s: no host_tune result in variable %r of any host (%s); nothing was written"
            % (NAME, result_var, ", ".join(sorted(found))))
    return found


def created_at(clock=time.time):
    """UTC ISO 8601 to the second: ``2026-12-05T17:10:00Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(clock()))


def controller_user():
    """``user@host`` of the process making the plan."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError, ImportError):
        user = "unknown"
    return "%s@%s" % (user, socket.gethostname())


def plan_files(doc):
    """{file name: text} of plan ``doc``."""
    text = _json(doc)
    return {planfile.file_name(doc): text, LATEST[0]: text, LATEST[1]: planfile.markdown(doc),
            LATEST[2]: planfile.html(doc)}


def _json(doc):
    """The plan file's text: sorted keys, indented (a reviewer may read it); ``load``
    checks the digest of the parsed document, so the layout is free."""
    return json.dumps(doc, sort_keys=True, indent=1, ensure_ascii=True) + "\n"


def run(p, check_mode=False, clock=time.time):
    """Module plan_report: ``p`` its options. ReportError on a folder that cannot be
    written."""
    results = p["results"]
    meta = {"collection_version": p.get("collection_version"),
            "created_at": created_at(clock), "created_by": p.get("created_by")
            or controller_user(), "hosts": p.get("hosts") or sorted(results),
            "parts": p.get("parts") or [], "wanted": p.get("wanted") or {},
            "serial": p.get("serial") if p.get("serial") not in ("", None) else None}
    files.check_file_names(sorted(results), "plan")
    doc = planfile.build(results, meta)
    paths, written = files.write_reports(NAME, p["dest"], plan_files(doc), check_mode,
                                         "gpuhost_plan_dir")
    plan = [path for path in paths if path.endswith(planfile.file_name(doc))][0]
    lines = ["%s: %s" % ("%d host%s" % (len(g["hosts"]), "" if len(g["hosts"]) == 1 else "s"),
                         "; ".join(g["summary"])) for g in doc["groups"]]
    return dict(changed=bool(written), files=paths, written=written, digest=doc["digest"],
                plan=plan, headline=planfile.headline(doc), groups=lines,
                refused=sorted(h for h, e in doc["hosts"].items() if e["refused"]))
