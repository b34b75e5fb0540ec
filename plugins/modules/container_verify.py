#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: container_verify
short_description: Bring one Proxmox container back after a boot and check its GPUs
version_added: 0.2.0
description:
  - For a GPU container (O(gpu)) the device allow rules are planned from C(/proc/devices)
    as M(gpuhost.tuning.lxc_cgroup_devices) does; when they change and the container
    runs, it is stopped first (C(pct stop)), then the rules are rewritten.
  - The container is started (C(pct start)) when O(start) asks it and it is not running
    (or was just stopped).
  - In a running GPU container, O(gpu_check) runs through C(pct exec) and must exit 0
    (its lines that start with C(GPU) are counted); then, unless O(cuda_probe) is false,
    CUDA must
    initialise there (M(gpuhost.tuning.cuda_probe) through C(pct exec -- python3 -), the
    check that sees error 999 while C(nvidia-smi) still lists the GPUs); then the optional
    O(cuda_check), which must print O(cuda_expect).
  - What is wrong inside is returned in RV(container.problems), not raised, so a caller can check
    every container before its gate; a step that cannot run (no config, a driver not
    loaded, C(pct) failing) fails the module with the reason.
author:
  - gpuhost.tuning developers (!UNKNOWN)
options:
  vmid:
    description: The container's VMID.
    type: int
    required: true
  gpu:
    description: It is a GPU container (its config passes NVIDIA devices), so its device
      rules are kept in step and the checks run inside.
    type: bool
    default: true
  start:
    description: Start it when it is not running (it ran before the reboot, or is onboot).
    type: bool
    default: false
  running_before:
    description: It ran before the reboot (recorded in the result).
    type: bool
    default: false
  onboot:
    description: It is marked onboot (recorded in the result).
    type: bool
    default: false
  pct:
    description: C(pct) may run (false where it does not act on O(root); stop, start and
      the checks inside are then skipped and listed in RV(container.skipped)).
    type: bool
    default: true
  config_dir:
    description: Folder of the container configs.
    type: path
    default: /etc/pve/lxc
  drivers:
    description: Character-device drivers whose majors GPU containers must be allowed.
    type: list
    elements: str
    default: [nvidia, nvidia-uvm, nvidia-caps]
  previous_majors:
    description: The GPU drivers' majors before the reboot; a rule for one of them that no
      GPU driver has now is removed even if another driver took the number.
    type: list
    elements: int
    default: []
  backup:
    description: Keep a copy of the config before rewriting its rules.
    type: bool
    default: false
  gpu_check:
    description: Command run in the container (C(pct exec)); must exit 0. Empty skips it
      and the CUDA check.
    type: list
    elements: str
    default: [nvidia-smi, -L]
  cuda_probe:
    description:
      - Prove that CUDA initialises in a running GPU container (C(cuInit) and a context
        per GPU through the driver library; the container needs C(python3)). A failure is
        a problem naming the code, its name and the usual cause.
    type: bool
    default: true
  cuda_check:
    description: Optional user-supplied CUDA check run in the container after O(gpu_check).
    type: list
    elements: str
    default: []
  cuda_expect:
    description: What O(cuda_check) must print (stripped).
    type: str
    default: "True"
  cuda_timeout:
    description:
      - Seconds each check inside the container (O(gpu_check), the CUDA probe, O(cuda_check))
        may take (1 to 3600). One that has not returned by then is killed with its process
        group (C(pct exec) and what it started) and is a problem naming it and the limit
        (the CUDA probe's also the step it was in); a hanging O(gpu_check) skips the checks
        after it, which would hang on the same driver.
    type: int
    default: 30
  root:
    description: Root under which host paths are read and written.
    type: path
    default: /
notes:
  - In check mode the rules are planned, not written; C(pct stop) and C(pct start) do not
    run; C(pct status) and the read-only checks inside a running container do.
seealso:
  - module: gpuhost.tuning.lxc_cgroup_devices
  - module: gpuhost.tuning.post_boot_verify
"""

EXAMPLES = r"""
- name: Repair, restart and check container 129
  gpuhost.tuning.container_verify:
    vmid: 129
    start: true
    previous_majors: [195, 504, 507]
    cuda_check: [python3, -c, "import torch; print(torch.cuda.is_available())"]
  register: ct

- name: "Gate: the container is right"
  ansible.builtin.fail:
    msg: "CT 129: {{ ct.container.problems | join('; ') }}"
  when: ct.container.problems | length > 0
"""

RETURN = r"""
container:
  description: The container's record (role reboot_verify puts it in its report).
  returned: always
  type: dict
  contains:
    vmid:
      description: The container.
      type: int
      sample: 129
    gpu:
      description: O(gpu).
      type: bool
    running_before:
      description: O(running_before).
      type: bool
    onboot:
      description: O(onboot).
      type: bool
    rules_added:
      description: Allow rules added (or that would be).
      type: list
      elements: str
      sample: ["c 509:* rwm"]
    rules_removed:
      description: Allow rules removed (or that would be).
      type: list
      elements: str
      sample: ["c 504:* rwm"]
    rules_moved:
      description: Majors whose rule now belongs to another driver
        (see M(gpuhost.tuning.lxc_cgroup_devices)).
      type: list
      elements: dict
    rules_changed:
      description: The config's rules changed (would change in check mode).
      type: bool
    stopped:
      description: C(pct stop) ran.
      type: bool
    started:
      description: C(pct start) ran.
      type: bool
    gpus:
      description: C(GPU n:) lines O(gpu_check) printed.
      type: int
      sample: 8
    gpu_check:
      description: Exit code of O(gpu_check) (null when it did not run).
      type: int
    cuda:
      description: What the CUDA probe found (null when it did not run) - C(code), C(name)
        and C(text) of C(cuInit), C(devices) (GPUs CUDA sees), C(error) and C(cause) (null
        when CUDA works), C(timed_out) (it did not return in O(cuda_timeout) and was
        killed), C(signal) (the signal that killed it, else null) and C(step) (the last
        step it reached, C(done) when it finished).
      type: dict
      sample: {code: 999, name: CUDA_ERROR_UNKNOWN, text: unknown error, devices: 0}
    cuda_check:
      description: What O(cuda_check) printed (null when it did not run).
      type: str
    skipped:
      description: Steps left out because C(pct) may not run here.
      type: list
      elements: str
    problems:
      description: What is wrong inside the container; empty when it is right.
      type: list
      elements: str
      sample: ["nvidia-smi -L exited 9: NVIDIA-SMI has failed"]
diff:
  description: Before and after text of the config.
  returned: when the rules change and diff mode is on
  type: dict
"""

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import zipload  # noqa: E402

zipload.install()  # before the collection's imports: compiled once per host and version

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (  # noqa: E402
    MAX_MAJOR,
    VMID_RANGE,
    check_module,
    common,
    inside,
    int_range,
    names,
    non_empty_list,
)

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import container  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.lxc.lxc import LxcError  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import (  # noqa: E402
    CommandError,
    Runner,
)


def rules(p):
    """Option values this module refuses before it reads or writes anything (run by
    validate.check_module: a ValidationError names the option, the value and what is
    allowed)."""
    common(p)
    int_range("vmid", p.get("vmid"), *VMID_RANGE)
    inside(p, "config_dir")
    non_empty_list("drivers", p.get("drivers"), "driver names from /proc/devices")
    names("drivers", p.get("drivers"), what="driver names as /proc/devices lists them "
                                            "(letters, digits, _ . + -)")
    for major in p.get("previous_majors") or []:
        int_range("previous_majors", major, 0, MAX_MAJOR)
    int_range("cuda_timeout", p.get("cuda_timeout"), 1, 3600)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            vmid=dict(type="int", required=True),
            gpu=dict(type="bool", default=True),
            start=dict(type="bool", default=False),
            running_before=dict(type="bool", default=False),
            onboot=dict(type="bool", default=False),
            pct=dict(type="bool", default=True),
            config_dir=dict(type="path", default="/etc/pve/lxc"),
            drivers=dict(type="list", elements="str",
                         default=["nvidia", "nvidia-uvm", "nvidia-caps"]),
            previous_majors=dict(type="list", elements="int", default=[]),
            backup=dict(type="bool", default=False),
            gpu_check=dict(type="list", elements="str", default=["nvidia-smi", "-L"]),
            cuda_probe=dict(type="bool", default=True),
            cuda_check=dict(type="list", elements="str", default=[]),
            cuda_expect=dict(type="str", default="True"),
            cuda_timeout=dict(type="int", default=30),
            root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    with check_module(module, "container_verify", rules):
        _run(module)


def _run(module):
    try:
        record = container.verify_run(module.params, Runner(module), module.check_mode)
    except (LxcError, CommandError) as exc:
        module.fail_json(msg="CT %s: %s" % (module.params["vmid"], exc))
    diff = record.pop("diff", None)
    changed = record["rules_changed"] or record["stopped"] or record["started"]
    result = dict(changed=changed, container=record)
    if diff and module._diff:
        result["diff"] = diff
    module.exit_json(**result)


if __name__ == "__main__":
    main()
