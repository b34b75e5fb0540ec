# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Module plan_report, run in the controller's process (plugin_utils/report_action.py); the
plan records this collection's version, read from the installed collection."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.plan import plan_writer
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.plan import planfile
from ansible_collections.gpuhost.tuning.plugins.plugin_utils.report_action import ReportAction

COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(params, check_mode):
    if not params.get("collection_version"):
        params = dict(params, collection_version=planfile.collection_version(COLLECTION_ROOT))
    return plan_writer.run(params, check_mode)


class ActionModule(ReportAction):
    NAME = "plan_report"
    GIVEN = "results"
    SPEC = staticmethod(plan_writer.options)
    RULES = plan_writer.RULES
    CHECK = staticmethod(plan_writer.rules)
    READ = staticmethod(plan_writer.registered_results)
    RUN = staticmethod(_run)
