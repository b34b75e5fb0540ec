#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: audit_report
short_description: Write the audit reports (JSON per host, Markdown summary, HTML page)
version_added: "0.1.0"
description:
  - "Renders the results of M(gpuhost.tuning.host_audit) for many hosts into O(dest):
    C(<host>.json) (keys C(schema) (1), C(host), C(collected_at), C(facts) (the AER
    counters as C(pcie_aer) among them), C(findings), C(checks), C(status), C(error),
    C(last_seen), C(groups)), C(summary.md) (hosts x severity counts, the hosts not
    audited, then the findings),
    C(index.html) (the fleet view: hosts not audited, findings grouped by id with host
    counts and the worst hosts, the host list; self-contained, no network) with one page
    per host, C(<host>.html) (its status, facts, checks, findings and GPU table), and
    C(gpuhost.prom) (the run's metrics in Prometheus text format)."
  - "When O(dest) already holds a host's C(<host>.json) from an earlier audit, the PCIe
    AER counters are compared with it - C(summary.md) gets a table C(PCIe errors since the
    previous report) (host, that report's time, device, change such as C(+3 correctable) or
    C(no change); C(counters restarted since) after a reboot or reset), C(index.html) the
    same per host, each C(pcie_aer_errors) finding its change (C(change) in the JSON) and
    C(<host>.json) the comparison as C(aer_change) C({since, devices}). Writing the
    reports of the same audit again keeps that comparison. A previous file that is not a
    readable report (bad JSON, wrong shape, not a regular file) is ignored for the
    comparison with a warning naming it, and replaced by this run's report."
  - "Every host given is in every report. A host that was not audited - C(unreachable)
    (its connection failed), C(failed) (its audit failed, or it failed in a task before
    the audit and has no result) or C(skipped) - gets a C(<host>.json) with that
    C(status), Ansible's message as C(error), empty C(facts), C(findings) and C(checks),
    C(collected_at) the time it was tried and C(last_seen) the C(collected_at) of its
    newest good audit (from its previous C(<host>.json) in O(dest); null if never); a row
    in the section C(Hosts not audited) of C(summary.md); and C(gpuhost_host_up 0) in
    C(gpuhost.prom). An audited host has C(status) C(ok), C(error) empty and C(last_seen)
    its C(collected_at). C(groups) is the host's inventory groups (O(groups))."
  - "A host name with a C(/), backslash, control character or leading dot, or too long for
    a file name, gets its report files under that name made safe plus a short hash of it,
    so two hosts never write one file; names already safe keep their file names."
  - "In C(summary.md) and C(index.html), findings of one host with the same id, severity,
    current and expected value are one row listing their subjects (in HTML a count, the
    list under a C(details) element); C(<host>.json) keeps one entry per finding."
  - "C(gpuhost.prom) holds, for every host (label C(host)): C(gpuhost_finding{id,severity,subject})
    1 per finding; C(gpuhost_findings{severity}) for all five severities, zeros included;
    C(gpuhost_audit_timestamp_seconds) and C(gpuhost_audit_duration_seconds);
    C(gpuhost_check_status{column}) per report column, -1 not applicable, 0 ok, 1 info,
    2 low, 3 medium, 4 high, 5 critical (those of audited hosts);
    C(gpuhost_gpu_recovery_action{gpu,action}) per GPU, what it needs (C(none), C(drain_p2p),
    C(reset), C(drain_and_reset), C(reboot)) and as the value its rank (0 to 4); for every host
    C(gpuhost_host_up) (1 audited in this run, 0 not) and
    C(gpuhost_last_good_audit_age_seconds) (from its C(last_seen) to O(generated_at), or to
    the controller's clock when O(generated_at) is no time stamp, so such a run rewrites
    C(gpuhost.prom) as the ages grow; no series for a host never audited)."
  - "Runs on the controller, in the controller's own process (an action plugin), once for
    the play (C(run_once)). With O(hosts) and O(result_var) it reads each host's registered
    result itself instead of having the results templated into O(audits)."
  - Files are written atomically and only when their content changed.
author:
  - gpuhost.tuning developers (!UNKNOWN)
options:
  audits:
    description:
      - Inventory host name to its C(audit) result from M(gpuhost.tuning.host_audit), or
        to C({status, error}) for a host that was not audited (C(status) one of
        C(unreachable), C(failed), C(skipped); C(error) the message why).
      - One of O(audits) and O(hosts) is required.
    type: dict
  hosts:
    description:
      - Inventory host names whose results to report, each read from that host's variable
        O(result_var) (typically V({{ ansible_play_hosts }})).
      - Read on the controller without templating, so the reports of many hosts cost no
        argument passing. Pass every host of the play, V({{ ansible_play_hosts_all }}) - a
        listed host whose result is unreachable or failed, or that has no result (it
        failed before the audit), is reported as not audited; the task fails only when no
        listed host has the variable at all (a misspelled O(result_var)).
      - Each host's inventory groups (C(group_names)) are read too, unless O(groups) is
        given.
    type: list
    elements: str
  result_var:
    description: Name under which each host of O(hosts) registered the result of
      M(gpuhost.tuning.host_audit). Required with O(hosts).
    type: str
  dest:
    description: Folder for the reports; created when missing.
    type: path
    required: true
  generated_at:
    description: Time stamp printed in the summaries (default the controller's UTC time).
    type: str
  mrrs_size:
    description: Wanted MRRS, for highlighting GPU table cells below it.
    type: int
    default: 4096
    choices: [128, 256, 512, 1024, 2048, 4096]
  groups:
    description: Inventory host name to its inventory group names, written into each
      C(<host>.json) as C(groups) (sorted; C(all) left out). With O(hosts), read from the
      hosts' C(group_names) when not given.
    type: dict
  write:
    description: Write the files; V(false) only renders (RV(metrics) for the hosts' textfile
      folders), and RV(files) and RV(written) are empty.
    type: bool
    default: true
  fleet_files:
    description:
      - Write C(summary.md), C(index.html) and C(gpuhost.prom) beside the per-host JSON.
      - V(false) for one slice of a sliced job (AWX/AAP job slicing; role audit's
        C(gpuhost_audit_report_slice)) - only C(<host>.json) is written, each with the
        host's own verdict (no fleet drift, since a slice sees part of the fleet), so slices
        writing one folder never overwrite each other; M(gpuhost.tuning.report_merge)
        then writes the fleet files over all slices.
    type: bool
    default: true
notes:
  - In check mode nothing is written; RV(files) still lists what would be.
"""

EXAMPLES = r"""
- name: Audit each host
  gpuhost.tuning.host_audit:
  register: audit

- name: Write the audit reports of every host on the controller
  gpuhost.tuning.audit_report:
    hosts: "{{ ansible_play_hosts_all }}"
    result_var: audit
    dest: "{{ playbook_dir }}/gpuhost-reports"
  run_once: true

- name: The same from results gathered some other way
  gpuhost.tuning.audit_report:
    audits:
      gpu01: "{{ hostvars['gpu01'].audit.audit }}"
    dest: /srv/reports
  run_once: true
"""

RETURN = r"""
files:
  description: Paths of the report files (written or unchanged).
  returned: always
  type: list
  elements: str
  sample: ["/srv/reports/gpu01.json", "/srv/reports/gpuhost.prom", "/srv/reports/index.html",
           "/srv/reports/summary.md"]
written:
  description: Paths whose content changed (or would in check mode).
  returned: always
  type: list
  elements: str
index:
  description: Path of C(index.html).
  returned: always
  type: str
metrics:
  description: Per audited host, that host's series alone in Prometheus text format (what a
    node_exporter textfile folder on the host should hold).
  returned: always
  type: dict
  sample: {"gpu01": "# HELP gpuhost_audit_duration_seconds ...\n"}
not_audited:
  description: The hosts given that were not audited, each C({status, error, last_seen}).
  returned: always
  type: dict
  sample: {"gpu02": {"status": "unreachable", "error": "Failed to connect to the host via
           ssh: ...", "last_seen": "2026-12-04T03:00:12Z"}}
summary:
  description: Per audited host C({worst, critical, high, medium, low, info}).
  returned: always
  type: dict
  sample: {"gpu01": {"worst": "critical", "critical": 1, "high": 21, "medium": 6,
           "low": 9, "info": 1}}
"""

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import zipload  # noqa: E402

zipload.install()  # before the collection's imports: compiled once per host and version

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import check_module  # noqa: E402

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import report_options  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import report  # noqa: E402


# The validation rules sit beside the spec (engines/report/report_options.py; the action
# plugin runs them too).
rules = report_options.audit_report_rules


def main():
    module = AnsibleModule(argument_spec=report_options.audit_report(), supports_check_mode=True,
                           **report_options.AUDIT_REPORT_RULES)
    with check_module(module, "audit_report", rules):
        _run(module)


def _run(module):
    try:
        result = report.audit_report_run(module.params, module.check_mode)
    except report.ReportError as exc:
        module.fail_json(msg=str(exc))
    for line in result.pop("warnings", None) or []:     # ansible-core 2.19+: warn(), not a key
        module.warn(line)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
