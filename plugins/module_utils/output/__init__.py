# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The reports' documents, rendering and files (module_utils/output/report.py runs the report
modules on them)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type
