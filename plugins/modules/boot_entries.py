#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: boot_entries
short_description: Read which kernels and command lines the boot loader will really boot
version_added: 0.1.0
description:
  - Reads the boot loader's own files, not the configuration they are made from -
    systemd-boot loader entries on every ESP (Proxmox C(proxmox-boot-tool) or
    C(kernel-install)), C(loader.conf) and the C(LoaderEntryOneShot)/C(LoaderEntryDefault)
    EFI variables; or the GRUB C(grub.cfg) menu entries and C(grubenv).
  - Reports the entry that boots next without a key press and its kernel, the Proxmox
    kernel pins (C(proxmox-boot-tool kernel list), or the pin files offline). The running
    kernel, the installed kernels, DKMS and the configured command line are
    M(gpuhost.tuning.kernel_state).
  - With O(params), checks that every entry of O(kernels) carries them; with O(require) a
    missing parameter or entry fails the task naming the entry and the parameter.
  - Proxmox ESPs are not mounted while the host runs. On the live host (O(root=/)) the
    module mounts each ESP of C(/etc/kernel/proxmox-boot-uuids) read-only when
    O(esp_dirs) does not hold it, and unmounts it again (as C(proxmox-boot-tool) does).
options:
  params:
    description:
      - Kernel parameters the entries must carry (name to value; V(true) for a flag,
        V(false) for C(off) (YAML reads an unquoted C(off) as false), null for "must not be
        there").
    type: dict
    default: {}
  absent:
    description: Parameters (C(name) or C(name=value)) the entries must not carry.
    type: list
    elements: str
    default: []
  kernels:
    description:
      - Kernels whose entries are checked against O(params); each must have an entry.
        Default is every kernel that has a (non-recovery) entry.
    type: list
    elements: str
    default: []
  require:
    description:
      - Fail when an entry of O(kernels) is missing or lacks a parameter, or when
        O(require_next_boot) is set and another kernel boots next.
    type: bool
    default: false
  require_next_boot:
    description: With O(require), the kernel the default entry must boot.
    type: str
  backend:
    description: C(auto) detects it like C(gpuhost.tuning.kernel_cmdline) does.
    type: str
    choices: [auto, systemd-boot, grub]
    default: auto
  esp_dirs:
    description:
      - Folders (host paths under O(root)) holding ESP content - an ESP itself, or
        C(<uuid>) subfolders, one per ESP (how test doubles and captures keep them).
    type: list
    elements: path
    default: []
  mount_esps:
    description:
      - On the live host, mount Proxmox ESPs not found in O(esp_dirs) read-only to read
        them (and unmount them afterwards).
    type: bool
    default: true
  grub_cfg:
    description: grub.cfg files to try, in order (host paths).
    type: list
    elements: path
    default: [/boot/grub/grub.cfg, /boot/grub2/grub.cfg]
  root:
    description: Host root every path is read under.
    type: path
    default: /
notes:
  - Read-only (besides the temporary read-only ESP mounts); check mode runs the same.
seealso:
  - module: gpuhost.tuning.kernel_cmdline
  - module: gpuhost.tuning.initramfs_check
  - module: gpuhost.tuning.kernel_state
author:
  - gpuhost.tuning developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Prove the new parameters reached the boot entries of the next kernel
  gpuhost.tuning.boot_entries:
    params:
      amd_pstate: active
      processor.max_cstate: "1"
    kernels: [6.14.11-5-bpo12-pve]
    require: true
    require_next_boot: 6.14.11-5-bpo12-pve

- name: What boots next
  gpuhost.tuning.boot_entries:
  register: boot

- name: Show it
  ansible.builtin.debug:
    msg: "{{ boot.next_boot_kernel }} via {{ boot.default_how }}"
"""

RETURN = r"""
backend:
  description: C(systemd-boot) or C(grub).
  returned: always
  type: str
  sample: systemd-boot
tool:
  description: What writes the entries - C(proxmox-boot-tool), C(kernel-install), C(grub)
    or C(unknown).
  returned: always
  type: str
  sample: proxmox-boot-tool
reason:
  description: Why that backend.
  returned: always
  type: str
entries:
  description: Every boot entry read, C({kernel, id, title, where, options, recovery}).
    C(where) names the ESP and file, or the grub.cfg and menu path.
  returned: always
  type: list
  elements: dict
  sample:
    - kernel: 6.14.11-5-bpo12-pve
      id: proxmox-6.14.11-5-bpo12-pve.conf
      where: "9B2E-4F1C:loader/entries/proxmox-6.14.11-5-bpo12-pve.conf"
      options: root=ZFS=rpool/ROOT/pve-1 boot=zfs amd_pstate=active
      title: Proxmox Virtual Environment
      recovery: false
default:
  description: The entry that boots next without a key press (same form), or null.
  returned: always
  type: dict
default_how:
  description: Why that entry (C(loader.conf default proxmox-*), C(LoaderEntryOneShot ...),
    C(grubenv next_entry ... (grub-reboot)), C(set default=0) ...).
  returned: always
  type: str
next_boot_kernel:
  description: Kernel of RV(default), or null.
  returned: always
  type: str
  sample: 6.14.11-5-bpo12-pve
grub_ref:
  description: For GRUB, the id path of the newest non-recovery entry of each kernel
    (kernel to the argument C(grub-set-default)/C(grub-reboot) take).
  returned: always
  type: dict
esps:
  description: ESPs read, each C({uuid, path, loader_default, entries, default,
    default_kernel, default_how}).
  returned: always
  type: list
  elements: dict
unreadable_esps:
  description: ESPs listed in C(/etc/kernel/proxmox-boot-uuids) that could not be read,
    C({uuid, error}).
  returned: always
  type: list
  elements: dict
kernel_list:
  description: Proxmox only (else null) - C({manual, automatic, pinned, next_boot}) from
    C(proxmox-boot-tool kernel list) (live) or the pin files.
  returned: always
  type: dict
grubenv:
  description: GRUB environment (C(saved_entry), C(next_entry)), or null.
  returned: always
  type: dict
check:
  description: C({ok, problems, checked}) of the entries against O(params) (C(ok) true
    without O(params)); each checked item C({kernel, where, id, missing}).
  returned: always
  type: dict
"""

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import zipload  # noqa: E402

zipload.install()  # before the collection's imports: compiled once per host and version

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (  # noqa: E402
    RELEASE,
    boot_params,
    check_module,
    common,
    inside,
    names,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import (  # noqa: E402
    kernel_cmdline,
    boot_entries,
    boot_entries_run,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import Runner  # noqa: E402


def rules(p):
    """Option values this module refuses before it reads or writes anything (run by
    validate.check_module: a ValidationError names the option, the value and what is
    allowed)."""
    common(p)
    boot_params("params", p.get("params"), "absent", p.get("absent"))
    names("kernels", p.get("kernels"), RELEASE, "kernel releases like 6.14.11-5-bpo12-pve")
    inside(p, "esp_dirs")
    inside(p, "grub_cfg")


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            params=dict(type="dict", default={}),
            absent=dict(type="list", elements="str", default=[]),
            kernels=dict(type="list", elements="str", default=[]),
            require=dict(type="bool", default=False),
            require_next_boot=dict(type="str"),
            backend=dict(type="str", choices=["auto", "systemd-boot", "grub"],
                         default="auto"),
            esp_dirs=dict(type="list", elements="path", default=[]),
            mount_esps=dict(type="bool", default=True),
            grub_cfg=dict(type="list", elements="path",
                          default=["/boot/grub/grub.cfg", "/boot/grub2/grub.cfg"]),
            root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )


def main():
    module = build_module()
    with check_module(module, "boot_entries", rules):
        _run(module)


def _run(module):
    try:
        result, failure = boot_entries_run.entries_run(module.params, Runner(module))
    except (boot_entries.BootloaderError, kernel_cmdline.BootConfigError, OSError) as exc:
        module.fail_json(msg=str(exc))
    if failure:
        module.fail_json(msg=failure, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
