# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The CUDA probe from the module's side: the child process that runs it (on this host,
``probe_host``, or in a container, ``probe_container``), its time limit, and what its exit
status, stdout and stderr mean (``child_result``: a hang, a crash, no result, the step it
was in); the audit's CUDA pass (``audit_pass``) over the host and its running GPU
containers.

The probe itself (``cuda_driver`` + ``cuda_ceiling`` + ``cuda_cublas`` + ``cuda_child``,
standard library only) never runs in the caller's process: ``child_source`` joins the four
files into the one script the child gets on stdin.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import inspect
import io
import json
import math
import re
import signal
import sys
import tokenize

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import bounded
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import (
    cuda_ceiling,
    cuda_child,
    cuda_cublas,
    cuda_driver,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda.cuda_ceiling import (
    CEILING_MB,
    CEILING_SECONDS,
    PARTS,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda.cuda_cublas import (
    CUBLAS_GPU_SECONDS,
    CUBLAS_LOAD_SECONDS,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda.cuda_driver import (
    ASSUMED_GPUS,
    AUDIT_LATENCY_COUNT,
    DEFAULT_LIBRARY,
    DEFAULT_TIMEOUT,
    DETAIL_LINES,
    MAX_LAUNCH_US,
    MIB,
    MIN_COPY_GBS,
    nvidia_gpus,
    STEP_PREFIX,
)

# The child script's files, in the order they are joined.
CHILD_FILES = (cuda_driver, cuda_ceiling, cuda_cublas, cuda_child)
# What the child script may weigh: a pipe's buffer (Linux: 64 KiB). A child that exits
# without reading its stdin (``pct exec`` into a stopped container or one without python3)
# then still takes the whole script, and the caller reports why instead of a broken pipe.
CHILD_SOURCE_LIMIT = 65536


def child_source():
    """The probe as one standard-library script, to run elsewhere as ``python3 -``: the
    sources of CHILD_FILES joined, less their ``__future__`` imports, the imports of the
    collection between them, their docstrings, comment lines and blank lines (read from the
    loaded modules: works from Ansible's zip); at most CHILD_SOURCE_LIMIT bytes."""
    parts = []
    for module in CHILD_FILES:
        text = inspect.getsource(module)
        drop = set()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and node.module and (
                    node.module == "__future__" or node.module.startswith(
                        "ansible_collections.")):
                drop.update(range(node.lineno - 1, node.end_lineno))
            body = getattr(node, "body", None)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and \
                    len(body) > 1 and isinstance(body[0], ast.Expr) and \
                    isinstance(body[0].value, ast.Constant) and \
                    isinstance(body[0].value.value, str):
                drop.update(range(body[0].lineno - 1, body[0].end_lineno))
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT and token.line.lstrip().startswith("#") or \
                    token.type == tokenize.NL and not token.line.strip():
                drop.add(token.start[0] - 1)
        parts.append("\n".join(line for index, line in enumerate(text.split("\n"))
                               if index not in drop))
    return "\n".join(parts)


def probe_argv(library=DEFAULT_LIBRARY, bandwidth=False, size_mb=256, repeats=5, peer=False,
               latency=False, latency_count=200, latency_gap_us=1000, latency_gpus=None,
               ceiling=False, ceiling_seconds=CEILING_SECONDS, ceiling_mb=CEILING_MB,
               ceiling_cublas=False, cublas=None):
    """Command-line options of :func:`main` for these settings (progress lines on)."""
    argv = ["--library", library, "--size-mb", str(size_mb), "--repeats", str(repeats),
            "--progress"]
    if bandwidth:
        argv.append("--bandwidth")
    if peer:
        argv.append("--peer")
    if latency:
        argv += ["--latency", "--latency-count", str(latency_count),
                 "--latency-gap-us", str(latency_gap_us)]
        if latency_gpus:
            argv += ["--latency-gpus", ",".join(latency_gpus)]
    if ceiling:
        argv += ["--ceiling", "--ceiling-seconds", repr(float(ceiling_seconds)),
                 "--ceiling-mb", str(ceiling_mb)]
        if ceiling_cublas:
            argv.append("--ceiling-cublas")
            if cublas:
                argv += ["--cublas", cublas]
    return argv


def time_limit(timeout=DEFAULT_TIMEOUT, bandwidth=False, size_mb=256, repeats=5, peer=False,
               gpus=0, latency=False, latency_count=200, latency_gap_us=1000,
               latency_gpus=None, ceiling=False, ceiling_seconds=CEILING_SECONDS,
               ceiling_mb=CEILING_MB, ceiling_cublas=False, cublas=None):
    """Seconds a probe child gets: ``timeout`` for loading, cuInit and the device listing,
    plus every asked copy (a warm-up and ``repeats`` per direction and GPU, the same per
    ordered GPU pair with ``peer``) at MIN_COPY_GBS, plus with ``latency`` every round trip
    (a tenth more for the warm-up, twice ``latency_count`` per GPU) at its sleep plus
    MAX_LAUNCH_US, plus with ``ceiling`` per GPU and part (memory, fp32, bf16, fp8) four
    times ``ceiling_seconds`` (calibration, JIT and the retakes of a stalled calibration,
    cuda_ceiling.timed_runs, included) and a second, and the ceiling's
    fills and first copies of ``ceiling_mb`` at MIN_COPY_GBS, and with ``ceiling_cublas``
    CUBLAS_LOAD_SECONDS once plus per GPU twice ``ceiling_seconds`` and CUBLAS_GPU_SECONDS
    (``cublas``, the library's path, changes nothing). ``gpus``: how many the PCI tree
    lists (0: ASSUMED_GPUS)."""
    n = gpus or ASSUMED_GPUS
    copies = 0
    if bandwidth:
        copies += n * 2 * (repeats + 1)
    if peer:
        copies += n * (n - 1) * (repeats + 1)
    seconds = copies * size_mb * MIB / (MIN_COPY_GBS * 1e9)
    if latency:
        timed = len(latency_gpus) if latency_gpus else n
        trips = timed * (2 * latency_count + latency_count // 10 + 5)
        seconds += trips * (latency_gap_us + MAX_LAUNCH_US) / 1e6
    if ceiling:
        seconds += n * (len(PARTS) * (4 * ceiling_seconds + 1)
                        + 4 * ceiling_mb * MIB / (MIN_COPY_GBS * 1e9))
        if ceiling_cublas:
            seconds += CUBLAS_LOAD_SECONDS + n * (2 * ceiling_seconds + CUBLAS_GPU_SECONDS)
    return int(timeout + math.ceil(seconds))


def probe_host(runner, library=DEFAULT_LIBRARY, bandwidth=False, size_mb=256, repeats=5,
               peer=False, root="/", timeout=DEFAULT_TIMEOUT, python=None, source=None,
               **latency):
    """The probe in a child process on this host: ``python3 - <options>`` (this Python,
    ``sys.executable``) with the source on stdin, through ``runner.run`` with the limit of
    ``time_limit``. Never raises for what the child does: a child that hangs, crashes or
    prints no result gives a result with ``error`` saying so and the step it was in."""
    limit = time_limit(timeout, bandwidth, size_mb, repeats, peer, len(nvidia_gpus(root)),
                       **latency)
    argv = [python or sys.executable, "-"] + probe_argv(
        library, bandwidth, size_mb, repeats, peer, **latency) + ["--root", root or "/"]
    return _run_child(runner, argv, source, limit, library, "the CUDA probe")


def probe_container(runner, pct, vmid, library=DEFAULT_LIBRARY, bandwidth=False, size_mb=256,
                    repeats=5, peer=False, source=None, timeout=DEFAULT_TIMEOUT, root="/",
                    **latency):
    """Run this file inside a Proxmox container: ``pct exec <vmid> -- python3 - <options>``
    with the source on stdin, bounded as ``probe_host`` (``root``: the host's, whose PCI
    tree says how many GPUs the copies may involve). ``runner.run(argv, check=False,
    data=..., timeout=...)`` returns ``(rc, stdout, stderr)``. The result is the probe's,
    plus ``vmid``; a container that cannot run it gives a result with ``error`` saying
    why."""
    limit = time_limit(timeout, bandwidth, size_mb, repeats, peer, len(nvidia_gpus(root)),
                       **latency)
    argv = [pct, "exec", str(vmid), "--", "python3", "-"] + probe_argv(
        library, bandwidth, size_mb, repeats, peer, **latency)
    result = _run_child(runner, argv, source, limit, library,
                        "pct exec %s -- python3 -" % vmid, vmid=vmid)
    result["vmid"] = int(vmid)
    return result


def _run_child(runner, argv, source, limit, library, what, vmid=None):
    timed_out = False
    try:
        rc, out, err = runner.run(argv, check=False, data=source or child_source(),
                                  timeout=limit)
    except Exception as exc:        # the runner's CommandTimeout (cuda.py imports no Ansible)
        if getattr(exc, "seconds", None) is None:
            raise
        rc, out, err, timed_out = None, exc.out, exc.err, True
    return child_result(rc, out, err, library, what, limit, timed_out, vmid)


def last_step(err):
    """The last progress step on a child's stderr, or None."""
    step = None
    for line in (err or "").splitlines():
        if line.startswith(STEP_PREFIX):
            step = line[len(STEP_PREFIX):].strip()
    return step


# faulthandler's names of the fatal signals it reports ("Fatal Python error: Aborted").
FAULT_NAMES = {"Segmentation fault": "SIGSEGV", "Aborted": "SIGABRT", "Bus error": "SIGBUS",
               "Floating point exception": "SIGFPE", "Illegal instruction": "SIGILL"}


def crash_signal(rc, err):
    """The name of the signal that ended the child, from faulthandler's line on stderr or a
    negative return code; None when it exited."""
    m = re.search(r"^Fatal Python error: (%s)" % "|".join(FAULT_NAMES), err or "", re.M)
    if m:
        return FAULT_NAMES[m.group(1)]
    if rc is not None and rc < 0:
        try:
            return signal.Signals(-rc).name
        except ValueError:
            return "signal %d" % -rc
    return None


def _detail(text):
    lines = [line for line in (text or "").strip().splitlines()
             if not line.startswith(STEP_PREFIX)]
    return "\n".join(lines[-DETAIL_LINES:])


def child_result(rc, out, err, library, what, limit, timed_out=False, vmid=None):
    """A probe child's result from its return code and output: its JSON document when it
    printed one (with ``time_limit``, ``timed_out`` false, ``signal`` null), else a result
    whose ``error`` says it did not return in ``limit`` s, was killed by a signal, or
    exited without a result, naming the last step it reported."""
    result = None
    for line in reversed((out or "").strip().splitlines()):
        try:
            # depth-bounded first: a container's output is tenant text (200,000 "[" were a
            # RecursionError); a NaN rate stays readable, as before
            if bounded.json_depth(line) > bounded.JSON_DEPTH:
                continue
            result = json.loads(line)
        except ValueError:
            continue
        if isinstance(result, dict) and "init" in result:
            break
        result = None
    step = last_step(err)
    sig = None if timed_out else crash_signal(rc, err)
    if result is not None and not timed_out and sig is None:
        result.update(time_limit=limit, timed_out=False, signal=None)
        return result
    result = {"library": library, "init": None, "driver_version": None, "devices": [],
              "cause": None, "step": step, "time_limit": limit, "timed_out": timed_out,
              "signal": sig}
    at = " (in step: %s)" % step if step else ""
    detail = _detail(err) or _detail(out)
    if timed_out:
        result["error"] = "%s did not return in %d s%s: killed" % (what, limit, at)
        result["cause"] = hang_cause(step)
    elif sig:
        result["error"] = "%s was killed by %s%s" % (what, sig, at)
        result["cause"] = ("the CUDA driver library crashed the process: check that the "
                           "user-space driver matches the kernel module (/proc/driver/nvidia/"
                           "version), and dmesg for NVRM/Xid lines")
    elif vmid is not None and (rc == 127 or re.search(r"python3.*(not found|No such file)|"
                                                      r"(No such file|not found).*python3",
                                                      detail)):
        result["error"] = ("container %s has no python3, which the CUDA probe needs: "
                           "install it there (apt-get install python3-minimal) (pct exec "
                           "exited %s: %s)" % (vmid, rc, detail))
    else:
        result["error"] = "%s exited %s%s: %s" % (what, rc, at, detail or "no output")
    return result


def hang_cause(step):
    """What a probe stuck in ``step`` usually means."""
    if step and "copies" in step:
        return ("the copies ran slower than %g GB/s, the rate the time limit allows for: "
                "check this GPU's link (pcie_link_degraded), AER errors (pcie_aer_errors) "
                "and dmesg for NVRM/Xid lines; a larger timeout only waits longer"
                % MIN_COPY_GBS)
    return ("the driver did not answer: a GPU that fell off the bus or is stuck in a reset "
            "(dmesg: NVRM Xid 79 or 119), a hung nvidia-persistenced or fabric manager, or a "
            "process stuck in the driver (D state in ps); check dmesg for NVRM/Xid lines and "
            "whether nvidia-smi answers; a GPU reset or reboot usually clears it")


def running_vmids(pct_list):
    """The VMIDs that ``pct list`` shows as running (a header line, then ``VMID Status
    Lock Name`` columns; the lock column may be empty)."""
    out = set()
    for line in (pct_list or "").splitlines()[1:]:
        cols = line.split()
        vmid = bounded.int_of(cols[0], digits=9) if cols else None
        if len(cols) >= 2 and vmid is not None and vmid >= 0 and cols[1] == "running":
            out.add(vmid)
    return out


def as_result(result):
    """A probe result as module cuda_probe returns it: ``msg`` naming the failure in
    place of ``error``."""
    msg = failure_message(result)
    result.pop("error", None)
    if msg:
        result["msg"] = msg
    return result


def audit_pass(runner, pct, containers, size_mb=256, library=DEFAULT_LIBRARY,
               timeout=DEFAULT_TIMEOUT, root="/", ceiling=False,
               ceiling_seconds=CEILING_SECONDS, ceiling_cublas=False):
    """The audit's opt-in CUDA pass on a live host: the host probed with pinned copy rates,
    the peer matrix (two or more GPUs) and the launch latency (AUDIT_LATENCY_COUNT round
    trips each way), then each running container of ``containers`` (the audit's ``lxc``
    facts) that has a GPU, by ``pct exec`` (``pct`` None: no Proxmox, the host alone); each
    probe a child
    bounded by ``timeout`` (``time_limit``). A probe that fails, hangs or crashes is a result
    with ``msg``, judged as a finding, never an error of the audit. ``root``: where the PCI
    tree is read (host_audit's, always ``/``: CUDA acts on the running system). With
    ``ceiling`` every probe also measures each GPU's compute and memory ceiling
    (``cuda_ceiling``, about ``ceiling_seconds`` per part and GPU), and with
    ``ceiling_cublas`` a BF16 GEMM through the cuBLAS the host or container has
    (``cuda_cublas``)."""
    extra = dict(ceiling=True, ceiling_seconds=ceiling_seconds) if ceiling else {}
    if ceiling and ceiling_cublas:
        extra["ceiling_cublas"] = True
    results = [as_result(probe_host(runner, library=library, bandwidth=True, size_mb=size_mb,
                                    timeout=timeout, root=root, latency=True, peer=True,
                                    latency_count=AUDIT_LATENCY_COUNT, **extra))]
    if not pct:
        return results
    try:
        rc, out, unused = runner.run([pct, "list"], check=False, timeout=timeout)
    except Exception as exc:        # the runner's CommandTimeout: no container is probed
        if getattr(exc, "seconds", None) is None:
            raise
        rc, out = None, ""
    running = running_vmids(out) if rc == 0 else set()
    for ct in containers or []:
        vmid = ct.get("vmid")
        if ct.get("gpu") and vmid is not None and int(vmid) in running:
            results.append(as_result(probe_container(runner, pct, vmid, library=library,
                                                     timeout=timeout, root=root, **extra)))
    return results


def failure_message(result):
    """One line naming where, the code, its name and the cause; None when CUDA works."""
    if not result.get("error"):
        return None
    where = "container %s" % result["vmid"] if result.get("vmid") is not None else "host"
    msg = "CUDA check failed on %s: %s" % (where, result["error"])
    if result.get("cause"):
        msg += "; cause: %s" % result["cause"]
    return msg
