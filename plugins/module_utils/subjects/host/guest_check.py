# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Column Audit: the audited host is a container or a VM guest, not a Proxmox VE node.

The audit runs there as anywhere, but what it finds is the guest's view (a container sees
the node's GPUs and sysctls read-only; a VM guest has its own kernel and idle states), and
the roles that change a host refuse it (role common's preflight) unless
gpuhost_allow_guest is set. What counts as a guest: subjects/host/virt.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.findings import check, found
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.host.errors_check import (
    COLUMN,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.host import virt


@check("host_is_guest", COLUMN, severity="info", order=195)
def host_is_guest(facts, wanted):
    """A container or a VM guest, said once, naming what decided it."""
    facts_virt = facts.get("virt") or {}
    if not facts_virt.get("guest"):
        return
    yield found(
        facts_virt.get("kind"), virt.describe(facts_virt), "a Proxmox VE node",
        "audit the node that hosts this guest; tune, revert, reboot_verify, driver_upgrade, "
        "kernel_upgrade and boot_config refuse a guest unless gpuhost_allow_guest: true "
        "(a GPU VM guest tuned on purpose)")
