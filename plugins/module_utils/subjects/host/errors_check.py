# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Column Audit: a fact reader that failed (the rest of the audit still ran)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.findings import (
    check,
    column,
    found,
)

COLUMN = column("audit", "Audit", position=120)


@check("audit_error", COLUMN, severity="medium", order=190)
def audit_error(facts, wanted):
    for error in facts.get("errors") or []:
        yield found(
            error["section"], error["error"], "readable",
            "report this with a capture: ansible-playbook gpuhost.tuning.capture")
