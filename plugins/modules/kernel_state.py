#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: kernel_state
short_description: Read the running kernel, the installed kernels, a target kernel and DKMS
version_added: 0.1.0
description:
  - Reports the running kernel and its command line (C(/proc/cmdline)) and what it lacks of
    O(params), the installed kernel releases, the DKMS modules (read from C(/var/lib/dkms)
    without running dkms), the command line the boot configuration asks for
    (C(/etc/kernel/cmdline) or the effective GRUB variables) and, for O(kernel), the package
    names and whether its image and headers are there.
  - What the boot loader will boot is M(gpuhost.tuning.boot_entries).
options:
  kernel:
    description:
      - A kernel release to describe in RV(target) (image and headers packages, whether
        it is installed and has headers), for example the upgrade target.
    type: str
  params:
    description:
      - Kernel parameters the running command line must carry (name to value; V(true) for
        a flag, V(false) for C(off), null for "must not be there"); what it lacks is in
        C(missing) of RV(running).
    type: dict
    default: {}
  absent:
    description: Parameters (C(name) or C(name=value)) the running command line must not carry.
    type: list
    elements: str
    default: []
  next_boot:
    description:
      - The kernel the boot loader boots next (C(next_boot_kernel) of
        M(gpuhost.tuning.boot_entries)), for RV(initramfs_kernels), and for RV(dkms_needed)
        when O(kernel) is not given.
    type: str
  root:
    description: Host root every path is read under.
    type: path
    default: /
notes:
  - Read-only; check mode runs the same.
seealso:
  - module: gpuhost.tuning.boot_entries
  - module: gpuhost.tuning.dkms_build
author:
  - gpuhost.tuning developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Which packages kernel 6.14.11-5-bpo12-pve needs, and what DKMS has built
  gpuhost.tuning.kernel_state:
    kernel: 6.14.11-5-bpo12-pve
  register: kernel

- name: Show it
  ansible.builtin.debug:
    msg: "running {{ kernel.running.kernel }}; {{ kernel.target.headers_package }}"
"""

RETURN = r"""
running:
  description: C({kernel, cmdline, missing}) - the running kernel, C(/proc/cmdline) and
    what it lacks of O(params).
  returned: always
  type: dict
kernels:
  description: C({installed, newest}) installed kernel releases (oldest first).
  returned: always
  type: dict
target:
  description: For O(kernel) - C({release, flavour, image_package, headers_package,
    vmlinuz, initrd, modules, headers, installed}); null without O(kernel).
  returned: always
  type: dict
  sample: {"release": "6.14.11-5-bpo12-pve", "flavour": "proxmox",
           "image_package": "proxmox-kernel-6.14.11-5-bpo12-pve-signed",
           "headers_package": "proxmox-headers-6.14.11-5-bpo12-pve",
           "installed": true, "headers": false}
dkms:
  description: DKMS modules from C(/var/lib/dkms) (no dkms run), each C({name, version,
    kernel, state, warning, modules}).
  returned: always
  type: list
  elements: dict
configured_cmdline:
  description: The command line the configuration asks for (C(/etc/kernel/cmdline) or
    the effective GRUB variables), before any refresh.
  returned: always
  type: str
initramfs_kernels:
  description:
    - The installed kernels whose initramfs must carry the modprobe.d options - the
      running one, the newest, O(next_boot) and O(kernel) - oldest first. The same rule the
      audit's C(nvidia_uvm_hmm) remedy names; role boot_config regenerates and checks these.
  returned: always
  type: list
  elements: str
  sample: ["6.8.12-9-pve", "6.14.11-5-bpo12-pve"]
dkms_needed:
  description:
    - The DKMS modules O(kernel) (else O(next_boot)) needs - those installed for the running
      kernel, or when it has none, those installed for another kernel. The same rule as the
      audit's C(dkms_missing_for_kernel); role kernel_upgrade builds and gates on these.
  returned: always
  type: list
  elements: str
  sample: ["nvidia"]
known_bad:
  description:
    - For O(kernel), each NVIDIA driver in the DKMS tree known not to build for its kernel
      series (a known-bad pair of module_utils/subjects/driver/driver_kernel.py, each with its
      source), as a sentence naming the pair, the version that builds and the source; empty without
      O(kernel). Role kernel_upgrade refuses the upgrade on one before installing anything.
  returned: always
  type: list
  elements: str
  sample: ["NVIDIA 580.119.02 does not build for kernel 7.0.2-6-pve (7.0 series): use 580.142
           or later builds for 7.0 (580.159.04 or later for 7.1 and newer); source: ..."]
"""

# Imports follow the documentation blocks (Ansible module layout), hence E402.
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import zipload  # noqa: E402

zipload.install()  # before the collection's imports: compiled once per host and version

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (  # noqa: E402
    RELEASE,
    boot_params,
    check_module,
    common,
    names,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver.kernel_state import (  # noqa: E402
    kernel_state,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import Runner  # noqa: E402


def rules(p):
    """Option values this module refuses before it reads or writes anything (run by
    validate.check_module: a ValidationError names the option, the value and what is
    allowed)."""
    common(p)
    boot_params("params", p.get("params"), "absent", p.get("absent"))
    names("kernel", [p["kernel"]] if p.get("kernel") else [], RELEASE,
          "a kernel release like 6.14.11-5-bpo12-pve")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            kernel=dict(type="str"),
            params=dict(type="dict", default={}),
            absent=dict(type="list", elements="str", default=[]),
            next_boot=dict(type="str"),
            root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    with check_module(module, "kernel_state", rules):
        _run(module)


def _run(module):
    p = module.params
    runner = Runner(module) if p["root"] == "/" else None
    state = kernel_state(p["root"], p["kernel"], p["params"], p["absent"], runner,
                         p["next_boot"])
    module.exit_json(changed=False, **state)


if __name__ == "__main__":
    main()
