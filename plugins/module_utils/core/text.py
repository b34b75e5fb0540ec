# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The console text of findings: one place for the lines and the headline that
``host_audit`` returns and the roles print."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.checks.base import SEVERITIES


def text_lines(items, limit=8):
    """Ranked findings as short log lines; findings of one id with the same values and the
    same remedy (up to their subject) collapse into one line listing the subjects."""
    groups = []
    index = {}
    for f in items:
        subject = str(f["subject"])
        template = f["remedy"].replace(subject, "<subject>") if subject else f["remedy"]
        key = (f["id"], f["severity"], f["current"], f["expected"], template)
        if key not in index:
            index[key] = len(groups)
            groups.append({"finding": f, "subjects": [], "template": template})
        groups[index[key]]["subjects"].append(subject)
    lines = []
    for group in groups:
        f = group["finding"]
        subjects = group["subjects"]
        shown = ", ".join(subjects[:limit])
        if len(subjects) > limit:
            shown += ", ... (%d more)" % (len(subjects) - limit)
        count = " x%d" % len(subjects) if len(subjects) > 1 else ""
        remedy = group["template"] if len(subjects) > 1 else f["remedy"]
        lines.append("%-8s %s%s [%s]: %s (want %s)%s. Fix: %s" % (
            f["severity"].upper(), f["id"], count, shown, f["current"], f["expected"],
            " [reboot]" if f.get("reboot_required") else "", remedy))
    return lines or ["no findings"]


def headline(items):
    """``worst high: 1 critical, 21 high`` or ``no findings``."""
    if not items:
        return "no findings"
    counts = dict((name, 0) for name in SEVERITIES)
    for f in items:
        counts[f["severity"]] += 1
    return "worst %s: %s" % (items[0]["severity"], ", ".join(
        "%d %s" % (counts[s], s) for s in SEVERITIES if counts[s]))


def summary(items):
    """``({severity: count}, worst)`` of ranked findings (worst ``none`` without any)."""
    counts = dict((name, 0) for name in SEVERITIES)
    for item in items:
        counts[item["severity"]] = counts.get(item["severity"], 0) + 1
    return counts, items[0]["severity"] if items else "none"
