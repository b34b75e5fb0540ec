"""Compute and memory ceiling on a real GPU host: the collection's CUDA probe with
--ceiling (the script cuda.py's child_source() ships, as ``python3 -``: device-to-device
copies, an FP32 FMA loop, BF16 and FP8 mma.sync loops, all PTX the driver JIT-compiles)
and, when torch imports, the same GPU through PyTorch: torch.matmul of BF16 8192 x 8192 x
8192 and a device-to-device ``copy_`` of the probe's copy size (read + write counted), 3
runs each, best counts. Where torch's cuBLAS is there (the libcublas its install ships,
``torch_cublas``) or ``--cublas`` names one, the probe also runs its BF16 GEMM through
that cuBLAS (``--ceiling-cublas``: the ``cublas bf16`` column, path ``cublas``, beside
``bf16 mma``, path ``ptx-mma``). Reads and computes only; no GPU setting is changed. Prints
the probe's JSON, then one JSON document with both sides, then a table (issue 43: the lent
H200).

    python3 bench/ceiling.py [--seconds 1.0] [--mb 1024] [--library libcuda.so.1]
                             [--no-torch] [--ceiling-cublas] [--cublas PATH] [--no-cublas]
                             [--out result.json]
"""

import argparse
import glob
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
RUNS = 3
MATMUL_N = 8192
MATMULS_PER_RUN = 10
COPIES_PER_RUN = 20
# Where a torch install's libcublas sits under its site-packages (cuda_cublas looks there
# too): the NVIDIA wheels of CUDA 12 and 13, older torch wheels' own folder.
TORCH_CUBLAS = ("nvidia/cublas/lib/libcublas.so.*", "nvidia/cu13/lib/libcublas.so.*",
                "torch/lib/libcublas.so.*")


def probe_source():
    """The probe's script as the modules ship it (``cuda.child_source()``), imported from
    this checkout through a temporary ``ansible_collections`` link."""
    links = tempfile.mkdtemp(prefix="gpuhost-ceiling.")
    try:
        os.makedirs(os.path.join(links, "ansible_collections", "gpuhost"))
        os.symlink(REPO, os.path.join(links, "ansible_collections", "gpuhost", "tuning"))
        sys.path.insert(0, links)
        from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import cuda
        return cuda.child_source()
    finally:
        shutil.rmtree(links)


def torch_cublas():
    """The libcublas torch's install ships (found without importing torch), or None."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return None
    site = os.path.dirname(os.path.dirname(spec.origin))
    for pattern in TORCH_CUBLAS:
        found = sorted(glob.glob(os.path.join(site, pattern)), reverse=True)
        if found:
            return found[0]
    return None


def run_probe(library, seconds, mb, cublas=None, ceiling_cublas=False):
    argv = [sys.executable, "-", "--library", library, "--ceiling",
            "--ceiling-seconds", str(seconds), "--ceiling-mb", str(mb)]
    if ceiling_cublas:
        argv.append("--ceiling-cublas")
        if cublas:
            argv += ["--cublas", cublas]
    started = time.perf_counter()
    proc = subprocess.run(argv, input=probe_source(), capture_output=True, text=True,
                          check=False, timeout=3600)
    if proc.stderr.strip():
        sys.stderr.write(proc.stderr)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["wall_seconds"] = round(time.perf_counter() - started, 3)
    return result


def torch_side(index, nbytes):
    """BF16 matmul TFLOPS and copy_ GB/s on GPU ``index`` (3 runs each, CUDA events)."""
    import torch
    dev = torch.device("cuda", index)
    out = {"torch": torch.__version__, "name": torch.cuda.get_device_name(dev)}
    with torch.cuda.device(dev):
        a = torch.randn(MATMUL_N, MATMUL_N, device=dev, dtype=torch.bfloat16)
        b = torch.randn(MATMUL_N, MATMUL_N, device=dev, dtype=torch.bfloat16)
        for _warm in range(3):
            torch.matmul(a, b)
        runs = []
        for _run in range(RUNS):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(
                enable_timing=True)
            start.record()
            for _mm in range(MATMULS_PER_RUN):
                torch.matmul(a, b)
            end.record()
            end.synchronize()
            seconds = start.elapsed_time(end) / 1e3
            runs.append(round(2.0 * MATMUL_N ** 3 * MATMULS_PER_RUN / seconds / 1e12, 1))
        out["bf16_matmul"] = {"n": MATMUL_N, "runs_tflops": runs, "tflops": max(runs)}
        del a, b
        src = torch.empty(nbytes, dtype=torch.uint8, device=dev).fill_(0x5A)
        dst = torch.empty_like(src)
        dst.copy_(src)
        runs = []
        for _run in range(RUNS):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(
                enable_timing=True)
            start.record()
            for _copy in range(COPIES_PER_RUN):
                dst.copy_(src)
            end.record()
            end.synchronize()
            seconds = start.elapsed_time(end) / 1e3
            runs.append(round(2.0 * nbytes * COPIES_PER_RUN / seconds / 1e9, 1))
        ok = bool((dst[:4096] == 0x5A).all()) and bool((dst[-4096:] == 0x5A).all())
        out["copy"] = {"bytes": nbytes, "runs_gbs": runs, "gbs": max(runs), "checked": ok}
        del src, dst
        torch.cuda.empty_cache()
    return out


def figure(part, key):
    if not isinstance(part, dict):
        return "-"
    if part.get("skipped"):
        return "skipped"
    if part.get("checked") is False:
        return "FAILED"
    return "%s" % part.get(key)


def table(probe, torch_results):
    rows = [("GPU", "cc", "SMs", "mem GB/s", "fp32 TF", "bf16 TF", "fp8 TF",
             "cublas bf16 TF", "torch bf16 TF", "torch copy GB/s", "bf16 probe/torch",
             "cublas/torch")]
    for dev in probe.get("devices", []):
        c = dev.get("ceiling") or {}
        t = torch_results.get(dev["index"]) or {}
        mm = (t.get("bf16_matmul") or {}).get("tflops")
        bf16 = (c.get("bf16") or {}).get("tflops")
        blas = (c.get("cublas_bf16") or {}).get("tflops")
        rows.append(("%d %s" % (dev["index"], dev.get("pci_bus_id")),
                     c.get("compute_capability", "-"), str(c.get("sm_count", "-")),
                     figure(c.get("memory"), "gbs"), figure(c.get("fp32"), "tflops"),
                     figure(c.get("bf16"), "tflops"), figure(c.get("fp8"), "tflops"),
                     figure(c.get("cublas_bf16"), "tflops"),
                     str(mm or t.get("error") or "-"),
                     str((t.get("copy") or {}).get("gbs", "-")),
                     "%.1f %%" % (100.0 * bf16 / mm) if bf16 and mm else "-",
                     "%.1f %%" % (100.0 * blas / mm) if blas and mm else "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--library", default="libcuda.so.1")
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--mb", type=int, default=1024)
    parser.add_argument("--no-torch", action="store_true")
    parser.add_argument("--ceiling-cublas", action="store_true",
                        help="the probe's cuBLAS GEMM even without torch's cuBLAS (the "
                        "probe then finds a libcublas itself)")
    parser.add_argument("--cublas", help="the libcublas the probe loads (default: torch's)")
    parser.add_argument("--no-cublas", action="store_true")
    parser.add_argument("--out")
    args = parser.parse_args()
    cublas = None if args.no_cublas else args.cublas or torch_cublas()
    use_cublas = not args.no_cublas and bool(cublas or args.ceiling_cublas)
    if use_cublas:
        print("cuBLAS for the probe's GEMM: %s" % (cublas or "found by the probe"))
    probe = run_probe(args.library, args.seconds, args.mb, cublas, use_cublas)
    print(json.dumps(probe, indent=1, sort_keys=True))
    torch_results = {}
    if not args.no_torch:
        try:
            import torch            # noqa: F401 (the comparison is optional)
            have_torch = torch.cuda.is_available()
        except ImportError:
            have_torch = False
        for dev in probe.get("devices", []) if have_torch else []:
            nbytes = ((dev.get("ceiling") or {}).get("memory") or {}).get("bytes") \
                or args.mb * (1 << 20)
            try:
                torch_results[dev["index"]] = torch_side(dev["index"], nbytes)
            except Exception as exc:         # report, keep the probe's figures
                torch_results[dev["index"]] = {"error": "%s: %s" % (type(exc).__name__, exc)}
    doc = {"probe": probe, "torch": torch_results}
    print(json.dumps({"torch": torch_results}, indent=1, sort_keys=True))
    print(table(probe, torch_results))
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(doc, handle, indent=1, sort_keys=True)
    return 1 if probe.get("error") else 0


if __name__ == "__main__":
    raise SystemExit(main())
