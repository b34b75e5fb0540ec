"""subjects/ceiling/ceiling_part.py: the opt-in ``ceiling`` tune part, before -> after per
GPU and part with the share of the datasheet, its options and its place in the registry."""

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import tune_registry
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import validate
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.ceiling import (
    ceiling_part,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import cuda

from .ceilingfacts import bus, ceiling


def probe(*ceilings, name="NVIDIA H200"):
    return {"init": {"code": 0}, "devices": [
        {"index": i, "name": name, "pci_bus_id": bus(i), "ceiling": c}
        for i, c in enumerate(ceilings)]}


def test_rows_before_and_after_with_the_datasheet_share():
    before = probe(ceiling(bf16=600.0, gbs=4000.0))
    after = probe(ceiling(bf16=500.0, gbs=4050.0))
    table, drops = ceiling_part.rows(before, after)
    rows = dict((item, (b, a, status, note)) for item, b, a, status, note in table)
    assert rows[bus(0) + " BF16"] == ("600 TFLOPS (60.6 % of datasheet)",
                                      "500 TFLOPS (50.5 % of datasheet)", "lower",
                                      "-16.7 %; NVIDIA H200")
    assert rows[bus(0) + " memory"][2] == "same"
    assert drops == [bus(0) + " BF16 600 -> 500 TFLOPS (-16.7 %)"]


def test_rows_of_wrong_skipped_and_missing_results():
    wrong = {"checked": False, "error": "fp8 kernel wrote nan", "path": "ptx-mma"}
    before = probe(ceiling(fp8={"skipped": "needs sm_89"}), ceiling())
    after = probe(ceiling(fp8={"skipped": "needs sm_89"}), ceiling(fp8=wrong))
    rows = dict((r[0], r[1:]) for r in ceiling_part.rows(before, after)[0])
    assert rows[bus(0) + " FP8"] == (None, None, "skipped", "needs sm_89; NVIDIA H200")
    assert rows[bus(1) + " FP8"][2:] == ("failed", "after: wrong result: fp8 kernel wrote "
                                                   "nan; NVIDIA H200")
    gone = ceiling_part.rows(probe(ceiling()), {"devices": []})[0]
    assert gone[0][3] == "skipped" and gone[0][4].startswith("after: not found")
    new = ceiling_part.rows({"devices": []}, probe(ceiling()))[0]
    assert new[0][3] == "measured"
    unknown = ceiling_part.cell({"name": "X", "ceiling": ceiling()}, "fp32")
    assert unknown == "60 TFLOPS"


def test_options_rules_and_registry():
    ceiling_part.rules({"ceiling_seconds": 1.0, "ceiling_mb": 1024, "cuda_library": "x"})
    for bad in ({"ceiling_seconds": 0.01}, {"ceiling_mb": 8}, {"cuda_library": ""}):
        with pytest.raises(validate.ValidationError):
            ceiling_part.rules(bad)
    assert ceiling_part.BEFORE_PART in tune_registry.REGISTRY
    assert ceiling_part.AFTER_PART in tune_registry.REGISTRY
    assert "ceiling" not in tune_registry.default_parts(tune_registry.REGISTRY)
    assert "4 s per" not in ceiling_part.check_mode_note({})
    assert "about 1 s per part" in ceiling_part.check_mode_note({"ceiling_seconds": 1})


def test_measure_asks_the_probe_for_the_ceiling(monkeypatch):
    seen = {}
    monkeypatch.setattr(cuda, "probe_host", lambda runner, **kw: seen.update(kw) or {})
    ceiling_part.measure({"cuda_library": None, "root": "/", "ceiling_seconds": 0.5,
                          "ceiling_mb": 256}, runner=None)
    assert seen == {"library": cuda.DEFAULT_LIBRARY, "root": "/", "ceiling": True,
                    "ceiling_seconds": 0.5, "ceiling_mb": 256}
