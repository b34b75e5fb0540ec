# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One host's planned change set, read from host_tune's check-mode result (pure functions).

A change is ``{part, item, before, after}``: a row of host_tune's ``rows`` whose status
says a change (``CHANGE_STATUSES``). ``fingerprint`` hashes the changes with their
before-values (the state the plan was made from); ``summary`` folds them into the lines a
reviewer reads, and ``group_key`` hashes those lines, so hosts whose MRRS changes name
different device addresses but are the same change share a group. ``difference`` says what
moved between a plan's changes and the host's changes now (module apply refuses on it).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import tune_registry

# A row status that says a change: "changed" (done, or would be in check mode), "planned"
# (check mode of a part that says so) and "loaded" (nvidia_peermem loaded for real).
CHANGE_STATUSES = ("changed", "planned", "loaded")
# A row status that says the part could not do its work (never a change; see ``refusal``).
FAILED_STATUSES = ("failed", "refused")
CHANGE_KEYS = ("part", "item", "before", "after")

# A PCI address at the start of an item ("0000:01:00.0 endpoint MRRS"), and the port's
# kind after it: rows differing only in them fold into one line counted in devices.
_ADDRESS = re.compile(r"^(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]\s+"
                      r"(?:(?:endpoint|upstream|root port|bridge)\s+)?")
# cpuidle's cells: "disabled on CPUs 0-63,96-127" (or "none").
_CPUS = re.compile(r"^disabled on CPUs (.*)$")
_LATENCY = re.compile(r"\s*\(\d+ us\)$")


def canonical(obj):
    """The canonical JSON text of ``obj`` (sorted keys, no spaces, ASCII): what a digest
    or fingerprint hashes."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def sha256(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _part_rank(part):
    return tune_registry.PARTS.index(part) if part in tune_registry.PARTS else len(
        tune_registry.PARTS)


def sort_key(change):
    """Part order of the tune part registry (unknown parts last), then item."""
    return (_part_rank(change.get("part")), str(change.get("part")), str(change.get("item")))


def _rows(tune_result):
    rows = (tune_result or {}).get("rows") if isinstance(tune_result, dict) else None
    return [r for r in rows or [] if isinstance(r, dict)]


def changes(tune_result):
    """The host's planned changes: the rows of ``tune_result`` (host_tune's result, check
    mode) whose status says a change, as ``[{part, item, before, after}]`` sorted by
    ``sort_key``."""
    out = [dict((k, row.get(k)) for k in CHANGE_KEYS) for row in _rows(tune_result)
           if row.get("status") in CHANGE_STATUSES]
    return sorted(out, key=sort_key)


def refusal(tune_result):
    """None, or why the host cannot be tuned as planned (text): no result (not reached),
    unreachable, skipped, a failed task (host_tune's refusal message, such as a guest
    target, or the failures of its parts, the before stage's among them), or a row whose
    status is failed or refused."""
    if not isinstance(tune_result, dict) or not tune_result:
        return "no host_tune result (the host was not reached)"
    msg = str(tune_result.get("msg") or "").strip()
    if tune_result.get("unreachable"):
        return "unreachable: %s" % (msg or "no reason given")
    if tune_result.get("skipped") and not _rows(tune_result):
        return "host_tune did not run (skipped%s)" % (": " + msg if msg else "")
    failures = [str(f).strip() for f in tune_result.get("failures") or [] if f]
    if failures:
        return " | ".join(failures)
    if tune_result.get("failed"):
        return msg or "host_tune failed"
    bad = ["%s %s: %s%s" % (r.get("part"), r.get("item"), r.get("status"),
                            " (%s)" % r["note"] if r.get("note") else "")
           for r in _rows(tune_result) if r.get("status") in FAILED_STATUSES]
    return " | ".join(bad) if bad else None


def _change(change):
    return dict((k, change.get(k)) for k in CHANGE_KEYS)


def fingerprint(changes_list):
    """sha256 hex of the canonical JSON of the changes (part, item, before, after; in
    ``sort_key`` order): equal fingerprints mean the same planned change made from the same
    before-values."""
    return sha256(canonical(sorted((_change(c) for c in changes_list or []), key=sort_key)))


def _cell(value):
    return "" if value is None else str(value)


def _cpu_count(text):
    """The number of CPUs in a list such as ``0-63,96-127`` (``none``: 0); None when it
    is no CPU list."""
    text = text.strip()
    if text in ("", "none"):
        return set()
    cpus = set()
    for piece in text.split(","):
        ends = piece.strip().split("-")
        if not all(e.isdigit() for e in ends) or len(ends) > 2:
            return None
        cpus.update(range(int(ends[0]), int(ends[-1]) + 1))
    return cpus


def _line(change):
    """``(fold key, line text, noun)`` of one change: rows of one part with the same key
    fold into one line, with a count in ``noun`` when more than one row or a device row."""
    item, before, after = _cell(change.get("item")), _cell(change.get("before")), _cell(
        change.get("after"))
    label, noun = item, None
    match = _ADDRESS.match(item)
    if match and match.end() < len(item):
        label, noun = item[match.end():], "device"
    was, now = _CPUS.match(before), _CPUS.match(after)
    if was and now:
        old, new = _cpu_count(was.group(1)), _cpu_count(now.group(1))
        if old is not None and new is not None:
            name = _LATENCY.sub("", label)
            if new >= old:
                text = "%s disabled on %d CPUs" % (name, len(new - old))
                if old:
                    text += " (already on %d)" % len(old)
            else:
                text = "%s enabled again on %d CPUs" % (name, len(old - new))
            return (change.get("part"), text), text, noun
    if before == "":
        text = "%s %s" % (label, after or "(removed)")
    else:
        text = "%s %s -> %s" % (label, before, after or "(none)")
    return (change.get("part"), text), text, noun


def summary(changes_list):
    """The grouped human lines of the changes, in part order: rows of one part with the
    same before -> after folded with a count ("MRRS 512 -> 4096 on 16 devices", "C2
    disabled on 128 CPUs", "kernel.numa_balancing 1 -> 0")."""
    folded, order = {}, []
    for change in sorted(changes_list or [], key=sort_key):
        key, text, noun = _line(change)
        if key not in folded:
            folded[key] = [text, noun, 0]
            order.append(key)
        folded[key][2] += 1
    out = []
    for key in order:
        text, noun, count = folded[key]
        if noun:
            text += " on %d %s%s" % (count, noun, "" if count == 1 else "s")
        elif count > 1:
            text += " (%d rows)" % count
        out.append(text)
    return out


def group_key(changes_list):
    """sha256 hex of the summary lines: hosts with the same key make the same change."""
    return sha256(canonical(summary(changes_list)))


def _describe(change):
    return "%s %s" % (change.get("part"), _line(change)[1])


def difference(planned, now):
    """[] when the host's changes ``now`` are the ``planned`` ones, else the lines naming
    what moved: "state moved since the plan: kernel.numa_balancing is now 0 (planned
    1 -> 0)", "not in the plan: ...", "planned but no longer needed: ...". ``now`` is the
    change list (``changes``) or host_tune's check-mode result itself: with the result, a
    planned change no longer needed names the value the host has now."""
    current = dict(((r.get("part"), r.get("item")), r) for r in _rows(now)) if isinstance(
        now, dict) else {}
    now_changes = changes(now) if isinstance(now, dict) else [_change(c) for c in now or []]
    plan = dict(((c.get("part"), c.get("item")), _change(c)) for c in planned or [])
    got = dict(((c.get("part"), c.get("item")), c) for c in now_changes)
    out = []
    for key in sorted(set(plan) | set(got), key=lambda k: sort_key({"part": k[0],
                                                                    "item": k[1]})):
        was, is_ = plan.get(key), got.get(key)
        if was == is_:
            continue
        if was and is_:
            if _cell(was["before"]) != _cell(is_["before"]):
                out.append("state moved since the plan: %s is now %s (planned %s -> %s)" % (
                    key[1], _cell(is_["before"]) or "(none)", _cell(was["before"]),
                    _cell(was["after"])))
            else:
                out.append("the wanted value changed since the plan: %s -> %s (planned "
                           "%s -> %s)" % (key[1], _cell(is_["after"]), _cell(was["before"]),
                                          _cell(was["after"])))
        elif is_:
            out.append("not in the plan: %s" % _describe(is_))
        else:
            row = current.get(key)
            if row is not None and _cell(row.get("before")) not in ("", _cell(was["before"])):
                out.append("state moved since the plan: %s is now %s (planned %s -> %s)" % (
                    key[1], _cell(row.get("before")), _cell(was["before"]),
                    _cell(was["after"])))
            else:
                out.append("planned but no longer needed: %s" % _describe(was))
    return out
