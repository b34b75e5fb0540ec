# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet checks, one file per check; see ``base`` for the contract and ``run`` for
how a report runs them. Importing this package registers every fleet check (a new file is
added to the imports below, in any order: they run in their declared order)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import fleet_findings
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import driver_drift
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import aer_change
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.fleet_findings import (  # noqa: F401
    HOST_LEVEL_NOTE,
    fleet_checks,
)

# every file of the package, named (an import-following installer, audittimer.library_files,
# ships what is imported by name; a comment on the import's first line would hide the first)
FILES = (aer_change, fleet_findings, driver_drift)
