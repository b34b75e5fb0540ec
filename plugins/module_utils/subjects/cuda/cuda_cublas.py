# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ceiling probe's optional BF16 GEMM through cuBLAS (``--ceiling-cublas``): the
realistic compute figure, what a framework's matmul gets, beside the PTX loops' peak.

Part of the child script: ``cuda.child_source()`` joins ``cuda_driver``, ``cuda_ceiling``,
this file and ``cuda_child`` (the imports of the collection between them left out).
Standard library only; off unless asked, since it loads a library the host may have from a
framework install.

Where the library comes from (``find_cublas``, once per probe): ``--cublas PATH`` when
given (nothing else then); else ``libcublas.so.13`` / ``libcublas.so.12`` on the library
path (what the dynamic loader finds); else the copy a PyTorch install ships, in a bounded
list of places (CUBLAS_SITE_GLOBS, this Python's own site folders first, then the CUDA
toolkit's CUBLAS_TOOLKIT_GLOBS), never a walk of the disk. ``libcublasLt`` beside it is
loaded first (a wheel's libcublas needs it and finds it only through its folder).

Per GPU (``measure_cublas``, on the probe's context, made current on this thread: cuBLAS
uses the context current on the calling thread): ``cublasCreate_v2``, then ``cublasGemmEx``
C = A.B, A (m x k) and B (k x n) BF16, C FP32, ``CUBLAS_COMPUTE_32F``, column-major,
no transposes, of the largest square size from ``--cublas-n`` (8192) down that fits in free
memory (three matrices, CUBLAS_WORKSPACE_MB and MEMORY_RESERVE_MB beside them). A and B hold
small integers in a known pattern (copied in with ``cuMemcpyHtoD``); C is cleared to a NaN
first; after the timed runs a sample of C (CUBLAS_SAMPLE_COLUMNS columns, CUBLAS_SAMPLE_ROWS
rows each, corners included) is read back and compared with what the host computes (exact:
FP32 sums of small integer products). One warm-up GEMM, then GEMMs per run calibrated so
the runs together take about ``seconds``; the best run counts: TFLOPS = 2 m n k x GEMMs /
s. Handle destroyed and memory freed on every path.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ctypes
import glob
import os
import struct
import sys
import time

# cuda.child_source() leaves these imports out: the child script holds both files' source.
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda.cuda_driver import (
    MIB,
    SUCCESS,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda.cuda_ceiling import (
    CEILING_REPEATS,
    CEILING_SECONDS,
    MEMORY_RESERVE_MB,
    UNWRITTEN,
    measure_ceiling,
    timed_runs,
)

CUBLAS_NAMES = ("libcublas.so.13", "libcublas.so.12")
# Inside a site-packages folder: where the NVIDIA wheels (CUDA 12: nvidia/cublas/lib, CUDA
# 13: nvidia/cu13/lib) and older PyTorch wheels (torch/lib) put libcublas.
CUBLAS_SITE_DIRS = ("nvidia/cublas/lib", "nvidia/cu13/lib", "torch/lib")
# Site-packages folders beyond this Python's own (each pattern a fixed depth).
CUBLAS_SITE_GLOBS = (
    "/usr/local/lib/python3*/dist-packages", "/usr/local/lib/python3*/site-packages",
    "/usr/lib/python3/dist-packages", "/usr/lib/python3*/site-packages",
    "/opt/conda/lib/python3*/site-packages", "/opt/conda/envs/*/lib/python3*/site-packages",
    "/opt/*/lib/python3*/site-packages", "/root/.local/lib/python3*/site-packages",
    "/root/*/lib/python3*/site-packages", "/home/*/.local/lib/python3*/site-packages",
    "/home/*/*/lib/python3*/site-packages",
)
CUBLAS_TOOLKIT_GLOBS = ("/usr/local/cuda/lib64", "/usr/local/cuda-*/lib64",
                        "/usr/local/cuda/targets/*/lib")
CUBLAS_MAX_PLACES = 64          # folders looked in at most
CUBLAS_N = 8192                 # the GEMM's m = n = k on a GPU with room for it
CUBLAS_MIN_N = 256
CUBLAS_WORKSPACE_MB = 64        # what cuBLAS may take beside the matrices
CUBLAS_SAMPLE_COLUMNS = 8
CUBLAS_SAMPLE_ROWS = 8
CUBLAS_FILL_BYTES = 4 * MIB     # host buffer per cuMemcpyHtoD while filling A and B
# What the time limit allows (cuda.time_limit): loading the library (a wheel's libcublasLt
# is about 500 MB) once, and per GPU beside the timed runs the handle, the fills, the first
# GEMM and the check on the host.
CUBLAS_LOAD_SECONDS = 30
CUBLAS_GPU_SECONDS = 10
CUDA_R_32F, CUDA_R_16BF = 0, 14
CUBLAS_OP_N = 0
CUBLAS_COMPUTE_32F = 68
CUBLAS_GEMM_DEFAULT = -1
CUBLAS_STATUS_NAMES = {
    0: "CUBLAS_STATUS_SUCCESS", 1: "CUBLAS_STATUS_NOT_INITIALIZED",
    3: "CUBLAS_STATUS_ALLOC_FAILED", 7: "CUBLAS_STATUS_INVALID_VALUE",
    8: "CUBLAS_STATUS_ARCH_MISMATCH", 11: "CUBLAS_STATUS_MAPPING_ERROR",
    13: "CUBLAS_STATUS_EXECUTION_FAILED", 14: "CUBLAS_STATUS_INTERNAL_ERROR",
    15: "CUBLAS_STATUS_NOT_SUPPORTED", 16: "CUBLAS_STATUS_LICENSE_ERROR",
}
_cb = ctypes
CUBLAS_SIGNATURES = {
    "cublasCreate_v2": [_cb.POINTER(_cb.c_void_p)],
    "cublasDestroy_v2": [_cb.c_void_p],
    "cublasGemmEx": [_cb.c_void_p, _cb.c_int, _cb.c_int, _cb.c_int, _cb.c_int, _cb.c_int,
                     _cb.POINTER(_cb.c_float), _cb.c_uint64, _cb.c_int, _cb.c_int, _cb.c_uint64,
                     _cb.c_int, _cb.c_int, _cb.POINTER(_cb.c_float), _cb.c_uint64, _cb.c_int,
                     _cb.c_int, _cb.c_int, _cb.c_int],
}


class CublasError(Exception):
    """A cuBLAS call returned a status other than success."""

    def __init__(self, step, status):
        self.step = step
        self.status = status
        Exception.__init__(self, "%s returned %d %s" % (
            step, status, CUBLAS_STATUS_NAMES.get(status, "CUBLAS_STATUS_%d" % status)))


def cublas_places():
    """Folders that may hold a PyTorch install's libcublas, in the order looked in: this
    Python's site folders, then CUBLAS_SITE_GLOBS, then the toolkit's; at most
    CUBLAS_MAX_PLACES, each once."""
    sites = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    for pattern in CUBLAS_SITE_GLOBS:
        sites += sorted(glob.glob(pattern))
    places = [os.path.join(site, sub) for site in sites for sub in CUBLAS_SITE_DIRS]
    for pattern in CUBLAS_TOOLKIT_GLOBS:
        places += sorted(glob.glob(pattern))
    out = []
    for place in places:
        real = os.path.realpath(place)
        if real not in out and os.path.isdir(real):
            out.append(real)
    return out[:CUBLAS_MAX_PLACES]


def _loaded_path(fragment):
    """The file of a loaded library whose path holds ``fragment`` (/proc/self/maps)."""
    try:
        with open("/proc/self/maps") as handle:
            for line in handle:
                path = line.split(None, 5)[-1].strip()
                if fragment in os.path.basename(path):
                    return path
    except (IOError, OSError):
        pass
    return None


def _open_cublas(path):
    """ctypes.CDLL of ``path``, its libcublasLt loaded first (globally) when beside it."""
    folder, name = os.path.split(path)
    lt = os.path.join(folder, name.replace("libcublas.", "libcublasLt.", 1))
    if folder and os.path.exists(lt):
        ctypes.CDLL(lt, mode=ctypes.RTLD_GLOBAL)
    return ctypes.CDLL(path)


def find_cublas(explicit=None, names=CUBLAS_NAMES, places=None):
    """``{"lib": CDLL, "library": path}`` of the first libcublas that loads, else
    ``{"skipped": "no libcublas found (looked in ...)"}`` naming every place and what
    refused to load. ``explicit``: the only path tried (``--cublas``); ``places``: the
    folders (default ``cublas_places()``)."""
    looked, refused = [], []
    if explicit:
        candidates = [("path", explicit)]
        looked.append("%s (--cublas)" % explicit)
    else:
        candidates = [("name", n) for n in names]
        if names:
            looked.append("%s on the library path" % " and ".join(names))
        for place in cublas_places() if places is None else places:
            looked.append(place)
            candidates += [("path", os.path.join(place, n)) for n in names]
    for kind, where in candidates:
        if kind == "path" and not os.path.isfile(where):
            continue
        try:
            lib = _open_cublas(where)
        except OSError as exc:
            if kind == "path":
                refused.append("%s: %s" % (where, exc))
            continue
        path = where if kind == "path" else _loaded_path(where) or where
        return {"lib": lib, "library": os.path.realpath(path) if kind == "path" else path}
    skipped = "no libcublas found (looked in %s)" % ", ".join(looked)
    if refused:
        skipped += "; could not load %s" % "; ".join(refused)
    return {"skipped": skipped}


def _blas(lib, name):
    fn = getattr(lib, name)
    fn.restype = ctypes.c_int
    fn.argtypes = CUBLAS_SIGNATURES[name]
    return fn


def cublas_a(i, p):
    """A's element (row i, column p): -3..3, exact in BF16, periodic in p (7)."""
    return (i + 2 * p) % 7 - 3


def cublas_b(p, j):
    """B's element (row p, column j): -2..2, periodic in j (5)."""
    return (3 * p + j) % 5 - 2


def cublas_expected(i, j, k):
    """C's element (i, j): the exact sum over the k products (an FP32 sum of small integer
    products is exact)."""
    return float(sum(cublas_a(i, p) * cublas_b(p, j) for p in range(k)))


def _bf16(value):
    return struct.unpack("<I", struct.pack("<f", float(value)))[0] >> 16


def _fill_matrix(drv, ptr, rows, cols, element, period):
    """Column-major ``rows x cols`` BF16 matrix of ``element(r, c)``, whose columns repeat
    every ``period``: one period of columns built on the host, copied in repeatedly."""
    block = b"".join(struct.pack("<%dH" % rows, *[_bf16(element(r, c)) for r in range(rows)])
                     for c in range(period))
    column = rows * 2
    per_copy = max(1, CUBLAS_FILL_BYTES // len(block)) * period
    chunk = block * (per_copy // period)
    done = 0
    while done < cols:
        count = min(per_copy, cols - done)
        drv.call("cuMemcpyHtoD_v2", ptr + done * column, chunk, count * column)
        done += count


def _gemm_size(drv, largest):
    """The largest square size from ``largest`` halving down to CUBLAS_MIN_N whose
    matrices, workspace and reserve fit in free memory; (size, free bytes)."""
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    drv.call("cuMemGetInfo_v2", ctypes.byref(free), ctypes.byref(total))
    n = largest
    while n >= CUBLAS_MIN_N:
        need = n * n * (2 + 2 + 4) + (CUBLAS_WORKSPACE_MB + MEMORY_RESERVE_MB) * MIB
        if need <= free.value:
            return n, free.value
        n //= 2
    return None, free.value


def _check_gemm(drv, c, m, n, k):
    """None when the sampled elements of C hold the exact products, else the first wrong."""
    cols = sorted(set([0, n - 1] + [n * s // CUBLAS_SAMPLE_COLUMNS
                                    for s in range(CUBLAS_SAMPLE_COLUMNS)]))
    rows = sorted(set([0, m - 1] + [m * s // CUBLAS_SAMPLE_ROWS + s
                                    for s in range(CUBLAS_SAMPLE_ROWS)]))
    back = ctypes.create_string_buffer(m * 4)
    for j in cols:
        drv.call("cuMemcpyDtoH_v2", back, c + j * m * 4, m * 4)
        values = struct.unpack("<%df" % m, back.raw)
        for i in rows:
            want = cublas_expected(i, j, k)
            if values[i] != want:
                return "cublasGemmEx wrote %r at C[%d, %d], expected %r" % (values[i], i, j,
                                                                            want)
    return None


def gpu_ceiling(drv, gpu, seconds, ceiling_mb, found, largest, steps, label):
    """One GPU's ceiling (``cuda_ceiling.measure_ceiling`` on its context, ``gpu``: the
    probe's ``{dev, ctx}``) and, with a library ``found``, its GEMM through cuBLAS."""
    drv.call("cuCtxSetCurrent", gpu["ctx"])
    out = measure_ceiling(drv, gpu["dev"], seconds, ceiling_mb, steps=steps, label=label)
    if found is not None:
        add_cublas(out, found, drv, gpu["ctx"], seconds, largest, steps, label)
    return out


def add_cublas(ceiling, found, drv, ctx, seconds, largest, steps, label):
    """The probe's step for one GPU: ``ceiling["cublas_bf16"]`` measured on context ``ctx``
    (made current again: the ceiling's parts ran before) with the library ``found``."""
    steps("%s: cublas bf16 GEMM" % label)
    drv.call("cuCtxSetCurrent", ctx)
    major, minor = ceiling["compute_capability"].split(".")
    ceiling["cublas_bf16"] = measure_cublas(found, drv, int(major) * 10 + int(minor), seconds,
                                            largest=largest)


def measure_cublas(found, drv, cc, seconds=CEILING_SECONDS, repeats=CEILING_REPEATS,
                   largest=CUBLAS_N):
    """The BF16 GEMM through cuBLAS on the current context (compute capability ``cc`` as
    major x 10 + minor): ``{tflops, runs_tflops, checked, path, library, m, n, k,
    gemms_per_run, types}``; ``{checked: false, error}`` for a wrong result or a cuBLAS
    status; ``{skipped}`` without a library, before sm_80 or without room. A driver call
    that fails raises CudaError, after the handle is destroyed and the memory freed."""
    if found.get("skipped"):
        return {"skipped": found["skipped"]}
    out = {"path": "cublas", "library": found["library"]}
    if cc < 80:
        out["skipped"] = "BF16 GEMM through cuBLAS needs sm_80; this GPU is sm_%d" % cc
        return out
    size, free = _gemm_size(drv, largest)
    if size is None:
        out["skipped"] = ("only %d MiB of GPU memory free, the %d x %d GEMM needs %d MiB: "
                          "not measured" % (free // MIB, CUBLAS_MIN_N, CUBLAS_MIN_N,
                                            (CUBLAS_MIN_N * CUBLAS_MIN_N * 8) // MIB
                                            + CUBLAS_WORKSPACE_MB + MEMORY_RESERVE_MB))
        return out
    m = n = k = size
    out.update(m=m, n=n, k=k, types="bf16 x bf16 -> fp32, compute 32F")
    handle, owned = ctypes.c_void_p(), []
    try:
        create = _blas(found["lib"], "cublasCreate_v2")
        status = create(ctypes.byref(handle))
        if status != SUCCESS:
            handle = ctypes.c_void_p()
            raise CublasError("cublasCreate_v2", status)
        for nbytes in (m * k * 2, k * n * 2, m * n * 4):
            ptr = ctypes.c_uint64()
            drv.call("cuMemAlloc_v2", ctypes.byref(ptr), nbytes)
            owned.append(ptr.value)
        a, b, c = owned
        _fill_matrix(drv, a, m, k, cublas_a, 7)
        _fill_matrix(drv, b, k, n, cublas_b, 5)
        drv.call("cuMemsetD32_v2", c, UNWRITTEN, m * n)
        gemm, sync, clock = _blas(found["lib"], "cublasGemmEx"), drv.func("cuCtxSynchronize"), \
            time.perf_counter
        alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
        args = (handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, ctypes.byref(alpha), a,
                CUDA_R_16BF, m, b, CUDA_R_16BF, k, ctypes.byref(beta), c, CUDA_R_32F, m,
                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)

        def run(count):
            drv.call("cuCtxSynchronize")
            start = clock()
            for _gemm in range(count):
                status = gemm(*args)
                if status != SUCCESS:
                    raise CublasError("cublasGemmEx", status)
            code = sync()
            if code != SUCCESS:
                raise drv.error("cuCtxSynchronize", code)
            return clock() - start

        run(1)                  # cuBLAS picks and loads its kernel on the first call
        count, times = timed_runs(run, seconds / repeats, repeats)
        out["gemms_per_run"] = count
        error = _check_gemm(drv, c, m, n, k)
        if error:
            out.update(checked=False, error=error)
            return out
        rates = [round(2.0 * m * n * k * count / t / 1e12, 2) if t > 0 else None
                 for t in times]
        out.update(checked=True, runs_tflops=rates, tflops=max(r for r in rates if r))
        return out
    except CublasError as exc:
        out.update(checked=False, error=str(exc))
        return out
    finally:
        if handle.value is not None:
            _blas(found["lib"], "cublasDestroy_v2")(handle)
        for ptr in owned:
            drv.raw("cuMemFree_v2", ptr)
