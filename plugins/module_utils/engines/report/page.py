# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The HTML report: ``html_files(documents, generated_at, mrrs_size) -> {file name: text}``
(``report.py`` writes them): ``index.html``, the fleet view (hosts not audited, findings
grouped by id with host counts and the worst hosts, the host list filterable by group,
severity, finding and status), and one page per host, ``<host>.html`` (its status, facts,
checks, findings with copyable remedies, GPUs). Every page is self-contained (inline CSS,
the fleet view's filter an inline script; no network) and lays out from 800 px to 2,560 px
(``page_templates``: ``FLEET_HTML``, ``HOST_HTML``, ``PAGE_CSS``; what each cell says is made here).

``render_html`` is the former single page (every host on it, template ``INDEX_HTML``), kept
for the callers that have not moved to ``html_files``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from urllib.parse import quote

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit.audit import (
    CHECKS,
    SCHEMA,
    SEVERITIES,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.fleet import fleet_registry
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import (
    page_templates,
    templates,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report.files import (
    FLEET_FILES,
    ReportError,
    safe_name,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report.render import render
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report.views import (
    ceiling_view,
    STATUS_ORDER,
    counts,
    fleet_findings,
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
    ("GPU", ("gpu_driver", "gpu_count", "gpu_xid", "gpu_recovery", "gpu_memory", "gpu_state",
             "gpu_use", "nvidia", "fabric_manager", "nvlink", "gpu_numa")),
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
    fleet_columns = set(item.id for item in fleet_registry.fleet_checks() if item.column)
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


# A host's page: ``safe_name(host)`` and this; one that would be a fleet file (a host named
# ``index``) takes ``HOST_PAGE_CLASH`` instead, so the fleet view is never replaced.
HOST_PAGE = ".html"
HOST_PAGE_CLASH = "-host.html"
STATUS_RANK = {"unreachable": 0, "failed": 1, "skipped": 2}  # before every audited host


def page_name(host):
    """The file name of ``host``'s page."""
    name = safe_name(host) + HOST_PAGE
    if name.lower() in set(f.lower() for f in FLEET_FILES):
        name = safe_name(host) + HOST_PAGE_CLASH
    return name


def _page_names(docs):
    """``{host: page name}``; ReportError naming both when two hosts would share a page."""
    names, seen = {}, {}
    for doc in docs:
        name = page_name(doc["host"])
        other = seen.get(name)
        if other is not None and other != doc["host"]:
            raise ReportError("hosts %r and %r would both write the page %s: rename one of "
                              "them in the inventory; nothing was written"
                              % (other, doc["host"], name))
        seen[name] = doc["host"]
        names[doc["host"]] = name
    return names


def _when(stamp):
    """A time as the pages show it: ``2026-12-05T03:10:00Z`` as ``2026-12-05 03:10:00Z``
    (two words, so a narrow column can put them on two lines)."""
    if not stamp:
        return stamp
    return re.sub(r"^(\d{4}-\d\d-\d\d)T", r"\1 ", str(stamp))


def _status(doc):
    return doc.get("status") or "ok"


def fleet_order(documents):
    """Hosts as the fleet view lists them: those not audited first (unreachable, failed,
    skipped), then the audited ones worst first (``views.hosts_order``)."""
    audited = hosts_order([doc for doc in documents if _status(doc) not in STATUS_RANK])
    others = hosts_order([doc for doc in documents if _status(doc) in STATUS_RANK])
    others.sort(key=lambda doc: STATUS_RANK[_status(doc)])
    return others + audited


def _host_row(doc, href):
    findings = doc.get("findings") or []
    number = counts(findings)
    return {"host": doc["host"], "href": href, "status": _status(doc),
            "error": doc.get("error") or "", "worst": worst(findings),
            "last_seen": _when(doc.get("last_seen")), "groups": sorted(doc.get("groups") or []),
            "counts": [(name, number[name]) for name in SEVERITIES if number.get(name)],
            "sevs": [name for name in SEVERITIES if number.get(name)],
            "ids": sorted(set(str(f.get("id")) for f in findings))}


def _checks_view(doc, groups):
    cells = iter(_cells(doc, groups))
    out = []
    for group in groups:
        shown = []
        for col in group["columns"]:
            cell = next(cells)
            shown.append(dict(cell, label=col["label"]))
        out.append({"label": group["label"], "cells": shown})
    return out


def _host_view(doc, mrrs_size, groups):
    """What a host's page shows of its document (a host not audited: its status, error
    and when it was last seen)."""
    findings = doc.get("findings") or []
    facts = doc.get("facts") or {}
    change = doc.get("aer_change")
    ok = _status(doc) == "ok"
    return {"host": doc["host"], "status": _status(doc), "error": doc.get("error") or "",
            "collected_at": _when(doc.get("collected_at")),
            "last_seen": _when(doc.get("last_seen")),
            "groups": sorted(doc.get("groups") or []), "worst": worst(findings),
            "facts": _facts_items(dict(doc, facts=facts)) if ok else [],
            "checks": _checks_view(doc, groups) if ok else [], "count": len(findings),
            "rows": _finding_rows(findings),
            "fresh": sum(1 for f in findings if f.get("new")),
            "compared_with": doc.get("compared_with"),
            "aer_change": {"since": change.get("since"),
                           "rows": sorted(change["devices"].items())} if change else None,
            "gpus": _gpu_rows(facts.get("gpus") or [], mrrs_size),
            "ceiling": ceiling_view(dict(doc, facts=facts)) if ok else None}


def html_files(documents, generated_at=None, mrrs_size=4096, title="GPU host audit",
               stale=None):
    """``{file name: text}``: ``index.html`` (the fleet view) and one page per host
    (:func:`page_name`) of ``documents`` (``stale`` as for ``summary.render_markdown``)."""
    docs = fleet_order(documents)
    names = _page_names(docs)
    href = dict((host, quote(name)) for host, name in names.items())
    totals = dict((s, 0) for s in SEVERITIES)
    for doc in docs:
        for key, value in counts(doc.get("findings")).items():
            totals[key] = totals.get(key, 0) + value
    hosts = [_host_row(doc, href[doc["host"]]) for doc in docs]
    statuses = {}
    for row in hosts:
        statuses[row["status"]] = statuses.get(row["status"], 0) + 1
    order = ["ok"] + sorted(STATUS_RANK, key=STATUS_RANK.get)
    status_counts = [(name, statuses[name]) for name in order if statuses.get(name)]
    status_counts += sorted((n, c) for n, c in statuses.items() if n not in order)
    findings = fleet_findings(docs)
    for row in findings:
        row["worst"] = [{"host": host, "href": href[host], "count": number}
                        for host, number in row["worst"]]
    choices = {"groups": sorted(set(g for row in hosts for g in row["groups"])),
               "ids": sorted(row["id"] for row in findings if row["id"] is not None),
               "statuses": [name for name, _count in status_counts]}
    missing = [row for row in hosts if row["status"] != "ok"]
    stale_rows = [dict(row, href=href.get(row["host"], "#")) for row in stale or []]
    out = {FLEET_FILES[1]: render(
        "fleet.html", title=title, css=page_templates.PAGE_CSS, script=page_templates.FILTER_JS,
        generated_at=generated_at, severities=SEVERITIES, totals=totals, hosts=hosts,
        status_counts=status_counts, findings=findings, choices=choices, missing=missing,
        stale=stale_rows, schema=SCHEMA)}
    groups = column_groups()
    for doc in docs:
        out[names[doc["host"]]] = render(
            "host.html", title=title, css=page_templates.PAGE_CSS, generated_at=generated_at,
            schema=SCHEMA, doc=_host_view(doc, mrrs_size, groups))
    return out
