#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: host_kind
short_description: Say whether the host is a Proxmox VE node, another host, a container or a VM
version_added: 0.2.0
description:
  - Reads, under O(root), the files C(systemd-detect-virt) reads (C(/proc/1/environ)
    C(container=), C(/run/systemd/container), C(/run/host/container-manager),
    C(/.dockerenv), the C(hypervisor) CPU flag in C(/proc/cpuinfo), the DMI strings in
    C(/sys/class/dmi/id)) and whether C(/etc/pve) is there, and returns RV(virt).
  - The roles that change a host call it first and refuse a container or a VM guest before
    any change (role C(gpuhost.tuning.common), C(gpuhost_allow_guest) opts in); the audit
    reports the same reading as fact C(virt) and finding C(host_is_guest).
  - Only a few small files are read, so the check costs a fraction of an audit.
options:
  root:
    description: Host root every path is read under.
    type: path
    default: /
  host:
    description: The host's name in RV(refusal) and RV(warning) (the inventory name).
    type: str
  changer:
    description: What would change the host, named in RV(refusal) (C(role tune)).
    type: str
    default: this role
notes:
  - Read-only; check mode runs the same.
seealso:
  - module: gpuhost.tuning.host_audit
author:
  - gpuhost.tuning developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: What is this host?
  gpuhost.tuning.host_kind:
  register: kind

- name: Stop on a guest
  ansible.builtin.fail:
    msg: "{{ inventory_hostname }} is a {{ kind.virt.kind }}: {{ kind.virt.evidence | join('; ') }}"
  when: kind.virt.guest
"""

RETURN = r"""
virt:
  description:
    - C(kind) (C(proxmox_node), C(host), C(container), C(vm); C(unknown) with C(error) set
      when the files could not be read), C(guest) (true for a container or a VM guest; null
      when unknown), C(technology) (the container manager or hypervisor), C(proxmox_node),
      C(evidence) (what decided it) and C(dmi) (the DMI strings read).
  returned: always
  type: dict
  sample: {"kind": "container", "guest": true, "technology": "lxc", "proxmox_node": false,
           "evidence": ["/proc/1/environ container=lxc"], "dmi": {}}
refusal:
  description:
    - Why O(changer) changes nothing on this host (a container, a VM guest, or a host whose
      kind could not be read) and what to do; null for a host that is no guest. The same
      text host_tune's option C(guest=refuse) fails with.
  returned: always
  type: str
  sample: "pve-ct129 (/) is a container (lxc: /proc/1/environ container=lxc): role tune
    changes nothing on it. Target the Proxmox VE node that hosts it (the example inventories
    hold the nodes only); to tune a GPU VM guest on purpose set gpuhost_allow_guest=true"
warning:
  description:
    - For a guest, the warning a role shows when C(gpuhost_allow_guest) lets it change the
      guest anyway; null otherwise.
  returned: always
  type: str
"""

# Imports follow the documentation blocks (Ansible module layout), hence E402.
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import zipload  # noqa: E402

zipload.install()  # before the collection's imports: compiled once per host and version

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (  # noqa: E402
    check_module,
    common,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.host import virt  # noqa: E402


def rules(p):
    """Option values this module refuses before it reads anything (run by
    validate.check_module): a root that is not an absolute folder."""
    common(p)


def main():
    module = AnsibleModule(argument_spec=dict(root=dict(type="path", default="/"),
                                              host=dict(type="str"),
                                              changer=dict(type="str", default="this role")),
                           supports_check_mode=True)
    with check_module(module, "host_kind", rules):
        try:
            found = virt.detect(module.params["root"])
        except Exception as exc:  # noqa: BLE001 - any failure is 'unknown', refused
            # as host_audit's fact: unknown, and the roles refuse a host they cannot read
            found = {"kind": "unknown", "guest": None, "technology": None,
                     "proxmox_node": None, "evidence": [], "dmi": {},
                     "error": "%s: %s" % (type(exc).__name__, exc)}
        p = module.params
        module.exit_json(changed=False, virt=found,
                         refusal=virt.refusal(found, p["host"], p["root"], p["changer"]),
                         warning=virt.guest_warning(found, p["host"] or p["root"]))


if __name__ == "__main__":
    main()
