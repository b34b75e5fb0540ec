#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: recover_report
short_description: Write one host's gpu_recover report
version_added: 0.3.0
description:
  - Writes C(<host>-recover.json) (the document, with C(host) added) and C(<host>-recover.md)
    (per GPU its need, the action, each step's outcome; the containers stopped and started;
    the verdict) in O(dest). Role gpuhost.tuning.gpu_recover runs it on the controller.
  - A file whose content would not change is not rewritten.
author:
  - gpuhost.tuning developers (!UNKNOWN)
options:
  host:
    description: The inventory host the report is about.
    type: str
    required: true
  report:
    description: The document - C(root), C(check_mode), C(asked), C(failure) and C(result)
      (module gpuhost.tuning.gpu_recover's result).
    type: dict
    required: true
  dest:
    description: The report folder.
    type: path
    required: true
"""

EXAMPLES = r"""
- name: Write <host>-recover.json and .md on the controller
  gpuhost.tuning.recover_report:
    host: "{{ inventory_hostname }}"
    report:
      root: /
      check_mode: false
      asked: {gpus: [], reboot: false}
      result: "{{ recovered }}"
    dest: /srv/reports
  delegate_to: localhost
"""

RETURN = r"""
files:
  description: The two report paths.
  returned: always
  type: list
  elements: str
  sample: ["/srv/reports/gpu07-recover.json", "/srv/reports/gpu07-recover.md"]
written:
  description: Paths whose content changed (or would in check mode).
  returned: always
  type: list
  elements: str
"""

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import zipload  # noqa: E402

zipload.install()  # before the collection's imports: compiled once per host and version

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import recover_doc  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report.files import ReportError  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (  # noqa: E402
    check_module,
    common,
    fail,
)


def rules(p):
    """Option values this module refuses before it reads or writes anything."""
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
    with check_module(module, "recover_report", rules):
        _run(module)


def _run(module):
    try:
        result = recover_doc.recover_report_run(module.params, module.check_mode)
    except ReportError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
