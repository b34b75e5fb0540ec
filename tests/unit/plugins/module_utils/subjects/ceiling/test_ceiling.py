"""subjects/ceiling/ceiling.py: the per-GPU rows (achieved / table / node best) and the
one-line answer per host: compute and memory against the datasheet, and whether the host
path or a GPU is the bottleneck."""

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import views
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.ceiling import ceiling

from .ceilingfacts import bus, ceiling as result, node


def test_rows_set_each_gpu_beside_the_table_and_the_node_best():
    facts = node([result(), result(bf16=558.0, gbs=3690.0)])
    rows = ceiling.gpu_rows(facts)
    assert [r["bus_id"] for r in rows] == [bus(0), bus(1)]
    assert rows[0]["model"] == "H200"
    slow = rows[1]["parts"]["bf16"]
    assert (slow["figure"], slow["datasheet"], slow["best"], slow["best_index"],
            slow["below_best_pct"], slow["datasheet_pct"]) == (558.0, 989.5, 620.0, 0,
                                                               10.0, 56.4)
    assert slow["healthy"] is None and slow["path"] == "ptx-mma"
    assert rows[1]["parts"]["memory"]["below_best_pct"] == 10.0


def test_a_gpu_measured_twice_counts_once_and_containers_not_at_all():
    one = node([result()])
    facts = {"cuda": one["cuda"] + one["cuda"] + [dict(one["cuda"][0], vmid=130)]}
    assert len(ceiling.gpu_rows(facts)) == 1
    assert ceiling.gpu_rows({"cuda": [{"devices": [{"pci_bus_id": bus(0)}]}]}) == []
    assert ceiling.verdict({}, []) is None


def test_verdict_when_the_host_is_not_the_bottleneck():
    facts = node([result(), result(bf16=600.0, gbs=4000.0)])
    line = ceiling.verdict(facts, [])
    assert line == ("compute BF16 62.7 % of datasheet (node spread 3.2 %), memory 85.4 % of "
                    "datasheet (node spread 2.4 %); host path (PCIe, launch latency) within "
                    "marks: the host is not the bottleneck")


def test_verdict_names_the_slow_host_path_and_the_low_gpus():
    facts = node([result(), result(bf16=400.0)])
    found = [{"id": "pcie_bandwidth_low", "subject": bus(0)},
             {"id": "gpu_launch_latency_high", "subject": bus(0)},
             {"id": "gpu_compute_low", "subject": bus(1)}]
    line = ceiling.verdict(facts, found)
    assert line.endswith("; the host path is a bottleneck: PCIe copy rate, launch latency "
                         "below their marks; GPU %s below its model or siblings "
                         "(gpu_compute_low, gpu_memory_bandwidth_low)" % bus(1))


def test_verdict_without_host_path_measurements_or_figures():
    facts = node([result()])
    facts["cuda"][0]["devices"][0]["h2d_gbs"] = None
    assert ceiling.verdict(facts, []).endswith("; host path not measured")
    skipped = node([{"skipped": "no context"}])
    assert ceiling.verdict(skipped, []).startswith("no ceiling figure")
    unknown = node([result(fp32=50.0, bf16={"skipped": "x"})], name="NVIDIA Hypothetical X1")
    assert ceiling.verdict(unknown, []).startswith("compute FP32 (no datasheet figure), ")


def test_report_rows():
    facts = node([result(), result(bf16={"checked": False, "error": "wrong", "path": "p"},
                                   fp8={"skipped": "no"})])
    first, second = ceiling.report_rows(facts)
    cells = dict(first["cells"])
    assert cells["BF16 TFLOPS"] == "620 / 989.5 ds / - (63 %)"
    assert cells["memory GB/s"] == "4100 / 4800 ds / 4100 (85 %)"
    cells = dict(second["cells"])
    assert cells["BF16 TFLOPS"] == "failed: wrong" and cells["FP8 TFLOPS"] == "skipped"
    assert first["model"] == "H200"
    other = ceiling.report_rows(node([result()], name="NVIDIA Hypothetical X1"))
    assert other[0]["model"] == "not in the table"
    assert dict(other[0]["cells"])["FP32 TFLOPS"] == "60 / - / -"


def test_the_reports_view_of_a_host():
    # engines/report/views.py: what summary.md and the host page show (goldens: h200-vm)
    assert views.ceiling_view({"facts": {}, "findings": []}) is None
    view = views.ceiling_view({"facts": node([result(), result()]), "findings": []})
    assert view["labels"] == ["FP32 TFLOPS", "BF16 TFLOPS", "BF16 GEMM TFLOPS", "FP8 TFLOPS",
                              "memory GB/s"]
    assert view["line"].startswith("compute BF16 62.7 % of datasheet (node spread 0.0 %)")
    assert [row["bus_id"] for row in view["rows"]] == [bus(0), bus(1)]
