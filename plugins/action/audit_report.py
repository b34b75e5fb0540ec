# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Module audit_report, run in the controller's process (plugin_utils/report_action.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import report_options
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import report
from ansible_collections.gpuhost.tuning.plugins.plugin_utils.report_action import ReportAction


class ActionModule(ReportAction):
    """Every host of ``hosts`` is reported: one without an audit as unreachable, failed or
    skipped (report.registered_audits), each with its inventory groups."""

    NAME = "audit_report"
    GIVEN = "audits"
    SPEC = staticmethod(report_options.audit_report)
    RULES = report_options.AUDIT_REPORT_RULES
    CHECK = staticmethod(report_options.audit_report_rules)
    READ = staticmethod(report.registered_audits)
    RUN = staticmethod(report.audit_report_run)

    def run(self, tmp=None, task_vars=None):
        hosts = self._task.args.get("hosts")
        if isinstance(hosts, list) and self._task.args.get("groups") is None and task_vars:
            self._task.args["groups"] = report.inventory_groups(
                task_vars["hostvars"].raw_get, [str(host) for host in hosts])
        return super(ActionModule, self).run(tmp, task_vars)
