#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: tune_report
short_description: Write the before -> after tune reports of many hosts in one call
version_added: "0.1.0"
description:
  - "Renders the results of M(gpuhost.tuning.host_tune) for many hosts into O(dest):
    C(<host>-tune.md) (the before -> after table, the snapshot, the managed findings before
    and after, the failures) and C(<host>-tune.json) (keys C(host), C(root), C(check_mode),
    C(snapshot), C(rows), C(findings_before), C(findings_after), C(verified), C(failures),
    C(status), C(error)): C(status) C(ok), C(unreachable) (Ansible's message in C(error)),
    C(skipped) or C(failed) (a failure, or no result: the host failed before host_tune)."
  - "Runs on the controller, in the controller's own process (an action plugin), once for
    the whole play (C(run_once)). With O(hosts) and O(result_var) it reads each host's
    registered result itself instead of having the results templated into O(results)."
  - Files are written atomically (temporary file in the same folder, then rename) and only
    when their content changed.
  - A host whose value is not a host_tune result (the module crashed, the host was not
    tuned) gets a report saying so, listed in its C(failures).
author:
  - gpuhost.tuning developers (!UNKNOWN)
options:
  results:
    description:
      - Inventory host name to the result M(gpuhost.tuning.host_tune) returned.
      - One of O(results) and O(hosts) is required.
    type: dict
  hosts:
    description:
      - Inventory host names whose results to report, each read from that host's variable
        O(result_var) (typically V({{ ansible_play_hosts_all }}), every host of the
        play, the unreachable ones too); a host without it gets a
        report saying it was not tuned in this play.
      - Read on the controller without templating, so the reports of many hosts cost no
        argument passing.
    type: list
    elements: str
  result_var:
    description: Name under which each host of O(hosts) registered the result of
      M(gpuhost.tuning.host_tune). Required with O(hosts).
    type: str
  dest:
    description: Folder for the reports; created when missing.
    type: path
    required: true
notes:
  - The reports are output on the controller, not a change to the hosts; the tune role runs
    this with C(check_mode=false) so a check-mode run writes its planned table too (marked
    as check mode in the file). In check mode (when not overridden) nothing is written and
    RV(written) lists what would be.
  - The same Markdown is returned in RV(tables) for printing.
seealso:
  - module: gpuhost.tuning.host_tune
  - module: gpuhost.tuning.audit_report
"""

EXAMPLES = r"""
- name: Write <host>-tune.md and <host>-tune.json for every host of the play
  gpuhost.tuning.tune_report:
    hosts: "{{ ansible_play_hosts }}"
    result_var: __tuned
    dest: "{{ playbook_dir }}/gpuhost-reports"
  run_once: true
  check_mode: false
  register: __report

- name: Print every host's table
  ansible.builtin.debug:
    var: __report.tables
  run_once: true
"""

RETURN = r"""
files:
  description: Paths of the report files (written or unchanged).
  returned: always
  type: list
  elements: str
  sample: ["/srv/reports/gpu01-tune.json", "/srv/reports/gpu01-tune.md"]
written:
  description: Paths whose content changed (or would in check mode).
  returned: always
  type: list
  elements: str
tables:
  description: Per host, the Markdown report as a list of lines (for printing).
  returned: always
  type: dict
  sample: {"gpu01": ["# Tuning of gpu01", "", "- root: `/`"]}
failed_hosts:
  description: Hosts whose report lists failures.
  returned: always
  type: list
  elements: str
"""

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import zipload  # noqa: E402

zipload.install()  # before the collection's imports: compiled once per host and version

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import check_module  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import report_options  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import report  # noqa: E402


# The validation rules sit beside the spec (engines/report/report_options.py; the action
# plugin runs them too).
rules = report_options.tune_report_rules


def main():
    module = AnsibleModule(argument_spec=report_options.tune_report(), supports_check_mode=True,
                           **report_options.TUNE_REPORT_RULES)
    with check_module(module, "tune_report", rules):
        _run(module)


def _run(module):
    try:
        result = report.tune_report_run(module.params, module.check_mode)
    except report.ReportError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
