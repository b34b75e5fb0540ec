# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ceiling subject's part of the audit (platform/facts_base.py): no fact of its own (the
ceiling results ride in the fact ``cuda``, the opt-in CUDA pass with ``cuda_ceiling``), the
two marks its checks judge by and the checks.

- ``ceiling_spread_pct`` (1-100, default 10): a GPU more than this many percent below the
  node's best GPU of the same model (same probe path) is low;
- ``ceiling_min_pct`` (1-100, default 85): a GPU below this share of the figure the model
  table says a healthy GPU reaches by the same path is low. 85: a healthy GPU's run-to-run
  and GPU-to-GPU spread is about 5 % (stas00/ml-engineering), and a published figure comes
  from another host; 15 % below it is a fault, not noise.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import int_range
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.ceiling import (
    ceiling_check,
)

WANTED = {
    "ceiling_spread_pct": dict(type="int", default=ceiling_check.DEFAULT_SPREAD_PCT),
    "ceiling_min_pct": dict(type="int", default=ceiling_check.DEFAULT_MIN_PCT),
}


def wanted_rules(w):
    int_range("ceiling_spread_pct", w.get("ceiling_spread_pct"), 1, 100)
    int_range("ceiling_min_pct", w.get("ceiling_min_pct"), 1, 100)


CHECKS = (ceiling_check,)
