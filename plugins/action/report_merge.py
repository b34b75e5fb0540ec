# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Module report_merge, run in the controller's process: the folders it merges are the
controller's own (plugin_utils/report_action.py). The reports (engines/report) and the
plans of the slices (engines/plan/plan_merge.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.plan import plan_merge
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import report_options
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import report
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (
    ValidationError,
    check,
)
from ansible_collections.gpuhost.tuning.plugins.plugin_utils.report_action import ReportAction


class ActionModule(ReportAction):
    NAME = "report_merge"
    SPEC = staticmethod(report_options.report_merge)
    RULES = {}
    CHECK = staticmethod(report_options.report_merge_rules)
    RUN = staticmethod(plan_merge.merge_run)

    def run(self, tmp=None, task_vars=None):
        result = super(ReportAction, self).run(tmp, task_vars)
        del tmp
        unused, params = self.validate_argument_spec(argument_spec=self.SPEC())
        try:
            check(self.CHECK, params)
            out = self.RUN(params, self._task.check_mode)
        except ValidationError as exc:
            raise AnsibleActionFail("%s: %s (nothing was read or written)" % (self.NAME, exc))
        except report.ReportError as exc:
            raise AnsibleActionFail(str(exc))
        result.update(out)
        return result
