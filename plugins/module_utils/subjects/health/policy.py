# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Operator policy the audit judges with: acknowledged findings, XID catalogue overrides and
copy-rate pass marks per GPU model.

All three are wanted values (host_audit options, role variables), checked here with an
error that names the entry and what to write instead (``ValueError``), and applied in the
checks (never in the facts: a capture audited with another policy reads the same host).

- ``acknowledged``: ``[{id, subject}]``; a finding with that id and subject (every subject of
  the id when ``subject`` is left out) is marked ``acknowledged: true``: still reported,
  left out of role audit's ``gpuhost_audit_fail_on`` gate and of the alerting series.
- ``xid_policy``: ``[{xid, class, min_count, window_hours}]``: ``class`` replaces the
  catalogue's class of that XID (xid.CLASSES less ``unknown``); ``min_count``: fewer events
  of it in the XID window are no finding; ``window_hours``: its last event older than this
  many hours before the log was read is no finding (Azure's XID check ignores old repeats,
  azurehpc-health-checks PR #648; aws eks-node-monitoring-agent #272 asks for both).
- ``copy_rate_marks``: ``[{model, host_gbs, peer_gbs}]`` added to (or replacing entries of)
  ``COPY_RATE_MARKS``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import bounded
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import xid

# Published pass marks, GB/s per direction. host_gbs: pinned host<->device copy, each way;
# peer_gbs: GPU -> GPU copy over NVLink. A model's mark applies where the GPU's link can
# carry it (its ceiling at least the mark); on a slower link the percentage of the link.
COPY_RATE_MARKS = (
    {"model": "H100", "host_gbs": 48.0, "peer_gbs": 335.0,
     "source": "Azure azurehpc-health-checks conf/nd96isr_h100_v5.conf: check_gpu_bw 48 335"},
    {"model": "H200", "host_gbs": 48.0, "peer_gbs": 335.0,
     "source": "Azure azurehpc-health-checks conf/nd96isr_h200_v5.conf: check_gpu_bw 48 335"},
)

_ACK_KEYS = ("id", "subject", "reason")
_XID_KEYS = ("xid", "class", "min_count", "window_hours")
_MARK_KEYS = ("model", "host_gbs", "peer_gbs", "source")
XID_CLASSES = tuple(c for c in xid.CLASSES if c != "unknown")


def _entries(option, items, keys, example):
    if items in (None, ""):
        return []
    if not isinstance(items, list):
        raise ValueError("%s must be a list of mappings like %s, got %r"
                         % (option, example, items))
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise ValueError("%s[%d] must be a mapping like %s, got %r"
                             % (option, index, example, item))
        extra = sorted(set(item) - set(keys))
        if extra:
            raise ValueError("%s[%d] has unknown key%s %s (known: %s)"
                             % (option, index, "s" if len(extra) > 1 else "",
                                ", ".join(extra), ", ".join(keys)))
    return items


def _number(option, index, item, key, low, integer=False):
    value = item.get(key)
    if value is None:
        return None
    kinds = (int,) if integer else (int, float)
    # bounded.finite: NaN compares false with everything, so a rule given it never applied
    if not bounded.finite(value) or not isinstance(value, kinds) or value < low:
        raise ValueError("%s[%d].%s must be %s %s or more, got %r"
                         % (option, index, key, "a whole number" if integer else "a number",
                            low, value))
    return value


def check_acknowledged(items, known_ids=None):
    """``acknowledged`` checked: each ``{id, subject[, reason]}`` with a known finding id."""
    example = "{id: gpu_xid_events, subject: '0000:17:00.0'}"
    for index, item in enumerate(_entries("acknowledged", items, _ACK_KEYS, example)):
        fid = item.get("id")
        if not isinstance(fid, str) or not fid:
            raise ValueError("acknowledged[%d] needs an id (a finding id), like %s; got %r"
                             % (index, example, item))
        if known_ids is not None and fid not in known_ids:
            raise ValueError("acknowledged[%d]: %r is no finding id of the audit (see "
                             "host_audit's documentation for the list)" % (index, fid))
        if item.get("subject") is not None and not isinstance(item["subject"], str):
            raise ValueError("acknowledged[%d].subject must be the finding's subject as "
                             "text, got %r" % (index, item["subject"]))
    return items or []


def mark_acknowledged(findings, acknowledged):
    """``findings`` with ``acknowledged: true`` on each one an entry of ``acknowledged``
    names (its id, and its subject unless the entry has none)."""
    if not acknowledged:
        return findings
    out = []
    for item in findings:
        for ack in acknowledged:
            if ack.get("id") == item.get("id") and (
                    ack.get("subject") is None or
                    str(ack["subject"]) == str(item.get("subject"))):
                item = dict(item, acknowledged=True)
                break
        out.append(item)
    return out


def gating(findings):
    """The findings a gate judges: those the operator has not acknowledged (marked by
    :func:`mark_acknowledged`). Role audit's gpuhost_audit_fail_on gate leaves out the same
    ones (``rejectattr('acknowledged', 'defined')``); the node check (onhost/audit_program)
    calls this."""
    return [item for item in findings or [] if not item.get("acknowledged")]


def check_options(wanted, known_ids=None):
    """All three policy values of ``wanted`` checked (ValueError naming the entry): what
    module host_audit's options and the node check's config both go through."""
    check_acknowledged(wanted.get("acknowledged"), known_ids)
    check_xid_policy(wanted.get("xid_policy"))
    check_copy_rate_marks(wanted.get("copy_rate_marks"))


def check_xid_policy(items):
    """``xid_policy`` checked: ``{xid, class, min_count, window_hours}``, one per XID."""
    example = "{xid: 13, class: restart_app, min_count: 3, window_hours: 24}"
    seen = set()
    for index, item in enumerate(_entries("xid_policy", items, _XID_KEYS, example)):
        code = _number("xid_policy", index, item, "xid", 1, integer=True)
        if code is None:
            raise ValueError("xid_policy[%d] needs xid (the XID number), like %s; got %r"
                             % (index, example, item))
        if code in seen:
            raise ValueError("xid_policy[%d]: XID %d is given twice (one entry per XID)"
                             % (index, code))
        seen.add(code)
        if item.get("class") is not None and item["class"] not in XID_CLASSES:
            raise ValueError("xid_policy[%d].class must be one of %s, got %r"
                             % (index, ", ".join(XID_CLASSES), item["class"]))
        _number("xid_policy", index, item, "min_count", 1, integer=True)
        _number("xid_policy", index, item, "window_hours", 1)
    return items or []


def _epoch(text):
    """kernlog's ISO time (``2026-12-01T03:47:48Z``) as Unix time, or None."""
    import calendar
    import time

    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return text
    if not text:
        return None
    try:
        return calendar.timegm(time.strptime(str(text), "%Y-%m-%dT%H:%M:%SZ"))
    except ValueError:
        return None


def apply_xid_policy(devices, policy, read_at=None):
    """The kernel log's per-device XID summaries (xid.summarize) as ``policy`` judges them:
    each code's class replaced where the policy names one (a reset or reboot class seen
    xid.REPEAT_HARDWARE times is hardware service, as in the catalogue), codes under their
    ``min_count`` or whose last event is older than ``window_hours`` before ``read_at``
    dropped (a device left without codes is dropped), ``worst`` recomputed. Copies: the
    facts are never changed. SXID devices are left as they are."""
    rules = dict((int(p["xid"]), p) for p in policy or [])
    if not rules:
        return devices
    now = _epoch(read_at)
    out = []
    for dev in devices or []:
        if dev.get("kind") != "xid":
            out.append(dev)
            continue
        codes = []
        for code in dev.get("codes") or []:
            rule = rules.get(code.get("code"))
            if rule is None:
                codes.append(code)
                continue
            if rule.get("min_count") and code.get("count", 0) < rule["min_count"]:
                continue
            last = _epoch(code.get("last"))
            if rule.get("window_hours") and now is not None and last is not None and \
                    last < now - float(rule["window_hours"]) * 3600:
                continue
            code = dict(code)
            if rule.get("class"):
                code["class"] = rule["class"]
                code["policy"] = "class %s by xid_policy" % rule["class"]
                if rule["class"] in ("reset_gpu", "reboot") and \
                        code.get("count", 0) >= xid.REPEAT_HARDWARE:
                    code["class"] = "hardware"
                    code["repeated"] = True
                elif code.get("repeated"):
                    code.pop("repeated")
            codes.append(code)
        if not codes:
            continue
        codes.sort(key=lambda c: (-xid.CLASS_RANK.get(c["class"], 0), c["code"]))
        out.append(dict(dev, codes=codes, events=sum(c.get("count", 0) for c in codes),
                        worst=xid.worst_class(c["class"] for c in codes)))
    return out


def check_copy_rate_marks(items):
    """``copy_rate_marks`` checked: ``{model, host_gbs, peer_gbs[, source]}``."""
    example = "{model: H100, host_gbs: 48, peer_gbs: 335}"
    for index, item in enumerate(_entries("copy_rate_marks", items, _MARK_KEYS, example)):
        model = item.get("model")
        if not isinstance(model, str) or not model.strip():
            raise ValueError("copy_rate_marks[%d] needs model (a word of the GPU's name, "
                             "e.g. H100), like %s; got %r" % (index, example, item))
        host = _number("copy_rate_marks", index, item, "host_gbs", 0.1)
        peer = _number("copy_rate_marks", index, item, "peer_gbs", 0.1)
        if host is None and peer is None:
            raise ValueError("copy_rate_marks[%d] (%s) needs host_gbs, peer_gbs or both"
                             % (index, model))
    return items or []


def copy_marks(name, overrides=None):
    """The pass marks for the GPU named ``name`` (the driver's name, e.g. ``NVIDIA H100 80GB
    HBM3``): ``{model, host_gbs, peer_gbs, source}`` of the first entry whose model is a
    word of the name (operator entries before the built-in ones), or None."""
    if not name:
        return None
    table = [dict(m, source=m.get("source") or "copy_rate_marks") for m in overrides or []]
    table += list(COPY_RATE_MARKS)
    for mark in table:
        if re.search(r"(?<![A-Za-z0-9])%s(?![A-Za-z0-9])" % re.escape(mark["model"].strip()),
                     str(name), re.IGNORECASE):
            return mark
    return None
