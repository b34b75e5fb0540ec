#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vm_verify
short_description: After a boot, start the VMs that ran and check their GPUs are on vfio-pci
version_added: 0.2.0
description:
  - For each Proxmox VM (C(/etc/pve/qemu-server/<vmid>.conf)) that passes a GPU through
    whole (C(hostpciN:) by address or C(mapping=)), ran before the reboot
    (O(running_before)) or is marked C(onboot) (set to 1) - reads its status
    (C(qm status)), starts it (C(qm start)) when it should run and is stopped, reads the
    status again, and reads each of its GPUs' driver from sysfs.
  - A GPU is right when it is bound to C(vfio-pci); one with no driver is right only while
    its VM is stopped (PVE binds it when the VM starts); one on a host driver (C(nvidia))
    is a problem - the boot's vfio-pci binding did not hold (see
    M(gpuhost.tuning.vfio_initramfs_check)).
  - A VM that fails to start is a problem naming the VM, its name and the last lines
    C(qm start) printed. Every C(qm) call is bounded in time.
options:
  running_before:
    description: VMIDs that ran before the reboot (role reboot_verify reads C(qm list) in
      its pre-flight).
    type: list
    elements: int
    default: []
  start:
    description: Start the VMs that ran before or are C(onboot) and are stopped now.
    type: bool
    default: true
  qm:
    description: Whether C(qm) may run here; false (a host tree under a root other than
      C(/)) checks the GPUs' drivers only.
    type: bool
    default: true
  start_timeout:
    description: Seconds one C(qm start) may take (1 to 3600); past it it is killed and is a
      problem naming the VM.
    type: int
    default: 300
  root:
    description: Root under which host paths are read.
    type: path
    default: /
notes:
  - In check mode C(qm start) does not run (recorded in C(skipped)); C(qm status) and the
    sysfs reads do.
  - Takes the root's lock and honours the run lock (it starts VMs).
seealso:
  - module: gpuhost.tuning.vfio_initramfs_check
  - module: gpuhost.tuning.container_verify
author:
  - gpuhost.tuning developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Start the VMs that ran before the reboot and check their GPUs
  gpuhost.tuning.vm_verify:
    running_before: [201]
  register: vms

- name: "Gate: every VM is right"
  ansible.builtin.fail:
    msg: "{{ vms.problems | join('; ') }}"
  when: vms.problems | length > 0
"""

RETURN = r"""
vms:
  description: One record per VM checked (role reboot_verify puts them in its report).
  returned: always
  type: list
  elements: dict
  contains:
    vmid:
      description: The VM.
      type: int
      sample: 201
    name:
      description: Its C(name:) (null when it has none).
      type: str
      sample: train-201
    onboot:
      description: marked C(onboot) (set to 1) in its config.
      type: bool
    running_before:
      description: Listed in O(running_before).
      type: bool
    status_before:
      description: C(qm status) before any start (null when C(qm) did not run).
      type: str
      sample: stopped
    started:
      description: C(qm start) ran and succeeded.
      type: bool
    status:
      description: C(qm status) at the end.
      type: str
      sample: running
    gpus:
      description: Its GPUs passed whole - C(key), C(address), C(id), C(driver) (now),
        C(driver_before_start) (read from sysfs before any C(qm) call, since C(qm start)
        rebinds it to vfio-pci; a host driver here took the GPU at boot) and C(bound) (on
        vfio-pci).
      type: list
      elements: dict
    skipped:
      description: Steps left out (C(qm) may not run here; check mode).
      type: list
      elements: str
    problems:
      description: What is wrong with this VM; empty when it is right.
      type: list
      elements: str
file:
  description: The file under O(root) that could not be read (a FIFO, a device or over
    4 MiB where a VM config, C(mapping/pci.cfg) or modprobe.d file belongs).
  returned: when such a file fails the module
  type: str
problems:
  description: Every VM's problems, each prefixed with C(vm <vmid> (<name>)).
  returned: always
  type: list
  elements: str
  sample: ["vm 202 (vdi-202): qm start 202 exited 255: start failed: QEMU exited with code 1"]
"""

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import zipload  # noqa: E402

zipload.install()  # before the collection's imports: compiled once per host and version

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (  # noqa: E402
    VMID_RANGE,
    check_module,
    common,
    int_range,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.passthrough import vm_verify  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import Runner  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import HostFileError  # noqa: E402


def rules(p):
    """Option values this module refuses before it reads or writes anything (run by
    validate.check_module: a ValidationError names the option, the value and what is
    allowed)."""
    common(p)
    for vmid in p.get("running_before") or []:
        int_range("running_before", vmid, *VMID_RANGE)
    int_range("start_timeout", p.get("start_timeout"), 1, 3600)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            running_before=dict(type="list", elements="int", default=[]),
            start=dict(type="bool", default=True),
            qm=dict(type="bool", default=True),
            start_timeout=dict(type="int", default=vm_verify.DEFAULT_START_TIMEOUT),
            root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    with check_module(module, "vm_verify", rules):
        _run(module)


def _run(module):
    p = module.params
    try:
        result = vm_verify.verify_vms(p["root"], Runner(module),
                                      running_before=p["running_before"], start=p["start"],
                                      qm=p["qm"], check_mode=module.check_mode,
                                      start_timeout=p["start_timeout"])
    except HostFileError as exc:  # a FIFO, device or oversized file where a config belongs
        module.fail_json(msg="cannot read a VM or PCI mapping file, no VM started: %s" % exc,
                         changed=False, file=exc.filename)
    module.exit_json(changed=any(vm["started"] for vm in result["vms"]), **result)


if __name__ == "__main__":
    main()
