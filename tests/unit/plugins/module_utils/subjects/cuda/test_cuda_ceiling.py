"""The CUDA probe's compute and memory ceiling (cuda_ceiling, ``--ceiling``) against the
stand-in libcuda.so.1, whose device-to-device copies and probe kernels take the time their
configured rates say (FAKECUDA_D2D_GBS, FAKECUDA_*_TFLOPS, FAKECUDA_RATE_SCALE per GPU) and
write what the real kernels write (or result + 1 with FAKECUDA_WRONG_RESULT); and every
kernel's PTX against the real PTX assembler where one is installed."""

import ast
import inspect
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
)

PROBE = None                            # the child script as a file (see probe_file)
EIGHT = ",".join("0000:%02x:00.0" % (0x18 + 0x10 * i) for i in range(8))
QUICK = ("--ceiling", "--ceiling-seconds", "0.15", "--ceiling-mb", "8")
# Small grids and copies the stand-in does quickly; rates it can keep (its memmove of 8 MiB
# takes about a millisecond, the set rate's copy 8 ms).
SMALL = dict(sm_count=4, d2d_gbs=2, fp32_tflops=50, bf16_tflops=500, fp8_tflops=1000)


@pytest.fixture(scope="module")
def lib():
    return fakecuda.build()


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


def leaks(path):
    with open(path) as handle:
        return [line.split(" calls=")[0] for line in handle]


def near(value, want, below=0.5, above=0.01):
    """The stand-in can only be slower than set, never faster: a figure above the rate is a
    bug of the arithmetic, one below it a busy test machine (best of 3 on 2 cores shared
    with other test processes was seen 13 % low, and far lower before timed_runs), so the margin
    below is wide: what this test proves is the arithmetic (a unit or a factor wrong is far
    outside it) and that a figure is never above the rate."""
    return want * (1 - below) <= value <= want * (1 + above)


def test_every_figure_follows_the_stand_in_s_rate_and_is_checked(lib, tmp_path):
    log = str(tmp_path / "fake.log")
    rc, res = run(lib, *QUICK, log=log)
    assert rc == 0 and res["error"] is None, res
    c = res["devices"][0]["ceiling"]
    assert (c["compute_capability"], c["sm_count"]) == ("9.0", 4)
    mem = c["memory"]
    assert mem["checked"] is True and mem["path"] == "ptx-dtod"
    assert (mem["bytes"], mem["limited_by"]) == (8 << 20, "asked")
    assert near(mem["gbs"], 2.0) and len(mem["runs_gbs"]) == 3 and max(mem["runs_gbs"]) == \
        mem["gbs"]
    for part, want, path in (("fp32", 50, "ptx-fma"), ("bf16", 500, "ptx-mma"),
                             ("fp8", 1000, "ptx-mma")):
        got = c[part]
        assert got["checked"] is True and got["path"] == path, got
        assert near(got["tflops"], want), (part, got)
        assert got["threads"] == 4 * cuda_ceiling.BLOCKS_PER_SM * cuda_ceiling.BLOCK
    assert 0.4 < c["seconds"] < 10
    assert leaks(log) == ["contexts=0 device_allocs=0 host_allocs=0 modules=0"]


def test_a_kernel_that_writes_a_wrong_result_or_a_copy_that_copies_nothing_fails(lib):
    rc, res = run(lib, *QUICK, wrong_result=1)
    assert rc == 0 and res["error"] is None      # CUDA works: the figures are refused
    c = res["devices"][0]["ceiling"]
    for part in ("memory", "fp32", "bf16", "fp8"):
        assert c[part]["checked"] is False, (part, c[part])
        assert "tflops" not in c[part] and "gbs" not in c[part]
    assert c["memory"]["error"] == ("the device-to-device copy left 0x00000000 at byte 0, "
                                    "expected 0x5a3c0f96")
    assert c["fp32"]["error"] == "fp32 kernel wrote %r at thread 0, expected %r" % (
        cuda_ceiling.fma_expected(0, c["fp32"]["iters"]) + 1,
        cuda_ceiling.fma_expected(0, c["fp32"]["iters"]))
    assert c["bf16"]["error"].startswith("bf16 kernel wrote ")
    assert "at thread 0 (element 0), expected" in c["fp8"]["error"]


def test_too_little_free_memory_skips_the_copy_with_the_reason(lib):
    rc, res = run(lib, "--ceiling", "--ceiling-seconds", "0.1", free_mb=300)
    assert rc == 0
    c = res["devices"][0]["ceiling"]
    assert c["memory"] == {"skipped": "only 300 MiB of GPU memory free, the device-to-device "
                                      "copy needs 2 x 64 MiB and 256 MiB beside them: not "
                                      "measured"}
    assert c["fp32"]["checked"] is True         # the kernels need little memory


def test_less_free_memory_than_asked_copies_what_it_allows_and_says_so(lib):
    rc, res = run(lib, "--ceiling", "--ceiling-seconds", "0.1", "--ceiling-mb", "1024",
                  free_mb=400, d2d_gbs=50)
    assert rc == 0
    mem = res["devices"][0]["ceiling"]["memory"]
    assert (mem["bytes"], mem["limited_by"], mem["checked"]) == (72 << 20, "free memory", True)


def test_turing_skips_both_tensor_core_loops_and_ampere_fp8(lib):
    rc, res = run(lib, *QUICK, devices="0000:01:00.0,0000:02:00.0", cc="7.5,8.6")
    assert rc == 0
    turing, ampere = (d["ceiling"] for d in res["devices"])
    assert turing["bf16"] == {"skipped": "bf16 mma needs sm_80; this GPU is sm_75"}
    assert turing["fp8"] == {"skipped": "fp8 mma needs sm_89; this GPU is sm_75"}
    assert turing["fp32"]["checked"] is True and turing["compute_capability"] == "7.5"
    assert ampere["bf16"]["checked"] is True
    assert ampere["fp8"] == {"skipped": "fp8 mma needs sm_89; this GPU is sm_86"}


def _eight_shares(lib):
    """One probe of eight stand-in GPUs, GPU 3 at 0.8 of the rate: each part's figures and
    each GPU's share of the node's best (percent)."""
    rc, res = run(lib, "--ceiling", "--ceiling-seconds", "0.12", "--ceiling-mb", "4",
                  devices=EIGHT, rate_scale="1,1,1,0.8,1", sm_count=2)
    assert rc == 0 and len(res["devices"]) == 8
    out = {}
    for part, key in (("memory", "gbs"), ("fp32", "tflops"), ("bf16", "tflops"),
                      ("fp8", "tflops")):
        figures = [d["ceiling"][part][key] for d in res["devices"]]
        out[part] = (figures, [round(100.0 * f / max(figures)) for f in figures])
    return out


def _slow_one_shows(shares):
    return 70 <= shares[3] <= 82 and all(s >= 85 for i, s in enumerate(shares) if i != 3)


def test_one_gpu_of_eight_at_0_8_shows_80_percent_of_its_siblings(lib):
    """80 % when the machine is quiet (79-81 measured alone). A busy one slows a copy or a
    kernel of any GPU now and then (CI's controller-next lane beside molecule's containers
    saw a healthy sibling at 73 %, and once at 55 % in one part while the other three parts
    of the same probe were clean): up to four probes, and each part must show it in one of
    them (a GPU 3 that is not at about 80 % in a part never shows it there)."""
    seen = []
    shown = set()
    for _attempt in range(4):
        parts = _eight_shares(lib)
        seen.append(parts)
        shown |= set(part for part, (_figures, shares) in parts.items()
                     if _slow_one_shows(shares))
        if shown == set(parts):
            return
    raise AssertionError("GPU 3 never stood out at about 80 %% in %s over %d probes: %s" % (
        ", ".join(sorted(set(seen[0]) - shown)), len(seen), seen))


def test_a_driver_refusing_the_ptx_skips_the_kernels_with_the_code(lib, tmp_path):
    log = str(tmp_path / "fake.log")
    rc, res = run(lib, *QUICK, fail="cuModuleLoadData:222", log=log)
    assert rc == 0 and res["error"] is None
    c = res["devices"][0]["ceiling"]
    assert c["memory"]["checked"] is True
    for part in ("fp32", "bf16", "fp8"):
        assert "cuModuleLoadData returned 222 CUDA_ERROR_UNSUPPORTED_PTX_VERSION" in \
            c[part]["skipped"]
    assert leaks(log) == ["contexts=0 device_allocs=0 host_allocs=0 modules=0"]


def test_a_failing_launch_is_the_gpu_error_and_everything_is_freed(lib, tmp_path):
    log = str(tmp_path / "fake.log")
    rc, res = run(lib, *QUICK, fail="cuLaunchKernel:719", log=log)
    assert rc == 1
    dev = res["devices"][0]
    assert dev["error"]["step"] == "cuLaunchKernel" and dev["error"]["code"] == 719
    assert res["step"] == "done"
    assert leaks(log) == ["contexts=0 device_allocs=0 host_allocs=0 modules=0"]


def test_a_busy_gpu_has_no_ceiling_and_says_why(lib):
    rc, res = run(lib, *QUICK, devices="0000:01:00.0,0000:02:00.0", busy="1,0")
    assert rc == 0
    first, second = res["devices"]
    assert first["ceiling"]["skipped"].startswith("busy: exclusive-process")
    assert second["ceiling"]["fp32"]["checked"] is True


def test_without_ceiling_nothing_is_launched_or_copied(lib, tmp_path):
    log = str(tmp_path / "fake.log")
    rc, res = run(lib, log=log)
    assert rc == 0 and "ceiling" not in res["devices"][0]
    with open(log) as handle:
        calls = handle.read()
    assert "cuLaunchKernel" not in calls and "cuMemcpyDtoD_v2" not in calls


def test_the_mma_input_places_every_element_of_a_and_b_once():
    """The fragment layout as the PTX ISA draws it: 32 lanes x 4 A registers cover the
    16 x K matrix once, 32 x 2 B registers the K x 8 one."""
    for kind, depth, per in (("bf16", 16, 2), ("fp8", 32, 4)):
        a_seen, b_seen = set(), set()
        for lane in range(32):
            group, tig = lane // 4, lane % 4
            for r in range(4):
                for i in range(per):
                    a_seen.add((group + 8 * (r % 2), tig * per + i + depth // 2 * (r >= 2)))
            for r in range(2):
                for i in range(per):
                    b_seen.add((tig * per + i + depth // 2 * r, group))
        assert len(a_seen) == 16 * depth and len(b_seen) == depth * 8
        assert len(cuda_ceiling.mma_input(kind)) == 32 * cuda_ceiling.MMA_WORDS


def test_flops_are_counted_from_the_kernels():
    # one iteration: 8 chains x 15 FMAs x 2, plus the 7 adds of the chains' sum
    assert cuda_ceiling.fma_flops(1, 1) == 8 * 15 * 2 + 7
    # one warp, one iteration: 2 rounds x (+B, -B) x 4 chains + 4 final, 2 x 16 x 8 x 16 each,
    # plus 3 adds per accumulator element
    assert cuda_ceiling.mma_flops("bf16", 32, 1) == 20 * 4096 + 32 * 4 * 3
    assert cuda_ceiling.mma_flops("fp8", 32, 1) == 20 * 8192 + 32 * 4 * 3
    assert cuda_ceiling.fma_expected(5, 2) == sum(5 + k for k in range(8))
    assert cuda_ceiling.fma_expected(5, 1) == sum(3.0 - (5 + k) for k in range(8))


def test_probe_argv_and_time_limit_carry_the_ceiling():
    argv = cuda.probe_argv(ceiling=True, ceiling_seconds=0.5, ceiling_mb=256)
    assert argv[-5:] == ["--ceiling", "--ceiling-seconds", "0.5", "--ceiling-mb", "256"]
    assert "--ceiling" not in cuda.probe_argv()
    base = cuda.time_limit(30, gpus=2)
    # per GPU: 4 parts x (4 x 1 s + 1 s: calibration, runs, retakes), and 4 x 1 GiB at 1 GB/s
    assert cuda.time_limit(30, gpus=2, ceiling=True) == base + int(2 * (20 + 4 * 1.073741824)
                                                                   + 1)


def test_the_child_script_s_files_define_no_name_twice():
    """cuda_driver, cuda_ceiling and cuda_child share one namespace in the child script."""
    seen = {}
    for module in cuda.CHILD_FILES:
        for node in ast.parse(inspect.getsource(module)).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [n.id for t in node.targets for n in ast.walk(t)
                         if isinstance(n, ast.Name)]
            else:
                continue
            for name in names:
                seen.setdefault(name, []).append(module.__name__.rsplit(".", 1)[1])
    assert cuda.CHILD_FILES[1] is cuda_ceiling
    assert {k: v for k, v in seen.items() if len(v) > 1 and k != "__metaclass__"} == {}


class Recorder:
    """A Runner that answers ``pct list`` with one running container and records argv."""

    def __init__(self):
        self.calls = []

    def run(self, argv, check=True, data=None, timeout=None, **unused):
        self.calls.append((list(argv), timeout))
        if argv[1:] == ["list"]:
            return 0, "VMID Status Lock Name\n129 running  ct129\n", ""
        return 1, "", "no result"


def test_the_audit_pass_asks_the_host_and_each_container_for_the_ceiling():
    runner = Recorder()
    cuda.audit_pass(runner, "/usr/sbin/pct", [{"vmid": 129, "gpu": True}], ceiling=True,
                    ceiling_seconds=0.5)
    host, listing, container = runner.calls
    assert listing[0] == ["/usr/sbin/pct", "list"]
    for argv, limit in (host, container):
        assert argv[argv.index("--ceiling-seconds") + 1] == "0.5"
        assert "--ceiling" in argv and limit > cuda.time_limit(30, gpus=8, bandwidth=False)
    plain = Recorder()
    cuda.audit_pass(plain, None, [])
    assert "--ceiling" not in plain.calls[0][0]


def _ptx(kind):
    return cuda_ceiling.fma_ptx() if kind == "fp32" else cuda_ceiling.mma_ptx(kind)


def _ptxas_knows(arch):
    proc = subprocess.run(["ptxas", "--help"], capture_output=True, text=True, check=False)
    return arch in proc.stdout


LOWEST = {"fp32": 50, "bf16": 80, "fp8": 89}
ARCHS = ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120")


@pytest.mark.skipif(not shutil.which("ptxas"), reason="no PTX assembler (ptxas) installed")
@pytest.mark.parametrize("kind,arch", [(kind, arch) for kind in ("fp32", "bf16", "fp8")
                                       for arch in ARCHS if int(arch[3:]) >= LOWEST[kind]])
def test_every_kernel_assembles_for_every_architecture_it_applies_to(tmp_path, kind, arch):
    """What the driver's JIT does at cuModuleLoadData, done by the toolkit's own assembler
    (CUDA 13's ptxas: Turing, sm_75, and newer) for each architecture the probe runs the
    kernel on (its compute capability at least the kernel's .target; the probe skips the
    others, see test_turing_skips_both_tensor_core_loops_and_ampere_fp8)."""
    if arch in ("sm_100", "sm_120") and not _ptxas_knows(arch):
        pytest.skip("this ptxas does not know %s" % arch)
    ptx = tmp_path / ("%s.ptx" % kind)
    ptx.write_text(_ptx(kind))
    proc = subprocess.run(["ptxas", "-arch=%s" % arch, str(ptx), "-o", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert os.path.getsize(tmp_path / "o") > 0


def test_a_stalled_calibration_is_taken_again_not_reported_as_a_slow_gpu():
    """A host busy for a moment during the calibration (its first run stalls 0.2 s) would
    leave a count of 1 and runs dominated by fixed costs; timed_runs scales the count from
    the best run and takes them again."""
    calls = []

    def run(count):                 # 1 us a unit, 20 us fixed; the first call stalls
        calls.append(count)
        return 0.2 if len(calls) == 1 else 20e-6 + count * 1e-6

    count, times = cuda_ceiling.timed_runs(run, 0.01, 3)
    assert calls[0] == 1 and count >= 8000, calls
    assert min(times) >= 0.01 * cuda_ceiling.SHORT_RUN
    # a quiet calibration takes no retake: one pass of 3 runs after it
    calls[:] = []
    count, times = cuda_ceiling.timed_runs(lambda c: calls.append(c) or c * 1e-6, 0.01, 3)
    assert len(times) == 3 and calls[-3:] == [count] * 3 and 9000 <= count <= 11000
