# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host subject's part of the audit (platform/facts_base.py): what the host is (a VM
guest or a container is said first: the roles that change a host refuse one), the character
device majors, and the Audit column's checks (guest, reader errors)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.facts_base import Fact
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.host import (
    errors_check,
    guest_check,
    procfs,
    virt,
)

VIRT_UNKNOWN = {"kind": "unknown", "guest": None, "technology": None, "proxmox_node": None,
                "evidence": [], "dmi": {}}


def char_device_facts(majors):
    """``{name: first major}`` of ``procfs.char_majors``' ``{name: [majors]}``."""
    return dict((name, values[0]) for name, values in sorted(majors.items()) if values)


FACTS = (
    Fact(10, "virt", lambda c: virt.detect(c.root), VIRT_UNKNOWN),
    # Every major per name (nvidia-caps may hold two): reboot_verify keeps them as the GPU
    # drivers' majors before the reboot. char_devices: the first of each, as documented.
    Fact(70, "char_majors", lambda c: procfs.char_majors(c.root), {}, section="char_devices"),
    Fact(71, "char_devices", lambda c: char_device_facts(c.get("char_majors", {})), {}),
)
WANTED = {"host": dict(type="str")}
CHECKS = (guest_check, errors_check)
