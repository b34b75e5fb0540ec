# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The per-model table of the compute and memory ceiling: one row per GPU model, the one
declaration (``MODELS``).

Each row: ``model`` (its name in the reports), ``match`` (a regular expression searched,
case-insensitive, in the name nvidia-smi and CUDA give: ``NVIDIA H100 80GB HBM3``), the
datasheet's dense figures (``datasheet``: fp32 / bf16 / fp8 TFLOPS without sparsity, memory
GB/s) with their ``source``, and ``healthy``: what a healthy GPU of the model reaches, per
part a tuple of ``(figure, path, kind, source)``: ``path`` the probe path the figure was
measured with (``ptx-dtod``, ``ptx-fma``, ``ptx-mma`` of subjects/cuda/cuda_ceiling.py, or
``cublas`` for a published matmul figure), ``kind`` ``measured`` (this probe on a real
GPU) or ``published`` (someone else's measurement, marked so until a real GPU's figure
replaces it).

A GPU is judged against the table only where a healthy figure of the same path exists:
a PTX ``mma.sync`` loop and a tuned cuBLAS GEMM are different programs, and judging one by
the other would fail every healthy GPU. Without one the datasheet percentage is shown and
the node's siblings judge (ceiling_check.py). A model with no row is judged against its
siblings only. Rows are tried in order: a more specific name first (H200 NVL before H200).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

PARTS = ("fp32", "bf16", "gemm", "fp8", "memory")
UNITS = {"fp32": "TFLOPS", "bf16": "TFLOPS", "gemm": "TFLOPS", "fp8": "TFLOPS",
         "memory": "GB/s"}
LABELS = {"fp32": "FP32", "bf16": "BF16", "gemm": "BF16 GEMM", "fp8": "FP8",
          "memory": "memory"}
# The probe's key of a part where it is not the part's name: ``gemm`` is the optional BF16
# GEMM through cuBLAS (cuda_probe ceiling_cublas, subjects/cuda/cuda_cublas.py).
RESULT_KEYS = {"gemm": "cublas_bf16"}
# A part judged by another part's datasheet figure and healthy figures: the GEMM is BF16
# work, its healthy figure the table's BF16 entry of path ``cublas``.
SAME_AS = {"gemm": "bf16"}

# Sources (each figure verified on the page named, December 2026).
_HPCTECH = ("NVIDIA H100 datasheet as tabled by hpctech.co.jp "
            "(archive-lib.hpctech.co.jp/gpuproduct/nvidia-h100.html; sparse / 2)")
_KLOCKWOOD_H100 = "glennklockwood.com/garden/processors/h100 (NVIDIA's H100 whitepaper)"
_H200 = ("NVIDIA H200 spec page as quoted by morphllm.com/nvidia-h200 (sparse / 2) and "
         "lzwjava.github.io/nvidia-h200-gpu-specs-en (4.8 TB/s)")
_A100 = ("NVIDIA A100 datasheet: glennklockwood.com/garden/processors/A100 (TFLOPS), "
         "thundercompute.com/blog/nvidia-a100-specs-full-guide (bandwidth per variant)")
_L40S = "NVIDIA L40S datasheet as tabled by mullet.se/product.html?product_id=355414 (dense)"
_RTX6000 = ("NVIDIA GTC 2025 announcement as reported by gpu.name (1,792 GB/s) and "
            "topcpu.net (up to 125 TFLOPS FP32); tensor figures not verified: left out")
_B200 = ("NVIDIA HGX B200 per-GPU specification as quoted by zdszero.github.io "
         "(Computer/Artificial_Intelligence/Hardware.html; sparse / 2)")
# This probe (bench/ceiling.py, 1 s per part, best of 3) on the lent H100 80GB HBM3, a KVM
# guest, driver 580.159.04, 700 W limit, max clocks 1980 / 2619 MHz, 2026-12-05: three runs
# (1 s, 1 s, 2 s per part) gave memory 3015.8 / 3014.9 / 3013.9 GB/s, FP32 65.18 / 65.26 /
# 65.26, BF16 666.7 / 667.9 / 665.7, FP8 1150.7 / 1151.0 / 1146.6 TFLOPS: the lowest kept.
_H100_MEASURED = ("measured: this probe on a lent H100 80GB HBM3 (KVM guest, driver "
                  "580.159.04, 700 W), 2026-12-05, lowest of 3 runs")
_MAMF = ("published: stas00/ml-engineering compute/accelerator, Maximum Achievable Matmul "
         "FLOPS (mamf-finder, torch BF16 matmul at 8192^3 and around it)")


def _row(model, match, fp32, bf16, fp8, memory_gbs, source, healthy=()):
    """One row; ``healthy``: ``(part, figure, path, kind, source)`` entries."""
    figures = {}
    for part, value, path, kind, where in healthy:
        figures.setdefault(part, []).append((value, path, kind, where))
    return {"model": model, "match": match,
            "datasheet": {"fp32": fp32, "bf16": bf16, "fp8": fp8, "memory": memory_gbs},
            "source": source, "healthy": dict((k, tuple(v)) for k, v in figures.items())}


MODELS = (
    _row("H200 NVL", r"\bh200\s+nvl\b", None, 835.5, 1670.5, 4800.0, _H200),
    _row("H200", r"\bh200\b", 67.0, 989.5, 1979.0, 4800.0, _H200 + "; FP32 as H100 SXM",
         healthy=[("bf16", 794.0, "cublas", "published",
                   _MAMF + " (H200 = H100 SXM compute)")]),
    _row("H100 PCIe", r"\bh100\b.*\bpcie\b", 51.0, 756.5, 1513.0, 2000.0, _HPCTECH),
    _row("H100 SXM", r"\bh100\b.*\b(sxm|hbm3)\b", 67.0, 989.5, 1979.0, 3350.0,
         _HPCTECH + "; " + _KLOCKWOOD_H100,
         healthy=[("bf16", 794.0, "cublas", "published", _MAMF),
                  ("fp32", 65.18, "ptx-fma", "measured", _H100_MEASURED),
                  ("bf16", 665.71, "ptx-mma", "measured", _H100_MEASURED),
                  ("fp8", 1146.61, "ptx-mma", "measured", _H100_MEASURED),
                  ("memory", 3013.91, "ptx-dtod", "measured", _H100_MEASURED)]),
    _row("A100 SXM 80GB", r"\ba100\b.*\bsxm.*\b80\s*gb\b", 19.5, 312.0, None, 2039.0, _A100),
    _row("A100 SXM 40GB", r"\ba100\b.*\bsxm.*\b40\s*gb\b", 19.5, 312.0, None, 1555.0, _A100),
    _row("A100 PCIe 80GB", r"\ba100\b.*\b80\s*gb\b.*\bpcie\b|\ba100\b.*\bpcie.*\b80\s*gb\b",
         19.5, 312.0, None, 1935.0, _A100),
    _row("A100 PCIe 40GB", r"\ba100\b.*\bpcie.*\b40\s*gb\b|\ba100\b.*\b40\s*gb\b.*\bpcie\b",
         19.5, 312.0, None, 1555.0, _A100),
    _row("L40S", r"\bl40s\b", 91.6, 362.05, 733.0, 864.0, _L40S),
    _row("RTX PRO 6000 Blackwell", r"\brtx\s+pro\s+6000\b.*\bblackwell\b", 125.0, None,
         None, 1792.0, _RTX6000),
    _row("B200", r"\bb200\b", 75.0, 2250.0, 4500.0, 7700.0, _B200,
         healthy=[("bf16", 1745.0, "cublas", "published", _MAMF)]),
)


def model_row(name, table=MODELS):
    """The row of ``table`` whose ``match`` is found in ``name``, or None (unknown model)."""
    for row in table:
        if name and re.search(row["match"], str(name), re.IGNORECASE):
            return row
    return None


def datasheet(row, part):
    """``row``'s datasheet figure of ``part`` (TFLOPS; memory in GB/s), or None."""
    return (row or {}).get("datasheet", {}).get(SAME_AS.get(part, part))


def healthy(row, part, path):
    """``{figure, path, kind, source}``: what a healthy GPU of ``row``'s model reaches in
    ``part`` by ``path``; None when the table has no figure of that path (only the
    siblings judge then)."""
    for entry in (row or {}).get("healthy", {}).get(SAME_AS.get(part, part)) or ():
        if entry[1] == path:
            return {"figure": entry[0], "path": entry[1], "kind": entry[2],
                    "source": entry[3]}
    return None


def figure(result, part):
    """The achieved figure of one part's result (TFLOPS or GB/s), or None (skipped, failed
    or missing)."""
    if not isinstance(result, dict) or not result.get("checked"):
        return None
    value = result.get("gbs" if part == "memory" else "tflops")
    return value if isinstance(value, (int, float)) else None


def shown(value):
    """A measured figure as the reports write it: one decimal at most (``533.4``, ``620``)."""
    return "%g" % round(value, 1)
