# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit's checks: every check file of every subject folder (``<column>_check.py``), and
the fleet checks (subjects/pcie/aer_change.py, subjects/driver/driver_drift.py); see
platform/findings.py and platform/fleet_findings.py for the contracts.

Importing this file registers every check. Each file is imported here by name, which is also
what lets Ansible's module_utils finder ship them inside a module (a new check file is one
line below, in any order: columns sort by their position, fleet checks run in their declared
order). The fleet checks' columns are registered from their declarations.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import findings  # noqa: F401
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import kernel_check  # noqa: F401
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cpu import (  # noqa: F401
    cpufreq_check,
    cpuidle_check,
    numa_balancing_check,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import cuda_check  # noqa: F401
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.device_nodes import (  # noqa: F401
    device_nodes_check,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.dkms import dkms_check  # noqa: F401
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.fabric_manager import (  # noqa: F401
    fabric_manager_check,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import (  # noqa: F401
    gpu_count_check,
    gpu_memory_check,
    gpu_state_check,
    gpu_use_check,
    gpu_xid_check,
    host_health_check,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.host import (  # noqa: F401
    errors_check,
    guest_check,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.lxc import lxc_check  # noqa: F401
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.nvlink import nvlink_check  # noqa: F401
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.passthrough import (  # noqa: F401
    passthrough_check,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import (  # noqa: F401
    gpu_driver_check,
    p2p_check,
    pcie_aer_check,
    pcie_link_check,
    pcie_mrrs_check,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.peermem import nvidia_check  # noqa: F401
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.placement import (  # noqa: F401
    gpu_numa_check,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.sysctl import sysctl_check  # noqa: F401
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import driver_drift  # noqa: F401
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import aer_change  # noqa: F401
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import fleet_findings
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.findings import (  # noqa: F401
    SEVERITIES,
    SEVERITY_RANK,
    column_table,
    columns,
    evaluate,
    finding_order,
)

# Every check file, named: importing one registers its checks (platform/findings.py); a
# subject's new check file is one import above and one name here.
CHECK_FILES = (
    kernel_check, cpufreq_check, cpuidle_check, numa_balancing_check, cuda_check,
    device_nodes_check, dkms_check, fabric_manager_check, gpu_count_check, gpu_memory_check,
    gpu_state_check, gpu_use_check, gpu_xid_check, host_health_check, errors_check, guest_check,
    lxc_check, nvlink_check, passthrough_check, gpu_driver_check, p2p_check, pcie_aer_check,
    pcie_link_check, pcie_mrrs_check, nvidia_check, gpu_numa_check, sysctl_check,
)
# The fleet checks, registered on import (platform/fleet_findings.py).
FLEET_CHECK_FILES = (driver_drift, aer_change)

__all__ = ("CHECK_FILES", "FLEET_CHECK_FILES", "SEVERITIES", "SEVERITY_RANK", "column_table",
           "columns", "evaluate", "finding_order")

# the fleet checks' own columns, n/a on one host (declared beside each fleet check)
findings.report_level(fleet_findings.fleet_checks())
