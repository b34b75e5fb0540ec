# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The options of the report modules (audit_report, report_merge, tune_report: each module
and its action plugin take them from here) and their validation rules, beside their specs
(platform/validate.py has the checks they are built from)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.findings import SEVERITIES
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (
    ValidationError,
    fail,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie.audit_pcie import (
    mrrs_size,
)


def report_rules(given):
    """The report modules: results given (``given``: ``audits``, ``results``), or read by
    the action plugin from each host's registered result (``hosts`` and ``result_var``)."""
    return dict(mutually_exclusive=[[given, "hosts"]], required_one_of=[[given, "hosts"]],
                required_together=[["hosts", "result_var"]])


AUDIT_REPORT_RULES = report_rules("audits")
TUNE_REPORT_RULES = report_rules("results")


def _registered():
    return {"hosts": dict(type="list", elements="str"), "result_var": dict(type="str")}


def audit_report():
    """The options of module ``audit_report`` (its module and its action plugin)."""
    spec = {
        "audits": dict(type="dict"),
        "dest": dict(type="path", required=True),
        "generated_at": dict(type="str"),
        "mrrs_size": mrrs_size(),
        "write": dict(type="bool", default=True),
        "fleet_files": dict(type="bool", default=True),
        "groups": dict(type="dict"),
    }
    spec.update(_registered())
    return spec


def report_merge():
    """The options of module ``report_merge`` (its module and its action plugin)."""
    return {
        "folders": dict(type="list", elements="path", required=True),
        "dest": dict(type="path", required=True),
        "stale_hours": dict(type="float", default=24.0),
        "generated_at": dict(type="str"),
        "mrrs_size": mrrs_size(),
    }


def tune_report():
    """The options of module ``tune_report`` (its module and its action plugin)."""
    spec = {"results": dict(type="dict"), "dest": dict(type="path", required=True)}
    spec.update(_registered())
    return spec


# The validation rules of the report modules, beside their specs (the module and its action
# plugin run them; module_utils/platform/validate.py has the checks they are built from).
FINDING_KEYS = ("id", "severity", "subject", "current", "expected")


def _short(value, limit=120):
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _results_rule(option):
    def rule(p):

        value = p.get(option)
        if value is None and p.get("hosts") is not None:
            # the action plugin fills the results from hosts before it checks
            raise ValidationError("hosts and result_var are read from the play's variables by "
                                  "the action plugin on the controller; pass %s when running "
                                  "the module itself" % option)
        if not isinstance(value, dict):
            fail(option, value, "a mapping of host name to result")
        if p.get("dest") in ("", None):
            fail("dest", p.get("dest"), "a folder path")
    return rule


tune_report_rules = _results_rule("results")


def audit_report_rules(p):
    """Each host's audit as host_audit returns it: findings a list of mappings with
    FINDING_KEYS, a known severity and a text id (the message names host and key)."""

    _results_rule("audits")(p)
    for host, audit in p["audits"].items():
        if not isinstance(audit, dict) or "findings" not in audit:
            continue  # the module says "no audit result for <host>"
        where = "audits.%s" % host
        findings = audit["findings"]
        if not isinstance(findings, list):
            raise ValidationError("%s.findings: %s is not allowed: a list of findings (pass "
                                  "the 'audit' value host_audit returned)"
                                  % (where, _short(findings)))
        for index, finding in enumerate(findings):
            at = "%s.findings[%d]" % (where, index)
            if not isinstance(finding, dict):
                raise ValidationError("%s: %s is not allowed: a finding mapping with %s"
                                      % (at, _short(finding), ", ".join(FINDING_KEYS)))
            missing = [key for key in FINDING_KEYS if key not in finding]
            if missing:
                raise ValidationError("%s: no %s: a finding needs %s"
                                      % (at, ", ".join(missing), ", ".join(FINDING_KEYS)))
            if not isinstance(finding["id"], str) or not finding["id"].strip():
                raise ValidationError("%s.id: %s is not allowed: a check id like mrrs_low"
                                      % (at, _short(finding["id"])))
            if finding["severity"] not in SEVERITIES:
                raise ValidationError("%s.severity: %s is not allowed: one of %s"
                                      % (at, _short(finding["severity"]), ", ".join(SEVERITIES)))


def report_merge_rules(p):

    if not p.get("folders"):
        fail("folders", p.get("folders"), "one or more report folders (one per slice or run)")
    for folder in p["folders"]:
        if folder in ("", None):
            fail("folders", p["folders"], "report folder paths, none empty")
    if p.get("dest") in ("", None):
        fail("dest", p.get("dest"), "a folder path")
    if p.get("stale_hours") is not None and not p["stale_hours"] > 0:
        fail("stale_hours", p["stale_hours"], "hours above 0 (a host audited longer ago "
             "is listed as stale)")
