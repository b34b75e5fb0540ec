# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each GPU's compute and memory ceiling as the reports and the checks read it: the CUDA
probe's ``ceiling`` results (subjects/cuda/cuda_ceiling.py, in the audit's fact ``cuda``)
set beside the model table (ceiling_models.py) and the node's best GPU of the same model,
and the one-line answer per host: is the host, the GPU or neither the bottleneck.

Only the host's probe results count (no ``vmid``): a container sees the same GPUs, and the
host's measurement is the one the node's GPUs are compared by. A GPU measured by two host
results counts once (the first).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.ceiling import (
    ceiling_models,
)

# The findings of the host path (subjects/cuda/cuda_check.py), by what they say is slow.
HOST_PATH_FINDINGS = (("pcie_bandwidth_low", "PCIe copy rate"),
                      ("gpu_peer_bandwidth_low", "GPU peer copy rate"),
                      ("gpu_launch_latency_high", "launch latency"))
GPU_FINDINGS = ("gpu_compute_low", "gpu_memory_bandwidth_low")
COMPUTE_PARTS = ("fp32", "bf16", "gemm", "fp8")


def _bus(value):
    return str(value or "").lower()


def host_devices(facts):
    """The host's probed GPUs that carry a ``ceiling`` result, each once, in probe order."""
    out, seen = [], set()
    for res in (facts or {}).get("cuda") or []:
        if res.get("vmid") is not None:
            continue
        for dev in res.get("devices") or []:
            if not isinstance(dev.get("ceiling"), dict) or _bus(dev.get("pci_bus_id")) in seen:
                continue
            seen.add(_bus(dev.get("pci_bus_id")))
            out.append(dev)
    return out


def _pct(value, of):
    return round(100.0 * value / of, 1) if value is not None and of else None


def _part(dev, part, row, table):
    result = dev["ceiling"].get(ceiling_models.RESULT_KEYS.get(part, part))
    out = {"figure": None, "unit": ceiling_models.UNITS[part], "path": None,
           "datasheet": ceiling_models.datasheet(row, part), "datasheet_pct": None,
           "healthy": None, "healthy_pct": None, "best": None, "best_index": None,
           "best_bus_id": None, "below_best_pct": None, "skipped": None, "error": None}
    if not isinstance(result, dict):
        out["skipped"] = dev["ceiling"].get("skipped") or (
            "not asked (ceiling_cublas)" if part in ceiling_models.RESULT_KEYS
            else "not measured")
        return out
    out["path"] = result.get("path")
    if result.get("skipped"):
        out["skipped"] = result["skipped"]
    elif result.get("checked") is False:
        out["error"] = result.get("error") or "the result was not checked"
    out["figure"] = ceiling_models.figure(result, part)
    out["datasheet_pct"] = _pct(out["figure"], out["datasheet"])
    out["healthy"] = ceiling_models.healthy(row, part, out["path"])
    if out["healthy"]:
        out["healthy_pct"] = _pct(out["figure"], out["healthy"]["figure"])
    return out


def gpu_rows(facts, table=ceiling_models.MODELS):
    """One row per host GPU with a ceiling result: ``{index, bus_id, name, model, seconds,
    skipped, parts}``; ``parts[part]``: ``{figure, unit, path, datasheet, datasheet_pct,
    healthy, healthy_pct, best, best_index, best_bus_id, below_best_pct, skipped, error}``
    (``best``: the node's best figure of the same model name and path, set where two or
    more GPUs have one; ``below_best_pct``: how far below it this GPU is)."""
    rows = []
    for dev in host_devices(facts):
        row = ceiling_models.model_row(dev.get("name"), table)
        ceiling = dev["ceiling"]
        rows.append({"index": dev.get("index"), "bus_id": dev.get("pci_bus_id"),
                     "name": dev.get("name"), "model": row["model"] if row else None,
                     "seconds": ceiling.get("seconds"), "skipped": ceiling.get("skipped"),
                     "parts": dict((part, _part(dev, part, row, table))
                                   for part in ceiling_models.PARTS)})
    for part in ceiling_models.PARTS:
        groups = {}
        for row in rows:
            cell = row["parts"][part]
            if cell["figure"] is not None:
                groups.setdefault((row["name"], cell["path"]), []).append(row)
        for members in groups.values():
            if len(members) < 2:
                continue
            top = max(members, key=lambda r: r["parts"][part]["figure"])
            best = top["parts"][part]["figure"]
            for row in members:
                cell = row["parts"][part]
                cell.update(best=best, best_index=top["index"], best_bus_id=top["bus_id"],
                            below_best_pct=round(100.0 * (best - cell["figure"]) / best, 1)
                            if best else None)
    return rows


def _headline(rows, part):
    """``(best datasheet %, node spread %)`` of ``part`` over ``rows``; spread None with
    fewer than two figures; None when no GPU has a figure."""
    figures = [r["parts"][part] for r in rows if r["parts"][part]["figure"] is not None]
    if not figures:
        return None
    pcts = [c["datasheet_pct"] for c in figures if c["datasheet_pct"] is not None]
    values = [c["figure"] for c in figures]
    spread = round(100.0 * (max(values) - min(values)) / max(values), 1) \
        if len(values) > 1 and max(values) else None
    return (max(pcts) if pcts else None), spread


def _phrase(label, head):
    pct, spread = head
    text = "%s %s" % (label, "%.1f %% of datasheet" % pct if pct is not None
                      else "(no datasheet figure)")
    if spread is not None:
        text += " (node spread %.1f %%)" % spread
    return text


def host_path(facts, findings):
    """``(measured, [what is slow])``: whether the CUDA pass measured the host path (copy
    rates or launch latency) and the host-path findings' parts present."""
    measured = any(dev.get("h2d_gbs") is not None or (dev.get("latency") or {}).get("sleeping")
                   for res in (facts or {}).get("cuda") or [] if res.get("vmid") is None
                   for dev in res.get("devices") or [])
    ids = set(f.get("id") for f in findings or [])
    return measured, [label for fid, label in HOST_PATH_FINDINGS if fid in ids]


def verdict(facts, findings, table=ceiling_models.MODELS):
    """The one-line answer for a host: compute and memory against the datasheet (the node's
    spread), and whether the host path or a GPU is the bottleneck; None when no GPU has a
    ceiling result."""
    rows = gpu_rows(facts, table)
    if not rows:
        return None
    parts = []
    compute = [p for p in ("bf16", "fp32") if _headline(rows, p)]
    for part in compute[:1]:
        parts.append(_phrase("compute %s" % ceiling_models.LABELS[part], _headline(rows, part)))
    if _headline(rows, "memory"):
        parts.append(_phrase("memory", _headline(rows, "memory")))
    if not parts:
        parts.append("no ceiling figure (every part skipped or failed)")
    measured, slow = host_path(facts, findings)
    low_gpus = sorted(set(str(f.get("subject")) for f in findings or []
                          if f.get("id") in GPU_FINDINGS))
    if slow:
        tail = "the host path is a bottleneck: %s below %s" % (
            ", ".join(slow), "their marks" if len(slow) > 1 else "its mark")
    elif measured:
        tail = "host path (PCIe, launch latency) within marks: the host is not the bottleneck"
    else:
        tail = "host path not measured"
    if low_gpus:
        many = len(low_gpus) > 1
        tail += "; %s %s below %s model or siblings (gpu_compute_low, " \
            "gpu_memory_bandwidth_low)" % ("GPUs" if many else "GPU", ", ".join(low_gpus),
                                           "their" if many else "its")
    return ", ".join(parts) + "; " + tail


def _cell_text(cell):
    """One part of one GPU as the reports show it: ``achieved / table / node best``."""
    if cell["error"]:
        return "failed: %s" % cell["error"]
    if cell["figure"] is None:
        asked = cell["skipped"] and not cell["skipped"].startswith("not asked")
        return "skipped" if asked else "-"
    text = ceiling_models.shown(cell["figure"])
    table = cell["healthy"]["figure"] if cell["healthy"] else cell["datasheet"]
    text += " / %s" % ("%g%s" % (table, "" if cell["healthy"] else " ds")
                       if table is not None else "-")
    text += " / %s" % (ceiling_models.shown(cell["best"]) if cell["best"] is not None
                       else "-")
    if cell["datasheet_pct"] is not None:
        text += " (%.0f %%)" % cell["datasheet_pct"]
    return text


def report_rows(facts, table=ceiling_models.MODELS):
    """The report's per-GPU rows: ``{index, bus_id, name, model, cells: [(label, text)]}``
    where each text is ``achieved / table / node best (datasheet %)``: the table figure is
    the healthy figure of the same path where the table has one, else the datasheet's
    (marked ``ds``)."""
    out = []
    for row in gpu_rows(facts, table):
        cells = [("%s %s" % (ceiling_models.LABELS[part], ceiling_models.UNITS[part]),
                  _cell_text(row["parts"][part])) for part in ceiling_models.PARTS]
        out.append({"index": row["index"], "bus_id": row["bus_id"], "name": row["name"],
                    "model": row["model"] or "not in the table", "skipped": row["skipped"],
                    "cells": cells})
    return out
