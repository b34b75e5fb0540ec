# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kernel side of a host, as module kernel_state returns it: the running kernel and
command line, the installed kernels, one kernel's packages and files, the DKMS tree and the
command line the boot configuration asks for. What the boot loader will boot is
``bootloader.inspect`` (module boot_entries)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import driver_kernel
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import (
    kernel_cmdline,
    boot_entries,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.dkms import dkms
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import kernels


def kernel_state(root, kernel=None, params=None, absent=None, runner=None, next_boot=None):
    """``{running, kernels, target, dkms, configured_cmdline}`` under ``root``.

    ``running``: ``{kernel, cmdline, missing}`` (what ``/proc/cmdline`` lacks of ``params``
    and still has of ``absent``); ``kernels``: ``{installed, newest}``; ``target``: for
    ``kernel``, its package names, files and whether it is installed (else None); ``dkms``:
    ``dkms.tree_status`` (empty when unreadable); ``configured_cmdline``: None when the
    configuration cannot be read. ``runner`` (runner.Runner) reads GRUB's effective
    variables on a live host. ``initramfs_kernels`` and ``dkms_needed``: the audit's rules
    (``kernel.initramfs_kernels``, ``dkms.needed_modules``) for ``kernel`` and ``next_boot``."""
    proc = kernel_cmdline.proc_cmdline_base(root)
    running = kernels.running_kernel(root)
    installed = kernels.installed_kernels(root)
    target = None
    if kernel:
        target = kernels.kernel_info(root, kernel)
        target["flavour"] = kernels.release_flavour(kernel)
        target["installed"] = bool(target["modules"] or target["vmlinuz"])
    try:
        dkms_entries = dkms.tree_status(root)
    except OSError:
        dkms_entries = []
    try:
        configured = kernel_cmdline.configured_cmdline(root, runner)
    except (kernel_cmdline.BootConfigError, OSError):
        configured = None
    return {
        "running": {"kernel": running, "cmdline": proc or None,
                    "missing": boot_entries.missing_params(proc, params or {}, absent or [])
                    if proc else []},
        "kernels": {"installed": installed, "newest": installed[-1] if installed else None},
        "target": target,
        "dkms": dkms_entries,
        "configured_cmdline": configured,
        "initramfs_kernels": kernels.initramfs_kernels(
            installed, running, next_boot, also=[kernel] if kernel else []),
        "dkms_needed": dkms.needed_modules(dkms_entries, running, kernel or next_boot),
        # the NVIDIA driver DKMS holds, known not to build for the target kernel
        "known_bad": sorted(set(
            text for entry in dkms_entries
            if str(entry.get("name") or "").startswith("nvidia") and kernel
            for text in driver_kernel.refusals(entry.get("version"), [kernel]))),
    }
