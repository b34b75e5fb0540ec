#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: plan_report
short_description: Write the saved fleet plan (plan.json, plan.md, plan.html) of many hosts
version_added: "0.2.0"
description:
  - "Builds the plan of every host from the result M(gpuhost.tuning.host_tune) returned in
    check mode: each host's planned changes (the rows whose status says a change: part,
    item, before, after), their fingerprint (sha256 of the changes with their
    before-values: the state the plan was made from), the host's group (hosts making the
    same change, device addresses aside), whether it is refused (host_tune failed or
    refused it, or it was unreachable) and the rollout batches of O(serial)."
  - "Writes into O(dest): C(plan-<digest12>.json) (the plan, named by the first 12
    characters of its digest: sha256 of its canonical JSON without the digest),
    C(plan.json) (a copy of the newest plan), C(plan.md) (the digest on its first line;
    the groups, outliers first, then the hosts of each group) and C(plan.html) (the same,
    one section per group, its hosts in a collapsed list); each file atomically."
  - "Runs on the controller, in the controller's own process (an action plugin), once for
    the whole play (C(run_once)). With O(hosts) and O(result_var) it reads each host's
    registered result itself."
  - Playbook C(gpuhost.tuning.plan) runs it; C(gpuhost.tuning.apply) applies a plan it wrote.
author:
  - gpuhost.tuning developers (!UNKNOWN)
options:
  results:
    description:
      - Inventory host name to the result M(gpuhost.tuning.host_tune) returned in check
        mode (an empty mapping for a host that gave none).
      - One of O(results) and O(hosts) is required.
    type: dict
  hosts:
    description:
      - "Inventory host names to plan, in rollout order, each read from that host's variable
        O(result_var) (typically V({{ ansible_play_hosts_all }}), the unreachable hosts too:
        they are in the plan, refused)."
    type: list
    elements: str
  result_var:
    description: Name under which each host of O(hosts) registered host_tune's result.
      Required with O(hosts).
    type: str
  dest:
    description: Folder for the plan files; created when missing.
    type: path
    required: true
  serial:
    description:
      - The rollout batches the apply would use (C(gpuhost_serial)'s forms, a number, a
        percentage or a list of them); omitted, every host in one batch.
    type: raw
  parts:
    description: The tune parts the plan ran (recorded in the plan's C(options)).
    type: list
    elements: str
    default: []
  wanted:
    description: The wanted values the plan was made against (only their sha256 is kept,
      C(options.wanted_digest); the host name left out).
    type: dict
    default: {}
  collection_version:
    description: The collection's version recorded in the plan; the action plugin fills it
      from the installed collection.
    type: str
  created_by:
    description: Who made the plan; default C(user@host) of the controller.
    type: str
notes:
  - The files are output on the controller, not a change to the hosts; playbook
    C(gpuhost.tuning.plan) runs this with C(check_mode=false).
seealso:
  - module: gpuhost.tuning.host_tune
  - module: gpuhost.tuning.tune_report
"""

EXAMPLES = r"""
- name: Write the plan of every host of the play
  gpuhost.tuning.plan_report:
    hosts: "{{ ansible_play_hosts_all }}"
    result_var: __gpuhost_tune
    dest: "{{ gpuhost_plan_dir }}"
    serial: "{{ gpuhost_serial | default(omit) }}"
  run_once: true
  check_mode: false
"""

RETURN = r"""
files:
  description: Paths of the plan files (written or unchanged).
  returned: always
  type: list
  elements: str
written:
  description: Paths whose content changed (or would in check mode).
  returned: always
  type: list
  elements: str
plan:
  description: Path of C(plan-<digest12>.json), the file to apply.
  returned: always
  type: str
  sample: /srv/plans/plan-3f2a9c0d1e4b.json
digest:
  description: The plan's digest (sha256 hex).
  returned: always
  type: str
headline:
  description: One line of counts (hosts, groups, refused, reboots, batches).
  returned: always
  type: str
groups:
  description: One line per group, outliers first (host count, summary).
  returned: always
  type: list
  elements: str
refused:
  description: Hosts the plan refused.
  returned: always
  type: list
  elements: str
"""

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import zipload  # noqa: E402

zipload.install()  # before the collection's imports: compiled once per host and version

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import check_module  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.plan import plan_writer  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import files  # noqa: E402


# The validation rules sit beside the spec (engines/plan/plan_writer.py; the action plugin
# runs them too).
rules = plan_writer.rules


def main():
    module = AnsibleModule(argument_spec=plan_writer.options(), supports_check_mode=True,
                           **plan_writer.RULES)
    with check_module(module, "plan_report", rules):
        _run(module)


def _run(module):
    try:
        result = plan_writer.run(module.params, module.check_mode)
    except files.ReportError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
