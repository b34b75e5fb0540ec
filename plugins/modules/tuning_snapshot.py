#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: tuning_snapshot
short_description: Record, list and restore the values the tune role manages
version_added: "0.1.0"
description:
  - With O(state=present), records in one call the current value of everything the tune role
    manages, as JSON under O(dir) on the host. Per GPU and upstream bridge the PCIe Max Read
    Request Size and Device Control word; per online CPU the C(disable) flag of every idle
    state, by name; each sysctl of O(sysctl_keys); for each of O(files) whether it
    exists and what it holds; and per GPU container in O(lxc_config_dir) (one whose live
    config passes in a C(/dev/nvidiaN)) its live C(lxc.cgroup2.cpuset.cpus) and
    C(lxc.cgroup2.cpuset.mems) lines as written, or that it has none.
  - The first snapshot ever taken is kept as C(original.json) and never overwritten. Later
    ones (O(kind=before)) go to C(snapshot-<UTC time>.json), and only when the host differs
    from the last recorded state, so re-running the tune playbook on an unchanged host
    writes nothing. O(kind=applied) records the state tune left in C(applied.json).
  - With O(state=restore), puts back snapshot O(snapshot). MRRS is restored per device
    (bits 14:12 only, read back), idle flags per CPU (read back) and sysctls (read back).
    Files are put back as recorded, and those that did not exist are removed. Each GPU
    container's cpuset lines are put back byte for byte in its live section (removed when
    it had none), every other line of its config as it is now; a container the snapshot
    does not hold gets the lines of the oldest later before-snapshot that holds it. Every
    item is tried and reported; the task fails at the end when any did not take.
  - With O(state=query), returns the snapshots in O(dir) without changing anything.
extends_documentation_fragment:
  - gpuhost.tuning.gpu_selection.devices
author:
  - gpuhost.tuning developers (!UNKNOWN)
options:
  state:
    description: C(present) records, C(restore) restores, C(query) only lists the snapshots.
    type: str
    choices: [present, restore, query]
    default: present
  kind:
    description:
      - With O(state=present), C(before) is taken ahead of changes and C(applied) after them.
    type: str
    choices: [before, applied]
    default: before
  snapshot:
    description:
      - With O(state=restore), the snapshot to restore. C(original) is the first ever taken,
        C(latest) the newest before-snapshot. Otherwise a file name in O(dir), or a host path.
    type: str
    default: original
  parts:
    description:
      - With O(state=restore), restore only these parts (the snapshot's sections, restored
        in this order - the tune parts' own in the order host_tune runs them, then the
        files).
    type: list
    elements: str
    choices: [sysctl, cpuidle, pcie, placement, files]
    default: [sysctl, cpuidle, pcie, placement, files]
  dir:
    description: Folder of the snapshots on the host (under O(root)).
    type: path
    default: /var/lib/gpuhost
  sysctl_keys:
    description: Sysctl keys to record (the keys of C(gpuhost_sysctl)).
    type: list
    elements: str
    default: []
  files:
    description: Host paths whose existence and content are recorded and restored.
    type: list
    elements: path
    default:
      - /etc/sysctl.d/99-gpuhost-tuning.conf
      - /etc/systemd/system/gpuhost-tuning.service
      - /etc/systemd/system/multi-user.target.wants/gpuhost-tuning.service
      - /etc/gpuhost-tuning
      - /etc/gpuhost-tuning/boot.json
      - /usr/local/lib/gpuhost-tuning
      - /etc/modules-load.d/gpuhost-nvidia-peermem.conf
      - /etc/systemd/system/gpuhost-nvidia-device-nodes.service
      - /etc/systemd/system/multi-user.target.wants/gpuhost-nvidia-device-nodes.service
  lxc_config_dir:
    description: Folder of the Proxmox container configs (under O(root)) whose GPU
      containers' cpuset lines are recorded and restored.
    type: path
    default: /etc/pve/lxc
  root:
    description: Host root every path is resolved under (C(/) on a live host).
    type: path
    default: /
notes:
  - Check mode computes what would be written or restored and writes nothing.
  - A restore does not stop or disable the boot service; run
    M(gpuhost.tuning.boot_service) with O(state=absent) first (the revert playbook does).
  - Needs root on a live host (PCI config space beyond 64 bytes).
seealso:
  - module: gpuhost.tuning.sysctl_settings
  - module: gpuhost.tuning.boot_service
"""

EXAMPLES = r"""
- name: Record the state before tuning (the first one becomes the original)
  gpuhost.tuning.tuning_snapshot:
    sysctl_keys: "{{ gpuhost_sysctl.keys() | list }}"

- name: Put the host back as it was before the first tune
  gpuhost.tuning.tuning_snapshot:
    state: restore
    snapshot: original
"""

RETURN = r"""
path:
  description: The snapshot written (host path), or null when nothing was written.
  returned: when O(state=present)
  type: str
  sample: /var/lib/gpuhost/original.json
original:
  description: Host path of the original snapshot.
  returned: when O(state=present)
  type: str
  sample: /var/lib/gpuhost/original.json
summary:
  description:
    - The state recorded (O(state=present)). C(pcie) (address to MRRS bytes),
      C(cpuidle_driver), C(cpuidle_cpus), C(cpuidle_disabled) (state name to the CPUs where
      it is disabled), C(sysctl) (key to value, null when the kernel lacks it), C(files)
      (path to C(absent), C(file), C(link) or C(dir)), C(placement) (VMID to C({cpus,
      mems}), the values its live cpuset lines give, null without one).
  returned: when O(state=present)
  type: dict
  sample: {"pcie": {"0000:01:00.0": 512}, "cpuidle_driver": "acpi_idle", "cpuidle_cpus": 128,
           "cpuidle_disabled": {"POLL": "", "C1": "", "C2": ""},
           "sysctl": {"kernel.numa_balancing": "1"},
           "files": {"/etc/sysctl.d/99-gpuhost-tuning.conf": "absent"},
           "placement": {"131": {"cpus": "0-15", "mems": "0"}}}
snapshots:
  description: Snapshot file names in O(dir), original first, C(applied.json) last.
  returned: always
  type: list
  elements: str
  sample: [original.json, snapshot-20260101T120000Z.json, applied.json]
snapshot:
  description: The snapshot restored (host path).
  returned: when O(state=restore)
  type: str
taken_at:
  description: When the restored snapshot was taken (UTC, ISO 8601).
  returned: when O(state=restore)
  type: str
pcie:
  description: Per device C({address, role, wanted, before, after, status, reason}).
  returned: when O(state=restore)
  type: list
  elements: dict
cpuidle:
  description: Per idle state name C({name, cpus_restored, status, reason}).
  returned: when O(state=restore)
  type: list
  elements: dict
sysctl:
  description: Per key C({key, before, wanted, after, status, reason}).
  returned: when O(state=restore)
  type: list
  elements: dict
files:
  description: Per file C({path, before, after, status, reason}); before and after are
    C(absent), C(file), C(link) or C(dir).
  returned: when O(state=restore)
  type: list
  elements: dict
placement:
  description: Per GPU container C({vmid, before, after, status, reason}); before and
    after are its live cpuset lines now and as the snapshot holds them.
  returned: when O(state=restore)
  type: list
  elements: dict
differs:
  description: Each item a restore changed (in check mode - would change), as
    C(<part> <item>) (C(pcie 0000:01:00.0), C(sysctl vm.swappiness), C(placement lxc 131));
    after a restore, a read-back in check mode lists what still differs from the snapshot.
  returned: when O(state=restore)
  type: list
  elements: str
report:
  description: One line per part of what a restore did, as the revert shows it
    (C(MRRS restored - 0000:01:00.0, ...), C(sysctls skipped - ...)); each part declares
    its lines.
  returned: when O(state=restore)
  type: list
  elements: str
failures:
  description: What did not take during a restore (the task fails when not empty).
  returned: when O(state=restore)
  type: list
  elements: str
"""

# Imports follow the documentation blocks (Ansible module layout), hence E402.
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import zipload  # noqa: E402

zipload.install()  # before the collection's imports: compiled once per host and version

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (  # noqa: E402
    check_module,
    common,
    fail,
    gpu,
    inside,
    non_empty_list,
    snapshot_name,
    sysctl_key,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import snapshot  # noqa: E402


def rules(p):
    """Option values this module refuses before it reads or writes anything (run by
    validate.check_module: a ValidationError names the option, the value and what is
    allowed)."""
    common(p)
    non_empty_list("parts", p.get("parts"), "snapshot parts (the choices of parts)")
    inside(p, "lxc_config_dir")
    snapshot_name("snapshot", p.get("snapshot"))
    if p.get("snapshot") and "/" in p["snapshot"]:
        inside(p, "snapshot")
    inside(p, "dir")
    inside(p, "files", follow=False)
    for path in p.get("files") or []:
        if not path.startswith("/"):
            fail("files", path, "absolute host paths")
    for key in p.get("sysctl_keys") or []:
        sysctl_key("sysctl_keys", key)
    gpu(p)


def build_module():
    return AnsibleModule(
        argument_spec=snapshot.snapshot_spec(),
        supports_check_mode=True,
    )


def main():
    module = build_module()
    with check_module(module, "tuning_snapshot", rules):
        _run(module)


def _run(module):
    result = snapshot.snapshot_run(module.params, module.check_mode)
    if not module._diff:
        result.pop("diff", None)
    if snapshot.snapshot_failure(result):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
