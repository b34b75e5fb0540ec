#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: rollout_report
short_description: Summarize a rolling run across hosts (done, stopped and why, not reached)
version_added: "0.1.0"
description:
  - "Writes C(<name>.md) and C(<name>.json) into O(dest) and returns console lines: each
    host of O(hosts) as C(done), C(stopped) (with the reason) or C(not reached) (no entry in
    O(results): a batch the run never started, or a host that was unreachable). A result
    with any other status is C(unknown), its raw status named in the row (C(raw_status))
    and its reason: the run reached that host."
  - Meant to run once on the controller after each batch (C(run_once), C(delegate_to
    localhost)), so the files are right even when the run stops at a failed host.
  - Files are written atomically and only when their content changed.
author:
  - gpuhost.tuning developers (!UNKNOWN)
options:
  hosts:
    description: Every host of the play in rollout order (C(ansible_play_hosts_all)).
    type: list
    elements: str
    required: true
  results:
    description: Host to C({status, reason}); C(status) is C(done) or C(stopped). Hosts missing
      here (or whose result has no status) are C(not reached); a result with another status
      is C(unknown).
    type: dict
    required: true
  dest:
    description: Folder on the controller for the files; created when missing.
    type: path
    required: true
  name:
    description: Base name of the files. A plain file name; refused when its files would
      replace or pose as the fleet files of the report folder (C(summary), C(index),
      C(gpuhost), C(tune-summary), in any case) or a per-host report file of one of
      O(hosts) (C(gpu01) would replace C(gpu01.json), C(gpu01-tune) its tune report).
    type: str
    default: rollout
  title:
    description: What ran, for the headline.
    type: str
    default: rollout
  generated_at:
    description: Time stamp written in the files (default the controller's UTC time).
    type: str
notes:
  - In check mode nothing is written; RV(written) lists what would be.
"""

EXAMPLES = r"""
- name: Write the rollout summary on the controller
  gpuhost.tuning.rollout_report:
    hosts: "{{ ansible_play_hosts_all }}"
    results: "{{ dict(ansible_play_hosts_all | zip(ansible_play_hosts_all
                 | map('extract', hostvars, '__rollout_result'))) }}"
    dest: "{{ playbook_dir }}/gpuhost-reports"
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
hosts:
  description: One entry per host, rollout order.
  returned: always
  type: list
  elements: dict
  sample: [{"host": "gpu01", "status": "done", "reason": null},
           {"host": "gpu02", "status": "stopped", "reason": "headers for kernel ... not found"},
           {"host": "gpu03", "status": "not reached", "reason": null}]
counts:
  description: Hosts per status; C(unknown) only when a host has that status.
  returned: always
  type: dict
  sample: {"done": 1, "stopped": 1, "not reached": 3}
finished:
  description: Whether every host has a result (nothing left not reached or unknown).
  returned: always
  type: bool
lines:
  description: The summary as console lines (headline, then one line per host).
  returned: always
  type: list
  elements: str
files:
  description: Paths of the two files.
  returned: always
  type: list
  elements: str
written:
  description: Paths whose content changed (or would in check mode).
  returned: always
  type: list
  elements: str
"""

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import zipload  # noqa: E402

zipload.install()  # before the collection's imports: compiled once per host and version

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import report, rollout  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (  # noqa: E402
    check_module,
    fail,
    no_control,
)


def rules(p):
    """Option values this module refuses before it reads or writes anything (run by
    validate.check_module: a ValidationError names the option, the value and what is
    allowed)."""
    for key in ("name", "title", "generated_at"):
        no_control(key, p.get(key))
    if p.get("dest") in ("", None):
        fail("dest", p.get("dest"), "a folder path")
    # the name is checked by rollout.report_run (a file name stem, no folder, not a fleet
    # file's or a host file's: files.report_name_clash)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            hosts=dict(type="list", elements="str", required=True),
            results=dict(type="dict", required=True),
            dest=dict(type="path", required=True),
            name=dict(type="str", default="rollout"),
            title=dict(type="str", default="rollout"),
            generated_at=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    with check_module(module, "rollout_report", rules):
        _run(module)


def _run(module):
    try:
        result = rollout.report_run(module.params, module.check_mode)
    except report.ReportError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
