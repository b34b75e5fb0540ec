# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit's registry: every subject the audit reads, one line each (``SUBJECTS``), and
what is derived from their declarations (platform/facts_base.py): the facts in reading order,
the wanted values' spec and rules, the check files and the fleet checks (platform/findings.py
and platform/fleet_findings.py hold their contracts).

Importing this file registers every check: each subject's declaration file imports its check
files by name, which is also what lets Ansible's module_utils finder ship them inside a
module. The fleet checks' columns are registered from their declarations.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import facts_base, findings
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import audit_boot
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.ceiling import (
    audit_ceiling,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cpu import audit_cpu
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import audit_cuda
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.device_nodes import (
    audit_device_nodes,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.dkms import audit_dkms
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import audit_driver
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.fabric_manager import (
    audit_fabric_manager,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import audit_health
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.host import audit_host
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.lxc import audit_lxc
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.nvlink import audit_nvlink
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.passthrough import (
    audit_passthrough,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import audit_pcie
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.peermem import audit_peermem
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.placement import (
    audit_placement,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.recovery import (
    audit_recovery,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.sysctl import audit_sysctl
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import fleet_findings
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.findings import (  # noqa: F401
    SEVERITIES,
    SEVERITY_RANK,
    column_table,
    columns,
    evaluate,
    finding_order,
)

# Every subject the audit reads: one line each, in any order (facts sort by their declared
# order, columns by their position, fleet checks run in their declared order). Everything
# below is derived from these declarations (platform/facts_base.py says what each holds).
SUBJECTS = (
    audit_host, audit_boot, audit_cpu, audit_sysctl, audit_pcie, audit_peermem, audit_dkms,
    audit_lxc, audit_device_nodes, audit_health, audit_fabric_manager, audit_driver,
    audit_nvlink, audit_placement, audit_passthrough, audit_cuda, audit_recovery,
    audit_ceiling,
)
# The audit's facts in reading order (facts.collect reads them).
FACTS = facts_base.ordered(SUBJECTS)
# Every check file (importing one registers its checks, platform/findings.py).
CHECK_FILES = tuple(check for subject in SUBJECTS
                    for check in facts_base.declared(subject, "CHECKS"))
# The fleet checks, registered on import (platform/fleet_findings.py).
FLEET_CHECK_FILES = tuple(check for subject in SUBJECTS
                          for check in facts_base.declared(subject, "FLEET_CHECKS"))


def wanted_spec():
    """The wanted values' spec: every subject's ``WANTED`` (a fresh copy each call)."""
    spec = {}
    for subject in SUBJECTS:
        own = facts_base.declared(subject, "WANTED")
        twice = set(spec) & set(own)
        if twice:
            raise ValueError("wanted values declared twice: %s" % ", ".join(sorted(twice)))
        spec.update(copy.deepcopy(own))
    return spec


def wanted_rules(wanted):
    """Every subject's rules for its wanted values (``wanted`` with ``root``): raises
    validate.ValidationError naming the first value that can only be a mistake."""
    for subject in SUBJECTS:
        facts_base.declared(subject, "wanted_rules")(wanted)


__all__ = ("CHECK_FILES", "FACTS", "FLEET_CHECK_FILES", "SUBJECTS", "SEVERITIES",
           "SEVERITY_RANK", "column_table", "columns", "evaluate", "finding_order")

# the fleet checks' own columns, n/a on one host (declared beside each fleet check)
findings.report_level(fleet_findings.fleet_checks())
