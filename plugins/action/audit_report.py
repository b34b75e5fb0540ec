# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of module audit_report: the reports are the controller's files, so they are
rendered and written in the controller's own process. With ``hosts`` and ``result_var`` each
host's host_audit result is read from the play's variables as registered, instead of being
templated into the task's arguments and sent to a module process (at 64 hosts that was
about 2 MB of arguments and 7 s of a 51 s audit)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpuhost.tuning.plugins.module_utils import argspec, report
from ansible_collections.gpuhost.tuning.plugins.module_utils.validate import (
    ValidationError,
    check,
)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        unused, params = self.validate_argument_spec(
            argument_spec=argspec.audit_report(), **argspec.AUDIT_REPORT_RULES)
        if params["hosts"] is not None:
            try:
                params["audits"] = report.registered_audits(
                    (task_vars or {})["hostvars"].raw_get, params["hosts"],
                    params["result_var"])
            except report.ReportError as exc:
                raise AnsibleActionFail(str(exc))
        try:
            check("audit_report", params)
        except ValidationError as exc:
            raise AnsibleActionFail("audit_report: %s (nothing was read or written)" % exc)
        try:
            out = report.audit_report_run(params, self._task.check_mode)
        except report.ReportError as exc:
            raise AnsibleActionFail(str(exc))
        result.update(out)
        return result
