# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The CUDA probe's compute and memory ceiling (``--ceiling``): what one GPU delivers, with
kernels the driver JIT-compiles from PTX and copies in its own memory, no toolkit.

Part of the child script: ``cuda.child_source()`` joins ``cuda_driver``, this file,
``cuda_cublas`` and ``cuda_child`` (the imports of the collection between them left
out). Standard library only.

Per GPU, on its context (``measure_ceiling``):

- memory: device-to-device copies (``cuMemcpyDtoD_v2``, then ``cuCtxSynchronize``) of a
  buffer of ``ceiling_mb`` MiB (default 1 GiB) per side, or of what free memory allows (half
  of the free memory less MEMORY_RESERVE_MB; ``limited_by`` says which); the rate counts
  what the copy reads and what it writes, 2 x bytes / s (as STREAM's copy and nvbandwidth's
  device-local copy do). The source is filled with a pattern (``cuMemsetD32``), the
  destination cleared before the timed runs, and start, middle and end of it read back
  after them: a copy that did nothing is a failure, not a figure.
- compute: an FP32 FMA loop (PTX ISA 6.0, sm_50: every architecture), a BF16 tensor-core
  loop (``mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32``, sm_80 and later) and an FP8
  one (``mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32``, sm_89 and later), on
  BLOCKS_PER_SM x BLOCK threads per multiprocessor. FLOPs are counted from the kernel: an
  FMA is 2, an ``mma`` m16n8k16 2 x 16 x 8 x 16 per warp instruction (m16n8k32: 2 x 16 x 8 x
  32), each final ``add.f32`` 1. Every thread writes its result; the host checks a sample
  against the value it computes itself (the FMA chains from their known start; the ``mma``
  accumulators from the known A and B): a kernel that did nothing or wrong is
  ``checked: false`` with the ``error`` and no figure.

Each part's loop count (copies per run, loop iterations) is calibrated so that its timed
runs together take about ``seconds``: each of the ``repeats`` runs about seconds /
repeats, the best run counts (``runs_*`` lists them all). A part the GPU's compute
capability lacks is ``skipped`` with the reason; one whose PTX the driver refuses is
skipped with the code.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ctypes
import struct
import time

# cuda.child_source() leaves this import out: the child script holds cuda_driver's source.
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda.cuda_driver import (
    MIB,
    SUCCESS,
)

ATTR_SM_COUNT = 16              # CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
ATTR_CC_MAJOR = 75              # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
ATTR_CC_MINOR = 76
CEILING_SECONDS = 1.0           # per part and GPU, all its timed runs together
CEILING_MB = 1024               # the device-to-device copy's buffer, per side
CEILING_REPEATS = 3
MIN_CEILING_MB = 64             # smaller copies time the launch more than the memory
MEMORY_RESERVE_MB = 256         # left free beside the two buffers
MEMORY_PATTERN = 0x5A3C0F96
UNWRITTEN = 0xFFFFFFFF          # a NaN: what an output the kernel never wrote holds
SAMPLES = 257                   # threads checked per kernel (evenly spread, last included)
BLOCK = 256
BLOCKS_PER_SM = 4
FMA_CHAINS = 8                  # independent FMA chains per thread
FMA_UNROLL = 15                 # FMAs per chain and loop iteration (odd: parity shows)
FMA_A, FMA_C = -1.0, 3.0        # x -> a * x + c: exact in FP32, x or c - x
MMA_CHAINS = 4                  # independent accumulators per warp
MMA_ROUNDS = 2                  # (+B, -B) rounds per loop iteration and chain
MMA_WORDS = 8                   # u32 per lane in the A/B input buffer (6 used)
PARTS = ("memory", "fp32", "bf16", "fp8")
PART_NAMES = {"memory": "the copy", "fp32": "fp32 fma", "bf16": "bf16 mma", "fp8": "fp8 mma"}

# kind -> (entry, PTX ISA, lowest sm, shape, A/B type, elements per register, sign mask)
MMA_KINDS = {
    "bf16": ("gpuhost_mma_bf16", "7.0", 80, "m16n8k16", "bf16", 2, "0x80008000"),
    "fp8": ("gpuhost_mma_fp8", "8.4", 89, "m16n8k32", "e4m3", 4, "0x80808080"),
}
FMA_ENTRY = "gpuhost_fma"
E4M3 = {0: 0x00, 1: 0x38, 2: 0x40, 3: 0x44}     # small integers as FP8 E4M3 (sign: 0x80)


def fma_ptx():
    """The FP32 kernel: FMA_CHAINS chains of ``x = fma(x, a, c)`` per thread, FMA_UNROLL per
    chain and iteration, ``iters`` iterations; chain k starts at (thread & 1023) + k; the
    thread writes the chains' sum (FMA_CHAINS - 1 adds) to ``out[thread]``."""
    body = ["\tld.param.u64 %rd0, [out];", "\tld.param.u32 %r0, [iters];",
            "\tld.param.f32 %fa, [a];", "\tld.param.f32 %fc, [c];",
            "\tmov.u32 %r1, %ctaid.x;", "\tmov.u32 %r2, %ntid.x;", "\tmov.u32 %r3, %tid.x;",
            "\tmad.lo.u32 %r1, %r1, %r2, %r3;", "\tand.b32 %r2, %r1, 1023;"]
    for k in range(FMA_CHAINS):
        body += ["\tadd.u32 %%r3, %%r2, %d;" % k, "\tcvt.rn.f32.u32 %%x%d, %%r3;" % k]
    body += ["\tsetp.eq.u32 %p, %r0, 0;", "\t@%p bra DONE;", "LOOP:"]
    for _unroll in range(FMA_UNROLL):
        body += ["\tfma.rn.f32 %%x%d, %%x%d, %%fa, %%fc;" % (k, k) for k in range(FMA_CHAINS)]
    body += ["\tsub.u32 %r0, %r0, 1;", "\tsetp.ne.u32 %p, %r0, 0;", "\t@%p bra LOOP;",
             "DONE:", "\tmov.f32 %s, %x0;"]
    body += ["\tadd.f32 %%s, %%s, %%x%d;" % k for k in range(1, FMA_CHAINS)]
    body += ["\tcvta.to.global.u64 %rd0, %rd0;", "\tmul.wide.u32 %rd1, %r1, 4;",
             "\tadd.u64 %rd0, %rd0, %rd1;", "\tst.global.f32 [%rd0], %s;", "\tret;"]
    return (".version 6.0\n.target sm_50\n.address_size 64\n\n"
            ".visible .entry %s(.param .u64 out, .param .u32 iters, .param .f32 a, "
            ".param .f32 c)\n{\n\t.reg .pred %%p;\n\t.reg .b32 %%r<4>;\n"
            "\t.reg .f32 %%x<%d>;\n\t.reg .f32 %%fa, %%fc, %%s;\n\t.reg .b64 %%rd<2>;\n"
            "%s\n}\n" % (FMA_ENTRY, FMA_CHAINS, "\n".join(body)))


def mma_ptx(kind):
    """The tensor-core kernel of ``kind``: each lane loads its A (4 registers) and B (2)
    fragments from ``in[lane * MMA_WORDS]``; MMA_CHAINS accumulators from 0 get, per
    iteration, MMA_ROUNDS x (+A.B, then A.(-B)) (an exact 0 in sum), then one more A.B; each
    thread writes the sum of its 4 accumulator elements over the chains to
    ``out[thread * 4 ..]``: MMA_CHAINS x (A.B) at its fragment's places."""
    entry, isa, sm, shape, ab, _per_reg, mask = MMA_KINDS[kind]
    op = "mma.sync.aligned.%s.row.col.f32.%s.%s.f32" % (shape, ab, ab)

    def mma(chain, b):
        d = "{%s}" % ", ".join("%%d%d" % (chain * 4 + i) for i in range(4))
        return "\t%s %s, {%%a0, %%a1, %%a2, %%a3}, {%%%s0, %%%s1}, %s;" % (op, d, b, b, d)

    body = ["\tld.param.u64 %rd0, [out];", "\tld.param.u64 %rd1, [in];",
            "\tld.param.u32 %r0, [iters];", "\tcvta.to.global.u64 %rd0, %rd0;",
            "\tcvta.to.global.u64 %rd1, %rd1;", "\tmov.u32 %r1, %ctaid.x;",
            "\tmov.u32 %r2, %ntid.x;", "\tmov.u32 %r3, %tid.x;",
            "\tmad.lo.u32 %r1, %r1, %r2, %r3;", "\tand.b32 %r2, %r1, 31;",
            "\tmul.wide.u32 %%rd2, %%r2, %d;" % (MMA_WORDS * 4), "\tadd.u64 %rd2, %rd1, %rd2;"]
    body += ["\tld.global.u32 %%a%d, [%%rd2+%d];" % (i, 4 * i) for i in range(4)]
    body += ["\tld.global.u32 %%b%d, [%%rd2+%d];" % (i, 16 + 4 * i) for i in range(2)]
    body += ["\txor.b32 %%n%d, %%b%d, %s;" % (i, i, mask) for i in range(2)]
    body += ["\tmov.f32 %%d%d, 0f00000000;" % i for i in range(MMA_CHAINS * 4)]
    body += ["\tsetp.eq.u32 %p, %r0, 0;", "\t@%p bra DONE;", "LOOP:"]
    for _round in range(MMA_ROUNDS):
        body += [mma(c, "b") for c in range(MMA_CHAINS)]
        body += [mma(c, "n") for c in range(MMA_CHAINS)]
    body += ["\tsub.u32 %r0, %r0, 1;", "\tsetp.ne.u32 %p, %r0, 0;", "\t@%p bra LOOP;",
             "DONE:"]
    body += [mma(c, "b") for c in range(MMA_CHAINS)]
    for i in range(4):
        body.append("\tmov.f32 %%s%d, %%d%d;" % (i, i))
        body += ["\tadd.f32 %%s%d, %%s%d, %%d%d;" % (i, i, c * 4 + i)
                 for c in range(1, MMA_CHAINS)]
    body += ["\tmul.wide.u32 %rd3, %r1, 16;", "\tadd.u64 %rd3, %rd0, %rd3;",
             "\tst.global.v4.f32 [%rd3], {%s0, %s1, %s2, %s3};", "\tret;"]
    return (".version %s\n.target sm_%d\n.address_size 64\n\n"
            ".visible .entry %s(.param .u64 out, .param .u64 in, .param .u32 iters)\n{\n"
            "\t.reg .pred %%p;\n\t.reg .b32 %%r<4>;\n\t.reg .b32 %%a<4>;\n"
            "\t.reg .b32 %%b<2>;\n\t.reg .b32 %%n<2>;\n\t.reg .f32 %%d<%d>;\n"
            "\t.reg .f32 %%s<4>;\n\t.reg .b64 %%rd<4>;\n%s\n}\n"
            % (isa, sm, entry, MMA_CHAINS * 4, "\n".join(body)))


def fma_flops(threads, iters):
    """What the FP32 kernel computes: 2 per FMA, 1 per final add."""
    return threads * (iters * FMA_CHAINS * FMA_UNROLL * 2 + FMA_CHAINS - 1)


def mma_flops(kind, threads, iters):
    """What the mma kernel computes: 2 x M x N x K per warp instruction, 1 per final add."""
    k = 16 if kind == "bf16" else 32
    per_warp = iters * MMA_ROUNDS * 2 * MMA_CHAINS + MMA_CHAINS
    return (threads // 32) * per_warp * 2 * 16 * 8 * k + threads * 4 * (MMA_CHAINS - 1)


def fma_expected(thread, iters):
    """The FP32 kernel's result for ``thread``: x -> c - x applied FMA_UNROLL x iters
    times to each chain (the identity after an even count), the chains summed."""
    odd = (FMA_UNROLL * iters) % 2
    total = 0.0
    for k in range(FMA_CHAINS):
        x = float((thread & 1023) + k)
        total += FMA_C - x if odd else x
    return total


def mma_matrices(kind):
    """A (16 x K) and B (K x 8) of small integers (-3..3), exact in BF16 and FP8 E4M3."""
    k = 16 if kind == "bf16" else 32
    a = [[(r * 3 + c * 5) % 7 - 3 for c in range(k)] for r in range(16)]
    b = [[(i * 5 + n * 3 + 1) % 7 - 3 for n in range(8)] for i in range(k)]
    return a, b


def _encode(kind, value):
    if kind == "bf16":
        return struct.unpack("<I", struct.pack("<f", float(value)))[0] >> 16
    return E4M3[abs(value)] | (0x80 if value < 0 else 0)


def mma_input(kind):
    """The A/B fragments of every lane, MMA_WORDS u32 per lane, in the PTX ISA's layout:
    A element i of register r = i // e (e per register, lowest bits first) sits at row
    group + 8 x (r % 2), column tig x e + i % e + K/2 x (r >= 2); B element i at row
    tig x e + i % e + K/2 x r, column group (group = lane / 4, tig = lane % 4)."""
    a, b = mma_matrices(kind)
    per = MMA_KINDS[kind][5]
    bits = 16 if per == 2 else 8
    half = len(b) // 2
    words = []
    for lane in range(32):
        group, tig = lane // 4, lane % 4
        regs = []
        for r in range(4):
            regs.append(sum(_encode(kind, a[group + 8 * (r % 2)][tig * per + i + half * (r >= 2)])
                            << (bits * i) for i in range(per)))
        for r in range(2):
            regs.append(sum(_encode(kind, b[tig * per + i + half * r][group]) << (bits * i)
                            for i in range(per)))
        words += regs + [0] * (MMA_WORDS - len(regs))
    return words


def mma_expected(kind, thread, element):
    """Element 0..3 of ``thread``'s result: MMA_CHAINS x (A.B) at row group + 8 x
    (element >= 2), column tig x 2 + element % 2."""
    a, b = mma_matrices(kind)
    lane = thread % 32
    row, col = lane // 4 + 8 * (element >= 2), (lane % 4) * 2 + element % 2
    return float(MMA_CHAINS * sum(a[row][i] * b[i][col] for i in range(len(b))))


def _attr(drv, attr, device):
    value = ctypes.c_int()
    drv.call("cuDeviceGetAttribute", ctypes.byref(value), attr, device)
    return value.value


def _alloc(drv, nbytes, owned):
    ptr = ctypes.c_uint64()
    drv.call("cuMemAlloc_v2", ctypes.byref(ptr), nbytes)
    owned.append(ptr.value)
    return ptr.value


def _calibrate(run, target):
    """The count for which ``run(count)`` takes about ``target`` seconds (grown from 1
    until a run takes an eighth of it, then scaled)."""
    count = 1
    while True:
        taken = run(count)
        if taken * 8 >= target or count >= 1 << 30:
            return max(1, min(1 << 31, int(count * target / max(taken, 1e-9))))
        count *= 8 if taken * 64 < target else 2


# A run shorter than this share of its target means the calibration was inflated by a stall
# (the host busy for a moment): the count is scaled from the best run and the runs taken
# again, at most RETAKES times, so fixed costs (launch, synchronise) never weigh.
SHORT_RUN = 0.25
RETAKES = 2


def timed_runs(run, target, repeats):
    """``(count, times)``: ``repeats`` runs of ``run(count)``, ``count`` calibrated to about
    ``target`` seconds a run (``_calibrate``); runs far shorter than that (``SHORT_RUN``)
    are taken again with the count scaled from the best of them. Seen on a busy 2-core test
    machine: one stalled calibration left 5 iterations where 20,000 were due, and the
    figure fell 10,000-fold."""
    count = _calibrate(run, target)
    times = [run(count) for _attempt in range(repeats)]
    for _retake in range(RETAKES):
        best = min(times)
        if best >= target * SHORT_RUN or count >= 1 << 30:
            break
        count = max(count + 1, min(1 << 31, int(count * target / max(best, 1e-9))))
        times = [run(count) for _attempt in range(repeats)]
    return count, times


def measure_memory(drv, seconds, ceiling_mb, repeats):
    """The device-to-device copy rate on the current context (see the module's doc)."""
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    drv.call("cuMemGetInfo_v2", ctypes.byref(free), ctypes.byref(total))
    want = ceiling_mb * MIB
    room = max(0, (free.value - MEMORY_RESERVE_MB * MIB) // 2) // MIB * MIB
    nbytes = min(want, room)
    if nbytes < min(want, MIN_CEILING_MB * MIB):
        return {"skipped": "only %d MiB of GPU memory free, the device-to-device copy needs "
                "2 x %d MiB and %d MiB beside them: not measured"
                % (free.value // MIB, min(want, MIN_CEILING_MB * MIB) // MIB,
                   MEMORY_RESERVE_MB)}
    owned = []
    try:
        src, dst = _alloc(drv, nbytes, owned), _alloc(drv, nbytes, owned)
        drv.call("cuMemsetD32_v2", src, MEMORY_PATTERN, nbytes // 4)
        copy, sync, clock = drv.func("cuMemcpyDtoD_v2"), drv.func("cuCtxSynchronize"), \
            time.perf_counter

        def run(count):
            drv.call("cuCtxSynchronize")
            start = clock()
            for _copy in range(count):
                code = copy(dst, src, nbytes)
                if code != SUCCESS:
                    raise drv.error("cuMemcpyDtoD_v2", code)
            code = sync()
            if code != SUCCESS:
                raise drv.error("cuCtxSynchronize", code)
            return clock() - start

        drv.call("cuMemsetD32_v2", dst, 0, nbytes // 4)
        count, times = timed_runs(run, seconds / repeats, repeats)
        out = {"bytes": nbytes, "limited_by": "asked" if nbytes == want else "free memory",
               "copies_per_run": count, "path": "ptx-dtod"}
        error = _check_copy(drv, dst, nbytes)
        if error:
            out.update(checked=False, error=error)
            return out
        rates = [round(2.0 * nbytes * count / t / 1e9, 2) if t > 0 else None for t in times]
        out.update(checked=True, runs_gbs=rates, gbs=max(r for r in rates if r))
        return out
    finally:
        for ptr in owned:
            drv.raw("cuMemFree_v2", ptr)


def _check_copy(drv, dst, nbytes):
    """None when start, middle and end of ``dst`` hold the pattern, else what they hold."""
    edge = min(4096, nbytes // 4)
    back = ctypes.create_string_buffer(edge)
    for offset in (0, (nbytes // 2) // 4 * 4, nbytes - edge):
        drv.call("cuMemcpyDtoH_v2", back, dst + offset, edge)
        words = struct.unpack("<%dI" % (edge // 4), back.raw)
        for index, word in enumerate(words):
            if word != MEMORY_PATTERN:
                return ("the device-to-device copy left 0x%08x at byte %d, expected 0x%08x"
                        % (word, offset + 4 * index, MEMORY_PATTERN))
    return None


def measure_kernel(drv, kind, sm_count, seconds, repeats):
    """One compute part on the current context: ``{tflops, runs_tflops, checked, path,
    iters}``, ``{checked: false, error}`` or ``{skipped}`` when the driver refuses the
    PTX. Frees and unloads what it takes."""
    if kind == "fp32":
        entry, ptx, path = FMA_ENTRY, fma_ptx(), "ptx-fma"
    else:
        entry, ptx, path = MMA_KINDS[kind][0], mma_ptx(kind), "ptx-mma"
    threads = sm_count * BLOCKS_PER_SM * BLOCK
    module, owned = ctypes.c_void_p(), []
    code = drv.raw("cuModuleLoadData", ctypes.byref(module), ptx.encode("ascii"))
    if code != SUCCESS:
        described = drv.describe(code)
        return {"skipped": "the driver refused the %s PTX kernel: cuModuleLoadData returned "
                "%d %s (%s)" % (kind, code, described["name"], described["text"])}
    try:
        fn = ctypes.c_void_p()
        drv.call("cuModuleGetFunction", ctypes.byref(fn), module, entry.encode("ascii"))
        out = _alloc(drv, threads * 16, owned)
        iters = ctypes.c_uint32()
        if kind == "fp32":
            values = [ctypes.c_uint64(out), iters, ctypes.c_float(FMA_A), ctypes.c_float(FMA_C)]
        else:
            words = mma_input(kind)
            data = b"".join(struct.pack("<I", w) for w in words)
            source = _alloc(drv, len(data), owned)
            drv.call("cuMemcpyHtoD_v2", source, data, len(data))
            values = [ctypes.c_uint64(out), ctypes.c_uint64(source), iters]
        params = (ctypes.c_void_p * len(values))(*[ctypes.addressof(v) for v in values])
        launch, sync, clock = drv.func("cuLaunchKernel"), drv.func("cuCtxSynchronize"), \
            time.perf_counter

        def run(count):
            iters.value = count
            drv.call("cuMemsetD32_v2", out, UNWRITTEN, threads * 4)
            drv.call("cuCtxSynchronize")
            start = clock()
            code = launch(fn, threads // BLOCK, 1, 1, BLOCK, 1, 1, 0, None, params, None)
            if code != SUCCESS:
                raise drv.error("cuLaunchKernel", code)
            code = sync()
            if code != SUCCESS:
                raise drv.error("cuCtxSynchronize", code)
            return clock() - start

        count, times = timed_runs(run, seconds / repeats, repeats)
        result = {"iters": count, "threads": threads, "path": path}
        error = _check_kernel(drv, kind, out, threads, count)
        if error:
            result.update(checked=False, error=error)
            return result
        flops = fma_flops(threads, count) if kind == "fp32" else \
            mma_flops(kind, threads, count)
        rates = [round(flops / t / 1e12, 2) if t > 0 else None for t in times]
        result.update(checked=True, runs_tflops=rates, tflops=max(r for r in rates if r))
        return result
    finally:
        for ptr in owned:
            drv.raw("cuMemFree_v2", ptr)
        drv.raw("cuModuleUnload", module)


def _check_kernel(drv, kind, out, threads, iters):
    """None when a sample of threads wrote what the host computes, else the first wrong."""
    per = 1 if kind == "fp32" else 4
    back = ctypes.create_string_buffer(threads * per * 4)
    drv.call("cuMemcpyDtoH_v2", back, out, threads * per * 4)
    values = struct.unpack("<%df" % (threads * per), back.raw)
    step = max(1, (threads - 1) // (SAMPLES - 1))
    for thread in sorted(set(list(range(0, threads, step)) + [threads - 1])):
        for element in range(per):
            got = values[thread * per + element]
            want = fma_expected(thread, iters) if kind == "fp32" else \
                mma_expected(kind, thread, element)
            if got != want:
                where = "thread %d" % thread if per == 1 else \
                    "thread %d (element %d)" % (thread, element)
                return "%s kernel wrote %r at %s, expected %r" % (kind, got, where, want)
    return None


def measure_ceiling(drv, device, seconds=CEILING_SECONDS, ceiling_mb=CEILING_MB,
                    repeats=CEILING_REPEATS, steps=None, label="GPU"):
    """The ceiling of ``device`` (its context current): ``{compute_capability, sm_count,
    memory, fp32, bf16, fp8, seconds}``, each part its figure or ``skipped`` with why.
    ``steps(name)`` before each part. A driver call that fails raises CudaError (the GPU's
    error), after freeing what the part took."""
    started = time.perf_counter()
    major, minor = _attr(drv, ATTR_CC_MAJOR, device), _attr(drv, ATTR_CC_MINOR, device)
    sm_count = _attr(drv, ATTR_SM_COUNT, device)
    result = {"compute_capability": "%d.%d" % (major, minor), "sm_count": sm_count}
    cc = major * 10 + minor
    for part in PARTS:
        if steps:
            steps("%s: %s ceiling" % (label, part))
        lowest = 50 if part in ("memory", "fp32") else MMA_KINDS[part][2]
        if cc < lowest:
            result[part] = {"skipped": "%s needs sm_%d; this GPU is sm_%d"
                            % (PART_NAMES[part], lowest, cc)}
        elif part == "memory":
            result[part] = measure_memory(drv, seconds, ceiling_mb, repeats)
        else:
            result[part] = measure_kernel(drv, part, sm_count, seconds, repeats)
    result["seconds"] = round(time.perf_counter() - started, 3)
    return result
