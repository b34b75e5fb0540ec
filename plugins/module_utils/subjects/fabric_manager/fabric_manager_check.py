# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Column Fabric manager: on hosts with NVSwitch, nvidia-fabricmanager installed at the
driver's version, enabled, and the GPUs' fabric initialised."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.fabric_manager import (
    fabric_manager,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.findings import (
    check,
    column,
    found,
)


def _applies(facts, wanted):
    if not (facts.get("fabric_manager") or {}).get("needed"):
        return "no NVSwitch (PCIe-only host)"
    return None


COLUMN = column("fabric_manager", "Fabric manager", position=104, applies=_applies)


@check("fabric_manager", COLUMN, severity="high", severities=("high", "medium"), order=45)
def fabric_manager_running(facts, wanted):
    """Not installed, another version than the driver, the GPUs' fabric not Completed, or
    the service not running: high (CUDA cannot use the GPUs behind the NVSwitches); not
    enabled at boot: medium."""
    fact = facts.get("fabric_manager") or {}
    unit = fabric_manager.UNIT
    for what, current, expected in fabric_manager.problems(fact):
        severity = "high"
        if what == "enabled":
            severity, remedy = "medium", "systemctl enable %s" % unit
        elif what == "not installed":
            remedy = ("install nvidia-fabricmanager of the driver's version (%s); CUDA cannot "
                      "use the GPUs behind the NVSwitches without it"
                      % (fact.get("driver_version") or "?"))
        elif what == "version":
            remedy = ("install nvidia-fabricmanager %s (it refuses to run with another "
                      "driver version), then systemctl restart %s"
                      % (fact.get("driver_version"), unit))
        else:
            remedy = ("systemctl restart %s and read journalctl -u %s; CUDA jobs fail until "
                      "every GPU's fabric state is Completed" % (unit, unit))
        yield found("nvidia-fabricmanager", current, expected, remedy,
                    detail="%d NVSwitch function(s): %s" % (
                        len(fact.get("nvswitches") or []),
                        ", ".join(fact.get("nvswitches") or [])),
                    severity=severity)
