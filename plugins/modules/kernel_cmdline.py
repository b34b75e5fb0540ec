#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: kernel_cmdline
short_description: Add, replace or remove kernel parameters in the file the host boots from
version_added: 0.1.0
description:
  - Edits the kernel command line idempotently where the boot loader takes it from.
  - C(systemd-boot) (Proxmox VE through C(proxmox-boot-tool), or C(kernel-install)) -
    C(/etc/kernel/cmdline), one line. Every parameter not asked about, C(root=) included,
    is kept in order. When the file is missing it is created from C(/proc/cmdline) (what
    proxmox-boot-tool falls back to), minus C(BOOT_IMAGE=) and C(initrd=). For
    proxmox-boot-tool a result without C(root=) is refused.
  - C(grub) - C(GRUB_CMDLINE_LINUX_DEFAULT) in C(/etc/default/grub), or in the
    C(/etc/default/grub.d/*.cfg) drop-in whose assignment reaches the kernel (drop-ins are
    sourced after C(/etc/default/grub); the last assignment wins). Parameters already in
    C(GRUB_CMDLINE_LINUX) are replaced or removed there. Every other line is kept byte for
    byte and the quoting style of the edited line is kept.
  - A present parameter is replaced where it stands (later duplicates are dropped); a new
    one is appended. Names compare with C(-) and C(_) as the same, as the kernel does.
  - The result is checked against the effective command line; an edit a later drop-in
    would override fails instead of reporting success.
  - Never runs the refresh (C(proxmox-boot-tool refresh), C(update-grub),
    C(kernel-install add)); RV(refresh_required) and RV(refresh_commands) say what to run.
  - Writes atomically (temporary file in the same folder, then rename), keeping mode and
    owner.
options:
  params:
    description:
      - Parameters to set, name to value. V(true) makes a flag (C(quiet)); null removes
        the parameter (as does listing it in O(absent)); numbers are written as numbers; a
        list sets a repeated parameter (C(console)) in that order. Dotted names such as
        C(processor.max_cstate) are fine.
      - V(false) writes C(name=off). YAML 1.1, which Ansible reads, turns an unquoted
        C(off), C(no) or C(false) (any case) into the boolean false before this module
        sees it, so C(mitigations) given as an unquoted C(off) arrives as false, and it
        means C(mitigations=off); the kernel's boolean parser reads C(off) as false too. To
        remove a parameter give null or list it in O(absent), never false. When false
        changes the file, the module warns which parameter it wrote as C(=off).
      - Likewise an unquoted C(on), C(yes) or C(true) arrives as true and makes a bare
        flag; quote the value when the kernel wants the word (C(intel_iommu) as C("on")).
    type: dict
    default: {}
  absent:
    description:
      - Parameters to remove, by name, or C(name=value) to remove only that pair.
        C(root) cannot be removed.
    type: list
    elements: str
    default: []
  backend:
    description:
      - C(auto) picks C(systemd-boot) when C(/etc/kernel/proxmox-boot-uuids) or
        C(/etc/kernel/cmdline) exists (on the live host C(proxmox-boot-tool status) decides,
        since proxmox-boot-tool also manages GRUB ESPs), else C(grub).
    type: str
    choices: [auto, systemd-boot, grub]
    default: auto
  grub_file:
    description:
      - With the GRUB backend, put new parameters in this file instead - C(/etc/default/grub)
        or a drop-in (a bare name means C(/etc/default/grub.d/<name>)); a missing drop-in is
        created extending C($GRUB_CMDLINE_LINUX_DEFAULT).
    type: str
  root:
    description:
      - Host root the files are read and written under (a mounted image, a test tree).
    type: path
    default: /
notes:
  - Supports check mode and diff mode; check mode writes nothing.
  - The new command line takes effect after the refresh and a reboot.
seealso:
  - module: gpuhost.tuning.dkms_build
author:
  - gpuhost.tuning developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: CPU frequency and idle settings for a GPU inference host
  gpuhost.tuning.kernel_cmdline:
    params:
      amd_pstate: active
      processor.max_cstate: 1
      nmi_watchdog: 0
  register: gpuhost_cmdline

- name: Refresh the boot entries when the command line changed
  ansible.builtin.command:
    argv: "{{ gpuhost_cmdline.refresh_commands[0] }}"
  when: gpuhost_cmdline.refresh_required
  changed_when: true

- name: Write mitigations=off and intel_iommu=on, remove splash
  gpuhost.tuning.kernel_cmdline:
    params:
      mitigations: false  # an unquoted off arrives as false too; both write mitigations=off
      intel_iommu: "on"  # quoted: an unquoted on would make a bare intel_iommu flag
      splash: null

- name: Remove quiet and splash, add iommu=pt, in a GRUB drop-in of our own
  gpuhost.tuning.kernel_cmdline:
    backend: grub
    grub_file: 99-gpuhost.cfg
    params:
      iommu: pt
    absent: [quiet, splash]
"""

RETURN = r"""
backend:
  description: The backend used, C(systemd-boot) or C(grub).
  returned: always
  type: str
  sample: systemd-boot
tool:
  description: What turns the file into boot entries - C(proxmox-boot-tool),
    C(kernel-install), C(grub) or C(unknown).
  returned: always
  type: str
  sample: proxmox-boot-tool
reason:
  description: Why that backend was chosen.
  returned: always
  type: str
  sample: /etc/kernel/proxmox-boot-uuids present
before:
  description: The command line before (systemd-boot - C(/etc/kernel/cmdline); GRUB - the
    effective C(GRUB_CMDLINE_LINUX) followed by C(GRUB_CMDLINE_LINUX_DEFAULT)).
  returned: always
  type: str
  sample: root=ZFS=rpool/ROOT/pve-1 boot=zfs
after:
  description: The command line after (in check mode, what it would be).
  returned: always
  type: str
  sample: root=ZFS=rpool/ROOT/pve-1 boot=zfs amd_pstate=active processor.max_cstate=1 nmi_watchdog=0
files:
  description: Host paths of the files written (in check mode, that would be written).
  returned: always
  type: list
  elements: str
  sample: [/etc/kernel/cmdline]
refresh_required:
  description: Whether the boot entries must be refreshed for the change to reach the next
    boot (true whenever a file changed).
  returned: always
  type: bool
  sample: true
refresh_commands:
  description: The commands to run for that (never run by this module), as argument
    lists; empty when nothing changed.
  returned: always
  type: list
  elements: list
  sample: [[proxmox-boot-tool, refresh]]
diff:
  description: Before and after of each changed file (a list when several changed).
  returned: when changed and diff mode is on
  type: raw
"""

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import zipload  # noqa: E402

zipload.install()  # before the collection's imports: compiled once per host and version

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (  # noqa: E402
    boot_params,
    check_module,
    common,
    inside,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot.kernel_cmdline import (  # noqa: E402
    BootConfigError,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot.kernel_cmdline_write import (  # noqa: E402,E501
    plan,
    write,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import Runner  # noqa: E402


def rules(p):
    """Option values this module refuses before it reads or writes anything (run by
    validate.check_module: a ValidationError names the option, the value and what is
    allowed)."""
    common(p)
    boot_params("params", p.get("params"), "absent", p.get("absent"))
    if p.get("grub_file"):
        path = p["grub_file"]
        if not path.startswith("/"):
            path = "/etc/default/grub.d/" + path
        inside(dict(p, grub_file=path), "grub_file")


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            params=dict(type="dict", default={}),
            absent=dict(type="list", elements="str", default=[]),
            backend=dict(type="str", choices=["auto", "systemd-boot", "grub"], default="auto"),
            grub_file=dict(type="str"),
            root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )


def false_params(params):
    """Names of ``params`` given as boolean false (YAML's unquoted off, no, false), alone or in
    a list: bootcfg writes them as ``=off``, and the module says so."""
    return sorted(name for name, value in (params or {}).items()
                  if value is False or (isinstance(value, (list, tuple))
                                        and any(v is False for v in value)))


def main():
    module = build_module()
    with check_module(module, "kernel_cmdline", rules):
        _run(module)


def _run(module):
    p = module.params
    root = p["root"]
    runner = Runner(module) if root == "/" else None
    off_names = false_params(p["params"])
    try:
        planned = plan(root, p["params"], p["absent"], backend=p["backend"], runner=runner,
                       grub_file=p["grub_file"])
        if planned["changed"] and not module.check_mode:
            write(root, planned)
    except (BootConfigError, OSError, UnicodeDecodeError) as exc:
        module.fail_json(msg=str(exc))
    changed_files = [f for f in planned["files"] if f["changed"]]
    if planned["changed"] and off_names:
        module.warn("params %s: false (YAML reads an unquoted off, no or false so) was "
                    "written as =off; to remove a parameter give null or list it in absent"
                    % ", ".join(off_names))
    result = dict(
        changed=planned["changed"],
        backend=planned["backend"],
        tool=planned["tool"],
        reason=planned["reason"],
        before=planned["before"],
        after=planned["after"],
        files=[f["path"] for f in changed_files],
        refresh_required=planned["refresh_required"],
        refresh_commands=planned["refresh_commands"],
    )
    if module._diff and changed_files:
        diffs = [dict(before_header=f["path"], after_header=f["path"],
                      before=f["content_before"], after=f["content_after"])
                 for f in changed_files]
        result["diff"] = diffs[0] if len(diffs) == 1 else diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
