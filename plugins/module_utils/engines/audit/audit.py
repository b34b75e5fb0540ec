# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The read-only host audit: facts, ranked findings and the per-check status.

The layers, each in its own file: ``hostfs`` (every host path under a root) ->
``facts`` (what the host is) -> ``checks`` (the registry: one file per report column, each
check its id, severity, rank and rule) -> this file (run them, rank, status) -> ``report``
and ``text`` (what users read). ``capture`` packs what the audit read.

``findings(facts, wanted)`` -> ranked findings; ``check_status(facts, items, wanted)`` -> the
reports' matrix; ``audit(root, wanted)`` -> facts, findings and status in one call.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import time

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import check_registry
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import policy
# Names other code reads from this module (audit.SEVERITIES, audit.text_lines, ...).
# pylint: disable=unused-import
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.findings import (  # noqa: F401
    PLAYBOOK_REBOOT,
    PLAYBOOK_TUNE,
    SEVERITIES,
    SEVERITY_RANK,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit.facts import (  # noqa: F401
    collect,
    merged_wanted,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit.text import (  # noqa: F401
    headline,
    text_lines,
)
# pylint: enable=unused-import

SCHEMA = 1

# Derived from the registry (module_utils/checks): within one severity, findings rank in
# FINDING_ORDER; CHECKS are the reports' matrix columns, (column, label, finding ids).
FINDING_ORDER = check_registry.finding_order()
CHECKS = check_registry.column_table()
CHECK_OF = dict((fid, check) for check, _label, ids in CHECKS for fid in ids)


def _natural(text):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(text))]


def sort_findings(items):
    order = dict((fid, index) for index, fid in enumerate(FINDING_ORDER))
    return sorted(items, key=lambda f: (SEVERITY_RANK.get(f["severity"], 99),
                                        order.get(f["id"], len(order)),
                                        _natural(f["subject"])))


def _evaluate(facts, wanted):
    items, reasons = check_registry.evaluate(facts, wanted)
    return sort_findings(items), reasons


def findings(facts, wanted=None):
    """Ranked findings: worst severity first, then the registry's order, then subject."""
    return _evaluate(facts, merged_wanted(wanted))[0]


def _status(facts, items, reasons):
    """``{column: {label, status, count, note}}`` from findings and n/a reasons."""
    out = {}
    for col in check_registry.columns():
        mine = [f for f in items if CHECK_OF.get(f["id"]) == col.key]
        note = col.remark(facts)
        if mine:
            worst = min(mine, key=lambda f: SEVERITY_RANK[f["severity"]])["severity"]
            out[col.key] = {"label": col.label, "status": worst, "count": len(mine),
                            "note": reasons.get(col.key) or note}
        elif col.key in reasons:
            out[col.key] = {"label": col.label, "status": "n/a", "count": 0,
                            "note": reasons[col.key]}
        else:
            out[col.key] = {"label": col.label, "status": "ok", "count": 0, "note": note}
    return out


def check_status(facts, items, wanted=None):
    """``{check: {label, status, count, note}}``: status is the worst severity of the
    check's findings, ``ok``, or ``n/a`` (with the reason in ``note``)."""
    wanted = merged_wanted(wanted)
    reasons = dict((col.key, col.not_applicable(facts, wanted)) for col in check_registry.columns())
    return _status(facts, items, dict((k, v) for k, v in reasons.items() if v is not None))


def audit(root="/", wanted=None, recorder=None, outputs=None, cuda=None, cuda_probe=None):
    """Facts, findings and per-check status of the host under ``root``; ``outputs`` (a
    cmdout.CommandOutputs) runs or reads the command outputs (nvidia-smi, the journal).

    ``cuda``: the results of ``cuda_probe`` on the live host and in its running GPU
    containers, kept as the fact ``cuda``; None (a capture, the default) leaves the CUDA
    checks nothing to judge. ``cuda_probe``: a function of the facts that returns those
    results (the opt-in CUDA pass, ``cuda.audit_pass``), run after the facts are read.

    Returns ``{facts..., findings, checks, collected_at}``.
    """
    wanted = merged_wanted(wanted)
    started = time.time()
    if recorder is not None:
        with recorder:
            facts = collect(root, wanted, outputs)
    else:
        facts = collect(root, wanted, outputs)
    if cuda_probe is not None:
        cuda = cuda_probe(facts)
    if cuda is not None:
        facts["cuda"] = list(cuda)
    items, reasons = _evaluate(facts, wanted)
    items = policy.mark_acknowledged(items, wanted.get("acknowledged"))
    result = dict(facts)
    result["findings"] = items
    result["checks"] = _status(facts, items, reasons)
    result["collected_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started))
    result["duration_s"] = round(time.time() - started, 3)
    result["root"] = root
    return result


def severity_at_least(severity, threshold):
    """True when ``severity`` is as bad as ``threshold`` or worse."""
    if threshold in (None, "", "none", "never"):
        return False
    return SEVERITY_RANK.get(severity, 99) <= SEVERITY_RANK[threshold]
