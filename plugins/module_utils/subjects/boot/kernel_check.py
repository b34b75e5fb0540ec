# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Column Kernel & boot: headers DKMS needs, a reboot pending, wanted boot parameters."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import kernel_cmdline
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import kernels
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.host import procfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.findings import (
    PLAYBOOK_REBOOT,
    check,
    column,
    found,
    limit,
)

# Parameters the boot loader or the kernel adds by itself: not "configured vs running".
CMDLINE_IGNORE = ("BOOT_IMAGE", "initrd", "root", "ro", "rw", "boot", "rootfstype")


def _note(facts):
    kern = facts.get("kernel") or {}
    if kern.get("running") and kern.get("running_installed") is False:
        return ("running kernel %s is not installed here (booted from outside: VM or "
                "container); nothing to check for the next boot" % kern["running"])
    return None


COLUMN = column("kernel", "Kernel & boot", position=90, note=_note)


def _cmdline_params(text):
    return procfs.cmdline_params(text or "")


@check("kernel_headers_missing", COLUMN, severity="high", severities=("high", "medium"),
       order=90)
def kernel_headers_missing(facts, wanted):
    """The kernels DKMS must build for (running and next boot), when DKMS is used: high for
    the next-boot kernel, medium for the running one."""
    if not facts.get("dkms"):
        return
    kern = facts.get("kernel") or {}
    running = kern.get("running")
    next_boot = kern.get("next_boot")
    headers = kern.get("headers") or {}
    for release in sorted(set(k for k in (running, next_boot) if k),
                          key=kernels.kernel_sort_key):
        if release not in (kern.get("installed") or []) and release == running:
            continue  # booted from outside this root (VM, container): nothing to build
        if headers.get(release) is False:
            yield found(
                release, "no headers at /lib/modules/%s/build" % release,
                "headers installed (DKMS builds need them)",
                "apt-get install %s" % kernels.headers_package(release),
                severity="high" if release == next_boot and release != running else "medium")


@check("reboot_pending", COLUMN, severity="medium", order=140)
def reboot_pending(facts, wanted):
    """A newer (or pinned) kernel boots next, or the configured command line is not the one
    running."""
    kern = facts.get("kernel") or {}
    host = wanted.get("host")
    running = kern.get("running")
    next_boot = kern.get("next_boot")
    if running and next_boot and next_boot != running and (
            kernels.kernel_sort_key(next_boot) > kernels.kernel_sort_key(running)
            or kern.get("pinned") == next_boot):
        yield found(
            "kernel", running, next_boot,
            "ansible-playbook %s%s (checks DKMS, headers, initramfs and the boot entry, "
            "then reboots)" % (PLAYBOOK_REBOOT, limit(host)), reboot_required=True)
    configured = kern.get("configured_cmdline")
    running_cmdline = kern.get("cmdline")
    if configured and running_cmdline is not None:
        have = _cmdline_params(running_cmdline)
        diff = []
        for key, value in _cmdline_params(configured).items():
            if key in CMDLINE_IGNORE:
                continue
            if key not in have or have[key] != value:
                diff.append(key if value is None else "%s=%s" % (key, value))
        if diff:
            yield found(
                "cmdline", "running without %s" % " ".join(diff),
                "%s (%s)" % (configured, kern.get("configured_cmdline_source")),
                "ansible-playbook %s%s" % (PLAYBOOK_REBOOT, limit(host)),
                reboot_required=True)


def boot_param_applies(key, cpu):
    """Vendor- and driver-specific parameters only where they do something: amd_pstate on
    AMD, intel_* on Intel, processor.max_cstate with acpi_idle; none of the CPU ones in a
    VM (the hypervisor owns idle and frequency there)."""
    vendor = cpu.get("vendor")
    virtual = bool(cpu.get("hypervisor"))
    if key.startswith("amd_pstate"):
        return vendor == "AuthenticAMD" and not virtual
    if key.startswith(("intel_pstate", "intel_idle")):
        return vendor == "GenuineIntel" and not virtual
    if key.startswith("processor."):
        return (cpu.get("cpuidle") or {}).get("driver") == "acpi_idle" and not virtual
    return True


@check("boot_param", COLUMN, severity="low", order=130)
def boot_param(facts, wanted):
    """Wanted boot parameters missing from what will boot (or present where wanted absent)."""
    kern = facts.get("kernel") or {}
    host = wanted.get("host")
    configured = kern.get("configured_cmdline")
    running_cmdline = kern.get("cmdline")
    params = wanted.get("boot_params") or {}
    if not params or (configured is None and running_cmdline is None) or \
            kern.get("boot_tool") is None:
        return
    source = _cmdline_params(configured if configured is not None else running_cmdline)
    cpu = facts.get("cpu") or {}
    where = kern.get("configured_cmdline_source") or "the boot configuration"
    for key, value in params.items():
        if not boot_param_applies(key, cpu):
            continue
        if value is None:  # wanted absent, as kernel_cmdline removes it
            if key in source:
                have = source[key]
                yield found(
                    key, key if have is None else "%s=%s" % (key, have), "absent",
                    "ansible-playbook %s%s (removes it from %s, then reboots)" % (
                        PLAYBOOK_REBOOT, limit(host), where),
                    reboot_required=True)
            continue
        # bootcfg's reading of a wanted value, as kernel_cmdline writes it: true is a flag,
        # false (YAML's unquoted off/no) is "off", numbers as the kernel shows them
        value = kernel_cmdline.format_value(value)
        text = key if value is None else "%s=%s" % (key, value)
        if value is None and key in source:
            continue
        if key in source and str(source[key]) == value:
            continue
        have = source.get(key, None) if key in source else "absent"
        yield found(
            key, "%s=%s" % (key, have) if key in source else have, text,
            "ansible-playbook %s%s (adds it to %s, then reboots)" % (
                PLAYBOOK_REBOOT, limit(host), where),
            reboot_required=True)
