#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: reboot_report
short_description: Write one host's reboot_verify report
version_added: 0.2.0
description:
  - "Writes O(report) (the document role reboot_verify assembles: C(host), C(result),
    C(failure), C(root), C(asked), C(before), C(upgrade), C(boot_config), C(reboot),
    C(after), C(checks), C(cuda_host), C(vfio_initramfs), C(vms), C(containers), C(pin)) into
    O(dest) as C(<host>-reboot.json) and
    C(<host>-reboot.md)."
  - Meant to run on the controller (C(delegate_to localhost)). Files are written atomically
    and only when their content changed, by the same writer as the audit and tune reports.
author:
  - gpuhost.tuning developers (!UNKNOWN)
options:
  host:
    description: Inventory name of the host (names the files).
    type: str
    required: true
  report:
    description: The report document.
    type: dict
    required: true
  dest:
    description: Folder for the reports; created when missing.
    type: path
    required: true
notes:
  - The reports are output on the controller, not a change to the host; the role runs this
    with C(check_mode=false) so a check-mode run records what it would do. In check mode
    (when not overridden) nothing is written and RV(written) lists what would be.
seealso:
  - module: gpuhost.tuning.post_boot_verify
  - module: gpuhost.tuning.container_verify
"""

EXAMPLES = r"""
- name: Write <host>-reboot.json and .md on the controller
  gpuhost.tuning.reboot_report:
    host: "{{ inventory_hostname }}"
    report: "{{ __report }}"
    dest: "{{ playbook_dir }}/gpuhost-reports"
  delegate_to: localhost
  check_mode: false
"""

RETURN = r"""
files:
  description: Paths of the report files (written or unchanged).
  returned: always
  type: list
  elements: str
  sample: ["/srv/reports/gpu07-reboot.json", "/srv/reports/gpu07-reboot.md"]
written:
  description: Paths whose content changed (or would in check mode).
  returned: always
  type: list
  elements: str
"""

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import zipload  # noqa: E402

zipload.install()  # before the collection's imports: compiled once per host and version

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (  # noqa: E402
    check_module,
    common,
    fail,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import report  # noqa: E402


def rules(p):
    """Option values this module refuses before it reads or writes anything (run by
    validate.check_module: a ValidationError names the option, the value and what is
    allowed)."""
    common(p, skip=("report",))
    if not isinstance(p.get("report"), dict):
        fail("report", p.get("report"), "the report document (a mapping)")
    if p.get("dest") in ("", None):
        fail("dest", p.get("dest"), "a folder path")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            host=dict(type="str", required=True),
            report=dict(type="dict", required=True),
            dest=dict(type="path", required=True),
        ),
        supports_check_mode=True,
    )
    with check_module(module, "reboot_report", rules):
        _run(module)


def _run(module):
    try:
        result = report.reboot_report_run(module.params, module.check_mode)
    except report.ReportError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
