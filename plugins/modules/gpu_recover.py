#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpu_recover
short_description: Reset the GPUs that need it without a reboot, stopping only their containers
version_added: 0.3.0
description:
  - "Reads what each GPU needs the way M(gpuhost.tuning.host_audit) does (its fact
    C(gpu_recovery), finding C(gpu_recovery_needed): the driver's recovery action, the XID
    events, a pending row remap, and who holds the GPU), or takes the GPUs named in O(gpus)."
  - "For each GPU to reset: the containers holding it are stopped (C(pct shutdown --timeout),
    then C(pct stop)), the GPU is reset (C(nvidia-smi -r -i <bus>), persistence mode off
    around it, killed after O(reset_timeout) s), read back (C(nvidia-smi -q -x) lists it,
    recovery action C(None)), CUDA is proven on it on the host, the containers that ran are
    started and CUDA is proven inside each."
  - Refuses a GPU passed through to a VM (naming the VM) and a GPU held by a host process
    outside any container (naming the process and its pid); never resets a GPU whose need is
    a reboot.
  - "Never reboots. When a GPU needs a reboot, or its reset is refused by the driver, fails,
    hangs, or its proof fails, RV(reboot_needed) is true with RV(reboot_reasons); the
    playbook C(gpuhost.tuning.gpu_recover) then marks the host, or runs the gated reboot
    when asked."
  - A host whose GPUs need nothing is left alone (C(changed=false)). Check mode returns the
    plan and runs no command (C(changed) then says whether a reset is planned).
author:
  - gpuhost.tuning developers (!UNKNOWN)
options:
  gpus:
    description: PCI addresses of the GPUs to reset (C(0000:3b:00.0)); they are reset even
      when the audit sees no need (a GPU the driver does not flag). Empty - every GPU whose
      C(gpu_recovery) need is not C(none) or C(reboot).
    type: list
    elements: str
    default: []
  pct:
    description: The C(pct) program.
    type: str
    default: pct
  qm:
    description: The C(qm) program (names the state of a VM a refused GPU is passed to).
    type: str
    default: qm
  nvidia_smi:
    description: The C(nvidia-smi) program.
    type: str
    default: nvidia-smi
  shutdown_timeout:
    description: Seconds C(pct shutdown) gives a container before C(pct stop).
    type: int
    default: 60
  reset_timeout:
    description: Seconds after which C(nvidia-smi -r) is killed and reported.
    type: int
    default: 120
  cuda_timeout:
    description: Seconds each CUDA probe may take (loading, C(cuInit), the device listing).
    type: int
    default: 30
  cuda_library:
    description: The CUDA driver library the host probe loads.
    type: str
    default: libcuda.so.1
  root:
    description: Root of the host's files (C(/) on a live host).
    type: path
    default: /
"""

EXAMPLES = r"""
- name: Reset the GPUs the driver asks to reset, stopping only their containers
  gpuhost.tuning.gpu_recover:
  register: recovered

- name: Reset one GPU by its bus address
  gpuhost.tuning.gpu_recover:
    gpus: ["0000:3b:00.0"]
"""

RETURN = r"""
gpus:
  description: One item per GPU acted on; C(action) reset, refused or reboot; C(result)
    recovered, failed, refused, reboot or planned (check mode); C(steps) each with
    C(step) (drain, persistence_off, reset, persistence_on, read_back, prove, restore),
    C(outcome) (ok, failed, in_use, not_supported, peers_required, timed_out) and C(detail).
  returned: always
  type: list
  elements: dict
containers:
  description: The containers this run looked at, with C(running_before), C(stopped)
    (shutdown, stop or null), C(started), C(cuda) and C(problem).
  returned: always
  type: list
  elements: dict
reboot_needed:
  description: A GPU needs the gated reboot (its need is reboot, or its reset or proof
    failed).
  returned: always
  type: bool
reboot_reasons:
  description: Why, per GPU.
  returned: always
  type: list
  elements: str
refused:
  description: GPUs refused, with what to do (a VM holds it, a host process holds it).
  returned: always
  type: list
  elements: str
problems:
  description: Containers that could not be stopped, started or proven.
  returned: always
  type: list
  elements: str
"""

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import zipload  # noqa: E402

zipload.install()  # before the collection's imports: compiled once per host and version

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import facts  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import cmdout  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import Runner  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (  # noqa: E402
    PCI_ADDRESS,
    check_module,
    common,
    fail,
    int_range,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.recovery import recover  # noqa: E402


def rules(p):
    """Option values this module refuses before it reads or writes anything."""
    common(p)
    for bdf in p.get("gpus") or []:
        if not PCI_ADDRESS.match(bdf or ""):
            fail("gpus", bdf, "PCI addresses like 0000:3b:00.0")
    int_range("shutdown_timeout", p.get("shutdown_timeout"), 1, 3600)
    int_range("reset_timeout", p.get("reset_timeout"), 1, 3600)
    int_range("cuda_timeout", p.get("cuda_timeout"), 1, 3600)
    for key in ("pct", "qm", "nvidia_smi", "cuda_library"):
        if not p.get(key):
            fail(key, p.get(key), "a program or library name or path")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            gpus=dict(type="list", elements="str", default=[]),
            pct=dict(type="str", default="pct"),
            qm=dict(type="str", default="qm"),
            nvidia_smi=dict(type="str", default="nvidia-smi"),
            shutdown_timeout=dict(type="int", default=60),
            reset_timeout=dict(type="int", default=120),
            cuda_timeout=dict(type="int", default=30),
            cuda_library=dict(type="str", default="libcuda.so.1"),
            root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    with check_module(module, "gpu_recover", rules):
        _run(module)


def _run(module):
    p = module.params
    runner = Runner(module)
    # The audit's own fact reading (nvidia-smi, the kernel log, the GPU processes, the
    # passthrough devices): the same gpu_recovery fact host_audit judges.
    found = facts.collect(p["root"], outputs=cmdout.CommandOutputs(p["root"], runner))
    options = dict((key, p[key]) for key in ("root", "pct", "qm", "nvidia_smi",
                                             "shutdown_timeout", "reset_timeout",
                                             "cuda_timeout", "cuda_library"))
    result = recover.run(runner, options, found, p["gpus"], module.check_mode)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
