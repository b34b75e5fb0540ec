# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prove that CUDA works and measure the PCIe path: the CUDA driver API through ctypes.

Standard library only and free of Ansible imports. The probe is four files run as one
script (``cuda.child_source()`` joins them, the imports between them left out):
``cuda_driver`` (the binding, the sysfs readers, each GPU's link ceiling), ``cuda_ceiling``
(the ceiling parts), ``cuda_cublas`` (the ceiling's optional cuBLAS GEMM) and this one (the
probe and its ``main``). It runs as a child of the module (``python3 - [options]`` with the
script on stdin, ``cuda.probe_host``), in a container as ``pct exec <vmid> -- python3 -
[options]`` (``cuda.probe_container``), or as a plain script, and prints one JSON document.

The driver is never called in the caller's process: a library whose ``cuInit`` never
returns, or that crashes, takes only the child with it. The child gets a time limit
(``time_limit``: ``timeout`` seconds for loading, ``cuInit`` and the device listing, plus
what the asked copies take at ``MIN_COPY_GBS``) and is killed with its process group when it
has not answered by then (the runner's ``timeout``). With ``--progress`` it names each step
on stderr before taking it (``STEP_PREFIX``), so a child killed at the limit or by a signal
is reported with the step it was in; ``faulthandler`` names a fatal signal on stderr where
the exit status cannot (``pct exec``).

What it does: loads the driver library (``libcuda.so.1``: no toolkit, no framework), calls
``cuInit(0)``, and for every GPU reads name, PCI bus id and total memory and creates a
context (the step that fails when a GPU is unusable although listed). On request it times
pinned host-to-device and device-to-host copies (best of N, wall clock around each copy
followed by a synchronise; the data is checked after the round trip) and the peer-to-peer
matrix; with ``--ceiling`` each GPU's compute and memory ceiling (and ``--ceiling-cublas``
a BF16 GEMM through cuBLAS). Plain device memory (``cuMemAlloc``) and pinned host memory
(``cuMemHostAlloc``) only, never managed memory; everything allocated is freed; no GPU
setting is changed. A GPU without enough free memory for the copy is skipped with the
reason; a GPU in exclusive-process compute mode that another process holds is ``busy``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ctypes
import json
import os
import sys
import time

# cuda.child_source() leaves this import out: the child script holds cuda_driver's source.
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda.cuda_driver import (
    ATTR_COMPUTE_MODE,
    cause_for,
    COMPUTE_MODES,
    CudaError,
    DEFAULT_LIBRARY,
    DEVICE_UNAVAILABLE,
    Driver,
    LATENCY_KERNEL,
    LATENCY_PTX,
    MIB,
    NO_DEVICE,
    normalize_bus_id,
    nvidia_gpus,
    OUT_OF_MEMORY,
    PEER_ACCESS_ALREADY_ENABLED,
    read_link,
    STEP_PREFIX,
    SUCCESS,
)
# cuda.child_source() leaves this import out too: the script holds cuda_ceiling's source.
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda.cuda_ceiling import (
    CEILING_MB,
    CEILING_SECONDS,
)
# cuda.child_source() leaves this import out too: the script holds cuda_cublas's source.
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda.cuda_cublas import (
    CUBLAS_N,
    find_cublas,
    gpu_ceiling,
)


class Steps(object):
    """The probe's steps: ``steps(name)`` before each one keeps it as ``last`` and passes it
    to ``report`` (the child's stderr line, see ``main``), so whoever waits on the child
    knows where it stopped. A new measurement names its steps the same way."""

    def __init__(self, report=None):
        self.report = report
        self.last = None

    def __call__(self, name):
        self.last = name
        if self.report is not None:
            self.report(name)


def _gpu(dev):
    """``GPU 0 (0000:a1:00.0)``, the bus id once known."""
    if dev.get("pci_bus_id"):
        return "GPU %d (%s)" % (dev["index"], dev["pci_bus_id"])
    return "GPU %d" % dev["index"]


def _best_gbs(seconds, nbytes):
    best = min(seconds)
    return round(nbytes / best / 1e9, 2) if best > 0 else None


def _timed(drv, name, args, repeats):
    """Wall clock of ``repeats`` synchronous copies after one warm-up, each synchronised."""
    drv.call(name, *args)
    drv.call("cuCtxSynchronize")
    times = []
    for _attempt in range(repeats):
        start = time.perf_counter()
        drv.call(name, *args)
        drv.call("cuCtxSynchronize")
        times.append(time.perf_counter() - start)
    return times


def _pct(gbs, ceiling):
    return round(100.0 * gbs / ceiling, 1) if gbs and ceiling else None


def measure_copies(drv, dev, nbytes, repeats, steps=None):
    """Pinned H2D and D2H of ``nbytes`` on the current context; frees what it allocates."""
    steps = steps or Steps()
    host = ctypes.c_void_p()
    dptr = ctypes.c_uint64()
    try:
        code = drv.raw("cuMemHostAlloc", ctypes.byref(host), nbytes, 0)
        if code == OUT_OF_MEMORY:
            dev["skipped"] = "could not pin %d MiB of host memory (CUDA_ERROR_OUT_OF_MEMORY)" \
                % (nbytes // MIB)
            host = ctypes.c_void_p()
            return
        if code != SUCCESS:
            host = ctypes.c_void_p()
            raise drv.error("cuMemHostAlloc", code)
        drv.call("cuMemAlloc_v2", ctypes.byref(dptr), nbytes)
        edge = min(4096, nbytes // 2)
        pattern = os.urandom(edge) + os.urandom(edge)
        ctypes.memmove(host.value, pattern[:edge], edge)
        ctypes.memmove(host.value + nbytes - edge, pattern[edge:], edge)
        steps("%s: host-to-device copies" % _gpu(dev))
        h2d = _timed(drv, "cuMemcpyHtoD_v2", (dptr.value, host.value, nbytes), repeats)
        ctypes.memset(host.value, 0, edge)
        ctypes.memset(host.value + nbytes - edge, 0, edge)
        steps("%s: device-to-host copies" % _gpu(dev))
        d2h = _timed(drv, "cuMemcpyDtoH_v2", (host.value, dptr.value, nbytes), repeats)
        back = ctypes.string_at(host.value, edge) + \
            ctypes.string_at(host.value + nbytes - edge, edge)
        if back != pattern:
            raise CudaError("verify", None, "DATA_MISMATCH",
                            "the data copied back from the GPU differs from what was sent")
        dev["h2d_gbs"] = _best_gbs(h2d, nbytes)
        dev["d2h_gbs"] = _best_gbs(d2h, nbytes)
    finally:
        if dptr.value:
            drv.raw("cuMemFree_v2", dptr.value)
        if host.value is not None:
            drv.raw("cuMemFreeHost", host.value)


def measure_peers(drv, gpus, nbytes, repeats, steps=None):
    """Ordered pairs: ``{from, to, access, gbs}``; copies only where peer access exists."""
    steps = steps or Steps()
    steps("peer matrix: allocating")
    peers = []
    bufs = {}
    try:
        for g in gpus:
            drv.call("cuCtxSetCurrent", g["ctx"])
            free, total = ctypes.c_size_t(), ctypes.c_size_t()
            drv.call("cuMemGetInfo_v2", ctypes.byref(free), ctypes.byref(total))
            if free.value >= nbytes + 64 * MIB:
                ptr = ctypes.c_uint64()
                drv.call("cuMemAlloc_v2", ctypes.byref(ptr), nbytes)
                bufs[g["index"]] = ptr.value
        for src in gpus:
            for dst in gpus:
                if src is dst:
                    continue
                can = ctypes.c_int()
                drv.call("cuDeviceCanAccessPeer", ctypes.byref(can), src["dev"], dst["dev"])
                item = {"from": src["index"], "to": dst["index"],
                        "from_bus_id": src["pci_bus_id"], "to_bus_id": dst["pci_bus_id"],
                        "access": bool(can.value), "gbs": None}
                if can.value and src["index"] in bufs and dst["index"] in bufs:
                    steps("peer copies GPU %d (%s) -> GPU %d (%s)" % (
                        src["index"], src["pci_bus_id"], dst["index"], dst["pci_bus_id"]))
                    drv.call("cuCtxSetCurrent", src["ctx"])
                    code = drv.raw("cuCtxEnablePeerAccess", dst["ctx"], 0)
                    if code not in (SUCCESS, PEER_ACCESS_ALREADY_ENABLED):
                        raise drv.error("cuCtxEnablePeerAccess", code)
                    args = (bufs[dst["index"]], dst["ctx"], bufs[src["index"]], src["ctx"],
                            nbytes)
                    times = []
                    for attempt in range(repeats + 1):
                        start = time.perf_counter()
                        drv.call("cuMemcpyPeer", *args)
                        drv.call("cuCtxSynchronize")
                        drv.call("cuCtxSetCurrent", dst["ctx"])
                        drv.call("cuCtxSynchronize")
                        drv.call("cuCtxSetCurrent", src["ctx"])
                        if attempt:
                            times.append(time.perf_counter() - start)
                    item["gbs"] = _best_gbs(times, nbytes)
                peers.append(item)
    finally:
        for g in gpus:
            if g["index"] in bufs:
                drv.raw("cuCtxSetCurrent", g["ctx"])
                drv.raw("cuMemFree_v2", bufs[g["index"]])
    return peers


def latency_stats(seconds):
    """``{p50_us, p99_us, max_us}`` of round trips given in seconds (nearest rank)."""
    ordered = sorted(seconds)
    if not ordered:
        return {"p50_us": None, "p99_us": None, "max_us": None}

    def rank(pct):
        return ordered[max(0, min(len(ordered) - 1, int(-(-pct * len(ordered) // 100)) - 1))]

    return {"p50_us": round(rank(50) * 1e6, 1), "p99_us": round(rank(99) * 1e6, 1),
            "max_us": round(ordered[-1] * 1e6, 1)}


def measure_latency(drv, count, gap_us, warmup=None):
    """Round trips of an empty kernel launch plus ``cuCtxSynchronize`` on the current
    context, timed on the host: ``count`` back to back, then ``count`` with the thread
    sleeping ``gap_us`` before each (what a serving loop does between steps: where a core's
    idle state and frequency show). ``{count, gap_us, back_to_back, sleeping}``, each
    :func:`latency_stats`; ``skipped`` names the code when the driver refuses the kernel.
    The module is unloaded again; nothing stays allocated."""
    out = {"count": count, "gap_us": gap_us, "back_to_back": None, "sleeping": None,
           "skipped": None}
    module = ctypes.c_void_p()
    code = drv.raw("cuModuleLoadData", ctypes.byref(module), LATENCY_PTX.encode("ascii"))
    if code != SUCCESS:
        described = drv.describe(code)
        out["skipped"] = ("the driver refused the probe's empty PTX kernel: cuModuleLoadData "
                          "returned %d %s (%s): latency not measured"
                          % (code, described["name"], described["text"]))
        return out
    try:
        fn = ctypes.c_void_p()
        drv.call("cuModuleGetFunction", ctypes.byref(fn), module,
                 LATENCY_KERNEL.encode("ascii"))
        launch, sync = drv.func("cuLaunchKernel"), drv.func("cuCtxSynchronize")
        clock = time.perf_counter

        def once():
            start = clock()
            code = launch(fn, 1, 1, 1, 1, 1, 1, 0, None, None, None)
            if code != SUCCESS:
                raise drv.error("cuLaunchKernel", code)
            code = sync()
            if code != SUCCESS:
                raise drv.error("cuCtxSynchronize", code)
            return clock() - start

        for _attempt in range(count // 10 + 5 if warmup is None else warmup):
            once()
        out["back_to_back"] = latency_stats([once() for _attempt in range(count)])
        gap = gap_us / 1e6
        sleeping = []
        for _attempt in range(count):
            time.sleep(gap)
            sleeping.append(once())
        out["sleeping"] = latency_stats(sleeping)
    finally:
        drv.raw("cuModuleUnload", module)
    return out


def probe(library=DEFAULT_LIBRARY, bandwidth=False, size_mb=256, repeats=5, peer=False,
          root="/", progress=None, latency=False, latency_count=200, latency_gap_us=1000,
          latency_gpus=None, ceiling=False, ceiling_seconds=CEILING_SECONDS,
          ceiling_mb=CEILING_MB, ceiling_cublas=False, cublas=None, cublas_n=CUBLAS_N):
    """Run the probe in this process; return the result dict (``error`` is None when CUDA
    works). Only the child process calls this (``main``): callers use ``probe_host`` or
    ``probe_container``. ``progress(step)`` is called before each step; ``step`` in the
    result is the last one (``done`` when it finished). With ``ceiling`` and
    ``ceiling_cublas`` each ceiling also gets ``cublas_bf16`` (``cuda_cublas``: the library
    at ``cublas`` or found, a GEMM of at most ``cublas_n``)."""
    started = time.perf_counter()
    steps = Steps(progress)
    result = {"library": library, "init": None, "driver_version": None, "devices": [],
              "cause": None, "error": None, "step": None}
    if peer:
        result["peers"] = []
    nbytes = int(size_mb) * MIB
    try:
        steps("loading %s" % library)
        drv = Driver(library)
    except OSError as exc:
        result["error"] = ("cannot load the CUDA driver library %s (%s): the NVIDIA driver is "
                           "not installed or not visible here" % (library, exc))
        result["cause"] = ("the driver's user-space library is missing: on a host install the "
                           "NVIDIA driver; in a container install the host's exact driver "
                           "version without its kernel module, or mount its libraries")
        result["seconds"] = round(time.perf_counter() - started, 3)
        result["step"] = steps.last
        return result
    gpus = []
    try:
        steps("cuDriverGetVersion")
        version = ctypes.c_int()
        if drv.raw("cuDriverGetVersion", ctypes.byref(version)) == SUCCESS:
            result["driver_version"] = version.value
        steps("cuInit")
        code = drv.raw("cuInit", 0)
        result["init"] = drv.describe(code)
        if code != SUCCESS:
            result["error"] = "cuInit(0) returned %d %s (%s)" % (
                code, result["init"]["name"], result["init"]["text"])
            result["cause"] = cause_for(code, root)
            if code == NO_DEVICE:
                listed = nvidia_gpus(root, passthrough=False)
                if listed:
                    result["error"] += ", although the PCI tree lists %s" % _listed(listed)
            return result
        steps("cuDeviceGetCount")
        count = ctypes.c_int()
        drv.call("cuDeviceGetCount", ctypes.byref(count))
        if count.value == 0:
            listed = nvidia_gpus(root, passthrough=False)
            if listed:
                result["error"] = ("cuInit(0) succeeded but CUDA sees 0 devices "
                                   "(cuDeviceGetCount), although the PCI tree lists %s"
                                   % _listed(listed))
                result["cause"] = cause_for(NO_DEVICE, root)
        found = None
        if ceiling and ceiling_cublas and count.value:
            steps("finding libcublas")
            found = find_cublas(cublas)
        for index in range(count.value):
            dev = {"index": index, "name": None, "pci_bus_id": None, "memory_total_mb": None,
                   "link": None, "link_gbs": None, "h2d_gbs": None, "d2h_gbs": None,
                   "h2d_pct": None, "d2h_pct": None, "busy": False, "skipped": None,
                   "error": None}
            result["devices"].append(dev)
            try:
                probe_device(drv, dev, gpus, index, bandwidth, nbytes, repeats, root, steps)
                chosen = not latency_gpus or dev["pci_bus_id"] in [
                    normalize_bus_id(g) for g in latency_gpus]
                if latency and not chosen:
                    dev["latency"] = {"count": latency_count, "gap_us": latency_gap_us,
                                      "back_to_back": None, "sleeping": None,
                                      "skipped": "not among the GPUs asked for"}
                elif latency and gpus and gpus[-1]["index"] == index:
                    steps("%s: launch latency" % _gpu(dev))
                    drv.call("cuCtxSetCurrent", gpus[-1]["ctx"])
                    dev["latency"] = measure_latency(drv, latency_count, latency_gap_us)
                elif latency:
                    dev["latency"] = {"count": latency_count, "gap_us": latency_gap_us,
                                      "back_to_back": None, "sleeping": None,
                                      "skipped": dev["skipped"] or "no context"}
                if ceiling and gpus and gpus[-1]["index"] == index:
                    dev["ceiling"] = gpu_ceiling(drv, gpus[-1], ceiling_seconds, ceiling_mb,
                                                 found, cublas_n, steps, _gpu(dev))
                elif ceiling:
                    dev["ceiling"] = {"skipped": dev["skipped"] or "no context"}
            except CudaError as exc:
                dev["error"] = exc.as_dict()
                if result["error"] is None:
                    result["error"] = "GPU %d (%s): %s" % (index, dev["pci_bus_id"], exc)
                    result["cause"] = cause_for(exc.code, root)
        if peer and len(gpus) >= 2:
            result["peers"] = measure_peers(drv, gpus, nbytes, repeats, steps)
    except CudaError as exc:
        if result["error"] is None:
            result["error"] = str(exc)
            result["cause"] = cause_for(exc.code, root)
    finally:
        if gpus:
            steps("destroying the contexts")
        for g in gpus:
            drv.raw("cuCtxDestroy_v2", g["ctx"])
        result["seconds"] = round(time.perf_counter() - started, 3)
        result["step"] = steps.last
    steps("done")       # not reached by an early return: ``step`` names where it stopped
    result["step"] = steps.last
    return result


def _listed(addresses):
    return "%d NVIDIA GPU%s: %s" % (len(addresses), "" if len(addresses) == 1 else "s",
                                    ", ".join(addresses))


def probe_device(drv, dev, gpus, index, bandwidth, nbytes, repeats, root, steps=None):
    steps = steps or Steps()
    steps("%s: cuDeviceGet" % _gpu(dev))
    handle = ctypes.c_int()
    drv.call("cuDeviceGet", ctypes.byref(handle), index)
    buf = ctypes.create_string_buffer(256)
    drv.call("cuDeviceGetName", buf, 256, handle.value)
    dev["name"] = buf.value.decode("utf-8", "replace")
    buf = ctypes.create_string_buffer(64)
    drv.call("cuDeviceGetPCIBusId", buf, 64, handle.value)
    dev["pci_bus_id"] = normalize_bus_id(buf.value.decode("ascii", "replace"))
    total = ctypes.c_size_t()
    drv.call("cuDeviceTotalMem_v2", ctypes.byref(total), handle.value)
    dev["memory_total_mb"] = total.value // MIB
    link = read_link(root, dev["pci_bus_id"])
    dev["link"] = link["speed"] and "%s x%s" % (link["speed"], link["width"])
    dev["link_gbs"] = link["gbs"]
    steps("%s: cuCtxCreate" % _gpu(dev))
    ctx = ctypes.c_void_p()
    code = drv.raw("cuCtxCreate_v2", ctypes.byref(ctx), 0, handle.value)
    if code == DEVICE_UNAVAILABLE:
        mode = ctypes.c_int()
        drv.raw("cuDeviceGetAttribute", ctypes.byref(mode), ATTR_COMPUTE_MODE, handle.value)
        dev["compute_mode"] = COMPUTE_MODES.get(mode.value, str(mode.value))
        if mode.value == 3:
            dev["busy"] = True
            dev["skipped"] = ("busy: exclusive-process compute mode and another process holds "
                              "the GPU (CUDA works there; nothing measured)")
            return
        if mode.value == 2:
            dev["skipped"] = "compute mode prohibited: no CUDA context may be created"
            return
    if code != SUCCESS:
        raise drv.error("cuCtxCreate_v2", code)
    gpus.append({"index": index, "dev": handle.value, "ctx": ctx.value,
                 "pci_bus_id": dev["pci_bus_id"]})
    if not bandwidth:
        return
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    drv.call("cuMemGetInfo_v2", ctypes.byref(free), ctypes.byref(total))
    need = nbytes + 64 * MIB
    if free.value < need:
        dev["skipped"] = ("only %d MiB of GPU memory free, the copy needs %d MiB: not measured"
                          % (free.value // MIB, need // MIB))
        return
    measure_copies(drv, dev, nbytes, repeats, steps)
    if dev.get("h2d_gbs"):
        # Read the link again while it is up at speed: an idle GPU trains down to 2.5 GT/s.
        link = read_link(root, dev["pci_bus_id"])
        dev["link"] = link["speed"] and "%s x%s" % (link["speed"], link["width"])
        dev["link_gbs"] = link["gbs"]
        dev["h2d_pct"] = _pct(dev["h2d_gbs"], dev["link_gbs"])
        dev["d2h_pct"] = _pct(dev["d2h_gbs"], dev["link_gbs"])


def main(argv=None):
    import argparse
    parser = argparse.ArgumentParser(
        prog="cuda-probe", description="Prove that CUDA works and measure the PCIe path.")
    parser.add_argument("--library", default=DEFAULT_LIBRARY)
    parser.add_argument("--bandwidth", action="store_true")
    parser.add_argument("--size-mb", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--peer", action="store_true")
    parser.add_argument("--root", default="/")
    parser.add_argument("--progress", action="store_true")   # STEP_PREFIX lines on stderr
    parser.add_argument("--latency", action="store_true")
    parser.add_argument("--latency-count", type=int, default=200)
    parser.add_argument("--latency-gap-us", type=int, default=1000)
    parser.add_argument("--latency-gpus", default="")
    parser.add_argument("--ceiling", action="store_true")
    parser.add_argument("--ceiling-seconds", type=float, default=CEILING_SECONDS)
    parser.add_argument("--ceiling-mb", type=int, default=CEILING_MB)
    parser.add_argument("--ceiling-cublas", action="store_true")   # with --ceiling
    parser.add_argument("--cublas", default=None)                  # else found
    parser.add_argument("--cublas-n", type=int, default=CUBLAS_N)  # largest m = n = k
    args = parser.parse_args(argv)
    if args.size_mb < 1 or args.repeats < 1:
        parser.error("--size-mb and --repeats must be at least 1")
    if args.latency_count < 1 or args.latency_gap_us < 0:
        parser.error("--latency-count must be at least 1 and --latency-gap-us at least 0")
    if not 0 < args.ceiling_seconds <= 600 or args.ceiling_mb < 1:
        parser.error("--ceiling-seconds must be above 0 (600 at most), --ceiling-mb at least 1")
    if not 256 <= args.cublas_n <= 65536:
        parser.error("--cublas-n must be from 256 to 65536")
    import faulthandler
    faulthandler.enable()       # a fatal signal is named on stderr, even through pct exec
    result = probe(library=args.library, bandwidth=args.bandwidth, size_mb=args.size_mb,
                   repeats=args.repeats, peer=args.peer, root=args.root,
                   progress=_stderr_step if args.progress else None, latency=args.latency,
                   latency_count=args.latency_count, latency_gap_us=args.latency_gap_us,
                   latency_gpus=[g for g in args.latency_gpus.split(",") if g],
                   ceiling=args.ceiling, ceiling_seconds=args.ceiling_seconds,
                   ceiling_mb=args.ceiling_mb, ceiling_cublas=args.ceiling_cublas,
                   cublas=args.cublas, cublas_n=args.cublas_n)
    sys.stdout.write(json.dumps(result, sort_keys=True) + "\n")
    return 1 if result["error"] else 0


def _stderr_step(step):
    sys.stderr.write(STEP_PREFIX + step + "\n")
    sys.stderr.flush()


if __name__ == "__main__":
    raise SystemExit(main())
