#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: apply_report
short_description: The controller's side of applying a saved plan (load, check, report)
version_added: "0.2.0"
description:
  - "The steps of playbook C(gpuhost.tuning.apply) that run on the controller, in the
    controller's own process (an action plugin; the module itself only documents them)."
  - "O(step=load): reads the plan O(plan) (written by C(gpuhost.tuning.plan)) and refuses
    the whole apply, before any host is touched, when its digest does not match (the plan
    was edited after it was made), its file name C(plan-<digest12>.json) names another
    digest, its schema is another, it was made by another collection version, or it is
    older than O(max_age) hours. Returns the hosts to apply (the plan's
    hosts of O(inventory), less O(skip), in the plan's batch order), their batch sizes for
    the play's C(serial), the hosts left out and the inventory hosts not in the plan."
  - "O(step=check), once per host: RV(refused) is None when the plan holds for the host,
    else why it is refused: another collection version, the plan too old, the host not in
    the plan, the plan refused it, host_tune refuses it now, or what host_tune would change
    now (its check-mode result in O(result_var)) is not exactly the planned change set
    (C(state moved since the plan: kernel.numa_balancing is now 0 (planned 1 -> 0))).
    Without O(result_var) only what the plan itself says is checked."
  - "O(step=write), once (C(run_once)): writes C(apply-<digest12>.json) and
    C(apply-<digest12>.md) into O(dest): per host of the plan its planned change set, what
    the real run changed, and its status: C(applied), C(differs) (done is not what was
    planned), C(refused) (why), C(failed) (why), C(skipped), C(not reached); and each
    inventory host of the run that is not in the plan (not touched). Atomic, and only when
    the content changed."
author:
  - gpuhost.tuning developers (!UNKNOWN)
options:
  step:
    description: Which step to run.
    type: str
    required: true
    choices: [load, check, write]
  plan:
    description: Path of the plan file (C(plan-<digest12>.json)). Required with
      O(step=load).
    type: path
  max_age:
    description: The oldest plan to apply, in hours (above 0).
    type: float
    default: 24
  skip:
    description: Hosts or groups of the plan left out by name (O(step=load)).
    type: list
    elements: str
    default: []
  inventory:
    description: The inventory hosts of this run (the play's host pattern). Required with
      O(step=load).
    type: list
    elements: str
  plan_var:
    description: The variable of C(localhost) under which O(step=load)'s result was
      registered (O(step=check) and O(step=write) read the plan from it).
    type: str
    default: __gpuhost_apply_plan
  result_var:
    description:
      - With O(step=check), the variable holding host_tune's check-mode result of this
        host; with O(step=write), the variable holding each host's real host_tune result.
    type: str
  status_var:
    description: The variable of each host holding what the apply recorded for it
      (C({status, reason}), status C(applied), C(refused) or C(failed)) (O(step=write)).
    type: str
    default: __gpuhost_apply_result
  hosts:
    description: The hosts of the apply play (typically V({{ ansible_play_hosts_all }})).
      Required with O(step=write).
    type: list
    elements: str
  dest:
    description: Folder for the apply report; created when missing. Required with
      O(step=write).
    type: path
notes:
  - Runs on the controller only; a host's check reads its variables there, so no argument
    carries a host_tune result.
seealso:
  - module: gpuhost.tuning.host_tune
  - module: gpuhost.tuning.tune_report
"""

EXAMPLES = r"""
- name: Load the plan (refused whole on a digest, version or age mismatch)
  gpuhost.tuning.apply_report:
    step: load
    plan: "{{ gpuhost_plan }}"
    inventory: "{{ query('ansible.builtin.inventory_hostnames', 'all') }}"
  register: __gpuhost_apply_plan
"""

RETURN = r"""
hosts:
  description: The hosts to apply, in batch order (O(step=load)).
  returned: step load
  type: list
  elements: str
serial:
  description: The batch sizes of RV(hosts) (O(step=load)).
  returned: step load
  type: list
  elements: int
skipped:
  description: Hosts of the plan that are not applied, with why (O(step=load)).
  returned: step load
  type: dict
not_in_plan:
  description: Inventory hosts of the run that the plan does not name (O(step=load)).
  returned: step load
  type: list
  elements: str
digest:
  description: The plan's digest (O(step=load)).
  returned: step load
  type: str
refused:
  description: None, or why this host is refused (O(step=check)).
  returned: step check
  type: str
planned:
  description:
    - This host's change set in the plan (O(step=check); empty when it is not in the plan).
      Role C(apply) passes it to M(gpuhost.tuning.host_tune)
      (O(gpuhost.tuning.host_tune#module:planned_changes)), which compares it again inside
      its run lock before the first change.
  returned: step check
  type: list
  elements: dict
files:
  description: Paths of the report files (O(step=write)).
  returned: step write
  type: list
  elements: str
counts:
  description: Hosts per status (O(step=write)).
  returned: step write
  type: dict
lines:
  description: The console lines of the report (O(step=write)).
  returned: step write
  type: list
  elements: str
"""

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import zipload  # noqa: E402

zipload.install()  # before the collection's imports: compiled once per host and version

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import check_module  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.plan import apply_check  # noqa: E402


# The validation rules sit beside the spec (engines/plan/apply_check.py; the action plugin
# runs them too).
rules = apply_check.rules


def main():
    module = AnsibleModule(argument_spec=apply_check.options(), supports_check_mode=True,
                           **apply_check.RULES)
    with check_module(module, "apply_report", rules):
        module.fail_json(msg="apply_report runs on the controller as an action plugin "
                             "(plugins/action/apply_report.py): it reads the play's "
                             "variables there and is never sent to a host")


if __name__ == "__main__":
    main()
