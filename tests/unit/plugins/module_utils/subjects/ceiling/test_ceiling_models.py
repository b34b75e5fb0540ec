"""subjects/ceiling/ceiling_models.py: the model table matches the names nvidia-smi and CUDA
give, most specific first, and holds the datasheet figures the brief checked."""

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.ceiling import (
    ceiling_models as cm,
)


@pytest.mark.parametrize("name,model", [
    ("NVIDIA H200", "H200"),
    ("NVIDIA H200 NVL", "H200 NVL"),
    ("NVIDIA H100 80GB HBM3", "H100 SXM"),
    ("NVIDIA H100 PCIe", "H100 PCIe"),
    ("NVIDIA A100-SXM4-80GB", "A100 SXM 80GB"),
    ("NVIDIA A100-SXM4-40GB", "A100 SXM 40GB"),
    ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB"),
    ("NVIDIA A100-PCIE-40GB", "A100 PCIe 40GB"),
    ("NVIDIA L40S", "L40S"),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX PRO 6000 Blackwell"),
    ("NVIDIA B200", "B200"),
])
def test_model_names_match_their_row(name, model):
    assert cm.model_row(name)["model"] == model


def test_unknown_and_missing_names_have_no_row():
    assert cm.model_row("NVIDIA H100 NVL") is None
    assert cm.model_row("NVIDIA GeForce RTX 4090") is None
    assert cm.model_row(None) is None


def test_datasheet_figures():
    h100 = cm.model_row("NVIDIA H100 80GB HBM3")
    assert [cm.datasheet(h100, p) for p in cm.PARTS] == [67.0, 989.5, 989.5, 1979.0, 3350.0]
    # the cuBLAS GEMM is judged by the BF16 entries of path cublas
    assert cm.healthy(h100, "gemm", "cublas")["figure"] == 794.0
    pcie = cm.model_row("NVIDIA H100 PCIe")
    assert (cm.datasheet(pcie, "fp32"), cm.datasheet(pcie, "memory")) == (51.0, 2000.0)
    assert cm.datasheet(cm.model_row("NVIDIA H200"), "memory") == 4800.0
    a100 = cm.model_row("NVIDIA A100-SXM4-80GB")
    assert (cm.datasheet(a100, "bf16"), cm.datasheet(a100, "memory")) == (312.0, 2039.0)
    assert cm.datasheet(a100, "fp8") is None
    assert cm.datasheet(None, "fp32") is None
    for row in cm.MODELS:
        assert row["source"] and set(row["datasheet"]) == set(cm.PARTS) - set(cm.SAME_AS)
        for part, entries in row["healthy"].items():
            assert part in cm.PARTS and entries
            for value, path, kind, source in entries:
                assert kind in ("measured", "published") and source and path
                assert value < row["datasheet"][part]


def test_the_measured_h100_sxm_figures_of_this_probe():
    h100 = cm.model_row("NVIDIA H100 80GB HBM3")
    got = dict((part, cm.healthy(h100, part, path)["figure"]) for part, path in (
        ("fp32", "ptx-fma"), ("bf16", "ptx-mma"), ("fp8", "ptx-mma"), ("memory", "ptx-dtod")))
    assert got == {"fp32": 65.18, "bf16": 665.71, "fp8": 1146.61, "memory": 3013.91}
    assert cm.healthy(h100, "bf16", "ptx-mma")["kind"] == "measured"
    assert cm.healthy(h100, "bf16", "cublas")["figure"] == 794.0


def test_healthy_figure_only_for_its_own_path():
    b200 = cm.model_row("NVIDIA B200")
    assert cm.healthy(b200, "bf16", "cublas")["figure"] == 1745.0
    assert cm.healthy(b200, "bf16", "ptx-mma") is None
    assert cm.healthy(b200, "memory", "ptx-dtod") is None


def test_figure_of_a_result():
    assert cm.figure({"checked": True, "tflops": 5.0}, "fp32") == 5.0
    assert cm.figure({"checked": True, "gbs": 7.0}, "memory") == 7.0
    assert cm.figure({"checked": False, "error": "x"}, "fp32") is None
    assert cm.figure({"skipped": "why"}, "memory") is None
    assert cm.figure(None, "bf16") is None


def test_shown_figures_have_one_decimal_at_most():
    assert [cm.shown(v) for v in (533.352, 620.0, 3015.75, 0.04)] == ["533.4", "620",
                                                                      "3015.8", "0"]
