#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: report_merge
short_description: Merge the reports and plans of several folders (job slices, runs) into one
version_added: 0.2.0
description:
  - "Reads the C(<host>.json) reports that M(gpuhost.tuning.audit_report) wrote in each of
    O(folders) (one per slice of a sliced AWX/AAP job, or per run) and writes into O(dest)
    what one run over all those hosts would have written - C(<host>.json) per host,
    C(summary.md), C(index.html) and C(gpuhost.prom) - with the fleet checks (C(fleet_drift),
    the PCIe AER change) judged over the union."
  - "A host whose newest report says it was not audited (C(status) C(unreachable),
    C(failed) or C(skipped)) stays so in the merge, with its C(error), and C(last_seen)
    the newest good audit any folder (or O(dest)) holds of it; it is in C(summary.md)'s
    C(Hosts not audited) and has C(gpuhost_host_up 0). The fleet checks judge the audited
    hosts only. C(tune-summary.md) names each host's status (C(UNREACHABLE: ...))."
  - "The same for the tune reports of M(gpuhost.tuning.tune_report) in them (each host's
    newest C(<host>-tune.json), written again with its C(<host>-tune.md), and a
    C(tune-summary.md) of every host) and the rollout summaries of
    M(gpuhost.tuning.rollout_report) (one C(<name>.json) and C(.md) per name, each host's row
    from the newest summary that lists it, in the slices' order)."
  - "The plans of M(gpuhost.tuning.plan_report) in them (a sliced plan job writes one per
    slice) are merged into ONE plan in O(dest) - C(plan-<digest12>.json), C(plan.json),
    C(plan.md), C(plan.html), as the plan play writes them - that
    C(gpuhost.tuning.apply -e gpuhost_plan=<dest>/plan-<digest12>.json) applies; its groups
    (outliers first) and rollout batches made again over the union of the hosts, its digest
    computed again. A plan is told by its content (schema C(gpuhost.tuning/plan/1)), never by
    its file name; a folder's C(plan.json) and C(plan-<digest12>.json) are one plan, and a
    folder's plan is its newest (C(created_at)). One plan alone is written unchanged."
  - "The merged plan's C(created_at) is the OLDEST slice plan's, so C(gpuhost_plan_max_age)
    counts from when the first state was read; C(created_by) names the slices' makers,
    C(merged_by) who merged and C(merged_from) each slice plan's file name, digest, folder,
    C(created_at), C(created_by) and host count (named in C(plan.md) and C(plan.html)). A
    host in two plans takes the newer plan's entry (a later folder wins a tie), named in a
    warning; refused and unreachable hosts stay so."
  - "Plans that disagree on C(collection_version) or on their options (tune parts, the
    wanted values' digest, C(serial)) cannot be one approval - no plan is merged or written
    (what O(dest) held stays), a warning names both plan files and what differs, and
    RV(plan) says it (its C(refused)); the task does not fail and the other reports still
    merge. A plan whose digest does not match its content (edited by hand) or that is
    malformed is left out with a warning naming it, and RV(plan) lists it (its C(left_out));
    when it is its folder's newest plan, that folder adds no plan (an older one is not taken
    instead)."
  - "Each host's newest report is used (by its C(collected_at); a later folder wins a tie).
    A date more than 5 minutes ahead of the controller's clock is not trusted: the file is
    named in a warning with its date, every report dated in the past ranks above it, and
    its file's modification time gives its age (unknown, so stale, when that is in the
    future too). The same holds for a rollout summary's C(generated_at) and a tune report's
    modification time. What a slice's report added is taken off first (its fleet drift,
    judged within the slice); the AER change a report carries is kept, else the host's
    next older report among the folders (or the one already in O(dest)) whose date is
    trusted is the previous report."
  - "A host whose newest report is older than O(stale_hours) is listed with its age and the
    folder it came from in a section C(Stale hosts) of C(summary.md) and C(index.html),
    and in RV(stale)."
  - "Folders without host reports (a slice whose limit left it no host) add nothing; when no
    folder has any, nothing is written and the task does not fail. Every C(*.json) is
    read and told apart by its content (an audit, tune, reboot or rollout document; the
    plan part reads them again and parses only a file whose text holds the plan schema),
    never by a suffix of its name, so any inventory host name is kept (C(lab-tune),
    C(db-reboot)). Reboot reports and JSON that is no report are passed over; a file that
    is unreadable, not a regular file, nested deeper than 64 levels, holds NaN or
    Infinity, is malformed or is named for another host is left out with a warning naming
    it. A rollout summary whose name is a fleet file's (C(summary.json)) or a merged host's
    file is left out the same way."
  - "Runs on the controller, in the controller's own process (an action plugin); every file
    is read bounded (regular files only, at most 64 MiB) and written atomically, and only
    when its content changed."
author:
  - gpuhost.tuning developers (!UNKNOWN)
options:
  folders:
    description: Report folders to merge, each as M(gpuhost.tuning.audit_report) wrote it.
    type: list
    elements: path
    required: true
  dest:
    description: Folder for the merged reports; created when missing. May be one of
      O(folders).
    type: path
    required: true
  stale_hours:
    description: A host whose newest report is older than this many hours is listed as stale.
    type: float
    default: 24.0
  generated_at:
    description: Time stamp printed in the summaries (default the controller's UTC time).
    type: str
  mrrs_size:
    description: Wanted MRRS, for highlighting GPU table cells below it.
    type: int
    default: 4096
    choices: [128, 256, 512, 1024, 2048, 4096]
notes:
  - In check mode nothing is written; RV(files) still lists what would be.
seealso:
  - module: gpuhost.tuning.audit_report
"""

EXAMPLES = r"""
- name: Merge the plans of a sliced plan job into one plan to approve and apply
  gpuhost.tuning.report_merge:
    folders: [/srv/plans/slice-1, /srv/plans/slice-2]
    dest: /srv/plans/fleet
  register: merged
  failed_when: merged.plan is not defined or merged.plan.refused is defined

- name: Merge the four slices' reports into one fleet report
  gpuhost.tuning.report_merge:
    folders:
      - /srv/reports/slice-1
      - /srv/reports/slice-2
      - /srv/reports/slice-3
      - /srv/reports/slice-4
    dest: /srv/reports/fleet
    stale_hours: 12
"""

RETURN = r"""
files:
  description: Paths of the merged report files (written or unchanged).
  returned: always
  type: list
  elements: str
written:
  description: Paths whose content changed (or would in check mode).
  returned: always
  type: list
  elements: str
index:
  description: Path of the merged C(index.html); null when no folder had a host report.
  returned: always
  type: str
hosts:
  description: Per host, the report used - C(from) (its file), C(collected_at), C(age_s)
    (seconds at the merge) and C(stale).
  returned: always
  type: dict
  sample: {"gpu01": {"from": "/srv/reports/slice-1/gpu01.json",
           "collected_at": "2026-01-05T03:00:00Z", "age_s": 420, "stale": false}}
stale:
  description: Hosts whose newest report is older than O(stale_hours).
  returned: always
  type: list
  elements: str
tune:
  description: The tune reports merged (C(<host>-tune.json) of the folders, each host's
    newest file) - C(hosts) (host to the file used), C(failed) (hosts whose tune failed) and
    C(summary) (the file name of the merged table, C(tune-summary.md)).
  returned: when a folder had a tune report
  type: dict
  sample: {"hosts": {"gpu01": "/srv/reports/slice-1/gpu01-tune.json"}, "failed": [],
           "summary": "tune-summary.md"}
rollout:
  description: Per rollout summary name (C(rollout) for C(rollout.json)), the counts of
    the merged summary (each host's row from the newest summary listing it).
  returned: when a folder had a rollout summary
  type: dict
  sample: {"rollout": {"done": 64, "stopped": 0, "not reached": 0}}
plan:
  description: The plans merged - C(merged_from) (the plan files taken, one per folder),
    C(left_out) (plan files left out - edited by hand or malformed), and C(file) (the merged
    C(plan-<digest12>.json) in O(dest)), C(digest), C(hosts) (how many) and C(headline)
    when a plan was written, or C(refused) (why none was - the plans disagree, or none is
    good).
  returned: when a folder held a plan
  type: dict
  sample: {"merged_from": ["/srv/plans/slice-1/plan.json", "/srv/plans/slice-2/plan.json"],
           "left_out": [], "file": "/srv/plans/fleet/plan-0123456789ab.json",
           "digest": "0123456789ab...", "hosts": 64,
           "headline": "64 hosts in 3 groups - 62 to change, ..."}
msg:
  description: Why nothing was written, when no folder had a report of any kind.
  returned: when no folder had a host report, a tune report, a rollout summary or a plan
  type: str
"""

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import zipload  # noqa: E402

zipload.install()  # before the collection's imports: compiled once per host and version

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import check_module  # noqa: E402

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.plan import plan_merge  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import report_options  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import report  # noqa: E402


# The validation rules sit beside the spec (engines/report/report_options.py; the action
# plugin runs them too).
rules = report_options.report_merge_rules


def main():
    module = AnsibleModule(argument_spec=report_options.report_merge(), supports_check_mode=True)
    with check_module(module, "report_merge", rules):
        _run(module)


def _run(module):
    try:
        result = plan_merge.merge_run(module.params, module.check_mode)
    except report.ReportError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
