# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit's checks, one file per report column; see ``base`` for the contract.

Importing this package registers every check. Each column file is imported here by name,
which is also what lets Ansible's module_utils finder ship them inside a module (a new file
must be added to the imports below, in any order: columns sort by their position). The
columns of the fleet checks (module_utils/fleet) are registered from their declarations.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.checks import (  # noqa: F401
    base,
    cpufreq,
    cpuidle,
    cuda,
    device_nodes,
    dkms,
    errors,
    fabric_manager,
    gpu_count,
    gpu_driver,
    gpu_memory,
    gpu_numa,
    gpu_state,
    gpu_use,
    gpu_xid,
    guest,
    host_health,
    kernel,
    lxc,
    numa_balancing,
    nvidia,
    nvlink,
    p2p,
    passthrough,
    pcie_aer,
    pcie_link,
    pcie_mrrs,
    sysctl,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils import fleet
from ansible_collections.gpuhost.tuning.plugins.module_utils.checks.base import (  # noqa: F401
    SEVERITIES,
    SEVERITY_RANK,
    column_table,
    columns,
    evaluate,
    finding_order,
)

# the fleet checks' own columns, n/a on one host (declared in module_utils/fleet)
base.report_level(fleet.fleet_checks())
