#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: setpci_maxreadreq
short_description: Set the PCIe Max Read Request Size of GPUs and the bridges above them
version_added: 0.1.0
description:
  - Sets the Max Read Request Size (MRRS) field, bits 14:12 of the PCI Express Device Control
    register (capability offset C(0x08)), of the selected devices and, by default, of every
    bridge between each device and its root complex (root ports, switch ports).
  - Writes only bits 14:12. Every other Device Control bit (error reporting, relaxed
    ordering, Max Payload Size, extended tag, no snoop) is kept as read. Bit 15 is never
    set; on an endpoint it is Initiate FLR, a function reset, and is written as 0 there; on a
    bridge it keeps the value read.
  - Reads the register back after each write and fails, naming the device, when the value
    did not take (QEMU's emulated PCIe devices keep 128, for example). A failure on one
    device does not stop the others; every device is tried and reported, then the module
    fails listing the devices that failed.
  - Every address, the size and every config space are checked before anything is
    written.
  - Runtime only. Linux does not set MRRS at boot (unless booted with
    C(pci=pcie_bus_perf)), and a driver reload, a reset or a rescan can undo it; re-apply at
    boot (after C(nvidia-persistenced.service)).
  - The PCI Express capability is found by walking the capability list from config offset
    C(0x34); devices without one (conventional PCI functions) are reported with
    C(skipped_reason) and left alone. SR-IOV virtual functions are skipped too (their MRRS
    field is reserved; the physical function's value applies).
options:
  devices:
    description:
      - PCI addresses to set, as C(0000:01:00.0) or C(01:00.0) (domain 0000).
      - When omitted, every GPU matching O(vendor) and O(classes).
      - An address that does not exist is an error, raised before anything is written.
    type: list
    elements: str
  mrrs_size:
    description:
      - Max Read Request Size in bytes. Any other value is refused.
      - C(size), its name before 0.2.0, is a deprecated alias (it stops working in 0.3.0).
    aliases: [size]
    type: int
    choices: [128, 256, 512, 1024, 2048, 4096]
    default: 4096
  state:
    description:
      - C(present) sets O(mrrs_size); C(query) only reports the current values and never writes.
    type: str
    choices: [present, query]
    default: present
  method:
    description:
      - C(sysfs) reads and writes the device's C(config) file in sysfs (2-byte write at the
        Device Control offset).
      - C(setpci) writes with C(setpci -A linux-sysfs -O sysfs.path=<root>/sys/bus/pci -s
        <address> CAP_EXP+8.w=<value>:<mask>) (package pciutils), a masked write of the
        MRRS bits (and, on endpoints, bit 15 forced to 0). The read-back is the same.
    type: str
    choices: [sysfs, setpci]
    default: sysfs
  root:
    description:
      - Host root the sysfs paths are resolved under (an unpacked capture, a test tree).
        Symlinks are resolved inside it.
    type: path
    default: /
notes:
  - Needs root (CAP_SYS_ADMIN) for the full config space; under kernel lockdown
    (C(/sys/kernel/security/lockdown)) config writes fail with EPERM and the module says so.
  - Supports check mode; nothing is written then, RV(devices[].after) is what it would be.
  - Supports diff mode; the diff lists each device's MRRS before and after.
extends_documentation_fragment:
  - gpuhost.tuning.gpu_selection.devices
author:
  - gpuhost.tuning developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: MRRS 4096 on every NVIDIA GPU and the root ports above them
  gpuhost.tuning.setpci_maxreadreq:
    mrrs_size: 4096

- name: Report MRRS of the GPUs and their bridges without changing anything
  gpuhost.tuning.setpci_maxreadreq:
    state: query
  register: mrrs

- name: Two GPUs only, without their bridges, with the setpci binary
  gpuhost.tuning.setpci_maxreadreq:
    devices: ["0000:01:00.0", "81:00.0"]
    include_upstream: false
    method: setpci

- name: Revert to the value the audit recorded
  gpuhost.tuning.setpci_maxreadreq:
    mrrs_size: 512
"""

RETURN = r"""
devices:
  description:
    - One entry per device considered, selected devices first (role C(endpoint)) then their
      bridges (role C(upstream)), each device once.
  returned: always
  type: list
  elements: dict
  contains:
    address:
      description: PCI address.
      type: str
      sample: "0000:01:00.0"
    role:
      description: C(endpoint) for a selected device, C(upstream) for a bridge above one.
      type: str
      sample: endpoint
    vendor:
      description: Vendor ID, 4 hex digits.
      type: str
      sample: 10de
    device:
      description: Device ID, 4 hex digits.
      type: str
      sample: 2bb5
    before:
      description: MRRS in bytes before the run; null when skipped.
      type: int
      sample: 512
    after:
      description:
        - MRRS in bytes after the run, as read back (in check mode, what it would be; with
          O(state=query), the current value); null when skipped.
      type: int
      sample: 4096
    devctl_before:
      description: Device Control register before, hex; null when skipped.
      type: str
      sample: "0x2936"
    devctl_after:
      description: Device Control register after, hex (read back, or planned in check mode).
      type: str
      sample: "0x5936"
    skipped_reason:
      description: Why the device was left alone (no PCI Express capability, SR-IOV VF).
      type: str
      returned: when skipped
      sample: "no PCI Express capability (conventional PCI function): it has no Max Read
        Request Size"
    error:
      description: Why the write failed or did not take on this device.
      type: str
      returned: when the device failed
      sample: "PCI device 0000:00:03.0: Max Read Request Size did not take: wanted 4096 bytes,
        read back 128 bytes ..."
  sample:
    - address: "0000:01:00.0"
      role: endpoint
      vendor: 10de
      device: 2bb5
      before: 512
      after: 4096
      devctl_before: "0x2936"
      devctl_after: "0x5936"
    - address: "0000:00:01.1"
      role: upstream
      vendor: "1022"
      device: 14ab
      before: 512
      after: 4096
      devctl_before: "0x293f"
      devctl_after: "0x593f"
failed_devices:
  description: Addresses of the devices whose write failed or did not take.
  returned: always
  type: list
  elements: str
  sample: []
"""

# Imports follow the documentation blocks (Ansible module layout), hence E402.
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import zipload  # noqa: E402

zipload.install()  # before the collection's imports: compiled once per host and version

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (  # noqa: E402
    check_module,
    common,
    gpu,
    non_empty_list,
    pci_addresses,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie.pci import PciError  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie.mrrs_part import (  # noqa: E402
    mrrs_failure,
    mrrs_run,
    mrrs_spec,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import Runner  # noqa: E402


def rules(p):
    """Option values this module refuses before it reads or writes anything (run by
    validate.check_module: a ValidationError names the option, the value and what is
    allowed)."""
    common(p)
    non_empty_list("devices", p.get("devices"),
                   "PCI addresses like 0000:41:00.0 (leave devices out to select by vendor "
                   "and class)")
    pci_addresses("devices", p.get("devices"))
    gpu(p)


def build_module():
    return AnsibleModule(
        argument_spec=mrrs_spec(),
        supports_check_mode=True,
    )


def main():
    module = build_module()
    with check_module(module, "setpci_maxreadreq", rules):
        _run(module)


def _run(module):
    try:
        result = mrrs_run(module.params, module.check_mode, Runner(module), warn=module.warn)
    except (ValueError, PciError, OSError) as exc:
        module.fail_json(msg=str(exc), changed=False, devices=[], failed_devices=[])
    if not module._diff:
        result.pop("diff", None)
    msg = mrrs_failure(result)
    if msg:
        module.fail_json(msg=msg, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
