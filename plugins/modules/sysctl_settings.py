#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: sysctl_settings
short_description: Set many sysctls now and persist them in one sysctl.d file we own
version_added: "0.1.0"
description:
  - Writes every key of O(values) to C(/proc/sys) under O(root) and reads each one back, in
    one call (no per-key task loop).
  - Persists them in O(path), a file this module owns whole (it holds exactly O(values) and
    nothing else), written atomically (temporary file in the same folder, then rename).
  - A key the kernel or container does not let it set (the key does not exist, or
    C(/proc/sys) is read-only as in an LXC container) is reported in RV(skipped_keys) with the
    reason and is not a failure. A key that does not read back the wanted value on a
    writable kernel, or a value the kernel refuses, is a failure; every other key is still
    set and reported.
  - A file applied after O(path) at boot (a later name in a sysctl.d folder, such as
    Debian 12's C(99-sysctl.conf) link to C(/etc/sysctl.conf)) that sets a managed key to
    another value would undo it at every boot. C(/etc/sysctl.conf) itself is not read by
    systemd-sysctl, which applies the files at boot on Debian 12 and 13 alike (Debian 13
    and Proxmox VE 9 ship neither the file nor the link). Such keys are reported in
    RV(overridden_at_boot) and fail the task (naming the file), after everything else was
    done.
  - With O(state=absent) the file is removed; live values are left as they are (restore
    them with M(gpuhost.tuning.tuning_snapshot)).
author:
  - gpuhost.tuning developers (!UNKNOWN)
options:
  values:
    description:
      - Wanted values, key (dotted, as C(sysctl) prints it) to value. Multi-field values
        (C(net.ipv4.tcp_rmem)) are compared with whitespace collapsed.
      - Required with O(state=present).
    type: dict
  at_least:
    description:
      - Keys where a current value larger than the wanted one counts as right and is kept
        (live and in the file). The default is the collection's rule, the same one the
        audit judges by - the socket buffer sizes and ceilings; V([]) makes every key exact.
    type: list
    elements: str
    default: [net.core.rmem_max, net.core.wmem_max, net.core.rmem_default, net.core.wmem_default]
  path:
    description: The sysctl.d file owned by this module (host path, resolved under O(root)).
    type: path
    default: /etc/sysctl.d/99-gpuhost-tuning.conf
  apply:
    description: Also set the values now (otherwise only the file is written).
    type: bool
    default: true
  state:
    description: C(present) writes the file and applies the values; C(absent) removes the file.
    type: str
    choices: [present, absent]
    default: present
  root:
    description: Host root the paths are resolved under (C(/) on a live host, a tree in tests).
    type: path
    default: /
notes:
  - Check mode reports what would change (file and values) and writes nothing; a key that
    is not writable here is reported as skipped in check mode too.
  - Needs root (C(become)) on a live host; without it every write is a failure, not a skip.
seealso:
  - module: gpuhost.tuning.tuning_snapshot
  - module: gpuhost.tuning.host_audit
"""

EXAMPLES = r"""
- name: Apply and persist the GPU host sysctls
  gpuhost.tuning.sysctl_settings:
    values:
      kernel.numa_balancing: "0"
      net.core.rmem_max: "16777216"
      vm.swappiness: "10"
    at_least: []  # every value exact, a larger buffer is lowered too

- name: Remove the persisted file (revert)
  gpuhost.tuning.sysctl_settings:
    state: absent
"""

RETURN = r"""
path:
  description: The sysctl.d file, as a host path.
  returned: always
  type: str
  sample: /etc/sysctl.d/99-gpuhost-tuning.conf
file_changed:
  description: Whether the file was (or in check mode would be) written or removed.
  returned: always
  type: bool
settings:
  description:
    - One entry per key of O(values), in order.
    - Deprecated, removed in 0.3.0 - the result also carries the same list under its name
      in 0.1.0, C(values), which Jinja's dot notation cannot reach (C(result.values) is
      the dict method). Read C(settings).
  returned: when O(state=present)
  type: list
  elements: dict
  contains:
    key:
      description: The sysctl key.
      type: str
    before:
      description: Value before this run (whitespace collapsed); null when the key does not exist.
      type: str
    wanted:
      description: The value wanted (the current one when O(at_least) keeps a larger value).
      type: str
    after:
      description: Value read back after this run (the planned value in check mode).
      type: str
    status:
      description: C(ok), C(changed), C(skipped) or C(failed).
      type: str
    reason:
      description: Why a key was skipped or failed.
      type: str
      returned: when status is skipped or failed
  sample: [{"key": "kernel.numa_balancing", "before": "1", "wanted": "0", "after": "0",
            "status": "changed"}]
changed_keys:
  description: Keys written now (or in check mode, that would be).
  returned: always
  type: list
  elements: str
skipped_keys:
  description: Keys this kernel or container does not let us set, each C({key, reason}).
  returned: always
  type: list
  elements: dict
  sample:
    - key: kernel.numa_balancing
      reason: "kernel.numa_balancing: not writable here (Read-only file system); in a
        container the host kernel owns it"
failed_keys:
  description: Keys whose write failed or did not read back the wanted value.
  returned: always
  type: list
  elements: str
kept:
  description: With O(state=absent), true when O(path) was left in place because
    gpuhost.tuning did not write it (no managed header, or a link such as Debian's
    C(99-sysctl.conf)); a warning says so too.
  returned: when O(state=absent) and the file was not written by gpuhost.tuning
  type: bool
  sample: true
overridden_at_boot:
  description: Managed keys that a file applied after O(path) at boot sets to another value,
    each C({key, file, value, wanted}); the task fails when not empty.
  returned: always
  type: list
  elements: dict
  sample: [{"key": "vm.swappiness", "file": "/etc/sysctl.d/99-sysctl.conf", "value": "60",
            "wanted": "10"}]
"""

# Imports follow the documentation blocks (Ansible module layout), hence E402.
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import zipload  # noqa: E402

zipload.install()  # before the collection's imports: compiled once per host and version

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (  # noqa: E402
    check_module,
    common,
    fail,
    inside,
    sysctl_key,
    sysctl_values,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.sysctl.sysctl_settings import (  # noqa: E402,E501
    settings_failure,
    settings_run,
    settings_spec,
)


def rules(p):
    """Option values this module refuses before it reads or writes anything (run by
    validate.check_module: a ValidationError names the option, the value and what is
    allowed)."""
    common(p)
    sysctl_values("values", p.get("values"), allow_empty=p.get("state") != "present")
    for key in p.get("at_least") or []:
        sysctl_key("at_least", key)
    inside(p, "path", follow=False)
    if p.get("path") and p["path"].endswith("/"):
        fail("path", p["path"], "a file path, not a folder")


def build_module():
    return AnsibleModule(
        argument_spec=settings_spec(),
        required_if=[("state", "present", ("values",))],
        supports_check_mode=True,
    )


def main():
    module = build_module()
    with check_module(module, "sysctl_settings", rules):
        _run(module)


def _run(module):
    try:
        result = settings_run(module.params, module.check_mode, warn=module.warn)
    except (ValueError, OSError) as exc:
        module.fail_json(msg=str(exc))
    if not module._diff:
        result.pop("diff", None)
    msg = settings_failure(result)
    if msg:
        module.fail_json(msg=msg, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
