# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each GPU's compute and memory ceiling (the opt-in CUDA pass with ``cuda_ceiling``),
judged two ways (ceiling.py reads it):

- against the model table (ceiling_models.py): below ``ceiling_min_pct`` (default 85) of
  the figure a healthy GPU of the model reaches by the same probe path, where the table has
  one (a PTX loop is never judged by a cuBLAS GEMM's figure);
- against the node's siblings: more than ``ceiling_spread_pct`` (default 10) below the
  node's best GPU of the same model by the same path (gpu-fryer fails a GPU 10 % below the
  node's best; 5 % between the GPUs of an 8-GPU node is normal).

A part whose kernel or copy wrote a wrong result (``checked: false``) is no figure: the GPU
gets the same finding saying "the kernel's result was wrong" with the error, since a GPU
that computes wrongly is worse than a slow one. The evidence names the GPU (index, bus),
achieved / table / node best, and what nvidia-smi said of it when the audit read it:
performance state, power limit and draw, the clock-event reasons active and the counters
of those that held the clocks down since the driver loaded, the temperature. The findings
sit in the GPU driver column, with the CUDA pass's other findings.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.ceiling import (
    ceiling,
    ceiling_models,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import (
    gpu_driver_check,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.findings import (
    check,
    found,
)

DEFAULT_SPREAD_PCT = 10
DEFAULT_MIN_PCT = 85
THERMAL = ("hw_thermal_slowdown", "sw_thermal_slowdown", "hw_slowdown")
POWER = ("sw_power_cap", "hw_power_brake_slowdown")
REMEASURE = "re-measure with gpuhost.tuning.cuda_probe ceiling: true"


def _smi_gpu(facts, bus_id):
    for gpu in (facts.get("nvidia_smi") or {}).get("gpus") or []:
        if str(gpu.get("address") or "").lower() == str(bus_id or "").lower():
            return gpu
    return None


def evidence(facts, bus_id):
    """``(text, causes)``: what nvidia-smi said of the GPU at ``bus_id`` when the audit read
    it, and the causes it shows (thermal, power); ``("no nvidia-smi data for this GPU",
    [])`` when there is none."""
    gpu = _smi_gpu(facts, bus_id)
    if gpu is None:
        return "no nvidia-smi data for this GPU", []
    bits, causes = [], []
    if gpu.get("performance_state"):
        bits.append(gpu["performance_state"])
    power = gpu.get("power") or {}
    if power.get("limit_w") is not None:
        text = "power limit %g W" % power["limit_w"]
        if power.get("default_limit_w") is not None:
            text += " (default %g W)" % power["default_limit_w"]
            if power["limit_w"] < power["default_limit_w"]:
                causes.append("its power limit %g W is below the default %g W (nvidia-smi "
                              "-i %s -pl %g restores it)" % (
                                  power["limit_w"], power["default_limit_w"], bus_id,
                                  power["default_limit_w"]))
        if power.get("draw_w") is not None:
            text += ", drawing %g W" % power["draw_w"]
        bits.append(text)
    active = [r for r in gpu.get("clock_reasons_active") or [] if r != "gpu_idle"]
    bits.append("clock-event reasons active: %s" % (", ".join(active) or "none"))
    if any(r in THERMAL for r in active):
        causes.append("its clocks are held down by heat (%s): check its cooling and airflow"
                      % ", ".join(r for r in active if r in THERMAL))
    if any(r in POWER for r in active):
        causes.append("its clocks are held down by power (%s): check the power limit and "
                      "the power supply" % ", ".join(r for r in active if r in POWER))
    counters = gpu.get("clock_event_counters_us") or {}
    held = sorted(((us, name) for name, us in counters.items()
                   if us and name != "gpu_idle" and name in THERMAL + POWER), reverse=True)
    if held:
        bits.append("since the driver loaded: %s" % ", ".join(
            "%s %.1f s" % (name, us / 1e6) for us, name in held[:3]))
    if gpu.get("temperature_c") is not None:
        text = "%g C" % gpu["temperature_c"]
        if gpu.get("temperature_margin_c") is not None:
            text += " (%g C below its slowdown limit)" % gpu["temperature_margin_c"]
        bits.append(text)
    return "; ".join(bits), causes


def _low(cell, spread, floor):
    """What is low in one part's cell (a list of phrases; empty when nothing)."""
    out = []
    healthy = cell["healthy"]
    if healthy and cell["figure"] < healthy["figure"] * floor / 100.0:
        out.append("%.1f %% of the table's %g (%s %s)" % (
            cell["healthy_pct"], healthy["figure"], healthy["kind"], healthy["path"]))
    if cell["below_best_pct"] is not None and cell["below_best_pct"] > spread:
        out.append("%.1f %% below the node's best %s (GPU %s %s)" % (
            cell["below_best_pct"], ceiling_models.shown(cell["best"]), cell["best_index"],
            cell["best_bus_id"]))
    return out


def _judge(facts, wanted, parts, what):
    spread = wanted.get("ceiling_spread_pct") or DEFAULT_SPREAD_PCT
    floor = wanted.get("ceiling_min_pct") or DEFAULT_MIN_PCT
    for row in ceiling.gpu_rows(facts):
        wrong, low = [], []
        for part in parts:
            cell = row["parts"][part]
            label = ceiling_models.LABELS[part]
            if cell["error"]:
                wrong.append("%s: %s" % (label, cell["error"]))
            elif cell["figure"] is not None:
                why = _low(cell, spread, floor)
                if why:
                    pct = "" if cell["datasheet_pct"] is None else \
                        " = %.1f %% of datasheet %g" % (cell["datasheet_pct"],
                                                        cell["datasheet"])
                    low.append("%s %s %s%s, %s" % (label, ceiling_models.shown(cell["figure"]),
                                                   cell["unit"], pct, " and ".join(why)))
        if not wrong and not low:
            continue
        current = "GPU %s: " % row["index"]
        if wrong:
            current += "the %s result was wrong: %s" % (what, "; ".join(wrong))
            if low:
                current += "; "
        current += "; ".join(low)
        text, causes = evidence(facts, row["bus_id"])
        expected = ("within %s %% of the node's best %s (ceiling_spread_pct) and at least %s "
                    "%% of the table's healthy figure where it has one (ceiling_min_pct)"
                    % (spread, row["model"] or row["name"] or "GPU", floor))
        if wrong:
            expected = "a correct result; " + expected
            remedy = ("a GPU that computes wrong results must not run work: drain it, check "
                      "its XID events and row remapping (gpu_xid_*, gpu_row_remap_*), reset "
                      "it and %s; if it repeats, replace it" % REMEASURE)
        elif causes:
            remedy = "; ".join(causes) + "; then " + REMEASURE
        else:
            remedy = ("nvidia-smi shows no power or heat cause: compare the GPU's clocks "
                      "under load (nvidia-smi dmon), check for other work on it (gpu_use) "
                      "and %s; a GPU that stays low is a candidate for the vendor's "
                      "diagnostics (dcgmi diag -r 3)" % REMEASURE)
        yield found(row["bus_id"], current, expected, remedy,
                    detail="%s; at the audit: %s" % (row["name"] or "GPU", text))


@check("gpu_compute_low", gpu_driver_check.COLUMN, severity="high", order=86)
def gpu_compute_low(facts, wanted):
    """High: a GPU's measured FP32, BF16 or FP8 ceiling (the opt-in CUDA pass with
    ``cuda_ceiling``) is below ``ceiling_min_pct`` of its model table's healthy figure of
    the same path, or more than ``ceiling_spread_pct`` below the node's best GPU of the same
    model; or its kernel's result was wrong (the kernel's error named)."""
    return _judge(facts, wanted, ceiling.COMPUTE_PARTS, "kernel's")


@check("gpu_memory_bandwidth_low", gpu_driver_check.COLUMN, severity="high", order=87)
def gpu_memory_bandwidth_low(facts, wanted):
    """High: a GPU's measured device-to-device copy rate (read + write) is below
    ``ceiling_min_pct`` of its model table's healthy figure, or more than
    ``ceiling_spread_pct`` below the node's best GPU of the same model; or the copy left
    wrong data."""
    return _judge(facts, wanted, ("memory",), "copy's")
