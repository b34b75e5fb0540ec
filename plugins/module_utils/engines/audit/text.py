# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The console text of findings: one place for the lines and the headline that
``host_audit`` returns and the roles print."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import shlex

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.findings import SEVERITIES


# The commands a remedy's clause may start with to be run once per subject in a shell loop
# (anything else, prose like "add ... to the kernel command line", is never looped).
LOOP_COMMANDS = frozenset((
    "apt-get", "chmod", "cpupower", "dkms", "echo", "ethtool", "ip", "ln", "mkdir",
    "modprobe", "nvidia-ctk", "nvidia-smi", "pct", "proxmox-boot-tool", "qm", "rmmod",
    "setpci", "sysctl", "systemctl", "udevadm", "update-initramfs"))
_MARK = "\x00subject\x00"
_TAIL = re.compile(r"^(?P<command>.*?)(?P<tail> \([^()]*\))?$", re.S)


def group_remedy(remedy, subject, subjects):
    """The remedy of findings that differ only in their subject, as text that can be
    pasted: ``remedy`` (one finding's, naming ``subject``) for every one of ``subjects``.
    The clause naming the subject becomes a shell loop over them when it is a command
    (``LOOP_COMMANDS``): ``for s in A B; do sysctl -w "$s"=0; done (now); ...``; else each
    subject's own remedy, one after the other. Never a placeholder such as ``<subject>``."""
    subject = str(subject)
    subjects = [str(s) for s in subjects]
    if len(subjects) < 2 or not subject or subject not in remedy:
        return remedy
    clauses = remedy.replace(subject, _MARK).split("; ")
    named = [i for i, clause in enumerate(clauses) if _MARK in clause]
    match = _TAIL.match(clauses[named[0]]) if len(named) == 1 else None
    command = match.group("command") if match else ""
    words = command.split(None, 1)
    if words and words[0] in LOOP_COMMANDS and _MARK not in (match.group("tail") or ""):
        loop = "for s in %s; do %s; done%s" % (
            " ".join(shlex.quote(s) for s in subjects), command.replace(_MARK, '"$s"'),
            match.group("tail") or "")
        clauses[named[0]] = loop
        return "; ".join(clauses)
    return "; ".join(remedy.replace(subject, s) for s in subjects)


def text_lines(items, limit=8):
    """Ranked findings as short log lines; findings of one id with the same values and the
    same remedy (up to their subject) collapse into one line listing the subjects, with
    one remedy for all of them that can be pasted (:func:`group_remedy`)."""
    groups = []
    index = {}
    for f in items:
        subject = str(f["subject"])
        template = f["remedy"].replace(subject, _MARK) if subject else f["remedy"]
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
        remedy = group_remedy(f["remedy"], f["subject"], subjects)
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
