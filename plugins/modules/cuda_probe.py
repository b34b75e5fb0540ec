#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: cuda_probe
short_description: Prove that CUDA works and measure each GPU's PCIe copy rate
version_added: 0.2.0
description:
  - Loads the CUDA driver library (no toolkit, no framework) through ctypes, calls
    C(cuInit(0)), and for every GPU reads its name, PCI bus id and total memory and creates
    a context. This is what fails when C(nvidia-smi) still lists the GPUs but every CUDA
    program dies, for example with error 999 C(CUDA_ERROR_UNKNOWN) in a container whose
    device rules no longer allow C(/dev/nvidia-uvm).
  - With O(bandwidth), times pinned host-to-device and device-to-host copies of O(size_mb)
    MiB (best of O(repeats), after one warm-up, each copy followed by a synchronise; the
    data is checked after the round trip) and relates them to the ceiling of the GPU's
    current PCIe link read from sysfs.
  - With O(peer) and two or more GPUs, the peer-to-peer matrix (C(cuDeviceCanAccessPeer),
    and the copy rate where peer access exists).
  - "With O(latency), the round trip of an empty kernel launch plus synchronise per GPU
    (C(cuModuleLoadData) of a PTX kernel that only returns, C(cuLaunchKernel),
    C(cuCtxSynchronize), timed on the host), O(latency_count) times back to back and
    O(latency_count) times with the thread sleeping O(latency_gap_us) before each launch
    (what a serving loop does between steps - a core that may enter a deep idle state wakes
    from it before it can launch), each after a warm-up, as p50, p99 and max in
    microseconds. The PTX (ISA 6.0, C(sm_50)) is compiled by the driver for the GPU, so one
    text serves every architecture from Maxwell on; a driver that refuses it leaves the GPU's
    RV(devices[].latency.skipped) naming the code. The module is unloaded afterwards."
  - "With O(ceiling), each GPU's compute and memory ceiling, with kernels the driver
    JIT-compiles from PTX (no toolkit, no framework): device-to-device copies
    (C(cuMemcpyDtoD)) of O(ceiling_mb) MiB per side, or what free memory allows, counted
    read + write (2 x bytes / s); an FP32 FMA loop (every architecture); a BF16 tensor-core
    loop (C(mma.sync) m16n8k16, sm_80 and later) and an FP8 E4M3 one (C(mma.sync)
    m16n8k32, sm_89 and later). Each part runs about O(ceiling_seconds), best of 3 runs,
    on a grid sized from the GPU's multiprocessors; FLOPs are counted from the kernel
    (an FMA 2, an m16n8k16 C(mma) 2 x 16 x 8 x 16). Every result is checked: the copied
    data read back, each kernel's output compared with what the host computes, and a part
    that did nothing or wrong is C(checked) false with the error
    and no figure, never a rate. A part the compute capability lacks is skipped with why.
    The figures are what C(mma.sync) and a plain copy reach, not a tuned GEMM (on an H100
    SXM C(mma.sync) BF16 reaches about 84 % of torch.matmul's 8192^3 figure: Hopper's full
    rate needs wgmma)."
  - Plain device memory and pinned host memory only, never managed memory; everything
    allocated is freed. No GPU setting is changed. A GPU without enough free memory for the
    copy is reported as skipped; a GPU in exclusive-process compute mode held by another
    process is reported as busy. Neither fails the module.
  - With O(vmid), the same probe runs inside that Proxmox container through
    C(pct exec <vmid> -- python3 -) with its source on stdin; the container needs
    C(python3) (standard library only) and the NVIDIA user-space driver.
  - The probe always runs in a child process (C(python3 -) with its source on stdin), never
    in the module's own, bounded by O(timeout) - a driver whose C(cuInit) never returns is
    killed with its process group at the limit, and a crash takes only the child.
  - Fails, with the result still returned, when the library cannot be loaded, when
    C(cuInit) fails or when a device step fails (the message names the code, its name and
    the usual cause); when C(cuInit) succeeds with 0 devices while the PCI tree under
    O(root) lists NVIDIA GPUs (naming their addresses); when the probe did not return in
    its limit (C(did not return in N s), with the step it was in); and when it was killed
    by a signal (its name and the step).
options:
  library:
    description: The CUDA driver library, a name the dynamic loader finds or a path.
    type: str
    default: libcuda.so.1
  bandwidth:
    description: Measure pinned host-to-device and device-to-host copy rates per GPU.
    type: bool
    default: false
  size_mb:
    description: Size of each copy in MiB (also the device and pinned host memory the
      probe takes per GPU while measuring).
    type: int
    default: 256
  repeats:
    description: Timed copies per direction; the best one counts.
    type: int
    default: 5
  peer:
    description: Measure the peer-to-peer matrix between GPUs (two or more GPUs).
    type: bool
    default: false
  latency:
    description: Measure each GPU's launch-and-synchronise round trip, after a sleep and back
      to back.
    type: bool
    default: false
  latency_count:
    description: Round trips per mode of O(latency) (1 to 100000), after a warm-up of a tenth
      as many.
    type: int
    default: 200
  latency_gap_us:
    description: How long the thread sleeps before each launch of the "sleeping" mode of
      O(latency), in microseconds (0 to 1000000).
    type: int
    default: 1000
  latency_gpus:
    description: Time only these GPUs (PCI addresses as sysfs or the driver print them);
      empty times every GPU. The others get RV(devices[].latency.skipped).
    type: list
    elements: str
    default: []
  ceiling:
    description: Measure each GPU's compute (FP32, BF16, FP8) and memory (device-to-device)
      ceiling.
    type: bool
    default: false
  ceiling_seconds:
    description: About how long each part of O(ceiling) runs per GPU, its 3 timed runs
      together (0.05 to 60).
    type: float
    default: 1.0
  ceiling_mb:
    description: The device-to-device copy's buffer per side in MiB (1 to 65536); less when
      free memory does not allow it (C(limited_by)).
    type: int
    default: 1024
  ceiling_cublas:
    description:
      - With O(ceiling), also a BF16 GEMM through cuBLAS on each GPU (sm_80 and later), the
        realistic figure a framework's matmul reaches, beside the PTX loops
        (RV(devices[].ceiling.cublas_bf16), C(path) C(cublas)).
      - Off by default because it loads a library the host may have only from a framework
        install - O(cublas), else C(libcublas.so.13) or C(libcublas.so.12) on the library
        path, else the copy a PyTorch install ships (C(nvidia/cublas/lib),
        C(nvidia/cu13/lib) or C(torch/lib) under this Python's and the usual site-packages
        folders, then C(/usr/local/cuda*/lib64)); never a search of the whole disk. Without
        one the part is C({skipped}) naming where it looked.
    type: bool
    default: false
  cublas:
    description: The libcublas to load for O(ceiling_cublas) (a path); nothing else is
      tried then.
    type: path
  timeout:
    description:
      - Seconds the probe may take to load the library, initialise CUDA and list the
        devices (1 to 3600). With O(bandwidth) or O(peer) the time every asked copy takes at
        1 GB/s is added, with O(ceiling) twice O(ceiling_seconds) and a second per part and
        GPU and its copies' fills at 1 GB/s, with O(ceiling_cublas) 30 s for loading cuBLAS
        and per GPU twice O(ceiling_seconds) and 10 s (for as many GPUs as the PCI tree
        under O(root) lists, 8 when it lists none), so a healthy GPU never hits the limit
        and a copy slower than that is reported, not waited for.
      - At the limit the probe is killed (SIGTERM, SIGKILL 5 s later, to its whole process
        group, a C(pct exec) included) and the module fails with RV(timed_out) true.
    type: int
    default: 30
  vmid:
    description: Run the probe inside this Proxmox container (C(pct exec)) instead of on
      the host. The container's own C(/sys) gives the links there.
    type: int
  root:
    description: Host root under which each GPU's link (C(/sys/bus/pci/devices/<bdf>/
      current_link_speed), C(current_link_width)), the NVIDIA GPUs the PCI tree lists and,
      for a failure's cause, C(/proc/devices) and C(/dev/nvidia-uvm) are read. The CUDA calls
      themselves always act on the running system.
    type: path
    default: /
notes:
  - Supports check mode (the same read-only run).
  - "Measured on an NVIDIA H200 (PCIe Gen5 x16, driver 580.159.04): 256 MiB copies at
    55.2 GB/s each way, 87.6 % of the link's 63.0 GB/s, within 2.5 % of PyTorch's pinned
    copies; about 0.4 s without bandwidth, 0.6 s with it."
author:
  - gpuhost.tuning developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Prove CUDA works on the host
  gpuhost.tuning.cuda_probe: {}

- name: Prove CUDA works inside container 129
  gpuhost.tuning.cuda_probe:
    vmid: 129

- name: Measure every GPU's PCIe copy rate and the peer matrix
  gpuhost.tuning.cuda_probe:
    bandwidth: true
    peer: true
  register: cuda

- name: Launch latency of every GPU, after a 1 ms sleep and back to back
  gpuhost.tuning.cuda_probe:
    latency: true
  register: lat
- name: Each GPU's compute and memory ceiling, about a second per part
  gpuhost.tuning.cuda_probe:
    ceiling: true
  register: ceiling

- name: The ceiling with a BF16 GEMM through the cuBLAS a PyTorch install ships
  gpuhost.tuning.cuda_probe:
    ceiling: true
    ceiling_cublas: true

- name: Show each GPU's rate against its link
  ansible.builtin.debug:
    msg: "{{ item.pci_bus_id }}: {{ item.h2d_gbs }} GB/s, {{ item.h2d_pct }} % of the link"
  loop: "{{ cuda.devices }}"
"""

RETURN = r"""
init:
  description: What C(cuInit(0)) returned; null when the library could not be loaded.
  returned: always
  type: dict
  contains:
    code:
      description: The CUresult, 0 for success.
      type: int
      sample: 999
    name:
      description: Its name.
      type: str
      sample: CUDA_ERROR_UNKNOWN
    text:
      description: The driver's description.
      type: str
      sample: unknown error
driver_version:
  description: C(cuDriverGetVersion), for example 13000 for CUDA 13.0; null when unknown.
  returned: always
  type: int
  sample: 13000
library:
  description: The library asked for.
  returned: always
  type: str
  sample: libcuda.so.1
devices:
  description: One entry per GPU CUDA sees.
  returned: always
  type: list
  elements: dict
  contains:
    index:
      description: CUDA device ordinal.
      type: int
    name:
      description: Device name.
      type: str
      sample: NVIDIA H200
    pci_bus_id:
      description: PCI address in sysfs form (lower case, 4-digit domain).
      type: str
      sample: "0000:a1:00.0"
    memory_total_mb:
      description: Total device memory in MiB.
      type: int
      sample: 143155
    link:
      description: The current link from sysfs, null when unreadable.
      type: str
      sample: 32.0 GT/s PCIe x16
    link_gbs:
      description: Per-direction ceiling of the current link in GB/s (10^9 bytes) - GT/s
        x width x 128/130 from 8 GT/s up (8/10 below) / 8; null when unreadable.
      type: float
      sample: 63.0
    h2d_gbs:
      description: Best pinned host-to-device rate in GB/s; null when not measured.
      type: float
      sample: 55.18
    d2h_gbs:
      description: Best pinned device-to-host rate in GB/s; null when not measured.
      type: float
      sample: 55.2
    h2d_pct:
      description: RV(devices[].h2d_gbs) as a percentage of RV(devices[].link_gbs).
      type: float
      sample: 87.6
    d2h_pct:
      description: RV(devices[].d2h_gbs) as a percentage of RV(devices[].link_gbs).
      type: float
      sample: 87.6
    busy:
      description: Exclusive-process compute mode and held by another process (CUDA works
        there; nothing measured).
      type: bool
    compute_mode:
      description: The compute mode, read only when a context was refused.
      type: str
      returned: when a context was refused with CUDA_ERROR_DEVICE_UNAVAILABLE
      sample: exclusive-process
    skipped:
      description: Why the GPU was not measured (busy, prohibited, too little free memory),
        else null.
      type: str
      sample: "only 100 MiB of GPU memory free, the copy needs 320 MiB: not measured"
    error:
      description: The failed step, C({step, code, name, text}), else null.
      type: dict
    latency:
      description: The launch round trip, with O(latency).
      type: dict
      returned: when O(latency) is true
      contains:
        count:
          description: Round trips per mode.
          type: int
          sample: 200
        gap_us:
          description: The sleep before each launch of RV(devices[].latency.sleeping), us.
          type: int
          sample: 1000
        sleeping:
          description: C({p50_us, p99_us, max_us}) with the thread sleeping before each
            launch; null when not measured.
          type: dict
          sample: {"p50_us": 11.2, "p99_us": 15.9, "max_us": 31.0}
        back_to_back:
          description: C({p50_us, p99_us, max_us}) of launches back to back; null when not
            measured.
          type: dict
          sample: {"p50_us": 8.1, "p99_us": 9.4, "max_us": 20.3}
        skipped:
          description: Why this GPU was not timed (the driver refused the kernel, with the
            code; not among O(latency_gpus); busy), else null.
          type: str
    ceiling:
      description: The GPU's compute and memory ceiling, with O(ceiling); C({skipped}) for a
        GPU without a context (busy, prohibited).
      type: dict
      returned: when O(ceiling) is true
      contains:
        compute_capability:
          description: The GPU's compute capability.
          type: str
          sample: "9.0"
        sm_count:
          description: Its multiprocessors (the grid is 4 blocks of 256 threads on each).
          type: int
          sample: 132
        memory:
          description: C({gbs, runs_gbs, bytes, limited_by, copies_per_run, checked, path})
            - the best device-to-device rate in GB/s counting read + write, every run's,
            the buffer per side, C(asked) or C(free memory), C(path) C(ptx-dtod); or
            C({checked, error}) when the copied data was wrong; or C({skipped}).
          type: dict
          sample: {"gbs": 3014.9, "runs_gbs": [3014.9, 3014.8, 3014.9], "bytes": 1073741824,
                   "limited_by": "asked", "copies_per_run": 467, "checked": true,
                   "path": "ptx-dtod"}
        fp32:
          description: C({tflops, runs_tflops, iters, threads, checked, path}) of the FP32
            FMA loop (C(path) C(ptx-fma)); C({checked, error}) without C(tflops) when the
            kernel wrote a wrong result; C({skipped}) with why.
          type: dict
          sample: {"tflops": 65.26, "runs_tflops": [65.26, 65.26, 65.26], "checked": true,
                   "path": "ptx-fma", "iters": 670221, "threads": 135168}
        bf16:
          description: The BF16 C(mma.sync) loop as RV(devices[].ceiling.fp32) (C(path)
            C(ptx-mma)); C({skipped}) before sm_80.
          type: dict
          sample: {"tflops": 670.4, "checked": true, "path": "ptx-mma"}
        fp8:
          description: The FP8 E4M3 C(mma.sync) loop likewise; C({skipped}) before sm_89.
          type: dict
          sample: {"tflops": 1152.49, "checked": true, "path": "ptx-mma"}
        cublas_bf16:
          description: With O(ceiling_cublas), C({tflops, runs_tflops, checked, path,
            library, m, n, k, gemms_per_run, types}) - the best of 3 runs of
            C(cublasGemmEx) BF16 x BF16 -> FP32 (C(CUBLAS_COMPUTE_32F)), 2 m n k per GEMM,
            of 8192 (halved while free memory is short), C(path) C(cublas), C(library) the
            file loaded; a sample of C checked against the host's sums; C({checked, error})
            for a wrong result or a cuBLAS status; C({skipped}) without a library (naming
            where it looked), before sm_80 or without room.
          type: dict
          returned: when O(ceiling_cublas) is true
          sample: {"tflops": 780.1, "checked": true, "path": "cublas",
                   "library": "/usr/lib/python3/dist-packages/nvidia/cu13/lib/libcublas.so.13",
                   "m": 8192, "n": 8192, "k": 8192}
        seconds:
          description: Wall time of the GPU's ceiling parts.
          type: float
          sample: 4.8
peers:
  description: Ordered GPU pairs C({from, to, from_bus_id, to_bus_id, access, gbs}) -
    C(access) from C(cuDeviceCanAccessPeer), C(gbs) the best peer copy rate where access
    exists. Empty with fewer than two GPUs.
  returned: when O(peer) is true
  type: list
  elements: dict
cause:
  description: For a known failure, what usually produces it and what to check (for 999 it
    also names what is wrong with C(/dev/nvidia-uvm) where that shows); else null.
  returned: always
  type: str
  sample: "/dev/nvidia-uvm is char 1:3, but nvidia-uvm's major is 238 (/proc/devices) ..."
seconds:
  description: Wall time of the probe itself.
  returned: when the probe returned a result
  type: float
  sample: 0.43
step:
  description: The last step the probe reached - C(done) when it finished; else where it
    stopped, for example C(cuInit), or a GPU's C(cuCtxCreate) or host-to-device copies
    (named with the GPU's index and PCI address).
  returned: always
  type: str
  sample: done
time_limit:
  description: The seconds the probe was given (O(timeout) plus the copies' share).
  returned: always
  type: int
  sample: 30
timed_out:
  description: The probe did not return in RV(time_limit) and was killed.
  returned: always
  type: bool
  sample: false
signal:
  description: The signal that killed the probe (a crash in the driver library), for
    example C(SIGSEGV); null when it exited.
  returned: always
  type: str
  sample: SIGSEGV
vmid:
  description: The container probed.
  returned: when O(vmid) is set
  type: int
"""

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import zipload  # noqa: E402

zipload.install()  # before the collection's imports: compiled once per host and version

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import (  # noqa: E402
    cuda,
    latency_part,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import Runner  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (  # noqa: E402
    PCI_ADDRESS,
    VMID_RANGE,
    check_module,
    common,
    fail,
    int_range,
)


def rules(p):
    """Option values this module refuses before it reads or writes anything (run by
    validate.check_module: a ValidationError names the option, the value and what is
    allowed)."""
    common(p)
    if p.get("vmid") is not None:
        int_range("vmid", p["vmid"], *VMID_RANGE)
    int_range("size_mb", p.get("size_mb"), 1, 65536)
    int_range("repeats", p.get("repeats"), 1, 1000)
    int_range("timeout", p.get("timeout"), 1, 3600)
    if not p.get("library"):
        fail("library", p.get("library"), "a library name like libcuda.so.1 or a path")
    latency_part.rules(p)
    if p.get("ceiling_seconds") is not None and not 0.05 <= p["ceiling_seconds"] <= 60:
        fail("ceiling_seconds", p["ceiling_seconds"], "a number from 0.05 to 60")
    if p.get("ceiling_mb") is not None:
        int_range("ceiling_mb", p["ceiling_mb"], 1, 65536)
    for bdf in p.get("latency_gpus") or []:
        if not PCI_ADDRESS.match(bdf or ""):
            fail("latency_gpus", bdf, "PCI addresses like 0000:c1:00.0")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            library=dict(type="str", default=cuda.DEFAULT_LIBRARY),
            bandwidth=dict(type="bool", default=False),
            size_mb=dict(type="int", default=256),
            repeats=dict(type="int", default=5),
            peer=dict(type="bool", default=False),
            latency=dict(type="bool", default=False),
            latency_count=dict(type="int", default=200),
            latency_gap_us=dict(type="int", default=1000),
            latency_gpus=dict(type="list", elements="str", default=[]),
            ceiling=dict(type="bool", default=False),
            ceiling_seconds=dict(type="float", default=cuda.CEILING_SECONDS),
            ceiling_mb=dict(type="int", default=cuda.CEILING_MB),
            ceiling_cublas=dict(type="bool", default=False),
            cublas=dict(type="path"),
            timeout=dict(type="int", default=cuda.DEFAULT_TIMEOUT),
            vmid=dict(type="int"),
            root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    with check_module(module, "cuda_probe", rules):
        _run(module)


def _run(module):
    p = module.params
    options = dict(library=p["library"], bandwidth=p["bandwidth"], size_mb=p["size_mb"],
                   repeats=p["repeats"], peer=p["peer"], timeout=p["timeout"], root=p["root"],
                   latency=p["latency"], latency_count=p["latency_count"],
                   latency_gap_us=p["latency_gap_us"], latency_gpus=p["latency_gpus"],
                   ceiling=p["ceiling"], ceiling_seconds=p["ceiling_seconds"],
                   ceiling_mb=p["ceiling_mb"], ceiling_cublas=p["ceiling_cublas"],
                   cublas=p["cublas"])
    runner = Runner(module)
    if p["vmid"] is not None:
        pct = module.get_bin_path("pct")
        if not pct:
            module.fail_json(msg="pct not found on the PATH: vmid needs a Proxmox VE host")
        result = cuda.probe_container(runner, pct, p["vmid"], **options)
    else:
        result = cuda.probe_host(runner, **options)
    result = cuda.as_result(result)
    if "msg" in result:
        module.fail_json(**result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
