# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Module tune_report, run in the controller's process (plugin_utils/report_action.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import report_options
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import report
from ansible_collections.gpuhost.tuning.plugins.plugin_utils.report_action import ReportAction


class ActionModule(ReportAction):
    NAME = "tune_report"
    GIVEN = "results"
    SPEC = staticmethod(report_options.tune_report)
    RULES = report_options.TUNE_REPORT_RULES
    CHECK = staticmethod(report_options.tune_report_rules)
    READ = staticmethod(report.registered_tunes)
    RUN = staticmethod(report.tune_report_run)
