# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fleet check ``pcie_aer_change``: each host's PCIe AER counters against its previous
report. It adds no finding: it gives the document ``aer_change`` (``{since, devices:
{address: text}}``) and each ``pcie_aer_errors`` finding of a device it compared ``change``
(that text), shown in the PCIe AER column's findings. A host compares with its own past, so
a slice of a sliced job runs it too (``needs_fleet=False``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import aer
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.fleet_findings import (
    fleet_check,
)

AER_ID = "pcie_aer_errors"


def changes(previous, current):
    """``{address: {kind: delta, reset}}`` between two audits' ``pcie_aer`` lists.

    ``delta`` is the growth of each kind's total since ``previous``; a total that went down
    means the counters restarted (reboot, device reset or re-enumerated): then ``reset`` is
    True and the delta is the current count. Devices only in ``current`` are left out (no
    base to compare with); devices without counters are skipped."""
    before = dict((e["address"], e) for e in previous or [] if e.get("available"))
    out = {}
    for entry in current or []:
        old = before.get(entry["address"])
        if old is None or not entry.get("available"):
            continue
        now, then = aer.totals(entry), aer.totals(old)
        reset = any(now[k] < then[k] for k in aer.KINDS)
        delta = dict((k, now[k] if reset else now[k] - then[k]) for k in aer.KINDS)
        delta["reset"] = reset
        out[entry["address"]] = delta
    return out


def change_text(delta):
    """One report cell for a :func:`changes` value: ``+3 correctable``, ``no change``,
    ``+1 fatal, +2 correctable (counters reset since)``."""
    if delta is None:
        return "no previous report"
    parts = ["+%d %s" % (delta[k], aer.KIND_LABEL[k]) for k in aer.KINDS if delta.get(k)]
    text = ", ".join(parts) or "no change"
    if delta.get("reset"):
        text += " (counters restarted since: reboot or reset)"
    return text


def _aer_change(doc, prev):
    """The ``aer_change`` of ``doc`` against its previous report ``prev`` (None: nothing
    to compare). TypeError, KeyError, AttributeError or ValueError when ``prev`` is not
    what a report writes."""
    before = prev["facts"].get("pcie_aer")
    if prev.get("collected_at") == doc.get("collected_at") and \
            before == doc["facts"].get("pcie_aer"):
        change = prev.get("aer_change")
        if change is not None and not (
                isinstance(change, dict) and isinstance(change.get("devices"), dict) and
                all(isinstance(v, str) for v in change["devices"].values())):
            raise ValueError("aer_change is not {since, devices: {address: text}}")
        return change
    if before is None:
        return None
    if not isinstance(before, list) or not all(isinstance(e, dict) for e in before):
        raise ValueError("facts.pcie_aer is not a list of devices")
    deltas = changes(before, doc["facts"].get("pcie_aer"))
    return {"since": prev.get("collected_at"),
            "devices": dict((address, change_text(delta))
                            for address, delta in sorted(deltas.items()))}


def judge(documents, context):
    """The AER counts' growth since each host's previous report. A previous report of the
    same audit (same ``collected_at`` and counters: the reports written again) passes on its
    own comparison, so writing them again changes nothing; one without AER counters (an
    older report) compares nothing; a malformed one compares nothing, with a line in the
    warnings naming its file, and never fails the report."""
    for doc in documents:
        prev = context.previous.get(doc["host"])
        if not prev:
            continue
        try:
            change = _aer_change(doc, prev)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            context.warn(doc["host"], "is malformed (%s: %s)" % (type(exc).__name__, exc))
            continue
        if not isinstance(change, dict) or not isinstance(change.get("devices"), dict):
            continue
        doc["aer_change"] = change
        doc["findings"] = [
            dict(f, change=change["devices"][f["subject"]])
            if f.get("id") == AER_ID and f.get("subject") in change["devices"] else f
            for f in doc["findings"]]
    return {}, {}


def _forget(findings):
    return [dict((k, v) for k, v in f.items() if k != "change")
            if f.get("id") == AER_ID and "change" in f else f for f in findings]


AER_CHANGE = fleet_check("pcie_aer_change", judge, order=1000, annotates="pcie_aer",
                         needs_fleet=False, forget=_forget)
