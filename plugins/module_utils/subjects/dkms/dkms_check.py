# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Column DKMS: the kernel that boots next lacks a DKMS module the running kernel has."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.dkms import dkms
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import kernels
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.findings import (
    PLAYBOOK_REBOOT,
    check,
    column,
    found,
    limit,
)

COLUMN = column("dkms", "DKMS", position=10,
                applies=lambda facts, wanted: None if facts.get("dkms") else "no DKMS modules")


def _gap_detail(running, basis, name, version, next_boot):
    kernel = basis.get(name)
    if kernel == running:
        return "%s runs with %s %s; booting %s leaves its devices without a driver" % (
            running, name, version, next_boot)
    return ("the running kernel %s has no DKMS module installed (booted from outside this "
            "root, or never built for), so the modules installed for the other kernels "
            "stand in: %s %s is installed for %s, not for %s; booting %s leaves its devices "
            "without a driver" % (running or "(unknown)", name, version, kernel, next_boot,
                                  next_boot))


@check("dkms_missing_for_kernel", COLUMN, severity="critical", order=10)
def dkms_missing_for_kernel(facts, wanted):
    """A module installed for the running kernel, not installed for the next one. When the
    running kernel has none (booted from outside this root: a container, a VM with a direct
    kernel boot, a capture; or a kernel DKMS never built for), the modules installed for any
    other kernel stand in for it, newest kernel first."""
    kern = facts.get("kernel") or {}
    running = kern.get("running")
    next_boot = kern.get("next_boot")
    modules = facts.get("dkms") or []
    headers = kern.get("headers") or {}
    if not next_boot or next_boot == running:
        return
    on_running, basis = dkms.installed_basis(modules, running, next_boot)
    for name, version in sorted(on_running.items()):
        state = None
        for entry in modules:
            if entry["name"] == name and entry["kernel"] == next_boot:
                if entry["state"] == "installed" or state is None:
                    state = entry["state"]
        if state == "installed":
            continue
        steps = []
        if not headers.get(next_boot):
            steps.append("apt-get install %s" % kernels.headers_package(next_boot))
        steps.append("dkms install %s/%s -k %s" % (name, version, next_boot))
        steps.append("ls /lib/modules/%s/updates/dkms" % next_boot)
        current = "%s/%s %s" % (name, version, "built, not installed" if state == "built"
                                else "not built (headers %s)" % (
                                    "present" if headers.get(next_boot) else "missing"))
        if basis[name] != running:
            current += "; installed for %s (the running kernel %s has no DKMS module)" % (
                basis[name], running or "(unknown)")
        yield found(
            next_boot, current,
            "%s/%s installed for %s" % (name, version, next_boot),
            "do not reboot yet: %s; or ansible-playbook %s%s, which gates the reboot on "
            "it" % (" && ".join(steps), PLAYBOOK_REBOOT, limit(wanted.get("host"))),
            detail=_gap_detail(running, basis, name, version, next_boot))
