"""The ceiling probe's optional BF16 GEMM through cuBLAS (cuda_cublas, ``--ceiling-cublas``)
against the stand-in libcublas.so.12 (tests/assets/fakecuda/fakecublas.c, linked against
the stand-in libcuda.so.1): its GEMM does the real product on small sizes and takes the time
FAKECUDA_CUBLAS_TFLOPS says (FAKECUDA_CUBLAS_WRONG: the product + 1)."""

import json
import os
import shutil
import subprocess
import sys

import fakecuda
import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import (
    cuda,
    cuda_ceiling,
    cuda_cublas,
    cuda_driver,
)

PROBE = None
QUICK = ("--ceiling", "--ceiling-seconds", "0.15", "--ceiling-mb", "8", "--cublas-n", "512")
SMALL = dict(sm_count=4, d2d_gbs=2, fp32_tflops=50, bf16_tflops=500, fp8_tflops=1000,
             cublas_tflops=0.25)


@pytest.fixture(scope="module")
def lib():
    return fakecuda.build()


@pytest.fixture(scope="module")
def blas():
    return fakecuda.build_cublas()


@pytest.fixture(scope="module", autouse=True)
def probe_file(tmp_path_factory):
    global PROBE
    path = tmp_path_factory.mktemp("probe") / "cuda-probe.py"
    path.write_text(cuda.child_source())
    PROBE = str(path)
    return PROBE


def run(lib, *args, **settings):
    env = fakecuda.clean_environ()
    env.update(fakecuda.env(**dict(SMALL, **settings)))
    proc = subprocess.run([sys.executable, PROBE, "--library", lib] + list(args),
                          env=env, capture_output=True, text=True, timeout=240, check=False)
    assert proc.stderr == ""
    return proc.returncode, json.loads(proc.stdout)


def log_lines(path):
    with open(path) as handle:
        return [line.split(" calls=")[0].strip() for line in handle]


def test_the_gemm_s_rate_follows_the_stand_in_and_its_result_is_checked(lib, blas, tmp_path):
    log = str(tmp_path / "fake.log")
    rc, res = run(lib, *QUICK, "--ceiling-cublas", "--cublas", blas, log=log)
    assert rc == 0 and res["error"] is None, res
    c = res["devices"][0]["ceiling"]
    got = c["cublas_bf16"]
    assert got["checked"] is True, got
    assert (got["path"], got["library"]) == ("cublas", os.path.realpath(blas))
    assert (got["m"], got["n"], got["k"]) == (512, 512, 512)
    assert got["types"] == "bf16 x bf16 -> fp32, compute 32F"
    # 1 ms a GEMM: the stand-in's own work (comparing A and B, writing C) fits in it
    # never above the stand-in's rate; below it only by a busy machine (best of 3)
    # (the stand-in computes the product on the CPU: a busy test machine slows it, seen at
    # 44 % of the rate with 5 processes on 2 cores; what counts is the arithmetic)
    assert 0.25 * 0.3 <= got["tflops"] <= 0.25 * 1.01 and len(got["runs_tflops"]) == 3
    assert max(got["runs_tflops"]) == got["tflops"] and got["gemms_per_run"] >= 1
    assert c["bf16"]["path"] == "ptx-mma"          # each figure says which path made it
    lines = log_lines(log)
    assert "contexts=0 device_allocs=0 host_allocs=0 modules=0" in lines
    (cublas_line,) = [line for line in lines if line.startswith("cublas ")]
    assert cublas_line.startswith("cublas handles=0 gemms=")
    # the warm-up, the calibration's runs and the three timed runs
    assert int(cublas_line.split("gemms=")[1]) > 1 + 3 * got["gemms_per_run"]


def test_a_wrong_product_is_refused_with_no_figure(lib, blas):
    rc, res = run(lib, *QUICK, "--ceiling-cublas", "--cublas", blas, cublas_wrong=1)
    assert rc == 0 and res["error"] is None       # CUDA works: the figure is refused
    got = res["devices"][0]["ceiling"]["cublas_bf16"]
    want = cuda_cublas.cublas_expected(0, 0, 512)
    assert got["checked"] is False and "tflops" not in got
    assert got["error"] == "cublasGemmEx wrote %r at C[0, 0], expected %r" % (want + 1, want)


def test_a_cublas_status_is_the_part_s_error_and_everything_is_freed(lib, blas, tmp_path):
    log = str(tmp_path / "fake.log")
    rc, res = run(lib, *QUICK, "--ceiling-cublas", "--cublas", blas, cublas_status=13,
                  log=log)
    assert rc == 0 and res["error"] is None
    got = res["devices"][0]["ceiling"]["cublas_bf16"]
    assert got["checked"] is False
    assert got["error"] == "cublasGemmEx returned 13 CUBLAS_STATUS_EXECUTION_FAILED"
    assert "contexts=0 device_allocs=0 host_allocs=0 modules=0" in log_lines(log)
    assert "cublas handles=0 gemms=0" in log_lines(log)


def test_no_library_is_skipped_naming_where_it_looked(lib, tmp_path):
    missing = str(tmp_path / "none" / "libcublas.so.12")
    rc, res = run(lib, *QUICK, "--ceiling-cublas", "--cublas", missing)
    assert rc == 0 and res["error"] is None
    c = res["devices"][0]["ceiling"]
    assert c["cublas_bf16"] == {"skipped": "no libcublas found (looked in %s (--cublas))"
                                           % missing}
    assert c["bf16"]["checked"] is True           # the PTX parts are measured all the same
    found = cuda_cublas.find_cublas(names=(), places=[str(tmp_path)])
    assert found == {"skipped": "no libcublas found (looked in %s)" % tmp_path}
    found = cuda_cublas.find_cublas(names=("libcublas.so.99",), places=[str(tmp_path)])
    assert found["skipped"] == ("no libcublas found (looked in libcublas.so.99 on the "
                                "library path, %s)" % tmp_path)


def test_a_file_that_does_not_load_is_named_with_the_loader_s_error(tmp_path):
    (tmp_path / "libcublas.so.12").write_text("not a library")
    found = cuda_cublas.find_cublas(names=("libcublas.so.12",), places=[str(tmp_path)])
    assert "; could not load %s/libcublas.so.12: " % tmp_path in found["skipped"]


def test_a_pytorch_install_s_copy_is_found_in_its_site_folder(blas, tmp_path, monkeypatch):
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    wheel = site / "nvidia" / "cublas" / "lib"
    wheel.mkdir(parents=True)
    (site / "torch" / "lib").mkdir(parents=True)
    shutil.copy(blas, str(wheel / "libcublas.so.12"))
    monkeypatch.setattr(sys, "path", ["/nowhere", str(site)])
    monkeypatch.setattr(cuda_cublas, "CUBLAS_SITE_GLOBS", (str(tmp_path / "*" / "none"),))
    monkeypatch.setattr(cuda_cublas, "CUBLAS_TOOLKIT_GLOBS", ())
    assert cuda_cublas.cublas_places() == [str(wheel), str(site / "torch" / "lib")]
    found = cuda_cublas.find_cublas(names=("libcublas.so.12",),
                                    places=cuda_cublas.cublas_places()[:1])
    assert found["library"] == str(wheel / "libcublas.so.12")
    assert found["lib"].cublasGemmEx is not None


def test_the_option_off_never_loads_the_library(lib, blas, tmp_path):
    log = str(tmp_path / "fake.log")
    rc, res = run(lib, *QUICK, "--cublas", blas, log=log)
    assert rc == 0 and "cublas_bf16" not in res["devices"][0]["ceiling"]
    assert not [line for line in log_lines(log) if line.startswith("cublas ")]
    rc, res = run(lib, "--ceiling-cublas", "--cublas", blas, log=log)     # no --ceiling
    assert rc == 0 and "ceiling" not in res["devices"][0]
    assert not [line for line in log_lines(log) if line.startswith("cublas ")]


def test_before_ampere_or_without_room_the_gemm_is_skipped_with_why(lib, blas):
    rc, res = run(lib, *QUICK, "--ceiling-cublas", "--cublas", blas,
                  devices="0000:01:00.0,0000:02:00.0", cc="7.5,9.0", free_mb="8000,300")
    assert rc == 0
    turing, short = (d["ceiling"]["cublas_bf16"] for d in res["devices"])
    assert turing["skipped"] == "BF16 GEMM through cuBLAS needs sm_80; this GPU is sm_75"
    assert short["skipped"] == ("only 300 MiB of GPU memory free, the 256 x 256 GEMM needs "
                                "320 MiB: not measured")
    assert short["library"] == os.path.realpath(blas)


def test_the_size_halves_until_it_fits(lib, blas):
    rc, res = run(lib, *QUICK[:-1], "1024", "--ceiling-cublas", "--cublas", blas,
                  free_mb=323, cublas_tflops=2)
    got = res["devices"][0]["ceiling"]["cublas_bf16"]
    assert (got["m"], got["checked"]) == (512, True), got


def test_the_expected_products_are_the_patterns_sums():
    k = 64
    want = sum(cuda_cublas.cublas_a(3, p) * cuda_cublas.cublas_b(p, 5) for p in range(k))
    assert cuda_cublas.cublas_expected(3, 5, k) == float(want)
    assert {cuda_cublas.cublas_a(i, 0) for i in range(7)} == set(range(-3, 4))
    assert all(cuda_cublas.cublas_a(2, p) == cuda_cublas.cublas_a(2, p + 7) for p in range(9))
    assert all(cuda_cublas.cublas_b(p, 1) == cuda_cublas.cublas_b(p, 6) for p in range(9))


def test_probe_argv_and_time_limit_carry_the_option():
    argv = cuda.probe_argv(ceiling=True, ceiling_cublas=True, cublas="/x/libcublas.so.12")
    assert argv[-3:] == ["--ceiling-cublas", "--cublas", "/x/libcublas.so.12"]
    assert "--ceiling-cublas" not in cuda.probe_argv(ceiling=True)
    assert "--ceiling-cublas" not in cuda.probe_argv(ceiling_cublas=True)
    base = cuda.time_limit(30, gpus=2, ceiling=True)
    assert cuda.time_limit(30, gpus=2, ceiling=True, ceiling_cublas=True) == base + (
        cuda_cublas.CUBLAS_LOAD_SECONDS + 2 * (2 + cuda_cublas.CUBLAS_GPU_SECONDS))


def test_the_child_script_fits_a_pipe_s_buffer_and_keeps_every_string():
    """A child that exits without reading stdin (pct exec into a stopped container) must
    not break the pipe: the script is at most CHILD_SOURCE_LIMIT bytes; dropping docstrings,
    comment and blank lines leaves the kernels' PTX text as it was."""
    source = cuda.child_source()
    assert len(source.encode("utf-8")) <= cuda.CHILD_SOURCE_LIMIT
    space = {"__name__": "gpuhost_child"}
    exec(compile(source, "cuda-probe", "exec"), space)      # noqa: S102 (our own script)
    assert space["mma_ptx"]("bf16") == cuda_ceiling.mma_ptx("bf16")
    assert space["LATENCY_PTX"] == cuda_driver.LATENCY_PTX
    assert '"""' not in source and "\n# " not in source
