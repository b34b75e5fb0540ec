# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cuda subject's part of the audit (platform/facts_base.py): no fact read from files
(the fact ``cuda`` is the opt-in probe's results, engines/audit/audit.py), the copy rate
the checks want and the operator's marks per GPU model."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import int_range
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import cuda_check

WANTED = {
    "bandwidth_min_pct": dict(type="int", default=70),
    "copy_rate_marks": dict(type="list", elements="dict", default=[]),
}


def wanted_rules(w):
    int_range("bandwidth_min_pct", w.get("bandwidth_min_pct"), 1, 100)


CHECKS = (cuda_check,)
