# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prove that CUDA works and measure the PCIe path: the CUDA driver API through ctypes.

Standard library only and free of Ansible imports, so the same source runs as a child
process of the module (``python3 - [options]`` with this file on stdin, ``probe_host``),
inside a container as ``pct exec <vmid> -- python3 - [options]`` (``probe_container``),
and as a plain script (``python3 cuda.py --bandwidth``). It prints one JSON document.

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
matrix. Plain device memory (``cuMemAlloc``) and pinned host memory (``cuMemHostAlloc``)
only, never managed memory; everything allocated is freed; no GPU setting is changed.

A GPU without enough free memory for the copy is skipped with the reason; a GPU in
exclusive-process compute mode that another process holds is ``busy`` (CUDA works there).
Each GPU's link ceiling comes from sysfs under ``root``: GT/s x width x 128/130 (8 GT/s and
up; 8/10 below) / 8 bytes per direction, so PCIe Gen5 x16 is 63.0 GB/s.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ctypes
import errno
import json
import math
import os
import re
import signal
import sys
import time

DEFAULT_LIBRARY = "libcuda.so.1"
MIB = 1 << 20
# Seconds for loading the library, cuInit and the device listing (contexts included).
DEFAULT_TIMEOUT = 30
# The copy rate the time limit allows for, in GB/s: below a PCIe Gen1 x4 link's, so a GPU
# copying this slowly is broken, and a probe copying slower is killed and reported.
MIN_COPY_GBS = 1.0
# GPUs the limit assumes when the PCI tree lists none (a container's or an odd sysfs).
ASSUMED_GPUS = 8
# A progress line on the child's stderr: ``gpuhost-cuda-step: cuInit``.
STEP_PREFIX = "gpuhost-cuda-step: "
# The last lines of a child's stderr shown in a failure.
DETAIL_LINES = 5
# A bound on what is read of a sysfs or /proc file.
READ_LIMIT = 1 << 16
NVIDIA_VENDOR = "0x10de"
GPU_CLASSES = ("0x0300", "0x0302")      # VGA and 3D controllers (class 0x0300xx, 0x0302xx)
PASSTHROUGH_DRIVERS = ("vfio-pci", "pci-stub")

SUCCESS = 0
OUT_OF_MEMORY = 2
DEVICE_UNAVAILABLE = 46
NO_DEVICE = 100
PEER_ACCESS_ALREADY_ENABLED = 704
UNKNOWN = 999

ATTR_COMPUTE_MODE = 20          # CU_DEVICE_ATTRIBUTE_COMPUTE_MODE
COMPUTE_MODES = {0: "default", 1: "exclusive-thread", 2: "prohibited", 3: "exclusive-process"}

# CUresult names (cuda.h), used when the library cannot name a code itself.
ERROR_NAMES = {
    0: "CUDA_SUCCESS", 1: "CUDA_ERROR_INVALID_VALUE", 2: "CUDA_ERROR_OUT_OF_MEMORY",
    3: "CUDA_ERROR_NOT_INITIALIZED", 4: "CUDA_ERROR_DEINITIALIZED",
    34: "CUDA_ERROR_STUB_LIBRARY", 46: "CUDA_ERROR_DEVICE_UNAVAILABLE",
    100: "CUDA_ERROR_NO_DEVICE", 101: "CUDA_ERROR_INVALID_DEVICE",
    102: "CUDA_ERROR_DEVICE_NOT_LICENSED", 201: "CUDA_ERROR_INVALID_CONTEXT",
    209: "CUDA_ERROR_NO_BINARY_FOR_GPU",
    214: "CUDA_ERROR_ECC_UNCORRECTABLE", 216: "CUDA_ERROR_CONTEXT_ALREADY_IN_USE",
    217: "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", 218: "CUDA_ERROR_INVALID_PTX",
    220: "CUDA_ERROR_NVLINK_UNCORRECTABLE", 222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
    304: "CUDA_ERROR_OPERATING_SYSTEM", 400: "CUDA_ERROR_INVALID_HANDLE",
    500: "CUDA_ERROR_NOT_FOUND", 700: "CUDA_ERROR_ILLEGAL_ADDRESS",
    704: "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
    719: "CUDA_ERROR_LAUNCH_FAILED", 800: "CUDA_ERROR_NOT_PERMITTED",
    801: "CUDA_ERROR_NOT_SUPPORTED", 802: "CUDA_ERROR_SYSTEM_NOT_READY",
    803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", 804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
    999: "CUDA_ERROR_UNKNOWN",
}

_c = ctypes
_p = ctypes.POINTER
# name -> (argtypes); every entry point returns CUresult (int).
SIGNATURES = {
    "cuGetErrorName": [_c.c_int, _p(_c.c_char_p)],
    "cuGetErrorString": [_c.c_int, _p(_c.c_char_p)],
    "cuDriverGetVersion": [_p(_c.c_int)],
    "cuInit": [_c.c_uint],
    "cuDeviceGetCount": [_p(_c.c_int)],
    "cuDeviceGet": [_p(_c.c_int), _c.c_int],
    "cuDeviceGetName": [_c.c_char_p, _c.c_int, _c.c_int],
    "cuDeviceGetPCIBusId": [_c.c_char_p, _c.c_int, _c.c_int],
    "cuDeviceTotalMem_v2": [_p(_c.c_size_t), _c.c_int],
    "cuDeviceGetAttribute": [_p(_c.c_int), _c.c_int, _c.c_int],
    "cuCtxCreate_v2": [_p(_c.c_void_p), _c.c_uint, _c.c_int],
    "cuCtxDestroy_v2": [_c.c_void_p],
    "cuCtxSetCurrent": [_c.c_void_p],
    "cuCtxSynchronize": [],
    "cuMemGetInfo_v2": [_p(_c.c_size_t), _p(_c.c_size_t)],
    "cuMemAlloc_v2": [_p(_c.c_uint64), _c.c_size_t],
    "cuMemFree_v2": [_c.c_uint64],
    "cuMemHostAlloc": [_p(_c.c_void_p), _c.c_size_t, _c.c_uint],
    "cuMemFreeHost": [_c.c_void_p],
    "cuMemcpyHtoD_v2": [_c.c_uint64, _c.c_void_p, _c.c_size_t],
    "cuMemcpyDtoH_v2": [_c.c_void_p, _c.c_uint64, _c.c_size_t],
    "cuDeviceCanAccessPeer": [_p(_c.c_int), _c.c_int, _c.c_int],
    "cuCtxEnablePeerAccess": [_c.c_void_p, _c.c_uint],
    "cuMemcpyPeer": [_c.c_uint64, _c.c_void_p, _c.c_uint64, _c.c_void_p, _c.c_size_t],
    "cuModuleLoadData": [_p(_c.c_void_p), _c.c_char_p],
    "cuModuleGetFunction": [_p(_c.c_void_p), _c.c_void_p, _c.c_char_p],
    "cuModuleUnload": [_c.c_void_p],
    "cuLaunchKernel": [_c.c_void_p, _c.c_uint, _c.c_uint, _c.c_uint, _c.c_uint, _c.c_uint,
                       _c.c_uint, _c.c_uint, _c.c_void_p, _c.c_void_p, _c.c_void_p],
}

# The launch-latency kernel: an entry point that returns. PTX ISA 6.0 for sm_50 is the
# oldest pair that the JIT of every driver branch the probe supports accepts (Maxwell and
# newer: CUDA 12 and 13 drivers); the driver compiles it for the GPU at load time, so one
# text serves every architecture. A driver that refuses it leaves the GPU "skipped" with
# the code (218 CUDA_ERROR_INVALID_PTX, 222 CUDA_ERROR_UNSUPPORTED_PTX_VERSION).
LATENCY_KERNEL = "gpuhost_empty"
# What a time limit allows per launch round trip on top of its sleep (a healthy one takes
# 5-20 us; the init share of the limit absorbs slower ones).
MAX_LAUNCH_US = 250
# Round trips per mode the audit's CUDA pass times per GPU (about 0.1 s each at 1 ms sleeps).
AUDIT_LATENCY_COUNT = 100
LATENCY_PTX = (".version 6.0\n.target sm_50\n.address_size 64\n\n"
               ".visible .entry %s()\n{\n\tret;\n}\n" % LATENCY_KERNEL)


class CudaError(Exception):
    """A driver call returned ``code``; ``step`` names the entry point."""

    def __init__(self, step, code, name, text):
        self.step = step
        self.code = code
        self.name = name
        self.text = text
        Exception.__init__(self, "%s returned %s %s (%s)" % (step, code, name, text))

    def as_dict(self):
        return {"step": self.step, "code": self.code, "name": self.name, "text": self.text}


class Driver:
    """The loaded library: ``call(name, *args)`` raises CudaError on a non-zero CUresult."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.funcs = {}

    def func(self, name):
        if name not in self.funcs:
            fn = getattr(self.lib, name)        # AttributeError: not exported
            fn.restype = ctypes.c_int
            fn.argtypes = SIGNATURES[name]
            self.funcs[name] = fn
        return self.funcs[name]

    def raw(self, name, *args):
        try:
            fn = self.func(name)
        except AttributeError:
            raise CudaError(name, -1, "SYMBOL_NOT_FOUND",
                            "the library does not export %s" % name)
        return fn(*args)

    def call(self, name, *args):
        code = self.raw(name, *args)
        if code != SUCCESS:
            raise self.error(name, code)

    def error(self, step, code):
        described = self.describe(code)
        return CudaError(step, code, described["name"], described["text"])

    def describe(self, code):
        """``{code, name, text}`` from cuGetErrorName/cuGetErrorString, else the table."""
        name = text = None
        for fname in ("cuGetErrorName", "cuGetErrorString"):
            out = ctypes.c_char_p()
            try:
                ok = self.func(fname)(code, ctypes.byref(out)) == SUCCESS and out.value
            except AttributeError:
                ok = False
            if ok:
                value = out.value.decode("utf-8", "replace")
                if fname == "cuGetErrorName":
                    name = value
                else:
                    text = value
        name = name or ERROR_NAMES.get(code, "CUDA_ERROR_%d" % code)
        return {"code": code, "name": name, "text": text or name}


# --- sysfs, /proc, /dev under root ---------------------------------------------------------

def _under(root, path):
    return os.path.join(root or "/", path.lstrip("/"))


def _read(root, path):
    """The text of a small file (the first READ_LIMIT bytes), or None when unreadable."""
    try:
        with open(_under(root, path), "rb") as handle:
            return handle.read(READ_LIMIT).decode("utf-8", "replace").strip()
    except (IOError, OSError):
        return None


def nvidia_gpus(root, passthrough=True):
    """PCI addresses (sysfs form, sorted) of the NVIDIA display and 3D controllers (vendor
    0x10de, class 0x0300xx or 0x0302xx) in ``/sys/bus/pci/devices`` under ``root``; without
    ``passthrough`` those bound to a passthrough driver (PASSTHROUGH_DRIVERS: a VM's GPU,
    which CUDA on the host never sees) are left out."""
    base = "/sys/bus/pci/devices"
    try:
        names = sorted(os.listdir(_under(root, base)))
    except OSError:
        return []
    out = []
    for name in names:
        if (_read(root, "%s/%s/vendor" % (base, name)) or "").lower() != NVIDIA_VENDOR:
            continue
        if (_read(root, "%s/%s/class" % (base, name)) or "").lower()[:6] not in GPU_CLASSES:
            continue
        if not passthrough:
            try:
                driver = os.path.basename(os.readlink(
                    _under(root, "%s/%s/driver" % (base, name))))
            except OSError:
                driver = None           # no driver bound: CUDA should see it, and does not
            if driver in PASSTHROUGH_DRIVERS:
                continue
        out.append(name)
    return out


def normalize_bus_id(text):
    """The driver's ``0000:A1:00.0`` (or an 8-digit domain) in sysfs form ``0000:a1:00.0``."""
    m = re.match(r"^\s*([0-9a-fA-F]{1,8}):([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])\s*$",
                 text or "")
    if not m:
        return (text or "").strip().lower()
    return "%04x:%02x:%02x.%s" % (int(m.group(1), 16), int(m.group(2), 16),
                                  int(m.group(3), 16), m.group(4))


def parse_gts(text):
    """``32.0 GT/s PCIe`` / ``8 GT/s`` / ``2.5 GT/s`` -> float; ``Unknown`` or absent -> None."""
    m = re.match(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*GT/s", text or "", re.IGNORECASE)
    return float(m.group(1)) if m else None


def link_ceiling_gbs(gts, width):
    """Bytes per second per direction, in GB/s (10^9), of a PCIe link."""
    if not gts or not width:
        return None
    coding = 128.0 / 130.0 if gts >= 8.0 else 8.0 / 10.0
    return gts * width * coding / 8.0


def read_link(root, bus_id):
    """``{speed, width, gbs}`` of the device's current link, from sysfs under ``root``."""
    base = "/sys/bus/pci/devices/%s" % bus_id
    speed_text = _read(root, base + "/current_link_speed")
    width_text = _read(root, base + "/current_link_width")
    gts = parse_gts(speed_text)
    try:
        width = int(width_text) if width_text else None
    except ValueError:
        width = None
    gbs = link_ceiling_gbs(gts, width)
    return {"speed": speed_text, "width": width, "gbs": round(gbs, 1) if gbs else None}


def char_majors(root):
    """``{name: major}`` of the character devices in ``/proc/devices`` under ``root``."""
    majors = {}
    text = _read(root, "/proc/devices") or ""
    section = None
    for line in text.splitlines():
        if line.endswith("devices:"):
            section = line.strip()
            continue
        m = re.match(r"^\s*(\d+)\s+(\S+)$", line)
        if m and section == "Character devices:":
            majors.setdefault(m.group(2), int(m.group(1)))
    return majors


def uvm_state(root):
    """What is wrong with ``/dev/nvidia-uvm``, as one sentence, or None when nothing shows."""
    path = _under(root, "/dev/nvidia-uvm")
    major = char_majors(root).get("nvidia-uvm")
    if major is None:
        return ("nvidia-uvm is not in /proc/devices: the nvidia_uvm kernel module is not "
                "loaded on the host (modprobe nvidia-uvm)")
    try:
        st = os.stat(path)
    except OSError:
        return ("/dev/nvidia-uvm does not exist here: on a host, nvidia-modprobe -u -c=0 "
                "creates it; in a container, bind-mount it (lxc.mount.entry: /dev/nvidia-uvm "
                "dev/nvidia-uvm none bind,optional,create=file)")
    import stat as _stat
    if not _stat.S_ISCHR(st.st_mode) or os.major(st.st_rdev) != major:
        kind = "char %d:%d" % (os.major(st.st_rdev), os.minor(st.st_rdev)) \
            if _stat.S_ISCHR(st.st_mode) else "not a character device"
        return ("/dev/nvidia-uvm is %s, but nvidia-uvm's major is %d (/proc/devices): the node "
                "is not the UVM device (a stale or wrong bind mount or node)" % (kind, major))
    try:
        fd = os.open(path, os.O_RDONLY)
        os.close(fd)
    except OSError as exc:
        if exc.errno in (errno.EPERM, errno.EACCES):
            return ("opening /dev/nvidia-uvm (char %d) failed with %s: the device rules do "
                    "not allow its current major (in a container: lxc.cgroup2.devices.allow: "
                    "c %d:* rwm; gpuhost.tuning.lxc_cgroup_devices repairs them)"
                    % (major, os.strerror(exc.errno), major))
        return "opening /dev/nvidia-uvm failed: %s" % os.strerror(exc.errno)
    return None


def cause_for(code, root):
    """What usually produces ``code`` and what to check, or None for an unlisted code."""
    if code == UNKNOWN:
        found = uvm_state(root)
        generic = ("CUDA_ERROR_UNKNOWN from cuInit usually means /dev/nvidia-uvm is unusable "
                   "while nvidia-smi still works: in a container, the device rules for "
                   "nvidia-uvm's current major (/proc/devices; gpuhost.tuning."
                   "lxc_cgroup_devices repairs them) and its bind mount; on the host, that "
                   "nvidia_uvm is loaded; then dmesg for NVRM/Xid lines")
        return "%s. %s" % (found, generic) if found else generic
    if code == NO_DEVICE:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        extra = " (CUDA_VISIBLE_DEVICES=%r hides GPUs)" % visible if visible is not None else ""
        return ("no CUDA device is visible%s: check that /dev/nvidia0.. and /dev/nvidiactl "
                "exist and are allowed (major 195; in a container bind-mounted and in "
                "lxc.cgroup2.devices.allow) and that nvidia-smi -L lists the GPUs" % extra)
    if code == 803:
        return ("the user-space driver (libcuda) differs from the loaded kernel module "
                "(/proc/driver/nvidia/version): in a container install the host's exact driver "
                "version without its kernel module; on a host, reboot after a driver upgrade")
    if code == 802:
        return ("the system is not ready: on NVSwitch systems nvidia-fabricmanager must run, at "
                "the driver's version (systemctl status nvidia-fabricmanager)")
    if code == 34:
        return ("the CUDA toolkit's stub libcuda.so was loaded instead of the driver's: put the "
                "driver's libcuda.so.1 first on the library path")
    if code == 304:
        return ("an operating-system call failed: check the permissions of /dev/nvidiactl and "
                "/dev/nvidia*, and dmesg for NVRM lines")
    if code is None:
        return ("the GPU gave back other data than it was sent: check nvidia-smi -q for ECC "
                "errors and dmesg for NVRM/Xid lines")
    if code == 3:
        return "the driver failed to initialise: dmesg for NVRM/Xid lines, nvidia-smi"
    return None


# --- the probe (in the child process) -----------------------------------------------------

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
          latency_gpus=None):
    """Run the probe in this process; return the result dict (``error`` is None when CUDA
    works). Only the child process calls this (``main``): callers use ``probe_host`` or
    ``probe_container``. ``progress(step)`` is called before each step; ``step`` in the
    result is the last one (``done`` when it finished)."""
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


def own_source():
    """This file's source, to run it elsewhere as ``python3 -`` (works from Ansible's zip)."""
    import inspect
    return inspect.getsource(sys.modules[__name__])


def probe_argv(library=DEFAULT_LIBRARY, bandwidth=False, size_mb=256, repeats=5, peer=False,
               latency=False, latency_count=200, latency_gap_us=1000, latency_gpus=None):
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
    return argv


def time_limit(timeout=DEFAULT_TIMEOUT, bandwidth=False, size_mb=256, repeats=5, peer=False,
               gpus=0, latency=False, latency_count=200, latency_gap_us=1000,
               latency_gpus=None):
    """Seconds a probe child gets: ``timeout`` for loading, cuInit and the device listing,
    plus every asked copy (a warm-up and ``repeats`` per direction and GPU, the same per
    ordered GPU pair with ``peer``) at MIN_COPY_GBS, plus with ``latency`` every round trip
    (a tenth more for the warm-up, twice ``latency_count`` per GPU) at its sleep plus
    MAX_LAUNCH_US. ``gpus``: how many the PCI tree lists (0: ASSUMED_GPUS)."""
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
        rc, out, err = runner.run(argv, check=False, data=source or own_source(),
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
        if len(cols) >= 2 and cols[0].isdigit() and cols[1] == "running":
            out.add(int(cols[0]))
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
               timeout=DEFAULT_TIMEOUT, root="/"):
    """The audit's opt-in CUDA pass on a live host: the host probed with pinned copy rates,
    the peer matrix (two or more GPUs) and the launch latency (AUDIT_LATENCY_COUNT round
    trips each way), then each running container of ``containers`` (the audit's ``lxc``
    facts) that has a GPU, by ``pct exec`` (``pct`` None: no Proxmox, the host alone); each
    probe a child
    bounded by ``timeout`` (``time_limit``). A probe that fails, hangs or crashes is a result
    with ``msg``, judged as a finding, never an error of the audit. ``root``: where the PCI
    tree is read (host_audit's, always ``/``: CUDA acts on the running system)."""
    results = [as_result(probe_host(runner, library=library, bandwidth=True, size_mb=size_mb,
                                    timeout=timeout, root=root, latency=True, peer=True,
                                    latency_count=AUDIT_LATENCY_COUNT))]
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
                                                     timeout=timeout, root=root)))
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


def main(argv=None):
    import argparse
    parser = argparse.ArgumentParser(prog="cuda-probe", description=__doc__.splitlines()[0])
    parser.add_argument("--library", default=DEFAULT_LIBRARY)
    parser.add_argument("--bandwidth", action="store_true")
    parser.add_argument("--size-mb", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--peer", action="store_true")
    parser.add_argument("--root", default="/")
    parser.add_argument("--progress", action="store_true",
                        help="name each step on stderr (%r lines) before taking it"
                        % STEP_PREFIX.strip())
    parser.add_argument("--latency", action="store_true")
    parser.add_argument("--latency-count", type=int, default=200)
    parser.add_argument("--latency-gap-us", type=int, default=1000)
    parser.add_argument("--latency-gpus", default="")
    args = parser.parse_args(argv)
    if args.size_mb < 1 or args.repeats < 1:
        parser.error("--size-mb and --repeats must be at least 1")
    if args.latency_count < 1 or args.latency_gap_us < 0:
        parser.error("--latency-count must be at least 1 and --latency-gap-us at least 0")
    import faulthandler
    faulthandler.enable()       # a fatal signal is named on stderr, even through pct exec
    result = probe(library=args.library, bandwidth=args.bandwidth, size_mb=args.size_mb,
                   repeats=args.repeats, peer=args.peer, root=args.root,
                   progress=_stderr_step if args.progress else None, latency=args.latency,
                   latency_count=args.latency_count, latency_gap_us=args.latency_gap_us,
                   latency_gpus=[g for g in args.latency_gpus.split(",") if g])
    sys.stdout.write(json.dumps(result, sort_keys=True) + "\n")
    return 1 if result["error"] else 0


def _stderr_step(step):
    sys.stderr.write(STEP_PREFIX + step + "\n")
    sys.stderr.flush()


if __name__ == "__main__":
    raise SystemExit(main())
