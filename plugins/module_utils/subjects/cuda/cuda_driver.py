# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The CUDA probe's base (first half of the child script, see ``cuda_child``): the driver
API through ctypes (``Driver``, the error names, the entry points' signatures), the probe's
constants, and what it reads of sysfs, /proc and /dev under ``root`` (NVIDIA GPUs and
their links, the character majors, nvidia-uvm's state, the cause of an error code).

Standard library only, no import of the collection: ``cuda.child_source()`` ships this
source, then ``cuda_child``'s, as one script.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ctypes
import errno
import os
import re

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
    "cuMemcpyDtoD_v2": [_c.c_uint64, _c.c_uint64, _c.c_size_t],
    "cuMemsetD32_v2": [_c.c_uint64, _c.c_uint, _c.c_size_t],
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
    """Bytes per second per direction, in GB/s (10^9), of a PCIe link: GT/s x width x
    128/130 (8 GT/s and up; 8/10 below) / 8, so PCIe Gen5 x16 is 63.0 GB/s (a GPU's link
    ceiling, read from sysfs under ``root``)."""
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
