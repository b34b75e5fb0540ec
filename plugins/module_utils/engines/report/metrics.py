# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Audit results as Prometheus metrics, in the text exposition format (version 0.0.4) that
Prometheus scrapes and node_exporter's textfile collector reads.

One family per metric name (``# HELP``, ``# TYPE``, then its samples), families sorted by
name, samples sorted by their labels, label values escaped, a trailing newline. Every series
carries a ``host`` label (the inventory name), so one file can hold a whole fleet's run and
a per-host file in a textfile folder does not clash with another host's.

Series (all gauges):

- ``gpuhost_finding{host,id,severity,subject}``: 1 per finding (the number of identical
  findings when two share every label), acknowledged ones left out (the alerts read it);
- ``gpuhost_finding_new{host,id,severity,subject}``: 1 per finding not in the host's
  previous report (the reports' "new"; a host without a previous report has none);
- ``gpuhost_finding_acknowledged{host,id,severity,subject}``: 1 per finding the operator
  acknowledged (host_audit ``acknowledged``): reported, never alerted on;
- ``gpuhost_findings{host,severity}``: findings per severity, all five severities present,
  acknowledged ones left out;
- ``gpuhost_audit_timestamp_seconds{host}``: when the audit ran (Unix time);
- ``gpuhost_audit_duration_seconds{host}``: how long the audit module took;
- ``gpuhost_check_status{host,column}``: each report column (check) as a number,
  ``CHECK_STATUS_VALUES``: -1 not applicable, 0 ok, 1 info, 2 low, 3 medium, 4 high,
  5 critical (higher is worse, so ``>= 4`` means high or critical);
- ``gpuhost_gpu_recovery_action{host,gpu,action}``: per GPU of the audit's ``gpu_recovery``
  fact, what it needs (``action``: none, drain_p2p, reset, drain_and_reset, reboot) and as the
  value its rank in that order (0 none ... 4 reboot; ``> 0`` means the GPU needs something);
- ``gpuhost_host_up{host}``: 1 for a host audited in this run, 0 for one that was not
  (unreachable, failed or skipped: every inventory host of the run has the series; the
  series above are for audited hosts only);
- ``gpuhost_last_good_audit_age_seconds{host}``: seconds from the host's newest good
  audit (its ``last_seen``) to the report's time; left out for a host never audited.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import math
import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.recovery import recovery
import time

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.findings import SEVERITIES

CHECK_STATUS_VALUES = {
    "n/a": -1,
    "ok": 0,
    "info": 1,
    "low": 2,
    "medium": 3,
    "high": 4,
    "critical": 5,
}

_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
TYPES = ("counter", "gauge", "untyped", "summary", "histogram")


class Family(object):
    """One metric family: a name, its help text, its type and its samples."""

    def __init__(self, name, help_text, metric_type="gauge"):
        if not _NAME.match(name):
            raise ValueError("invalid metric name %r" % (name,))
        if metric_type not in TYPES:
            raise ValueError("invalid metric type %r" % (metric_type,))
        self.name = name
        self.help = help_text
        self.type = metric_type
        self.samples = {}

    def add(self, labels, value, accumulate=False):
        """Set the sample with ``labels`` (a dict, in the order the labels should be
        printed) to ``value``; with ``accumulate`` add it to a sample already there (two
        identical findings count 2)."""
        for key in labels:
            if not _LABEL.match(key) or key.startswith("__"):
                raise ValueError("invalid label name %r for %s" % (key, self.name))
        # labels keep the order given (host first), so sorting samples groups them by host
        key = tuple((k, "" if v is None else str(v)) for k, v in labels.items())
        if accumulate and key in self.samples:
            self.samples[key] += value
        else:
            self.samples[key] = value
        return self


# Characters a reader may take for a line break or cannot carry: every other C0 control
# (carriage return, vertical tab, form feed, NUL, ...), DEL, C1 controls (U+0085 is NEL),
# the Unicode line and paragraph separators, and lone surrogates (a name decoded with
# surrogateescape: not UTF-8, and promtool refuses invalid UTF-8). The format escapes only
# backslash, double quote and line feed, so these are written as visible text instead.
_HIDDEN = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def _visible(text):
    """``text`` with every ``_HIDDEN`` character as the text ``\\xHH`` (``\\uHHHH`` above
    U+00FF), so the file keeps one sample per line and is valid UTF-8."""
    return _HIDDEN.sub(lambda m: ("\\\\x%02x" if ord(m.group()) < 0x100 else "\\\\u%04x")
                       % ord(m.group()), text)


def escape_label(value):
    """A label value as the text format wants it: backslash, double quote and line feed
    escaped; any other control character (a carriage return in a host name), line separator
    or lone surrogate as the visible text ``\\xHH`` (``_HIDDEN``)."""
    return _visible(str(value).replace("\\", "\\\\").replace("\"", "\\\"")
                    .replace("\n", "\\n"))


def escape_help(text):
    """HELP text: backslash and line feed escaped (double quotes stay), other control
    characters as in ``escape_label``."""
    return _visible(str(text).replace("\\", "\\\\").replace("\n", "\\n"))


def format_value(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def render(families):
    """The exposition text of ``families``: one block per name, names sorted, samples
    sorted by their label values; families without samples are left out. Raises ValueError
    when two families share a name."""
    seen = set()
    lines = []
    for family in sorted(families, key=lambda f: f.name):
        if family.name in seen:
            raise ValueError("metric family %s given twice" % family.name)
        seen.add(family.name)
        if not family.samples:
            continue
        lines.append("# HELP %s %s" % (family.name, escape_help(family.help)))
        lines.append("# TYPE %s %s" % (family.name, family.type))
        for key in sorted(family.samples):
            labels = ",".join('%s="%s"' % (k, escape_label(v)) for k, v in key)
            lines.append("%s%s %s" % (family.name, "{%s}" % labels if labels else "",
                                      format_value(family.samples[key])))
    return "\n".join(lines) + "\n" if lines else ""


def epoch(collected_at):
    """``2026-12-01T03:47:48Z`` (host_audit's ``collected_at``) or ``2026-12-01 03:47:48Z``
    (a report's ``generated_at``) as Unix time, or None."""
    if not collected_at:
        return None
    for fmt in ("%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%d %H:%M:%SZ"):
        try:
            return calendar.timegm(time.strptime(str(collected_at), fmt))
        except ValueError:
            continue
    return None


def audit_families(audits):
    """The families for ``audits`` (inventory host -> host_audit's ``audit`` result)."""
    finding = Family("gpuhost_finding",
                     "One series per audit finding (value: how many identical findings).")
    fresh = Family("gpuhost_finding_new",
                   "One series per audit finding not in the host's previous report.")
    acked = Family("gpuhost_finding_acknowledged",
                   "One series per audit finding the operator acknowledged (not alerted on).")
    per_severity = Family("gpuhost_findings",
                          "Audit findings per host and severity (all five severities), "
                          "acknowledged ones left out.")
    stamp = Family("gpuhost_audit_timestamp_seconds",
                   "Unix time at which the host's audit ran.")
    duration = Family("gpuhost_audit_duration_seconds",
                      "Seconds the host's audit module took to read the host.")
    status = Family("gpuhost_check_status",
                    "Worst severity per report column: -1 n/a, 0 ok, 1 info, 2 low, "
                    "3 medium, 4 high, 5 critical.")
    recover = Family("gpuhost_gpu_recovery_action",
                     "What each GPU needs to recover (label action), as its rank: 0 none, "
                     "1 drain_p2p, 2 reset, 3 drain_and_reset, 4 reboot.")
    for host in sorted(audits):
        audit = audits[host] or {}
        for gpu in audit.get("gpu_recovery") or []:
            need = gpu.get("need")
            if gpu.get("address") and need in recovery.NEED_RANK:
                recover.add({"host": host, "gpu": gpu["address"], "action": need},
                            recovery.NEED_RANK[need])
        counts = dict((name, 0) for name in SEVERITIES)
        for item in audit.get("findings") or []:
            severity = item.get("severity")
            labels = {"host": host, "id": item.get("id"), "severity": severity,
                      "subject": item.get("subject")}
            if item.get("new"):
                fresh.add(labels, 1, accumulate=True)
            if item.get("acknowledged"):
                acked.add(labels, 1, accumulate=True)
                continue
            counts[severity] = counts.get(severity, 0) + 1
            finding.add(labels, 1, accumulate=True)
        for severity, count in counts.items():
            per_severity.add({"host": host, "severity": severity}, count)
        when = epoch(audit.get("collected_at"))
        if when is not None:
            stamp.add({"host": host}, when)
        if audit.get("duration_s") is not None:
            duration.add({"host": host}, float(audit["duration_s"]))
        for column, info in sorted((audit.get("checks") or {}).items()):
            value = CHECK_STATUS_VALUES.get((info or {}).get("status"))
            if value is not None:
                status.add({"host": host, "column": column}, value)
    return [finding, fresh, acked, per_severity, stamp, duration, status, recover]


def host_families(docs, now_s):
    """``gpuhost_host_up`` and ``gpuhost_last_good_audit_age_seconds`` for report documents
    ``docs`` (each with ``host``, ``status`` and ``last_seen``), ages at Unix time
    ``now_s``."""
    up = Family("gpuhost_host_up",
                "1: the host was audited in this run; 0: it was not (unreachable, failed or "
                "skipped: see its report's status and error).")
    age = Family("gpuhost_last_good_audit_age_seconds",
                 "Seconds since the host's newest good audit, at the time of the report "
                 "(no series for a host never audited).")
    for doc in docs:
        host = doc["host"]
        up.add({"host": host}, 1 if doc.get("status", "ok") == "ok" else 0)
        seen = epoch(doc.get("last_seen"))
        if seen is not None and now_s is not None:
            age.add({"host": host}, max(0, int(now_s) - seen))
    return [up, age]


def audit_text(audits, docs=None, now_s=None):
    """The exposition text for ``audits`` (host -> audit result) and, with ``docs`` (the
    report documents of every host of the run), each host's up and age series
    (:func:`host_families`, ages at ``now_s``)."""
    return render(audit_families(audits) + host_families(docs or [], now_s))
