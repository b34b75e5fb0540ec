# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the report action plugins (audit_report, tune_report) share: the reports are the
controller's own files, so they are rendered and written in the controller's process. With
``hosts`` and ``result_var`` each host's registered result is read as stored
(``hostvars.raw_get``) instead of being templated into the task's arguments and sent to a
module process: at 64 hosts that was about 2 MB of arguments and 7 s of a 51 s audit."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import report
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (
    ValidationError,
    check,
)


display = Display()


class ReportAction(ActionBase):
    """A report module run in the controller's process. Subclasses set ``NAME`` (the
    module), ``GIVEN`` (its option holding the results), ``SPEC`` and ``RULES`` (its option
    spec, from argspec), ``CHECK`` (its validation rules, beside the spec in argspec),
    ``READ`` (report.registered_* for ``hosts``/``result_var``) and
    ``RUN`` (report.*_run)."""

    TRANSFERS_FILES = False
    _requires_connection = False
    NAME = GIVEN = SPEC = RULES = CHECK = READ = RUN = None

    def run(self, tmp=None, task_vars=None):
        result = super(ReportAction, self).run(tmp, task_vars)
        del tmp
        unused, params = self.validate_argument_spec(argument_spec=self.SPEC(), **self.RULES)
        try:
            if params["hosts"] is not None:
                params[self.GIVEN] = self.READ(
                    (task_vars or {})["hostvars"].raw_get, params["hosts"],
                    params["result_var"])
            check(self.CHECK, params)
        except ValidationError as exc:
            raise AnsibleActionFail("%s: %s (nothing was read or written)" % (self.NAME, exc))
        except report.ReportError as exc:
            raise AnsibleActionFail(str(exc))
        try:
            out = self.RUN(params, self._task.check_mode)
        except report.ReportError as exc:
            raise AnsibleActionFail(str(exc))
        for line in out.pop("warnings", None) or []:   # shown once, not a result key
            display.warning(line)
        result.update(out)
        return result
