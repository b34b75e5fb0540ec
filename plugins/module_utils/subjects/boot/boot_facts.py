# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit's ``kernel`` facts: the running, installed and next-boot kernels, their headers
and the kernel command line configured for the next boot, read offline under a root. The
audit (engines/audit/facts.py) and the driver gate (subjects/driver/driver_state.py) decide
the next boot by this one rule."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    host_path,
    read_text,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import (
    boot_entries,
    kernel_cmdline,
    kernels,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.host import procfs


def _boot_config(root):
    """``{tool, backend, cmdline, source}`` of the boot configuration, read offline."""
    config = kernel_cmdline.read_config(root)
    tool = config.get("tool")
    return {
        "tool": None if tool in (None, "unknown") else tool,
        "backend": config.get("backend") if config.get("cmdline") is not None else None,
        "cmdline": config.get("cmdline"),
        "source": config.get("source"),
    }


def _pinned_kernel(root):
    """The kernel proxmox-boot-tool pinned (next-boot pin first), or None."""
    for path in ("/etc/kernel/next-boot-pin", "/etc/kernel/proxmox-boot-pin"):
        text = read_text(host_path(root, path))
        if text:
            return text.split()[0]
    return None


def _loader_next_boot(root):
    """``(kernel, how)`` the boot loader's own files say boots next (GRUB's grub.cfg and
    grubenv, systemd-boot entries on an ESP under root), or ``(None, None)`` when they cannot
    be read offline (Proxmox ESPs are not mounted)."""
    try:
        loader = boot_entries.inspect(root)
    except Exception:  # noqa: BLE001 - optional refinement; pins and newest still decide
        return None, None
    pins = loader.get("kernel_list") or {}
    if pins.get("next_boot"):
        return pins["next_boot"], "proxmox-boot-tool next-boot pin"
    if pins.get("pinned"):
        return pins["pinned"], "proxmox-boot-tool pin"
    if loader.get("next_boot_kernel"):
        return loader["next_boot_kernel"], "boot loader default entry (%s)" % (
            loader.get("default_how") or loader.get("backend"))
    return None, None


def kernel_facts(root):
    running = kernels.running_kernel(root)
    installed = kernels.installed_kernels(root)
    newest = installed[-1] if installed else None
    pinned = _pinned_kernel(root)
    loader_kernel, how = _loader_next_boot(root)
    if loader_kernel in installed:
        next_boot, next_how = loader_kernel, how
    elif pinned in installed:
        next_boot, next_how = pinned, "proxmox-boot-tool pin"
    else:
        next_boot, next_how = newest, "newest installed kernel" if newest else None
    headers = dict((k, kernels.has_headers(root, k))
                   for k in sorted(set(installed + ([running] if running else [])),
                                   key=kernels.kernel_sort_key))
    boot = _boot_config(root)
    return {
        "running": running,
        "cmdline": procfs.read_cmdline(root),
        "installed": installed,
        "newest": newest,
        "pinned": pinned,
        "next_boot": next_boot,
        "next_boot_source": next_how,
        "running_installed": running in installed if running else None,
        "headers": headers,
        "configured_cmdline": boot["cmdline"],
        "configured_cmdline_source": boot["source"],
        "boot_tool": boot["tool"],
        "boot_backend": boot["backend"],
    }
