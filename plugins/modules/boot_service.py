#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: boot_service
short_description: Install the boot-time service that re-applies PCIe MRRS and CPU idle states
version_added: "0.1.0"
description:
  - PCIe Max Read Request Size is reset by a reboot, a driver reload or a device reset, and
    CPU idle-state C(disable) flags by a reboot. This module installs C(gpuhost-tuning.service),
    a systemd oneshot unit (C(Type=oneshot), C(RemainAfterExit=yes)) ordered after
    C(nvidia-persistenced.service) and before C(pve-guests.service), wanted by
    C(multi-user.target), that re-applies both at every boot and logs each device and state
    to the journal; it exits non-zero naming any device whose MRRS did not take.
  - On a Proxmox host (a C(pve-cluster.service) unit file in C(/etc/systemd/system),
    C(/usr/lib/systemd/system) or C(/lib/systemd/system)) the unit also C(Wants=) and is
    ordered C(After=) C(pve-cluster.service), so C(/etc/pve) is mounted when the program
    decides which GPUs are the host's (a GPU a VM passes through is never written); on
    another host it names no Proxmox unit.
  - The program is not Ansible. The module writes copies of its own bundled module_utils
    (C(engines/tune/boot_program.py) and every module_utils file it imports, C(platform/hostfs.py),
    C(subjects/pcie/pci.py), C(subjects/pcie/setpci_maxreadreq.py), C(subjects/cpu/cpu.py),
    C(subjects/cpu/cpuidle_state.py) and the files those import), byte for byte, under
    C(/usr/local/lib/gpuhost-tuning), so the boot-time code is the code the modules run and
    updating the collection updates it (any differing file is rewritten and reported).
  - Also writes the JSON config C(/etc/gpuhost-tuning/boot.json) and the unit in
    C(/etc/systemd/system), and enables it (the C(multi-user.target.wants) link).
  - On a live host (O(root=/) with systemd running) it runs C(systemctl daemon-reload) after
    a change, C(systemctl enable), and starts the unit (restarts it when a file changed), so
    a failing re-apply fails this task. Under another O(root) (a tree, an image) only files
    and the wants link are written; the live-only commands are reported in RV(commands)
    as skipped.
  - O(state=absent) disables and stops the unit (live) and removes the unit, the wants link,
    the config and the library files it installed (everything under
    C(ansible_collections/gpuhost/tuning) in the library folder and the two package markers
    above it), then the config and library folders when nothing else is in them. A folder
    that holds other files stays with them and is listed in RV(kept). Values already
    applied stay as they are.
  - O(state=present) never removes a file in the library folder outside its own package.
extends_documentation_fragment:
  - gpuhost.tuning.gpu_selection.devices
author:
  - gpuhost.tuning developers (!UNKNOWN)
options:
  state:
    description: C(present) installs, enables and starts; C(absent) disables and removes.
    type: str
    choices: [present, absent]
    default: present
  mrrs_size:
    description:
      - PCIe Max Read Request Size (bytes) set at boot on every GPU (O(vendor), O(classes))
        and, with O(include_upstream), each bridge above it. V(0) leaves MRRS alone.
    type: int
    default: 4096
    choices: [0, 128, 256, 512, 1024, 2048, 4096]
  cpuidle_deeper_than:
    description:
      - Disable at boot, on every online CPU, the idle states with a higher exit latency than
        this named state (C(C1) disables C2 and deeper). Empty leaves idle states alone.
    type: str
    default: C1
  after:
    description: Units the service is ordered after (C(After=)).
    type: list
    elements: str
    default: [nvidia-persistenced.service]
  before:
    description: Units the service is ordered before (C(Before=)).
    type: list
    elements: str
    default: [pve-guests.service]
  python:
    description:
      - The host's Python 3 the unit runs (stdlib only is needed), an absolute path alone.
      - Spaces are allowed; the path is quoted in C(ExecStart=) as systemd.syntax(7) reads
        it (C(%) and C($) doubled). Arguments, quotes, backslashes, control characters and
        C(.) or C(..) parts are refused.
    type: path
    default: /usr/bin/python3
  start:
    description: On a live host, start the unit now (restart it when a file changed).
    type: bool
    default: true
  root:
    description: Host root the files are written under (C(/) on a live host).
    type: path
    default: /
notes:
  - Check mode reports every file that would change and the commands that would run; with
    diff mode the unit and config are shown as diffs, library files by name, one per line.
  - Needs root on a live host.
seealso:
  - module: gpuhost.tuning.setpci_maxreadreq
  - module: gpuhost.tuning.cpuidle_state
"""

EXAMPLES = r"""
- name: Re-apply MRRS 4096 and keep C2 off at every boot
  gpuhost.tuning.boot_service:
    mrrs_size: 4096
    cpuidle_deeper_than: C1

- name: Remove the service (revert)
  gpuhost.tuning.boot_service:
    state: absent
"""

RETURN = r"""
unit_path:
  description: Host path of the unit file.
  returned: always
  type: str
  sample: /etc/systemd/system/gpuhost-tuning.service
config_path:
  description: Host path of the JSON config the unit reads.
  returned: always
  type: str
  sample: /etc/gpuhost-tuning/boot.json
config:
  description: The config written (null parts are switched off).
  returned: when O(state=present)
  type: dict
  sample: {"mrrs": {"size": 4096, "vendor": "10de", "classes": ["0300", "0302"],
                    "include_upstream": true}, "cpuidle": {"deeper_than": "C1"}}
files:
  description: Every file and link the module manages, each C({path, action}); C(action) is
    C(create), C(update), C(remove) or C(ok).
  returned: always
  type: list
  elements: dict
  sample: [{"path": "/etc/systemd/system/gpuhost-tuning.service", "action": "create"}]
kept:
  description: With O(state=absent), each C({path, reason}) of the config or library folder
    left in place because it holds files this module did not install (named in the reason).
  returned: when O(state=absent)
  type: list
  elements: dict
  sample: [{"path": "/usr/local/lib/gpuhost-tuning", "reason": "holds 1 file(s) boot_service
    did not install (/usr/local/lib/gpuhost-tuning/site.py): kept with them; only its own
    files were removed"}]
enabled:
  description: Whether the wants link exists after the run (planned, in check mode).
  returned: always
  type: bool
active:
  description: C(systemctl is-active) of the unit after the run on a live host; null
    otherwise.
  returned: always
  type: str
  sample: active
commands:
  description: Live-only commands, each C({command, status, reason}); C(status) is C(run),
    C(skipped) (with the reason) or C(planned) (check mode).
  returned: always
  type: list
  elements: dict
  sample: [{"command": "systemctl daemon-reload", "status": "skipped",
            "reason": "root is /srv/tree, not the live host"}]
"""

# Imports follow the documentation blocks (Ansible module layout), hence E402.
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import zipload  # noqa: E402

zipload.install()  # before the collection's imports: compiled once per host and version

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (  # noqa: E402
    EXEC_PATH,
    UNIT_NAME,
    check_module,
    common,
    fail,
    gpu,
    idle_state_name,
    names,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import boot_service  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import Runner  # noqa: E402


def rules(p):
    """Option values this module refuses before it reads or writes anything (run by
    validate.check_module: a ValidationError names the option, the value and what is
    allowed)."""
    common(p)
    gpu(p)
    idle_state_name("cpuidle_deeper_than", p.get("cpuidle_deeper_than"), allow_empty=True)
    names("after", p.get("after"), UNIT_NAME, "systemd unit names like nvidia-persistenced.service")
    names("before", p.get("before"), UNIT_NAME, "systemd unit names like pve-guests.service")
    python = p.get("python")
    if python is not None and (not EXEC_PATH.match(python)
                               or set(python.split("/")) & set([".", ".."])):
        fail("python", python, "the absolute path of the interpreter alone (spaces are "
                               "allowed and quoted in the unit; no arguments, quotes, "
                               "backslashes, control characters, '.' or '..')")


def build_module():
    return AnsibleModule(argument_spec=boot_service.service_spec(), supports_check_mode=True)


def main():
    module = build_module()
    with check_module(module, "boot_service", rules):
        _run(module)


def _run(module):
    result = boot_service.service_run(module.params, module.check_mode, Runner(module))
    if not module._diff:
        result.pop("diff", None)
    if boot_service.service_failure(result):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
