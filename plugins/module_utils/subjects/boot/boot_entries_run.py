# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The boot_entries pass (module ``boot_entries``): ``bootloader.inspect``'s entries checked
against the wanted boot parameters and kernels, as the module returns them."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import tempfile

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import kernel_cmdline
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot.boot_entries import (
    check_entries,
    inspect,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot.boot_grub import (
    grub_entry_ref,
)


ENTRY_KEYS = ("kernel", "id", "title", "where", "options", "recovery")


def _entry(entry):
    return dict((k, entry.get(k)) for k in ENTRY_KEYS) if entry else None


def _grub_refs(entries):
    refs = {}
    for entry in entries:
        if entry.get("kernel") and not entry.get("recovery") and entry.get("path_ids") \
                and len(entry["path_ids"]) > 1 and entry["kernel"] not in refs:
            refs[entry["kernel"]] = grub_entry_ref(entry)
    return refs


def entries_check(found, params, absent, kernels):
    """``{ok, problems, checked}`` of the entries ``inspect`` ``found`` against the wanted
    boot ``params``, the ``absent`` ones and the ``kernels`` that need an entry (ok without
    any): an unreadable ESP, or no entries at all, is a problem too."""
    entries = found["entries"]
    check = {"ok": True, "problems": [], "checked": []}
    if params or absent or kernels:
        check = check_entries(entries, params, absent, kernels)
        if found["unreadable_esps"]:
            for esp in found["unreadable_esps"]:
                check["problems"].append("ESP %s unreadable: %s" % (esp["uuid"], esp["error"]))
            check["ok"] = False
    if not entries and (params or kernels):
        check["problems"].insert(0, "no boot entries found (%s, %s): %s" % (
            found["backend"], found["tool"],
            "pass esp_dirs" if found["backend"] == "systemd-boot" else "no grub.cfg"))
        check["ok"] = False
    return check


def entries_run(p, runner=None):
    """The boot_entries pass for ``p`` (the module's options, all given) with ``runner``
    (runner.Runner; used only when ``root`` is ``/``). Returns ``(result, failure)``:
    the module's result and, with ``require``, the message naming every problem (else
    None). Raises BootloaderError, bootcfg.BootConfigError or OSError when the boot
    loader's files cannot be read or the wanted values are malformed."""
    root = p["root"]
    live = root == "/"
    workdir = tempfile.mkdtemp(prefix="gpuhost-esp-") if live and p["mount_esps"] else None
    try:
        found = inspect(root, p["backend"], p["esp_dirs"], p["grub_cfg"],
                        runner=runner if live else None, mount=live and p["mount_esps"],
                        workdir=workdir)
        kernel_cmdline.validate(p["params"], p["absent"])
    finally:
        if workdir:
            try:
                os.rmdir(workdir)
            except OSError:
                pass
    entries = found["entries"]
    check = entries_check(found, p["params"], p["absent"], p["kernels"])
    result = dict(
        changed=False,
        backend=found["backend"],
        tool=found["tool"],
        reason=found["reason"],
        entries=[_entry(e) for e in entries],
        default=_entry(found["default"]),
        default_how=found["default_how"],
        next_boot_kernel=found["next_boot_kernel"],
        grub_ref=_grub_refs(entries),
        esps=found["esps"],
        unreadable_esps=found["unreadable_esps"],
        kernel_list=found["kernel_list"],
        grubenv=found["grubenv"],
        check=check,
    )
    problems = list(check["problems"])
    if p["require_next_boot"] and found["next_boot_kernel"] != p["require_next_boot"]:
        problems.append("the boot loader will boot %s next (%s), not %s" % (
            found["next_boot_kernel"] or "nothing known", found["default_how"],
            p["require_next_boot"]))
    failure = None
    if p["require"] and problems:
        failure = "boot entries do not match: " + "; ".join(problems)
    return result, failure
