"""subjects/ceiling/ceiling_check.py: gpu_compute_low and gpu_memory_bandwidth_low judged
against the node's best GPU of the same model (a doctored 8-GPU node with one GPU 20 %
slow), the model table (only a healthy figure of the same probe path judges), an unknown
model (siblings only) and a kernel whose result was wrong."""

from auditcase import WANTED
from fixtures import hosts
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import findings
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.ceiling import (
    ceiling_check,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import cuda
from ansible_collections.gpuhost.tuning.plugins.modules import host_audit

from .ceilingfacts import bus, ceiling, node

assert ceiling_check.DEFAULT_SPREAD_PCT == 10


def run(fid, facts, **wanted):
    return list(findings.get(fid).run(facts, audit.merged_wanted(dict(WANTED, **wanted))))


def both(facts, **wanted):
    return run("gpu_compute_low", facts, **wanted) + \
        run("gpu_memory_bandwidth_low", facts, **wanted)


def healthy_node(n=8):
    # a healthy node: about 5 % between its GPUs, as on a real 8-GPU node
    return [ceiling(fp32=60.0 - i * 0.3, bf16=620.0 - i * 3, fp8=1200.0 - i * 6,
                    gbs=4100.0 - i * 20) for i in range(n)]


def test_a_healthy_node_has_no_finding():
    assert both(node(healthy_node())) == []


def test_one_gpu_of_eight_20_pct_slow_is_exactly_that_finding_naming_it():
    gpus = healthy_node()
    gpus[5] = ceiling(fp32=48.0, bf16=496.0, fp8=960.0)
    facts = node(gpus, smi={5: {"reasons": ["sw_power_cap"], "limit": 500.0, "temp": 83}})
    got = both(facts)
    assert [(f["id"], f["subject"]) for f in got] == [("gpu_compute_low", bus(5))]
    f = got[0]
    assert f["severity"] == "high"
    assert f["current"].startswith("GPU 5: FP32 48 TFLOPS")
    assert "20.0 %% below the node's best 60 (GPU 0 %s)" % bus(0) in f["current"]
    assert "BF16 496 TFLOPS = 50.1 % of datasheet 989.5" in f["current"]
    assert "power limit 500 W (default 700 W), drawing 650 W" in f["detail"]
    assert "clock-event reasons active: sw_power_cap" in f["detail"]
    assert "83 C" in f["detail"] and f["detail"].startswith("NVIDIA H200")
    assert f["remedy"].startswith("its power limit 500 W is below the default 700 W")
    assert "held down by power (sw_power_cap)" in f["remedy"]
    assert "within 10 % of the node's best H200" in f["expected"]


def test_the_spread_is_the_wanted_value():
    gpus = healthy_node()
    gpus[2] = ceiling(gbs=3600.0)       # 12.2 % below the best 4100
    assert [f["id"] for f in both(node(gpus))] == ["gpu_memory_bandwidth_low"]
    assert both(node(gpus), ceiling_spread_pct=15) == []


def test_memory_finding_without_a_cause_says_what_to_check():
    gpus = healthy_node(2)
    gpus[1] = ceiling(gbs=3000.0)
    f, = run("gpu_memory_bandwidth_low", node(gpus))
    assert f["subject"] == bus(1)
    assert "memory 3000 GB/s = 62.5 % of datasheet 4800" in f["current"]
    assert "nvidia-smi shows no power or heat cause" in f["remedy"]


def test_unknown_model_is_judged_against_its_siblings_only():
    gpus = healthy_node(4)
    gpus[3] = ceiling(bf16=400.0)
    got = both(node(gpus, name="NVIDIA Hypothetical X1"))
    assert [(f["id"], f["subject"]) for f in got] == [("gpu_compute_low", bus(3))]
    assert "% of datasheet" not in got[0]["current"]
    # one GPU alone of an unknown model: nothing to judge it by
    assert both(node([ceiling(bf16=10.0)], name="NVIDIA Hypothetical X1")) == []


def test_the_table_judges_only_a_healthy_figure_of_the_same_path():
    # B200's only healthy BF16 is a published cuBLAS GEMM figure: a PTX mma loop far below
    # it is not judged by it (one GPU, no sibling)
    assert both(node([ceiling(bf16=300.0)], name="NVIDIA B200")) == []
    # a cuBLAS figure is: 600 of 794 is 75.6 %, below 85 %
    gemm = {"tflops": 600.0, "runs_tflops": [600.0], "checked": True, "path": "cublas"}
    f, = both(node([ceiling(bf16=gemm)], name="NVIDIA H100 80GB HBM3"))
    assert "75.6 % of the table's 794 (published cublas)" in f["current"]
    assert both(node([ceiling(bf16=gemm)], name="NVIDIA H100 80GB HBM3"),
                ceiling_min_pct=70) == []


def test_the_cublas_gemm_is_its_own_part_judged_by_the_published_matmul_figure():
    """cuda_probe ceiling_cublas puts the GEMM under cublas_bf16 (subjects/cuda/
    cuda_cublas.py); the lent H100 reached 775.4 TFLOPS there (torch.matmul 785.9), 97.7 %
    of the published 794: healthy. One at 600 is low, named as the BF16 GEMM."""
    healthy = {"tflops": 775.39, "runs_tflops": [763.94, 775.39], "checked": True,
               "path": "cublas", "library": "libcublas.so.13", "m": 8192, "n": 8192,
               "k": 8192}
    h100 = "NVIDIA H100 80GB HBM3"
    assert both(node([ceiling(bf16=666.7, cublas_bf16=healthy)], name=h100)) == []
    slow = dict(healthy, tflops=600.0, runs_tflops=[600.0])
    f, = both(node([ceiling(bf16=666.7, cublas_bf16=slow)], name=h100))
    assert f["id"] == "gpu_compute_low" and "BF16 GEMM" in f["current"]
    assert "75.6 % of the table's 794 (published cublas)" in f["current"]


# The lent H100 80GB HBM3's own result (bench/ceiling.py, 2026-12-05, 1 s per part).
H100_REAL = dict(fp32=65.18, bf16=666.69, fp8=1150.7, gbs=3015.75)


def test_a_lone_h100_is_judged_by_the_probes_measured_figure():
    assert both(node([ceiling(**H100_REAL)], name="NVIDIA H100 80GB HBM3")) == []
    # the same GPU power-capped to 80 % of its clocks: no sibling, the table finds it
    capped = dict((k, v * 0.8) for k, v in H100_REAL.items() if k != "gbs")
    facts = node([ceiling(gbs=H100_REAL["gbs"], **capped)], name="NVIDIA H100 80GB HBM3",
                 smi={0: {"reasons": ["sw_power_cap"], "limit": 400.0}})
    f, = both(facts)
    assert f["id"] == "gpu_compute_low" and f["subject"] == bus(0)
    assert "BF16 533.4 TFLOPS = 53.9 % of datasheet 989.5, 80.1 % of the table's 665.71 " \
        "(measured ptx-mma)" in f["current"]
    assert f["remedy"].startswith("its power limit 400 W is below the default 700 W")


def test_a_wrong_kernel_result_is_gpu_compute_low_saying_so():
    gpus = healthy_node(2)
    gpus[1] = ceiling(bf16={"checked": False, "path": "ptx-mma",
                            "error": "bf16 kernel wrote 0.0 at thread 3, expected 64.0"})
    f, = both(node(gpus))
    assert f["id"] == "gpu_compute_low" and f["subject"] == bus(1)
    assert f["current"] == ("GPU 1: the kernel's result was wrong: BF16: bf16 kernel wrote "
                            "0.0 at thread 3, expected 64.0")
    assert f["expected"].startswith("a correct result")
    assert "must not run work" in f["remedy"]


def test_skipped_parts_containers_and_no_results_find_nothing():
    skipped = ceiling(fp8={"skipped": "fp8 mma needs sm_89; this GPU is sm_80"})
    assert both(node([skipped, skipped])) == []
    assert both(node([{"skipped": "no context"}] * 2)) == []
    assert both({"cuda": []}) == [] and both({}) == []
    # a container's results are not the node's: the host's measurement judges
    gpus = healthy_node(2)
    facts = node(gpus, extra_results=[{"vmid": 130, "devices": [
        {"index": 0, "name": "NVIDIA H200", "pci_bus_id": bus(7),
         "ceiling": ceiling(bf16=100.0)}]}])
    assert both(facts) == []


def test_evidence_without_nvidia_smi_and_with_thermal_counters():
    text, causes = ceiling_check.evidence({}, bus(0))
    assert (text, causes) == ("no nvidia-smi data for this GPU", [])
    facts = node([ceiling()], smi={0: {"reasons": ["hw_thermal_slowdown", "gpu_idle"],
                                       "counters": {"hw_thermal_slowdown": 2500000,
                                                    "gpu_idle": 9e9}}})
    text, causes = ceiling_check.evidence(facts, bus(0))
    assert "clock-event reasons active: hw_thermal_slowdown;" in text
    assert "since the driver loaded: hw_thermal_slowdown 2.5 s" in text
    assert causes == ["its clocks are held down by heat (hw_thermal_slowdown): check its "
                      "cooling and airflow"]


def test_host_audit_judges_ceiling_results_given_as_cuda(tmp_path):
    vm = hosts.vm_host(str(tmp_path / "vm"))
    gpus = healthy_node(3)
    gpus[2] = ceiling(gbs=3000.0)
    res = run_module(host_audit, {"root": vm["root"], "cuda": node(gpus)["cuda"]})
    assert res.get("failed") is not True, res
    found = [(f["id"], f["subject"]) for f in res["audit"]["findings"]
             if f["id"] in ("gpu_compute_low", "gpu_memory_bandwidth_low")]
    assert found == [("gpu_memory_bandwidth_low", bus(2))]


def test_host_audit_refuses_cuda_ceiling_without_the_cuda_pass(tmp_path):
    vm = hosts.vm_host(str(tmp_path / "vm"))
    res = run_module(host_audit, {"root": vm["root"], "cuda_ceiling": True})
    assert res["failed"] is True and "cuda_ceiling" in res["msg"]
    assert "unless cuda_probe is true" in res["msg"]


def test_host_audit_asks_the_cuda_pass_for_the_ceiling(monkeypatch):
    seen = []

    def audit_pass(runner, pct, containers, size_mb=256, **kw):
        seen.append(kw)
        return node(healthy_node(2))["cuda"]

    monkeypatch.setattr(cuda, "audit_pass", audit_pass)
    res = run_module(host_audit, {"root": "/", "cuda_probe": True, "cuda_ceiling": True})
    assert res.get("failed") is not True, res.get("msg")
    assert seen == [{"timeout": 30, "ceiling": True, "ceiling_cublas": False}]
    assert res["audit"]["cuda"][0]["devices"][1]["ceiling"]["bf16"]["tflops"] == 617.0
