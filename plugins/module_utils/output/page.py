# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``index.html``: one self-contained page (inline CSS, no script, no network) with
the hosts x checks matrix, then per host its facts, findings and GPUs (template
``templates.INDEX_HTML``; what each cell says is made here)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.checks.run import (
    CHECKS,
    SCHEMA,
    SEVERITIES,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils import fleet
from ansible_collections.gpuhost.tuning.plugins.module_utils.output import templates
from ansible_collections.gpuhost.tuning.plugins.module_utils.output.render import (
    render,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.output.views import (
    STATUS_ORDER,
    counts,
    group_findings,
    hosts_order,
    marks,
    shown_order,
    worst,
)


def _gts(value):
    if value is None:
        return "?"
    return ("%g" % value)


def _link(link):
    """A PCIe link as the GPU table shows it (``templates.INDEX_HTML``'s ``link``)."""
    link = link or {}
    return {
        "none": link.get("speed_gts") is None and link.get("max_speed_gts") is None,
        "current": "%s GT/s x%s" % (_gts(link.get("speed_gts")), link.get("width") or "?"),
        "top": "%s GT/s x%s" % (_gts(link.get("max_speed_gts")), link.get("max_width") or "?"),
        "degraded": ((link.get("speed_gts") or 0) < (link.get("max_speed_gts") or 0)
                     or (link.get("width") or 0) < (link.get("max_width") or 0))}


def _size(value, want=None):
    """A read request size, bad below ``want`` (the template's ``size``)."""
    return {"value": value, "bad": bool(want and value is not None and value < want)}


# The matrix's column groups, by subject: each column of the check registry in one (a unit
# test fails on a column in none), in the registry's order within its group. The fleet
# checks' own columns make the last group, from their declarations.
GROUPS = (
    ("GPU", ("gpu_driver", "gpu_count", "gpu_xid", "gpu_memory", "gpu_state", "gpu_use",
             "nvidia", "fabric_manager", "nvlink", "gpu_numa")),
    ("PCIe", ("pcie_mrrs", "pcie_link", "pcie_aer", "p2p")),
    ("CPU", ("numa_balancing", "cpuidle", "cpufreq")),
    ("Kernel and boot", ("dkms", "sysctl", "kernel", "host_health", "audit")),
    ("Containers and VMs", ("lxc", "device_nodes", "passthrough")),
)
OTHER = "Other"


def column_groups():
    """``[{label, columns: [{key, label}]}]``: the matrix's groups with their columns, in
    the order the page shows them (a column in no group, which a unit test refuses, shows
    under ``Other`` rather than not at all)."""
    member = dict((key, index) for index, (_label, keys) in enumerate(GROUPS) for key in keys)
    labels = [label for label, _keys in GROUPS] + ["Fleet", OTHER]
    fleet_columns = set(item.id for item in fleet.fleet_checks() if item.column)
    out = [{"label": label, "columns": []} for label in labels]
    for check, label, _ids in CHECKS:
        index = len(GROUPS) if check in fleet_columns else member.get(check, len(GROUPS) + 1)
        out[index]["columns"].append({"key": check, "label": label})
    return [group for group in out if group["columns"]]


def _cells(doc, groups):
    """The matrix row of one document: a cell per column, in the page's order."""
    checks = doc.get("checks") or {}
    out = []
    labels = [(col["key"], col["label"]) for group in groups for col in group["columns"]]
    for check, label in labels:
        info = checks.get(check) or {"status": "n/a", "count": 0, "note": "not audited"}
        status = info.get("status", "n/a")
        text = status
        if info.get("count"):
            text = "%s %d" % (status, info["count"])
        title = "%s: %s" % (label, status)
        if info.get("note"):
            title += " (%s)" % info["note"]
        out.append({"status": status, "title": title, "text": text})
    return out


def _facts_items(doc):
    facts = doc["facts"]
    kern = facts.get("kernel") or {}
    cpu = facts.get("cpu") or {}
    nv = facts.get("nvidia") or {}
    idle = (cpu.get("cpuidle") or {})
    freq = (cpu.get("cpufreq") or {})
    items = [
        ("Kernel", "%s running%s" % (kern.get("running") or "?",
                                     "; next boot %s" % kern["next_boot"]
                                     if kern.get("next_boot") and kern.get("next_boot")
                                     != kern.get("running") else "")),
        ("Boot", "%s%s" % (kern.get("boot_tool") or "unknown",
                           " (%s)" % kern["configured_cmdline_source"]
                           if kern.get("configured_cmdline_source") else "")),
        ("CPU", "%s, %s online" % (cpu.get("model_name") or "?", cpu.get("online") or "?")),
        ("Idle / freq", "cpuidle %s, cpufreq %s" % (idle.get("driver") or "absent",
                                                    freq.get("driver") or "absent")),
        ("NVIDIA", "driver %s, %d GPU(s)" % (
            nv.get("driver_version") or "not loaded", len(facts.get("gpus") or []))),
        ("DKMS", ", ".join(
            "%s/%s %s: %s" % (e["name"], e["version"], e.get("kernel") or "-", e["state"])
            for e in facts.get("dkms") or []) or "none"),
    ]
    if facts.get("lxc"):
        items.append(("LXC", ", ".join("%s%s" % (c["vmid"], " (GPU)" if c.get("gpu") else "")
                                       for c in facts["lxc"])))
    notes = [(c.get("label"), c.get("note")) for c in (doc.get("checks") or {}).values()
             if c.get("note")]
    for label, note in notes:
        items.append((label, note))
    return items


def _finding_rows(findings):
    out = []
    for row in group_findings(shown_order(findings)):
        f = row["finding"]
        out.append({"severity": f["severity"], "id": f["id"], "marks": marks(f),
                    "subjects": row["subjects"], "details": row["details"],
                    "detail": f.get("detail"), "current": f["current"],
                    "change": f.get("change"), "expected": f["expected"],
                    "reboot": f.get("reboot_required"), "remedy": row["remedy"]})
    return out


def _gpu_rows(gpus, mrrs_size):
    out = []
    for gpu in gpus:
        out.append({
            "address": gpu["address"], "device": "%s:%s" % (gpu.get("vendor"), gpu.get("device")),
            "driver": gpu.get("driver") or "none", "owner": gpu.get("owner") or "host",
            "numa": gpu.get("numa_node"),
            "mrrs": _size(gpu.get("max_read_request_size"), mrrs_size),
            "mps": "%s / %s" % (gpu.get("max_payload_size") or "?",
                                gpu.get("max_payload_size_supported") or "?"),
            "link": _link(gpu.get("link")),
            "upstream": [{"address": b["address"],
                          "mrrs": _size(b.get("max_read_request_size"), mrrs_size),
                          "link": _link(b.get("link"))}
                         for b in gpu.get("upstream") or []]})
    return out


def _view(doc, mrrs_size, groups):
    """What the page shows of one document."""
    findings = doc["findings"]
    change = doc.get("aer_change")
    return {"host": doc["host"], "worst": worst(findings), "cells": _cells(doc, groups),
            "facts": _facts_items(doc), "count": len(findings),
            "rows": _finding_rows(findings),
            "fresh": sum(1 for f in findings if f.get("new")),
            "compared_with": doc.get("compared_with"),
            "aer_change": {"since": change.get("since"),
                           "rows": sorted(change["devices"].items())} if change else None,
            "gpus": _gpu_rows(doc["facts"].get("gpus") or [], mrrs_size)}


def render_html(documents, generated_at=None, mrrs_size=4096, title="GPU host audit",
                stale=None):
    """One self-contained page: totals, the hosts x checks matrix, then per host its facts,
    findings and GPU table (``stale`` as for ``summary.render_markdown``)."""
    docs = hosts_order(documents)
    totals = dict((s, 0) for s in SEVERITIES)
    for doc in docs:
        for key, value in counts(doc["findings"]).items():
            totals[key] += value
    groups = column_groups()
    return render("index.html", title=title, css=templates.CSS, generated_at=generated_at,
                  severities=SEVERITIES, totals=totals, statuses=STATUS_ORDER,
                  stale=stale or [], groups=groups, schema=SCHEMA,
                  docs=[_view(doc, mrrs_size, groups) for doc in docs])
