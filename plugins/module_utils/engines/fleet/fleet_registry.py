# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet checks as a report runs them (engines/fleet/fleet_run.py): the ones the audit's
registry (engines/audit/check_registry.py) imported from their subjects, in their declared
order; see platform/fleet_findings.py for the contract."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import (  # noqa: F401
    check_registry,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.fleet_findings import (  # noqa: F401
    HOST_LEVEL_NOTE,
    fleet_checks,
)

__all__ = ("check_registry", "HOST_LEVEL_NOTE", "fleet_checks")
