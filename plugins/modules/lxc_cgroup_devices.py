#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: lxc_cgroup_devices
short_description: Keep a Proxmox container's device allow rules in step with /proc/devices
version_added: 0.1.0
description:
  - NVIDIA's dynamic character majors (C(nvidia-uvm), C(nvidia-caps), ...) change across
    kernels and boots (nvidia-uvm 504 -> 509 seen). A container whose
    C(lxc.cgroup2.devices.allow) rules still name the old majors sees C(nvidia-smi) work
    while CUDA fails (error 999), because the cgroup device controller silently blocks
    C(/dev/nvidia-uvm).
  - This module reads C(/proc/devices) and makes the container config allow
    C(c <major>:* <access>) for every major of every listed driver, and (with
    O(remove_stale)) removes allow rules for character majors C(/proc/devices) no longer
    registers under any name.
  - Only the live section (everything before the first C([section]) line) is edited;
    C([pve:pending]) and snapshot sections and every other line stay byte for byte, in
    order. New rules go right after the last existing C(lxc.cgroup2.devices.allow) line,
    or at the end of the live section when there is none.
  - The file is written through a temporary file in the same folder and a rename, without
    chmod (pmxcfs refuses it; it keeps mode 0640 root:www-data by itself). The temporary
    file gets the old file's mode; on a plain filesystem the old owner and group are put
    back after the rename (pmxcfs refuses that too, harmlessly). A config that is a
    symlink is written where its links lead (resolved inside O(root)), so the link stays;
    one that leads out of the tree, or to something that is not a regular file, is refused.
  - A listed driver that C(/proc/devices) does not register (right after boot nvidia-uvm is
    often not loaded yet) fails by default and nothing is written - rewriting the rules then
    would drop the container's access for good. Load it first, or set O(missing=skip).
  - The rules take effect when the container starts; restart a running container.
options:
  vmid:
    description:
      - Container ID; the config is O(config_dir)/<vmid>.conf.
      - One of O(vmid) and O(path) is required.
    type: int
  path:
    description:
      - Path of a container config, instead of O(vmid) (resolved under O(root)).
    type: path
  config_dir:
    description:
      - Folder of container configs. C(/etc/pve/lxc) shows only this node's containers.
    type: path
    default: /etc/pve/lxc
  drivers:
    description:
      - Character device names as C(/proc/devices) lists them. C(nvidia) and C(nvidiactl)
        have the fixed major 195 (C(nvidia-frontend) in C(/proc/devices)).
      - Every major a name is registered under gets a rule.
    type: list
    elements: str
    default: [nvidia, nvidia-uvm, nvidia-caps]
  access:
    description:
      - Access of the added rules, letters of C(rwm).
      - An existing rule for the same major with minor C(*) that grants at least this
        access counts as present.
    type: str
    default: rwm
  remove_stale:
    description:
      - Remove live C(lxc.cgroup2.devices.allow) rules for character majors that
        C(/proc/devices) no longer registers at all (C(*) majors and block rules are kept).
      - A rule whose old major a new kernel gave to another driver is not stale by this
        test; such rules are listed in RV(other_allowed).
    type: bool
    default: true
  previous_majors:
    description:
      - Majors the listed drivers had before, e.g. read by an audit before a reboot
        (the playbook C(gpuhost.tuning.reboot_verify) passes them).
      - With O(remove_stale), live allow rules for such a major that no listed driver has
        now are removed even when a new kernel gave the major to another driver (a GPU
        container would keep access to that driver's devices otherwise). Listed in
        RV(moved).
    type: list
    elements: int
    default: []
  missing:
    description:
      - What to do when a listed driver is not in C(/proc/devices).
      - C(fail) stops before writing anything and names the command that loads the driver
        (C(nvidia-modprobe -u -c=0) or C(modprobe nvidia_uvm) for nvidia-uvm).
      - C(skip) leaves that driver out (absent on purpose).
    type: str
    choices: [fail, skip]
    default: fail
  backup:
    description:
      - Keep a timestamped copy of the config next to it before changing it.
    type: bool
    default: false
  root:
    description:
      - Host root C(/proc/devices) and the config paths are resolved under.
    type: path
    default: /
notes:
  - Supports check mode and diff mode.
  - Stop the container before, start it after; the playbook C(gpuhost.tuning.reboot_verify)
    does that.
author:
  - gpuhost.tuning developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Repair container 129's GPU device rules after a kernel upgrade
  gpuhost.tuning.lxc_cgroup_devices:
    vmid: 129
    backup: true
  register: rules

- name: Also allow the IMEX channels, and tolerate a host where nvidia-uvm is not wanted
  gpuhost.tuning.lxc_cgroup_devices:
    vmid: 129
    drivers: [nvidia, nvidia-uvm, nvidia-caps, nvidia-caps-imex-channels]
    missing: skip

- name: Check only (what would change), with the diff
  gpuhost.tuning.lxc_cgroup_devices:
    vmid: 129
  check_mode: true
  diff: true
"""

RETURN = r"""
config_file:
  description: The container config file (resolved under O(root)).
  returned: always
  type: str
  sample: /etc/pve/lxc/129.conf
added:
  description: Values of the C(lxc.cgroup2.devices.allow) lines added (or that would be).
  returned: always
  type: list
  elements: str
  sample: ["c 509:* rwm", "c 238:* rwm"]
removed:
  description: Values of the stale C(lxc.cgroup2.devices.allow) lines removed.
  returned: always
  type: list
  elements: str
  sample: ["c 504:* rwm", "c 507:* rwm"]
majors:
  description: Driver name to its (first) major from C(/proc/devices); C(nvidia) is 195.
  returned: always
  type: dict
  sample: {nvidia: 195, nvidia-uvm: 509, nvidia-caps: 238}
majors_all:
  description: Driver name to every major it is registered under.
  returned: always
  type: dict
  sample: {nvidia: [195], nvidia-uvm: [509], nvidia-caps: [238]}
missing:
  description: Listed drivers C(/proc/devices) does not register (only with O(missing=skip)).
  returned: always
  type: list
  elements: str
  sample: []
moved:
  description: Previous majors (O(previous_majors)) whose rules were removed (or would be)
    because no listed driver has them now, with the names C(/proc/devices) registers them
    under now.
  returned: always
  type: list
  elements: dict
  sample: [{major: 244, registered_as: [nvme]}]
other_allowed:
  description: Live char allow rules kept that belong to no listed driver, with the names
    C(/proc/devices) registers their major under (an empty list means nothing registers it
    and O(remove_stale) is off).
  returned: always
  type: list
  elements: dict
  sample: [{rule: "c 226:* rwm", major: 226, registered_as: [drm]}]
onboot:
  description: Whether the container starts on boot (C(onboot 1) in the live section).
  returned: always
  type: bool
  sample: false
backup_file:
  description: The copy made before the change.
  returned: when O(backup=true) and the file changed (not in check mode)
  type: str
  sample: /etc/pve/lxc/129.conf.4711.2025-06-18@12:30:01~
diff:
  description: Before and after text of the config.
  returned: when changed and diff mode is on
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
    fail,
    inside,
    int_range,
    names,
    non_empty_list,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda.container import (  # noqa: E402
    rules_run,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.lxc.lxc import LxcError  # noqa: E402


def rules(p):
    """Option values this module refuses before it reads or writes anything (run by
    validate.check_module: a ValidationError names the option, the value and what is
    allowed)."""
    common(p)
    int_range("vmid", p.get("vmid"), *VMID_RANGE)
    inside(p, "path")
    inside(p, "config_dir")
    non_empty_list("drivers", p.get("drivers"), "driver names from /proc/devices")
    names("drivers", p.get("drivers"), what="driver names as /proc/devices lists them "
                                            "(letters, digits, _ . + -)")
    access = p.get("access")
    if access is not None and (not access or any(c not in "rwm" for c in access)
                               or len(set(access)) != len(access)):
        fail("access", access, "a non-empty subset of rwm, each letter once (r read, w write, "
                               "m mknod)")
    for major in p.get("previous_majors") or []:
        int_range("previous_majors", major, 0, MAX_MAJOR)


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            vmid=dict(type="int"),
            path=dict(type="path"),
            config_dir=dict(type="path", default="/etc/pve/lxc"),
            drivers=dict(type="list", elements="str",
                         default=["nvidia", "nvidia-uvm", "nvidia-caps"]),
            access=dict(type="str", default="rwm"),
            remove_stale=dict(type="bool", default=True),
            previous_majors=dict(type="list", elements="int", default=[]),
            missing=dict(type="str", choices=["fail", "skip"], default="fail"),
            backup=dict(type="bool", default=False),
            root=dict(type="path", default="/"),
        ),
        mutually_exclusive=[("vmid", "path")],
        required_one_of=[("vmid", "path")],
        supports_check_mode=True,
    )


def main():
    module = build_module()
    with check_module(module, "lxc_cgroup_devices", rules):
        _run(module)


def _run(module):
    try:
        result = rules_run(module.params, module.check_mode)
    except (LxcError, ValueError, OSError) as exc:
        module.fail_json(msg="lxc_cgroup_devices: %s" % exc, changed=False)
    if not module._diff:
        result.pop("diff", None)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
