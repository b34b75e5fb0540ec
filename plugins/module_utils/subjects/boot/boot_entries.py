# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the boot loader will really boot: read its own files, not the configuration.

``kernel_cmdline_write`` edits what the host *asks* for (``/etc/kernel/cmdline``,
``/etc/default/grub``); this reads what the loader *will use* after the refresh:

- systemd-boot (Proxmox ``proxmox-boot-tool`` and plain ``kernel-install``): Boot Loader
  Specification type #1 entries ``<ESP>/loader/entries/*.conf`` (``title``, ``version``,
  ``options``, ``linux``, ``initrd``), ``<ESP>/loader/loader.conf`` (``default`` glob), and
  the EFI variables ``LoaderEntryOneShot``/``LoaderEntryDefault`` (``bootctl set-oneshot``/
  ``set-default``), which win over ``loader.conf``. Proxmox ESPs are not mounted: the
  caller mounts them (``/dev/disk/by-uuid/<uuid>`` from ``/etc/kernel/proxmox-boot-uuids``)
  or passes folders holding their content.
- GRUB: ``menuentry`` blocks of ``grub.cfg`` (nested in ``submenu``), their ``linux`` lines,
  ``set default=...`` and ``grubenv`` (``saved_entry``, ``next_entry`` from
  ``grub-set-default``/``grub-reboot``).
- ``proxmox-boot-tool kernel list`` output and its pin files.

Plain Python, stdlib only; every reader takes ``root`` or content. The systemd-boot
readers are ``bootloader_sdboot``, the GRUB ones ``bootloader_grub``, the module
boot_entries' pass ``bootloader_entries``; this file puts them together
(``inspect``) with proxmox-boot-tool's pins and the entry checks.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import kernel_cmdline
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot.boot_grub import (
    read_grub,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot.boot_sdboot import (
    boot_partition,
    locate_esps,
    mount_esps,
    pbt_uuids,
    read_systemd_boot,
    umount_all,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    host_path,
    read_text,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot.kernels import (
    kernel_sort_key,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import QUERY_TIMEOUT_S

PBT_PIN = "/etc/kernel/proxmox-boot-pin"
PBT_NEXT_BOOT_PIN = "/etc/kernel/next-boot-pin"
PBT_MANUAL = "/etc/kernel/proxmox-boot-manual-kernels"


class BootloaderError(Exception):
    """The boot loader's files cannot be read or do not say what was asked."""


# --------------------------------------------------------------------------- helpers


def missing_params(cmdline, params=None, absent=None):
    """What ``cmdline`` lacks of ``params`` (name -> value, True for a flag, False for
    ``off``, None for "must not be there") and still has of ``absent``: list of readable
    strings such as ``amd_pstate=active`` or ``!quiet``. Empty when it carries everything."""
    out = []
    for name, value in (params or {}).items():
        got = kernel_cmdline.get(cmdline or "", name)
        if value is None:
            if got is not None:
                out.append("!%s" % name)
            continue
        values = value if isinstance(value, (list, tuple)) else [value]
        want = kernel_cmdline.format_value(values[-1])
        if want is None:
            if got is not True:
                out.append(name)
        elif got != want:
            out.append("%s=%s" % (name, want))
    for spec in absent or []:
        name, sep, value = spec.partition("=")
        got = kernel_cmdline.get(cmdline or "", name)
        if got is not None and (not sep or got == value):
            out.append("!%s" % spec)
    return out


# --------------------------------------------------------------------------- proxmox-boot-tool


def parse_kernel_list(text):
    """``proxmox-boot-tool kernel list`` -> ``{manual, automatic, pinned, next_boot}``.

    Blocks: "Manually selected kernels:" ("None." when empty), "Automatically selected
    kernels:", then optional "Pinned kernel:" and "Kernel pinned on next-boot:"."""
    result = {"manual": [], "automatic": [], "pinned": None, "next_boot": None}
    block = None
    headers = {
        "manually selected kernels:": "manual",
        "automatically selected kernels:": "automatic",
        "pinned kernel:": "pinned",
        "kernel pinned on next-boot:": "next_boot",
    }
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        key = headers.get(line.lower())
        if key:
            block = key
            continue
        if block is None or line == "None.":
            continue
        if block in ("manual", "automatic"):
            result[block].append(line)
        elif result[block] is None:
            result[block] = line
    return result


def pbt_files(root):
    """The pin files proxmox-boot-tool writes, read offline: same shape as
    ``parse_kernel_list`` (``automatic`` empty: it needs the package list)."""
    def first_line(path):
        text = read_text(host_path(root, path))
        if not text:
            return None
        line = text.splitlines()[0].strip() if text.splitlines() else ""
        return line or None

    manual_text = read_text(host_path(root, PBT_MANUAL)) or ""
    return {"manual": [x.strip() for x in manual_text.splitlines() if x.strip()],
            "automatic": [], "pinned": first_line(PBT_PIN),
            "next_boot": first_line(PBT_NEXT_BOOT_PIN)}


# --------------------------------------------------------------------------- checks


def check_entries(entries, params=None, absent=None, kernels=None):
    """For each kernel of ``kernels`` (default: every kernel with an entry), the entries
    that boot it (recovery entries left out) and what each lacks.

    Returns ``{ok, problems: [str], checked: [{kernel, where, id, missing}]}``: a kernel of
    ``kernels`` without an entry is a problem, as is an entry missing a parameter.
    """
    usable = [e for e in entries if not e.get("recovery")]
    wanted = list(kernels) if kernels else sorted({e["kernel"] for e in usable if e["kernel"]},
                                                  key=kernel_sort_key)
    problems = []
    checked = []
    for release in wanted:
        mine = [e for e in usable if e.get("kernel") == release]
        if not mine:
            problems.append("no boot entry for kernel %s" % release)
            continue
        for entry in mine:
            missing = missing_params(entry.get("options") or "", params, absent)
            where = entry.get("where") or entry.get("file") or entry.get("id")
            checked.append({"kernel": release, "where": where, "id": entry.get("id"),
                            "missing": missing})
            if missing:
                problems.append("entry %s (kernel %s) lacks %s: options are %r" % (
                    where, release, " ".join(missing), entry.get("options") or ""))
    return {"ok": not problems, "problems": problems, "checked": checked}


# --------------------------------------------------------------------------- everything


def inspect(root="/", backend="auto", esp_dirs=None, grub_cfgs=None, runner=None,
            mount=False, workdir=None):
    """What the boot loader will boot, read from its own files.

    ``runner``: only for the live host (``root=/``): decides the backend with
    ``proxmox-boot-tool status``, reads ``kernel list``, and with ``mount`` mounts the
    Proxmox ESPs that ``esp_dirs`` does not hold (read-only, unmounted before returning).
    Returns ``{backend, tool, reason, entries, default, default_how, next_boot_kernel,
    esps, unreadable_esps, kernel_list, grub_cfg, grubenv, oneshot, efi_default}``.
    """
    detected = kernel_cmdline.detect_backend(root, runner)
    tool = detected["tool"]
    if backend == "auto":
        backend = detected["backend"]
        reason = detected["reason"]
    else:
        reason = "backend=%s requested" % backend
    result = {"backend": backend, "tool": tool, "reason": reason, "entries": [],
              "default": None, "default_how": None, "esps": [], "unreadable_esps": [],
              "kernel_list": None, "grub_cfg": None, "grubenv": None, "oneshot": None,
              "efi_default": None}
    uuids = pbt_uuids(root)
    if uuids is not None:
        result["kernel_list"] = pbt_files(root)
        if runner is not None and runner.which("proxmox-boot-tool"):
            rc, out, _err = runner.run(["proxmox-boot-tool", "kernel", "list"], check=False,
                                       timeout=QUERY_TIMEOUT_S)
            if rc == 0:
                listed = parse_kernel_list(out)
                for key in ("pinned", "next_boot"):
                    listed[key] = listed[key] or result["kernel_list"][key]
                result["kernel_list"] = listed
    if backend == "systemd-boot":
        mounted = []
        try:
            if uuids:
                esps = locate_esps(root, esp_dirs, uuids)
                missing = [e["uuid"] for e in esps if e["path"] is None]
                if missing and mount and runner is not None:
                    esps = [e for e in esps if e["path"] is not None]
                    more, mounted = mount_esps(runner, missing, workdir or "/run/gpuhost-esp")
                    esps.extend(more)
            else:
                esps = locate_esps(root, esp_dirs) if esp_dirs else []
                boot = boot_partition(root)
                if boot and not any(e["path"] == host_path(root, boot) for e in esps):
                    esps.append({"uuid": None, "path": host_path(root, boot)})
            sd = read_systemd_boot(root, esps)
        finally:
            if mounted:
                umount_all(runner, mounted)
        for esp in esps:
            if esp.get("path") is None:
                result["unreadable_esps"].append({"uuid": esp.get("uuid"),
                                                  "error": esp.get("error") or "not found"})
        for esp in sd["esps"]:
            if esp["path"] and esp["path"].startswith(workdir or "/run/gpuhost-esp"):
                esp["path"] = "/dev/disk/by-uuid/%s (mounted read-only)" % esp["uuid"]
        result.update({"entries": sd["entries"], "default": sd["default"],
                       "default_how": sd["default_how"], "esps": sd["esps"],
                       "oneshot": sd["oneshot"], "efi_default": sd["efi_default"]})
    else:
        grub = read_grub(root, grub_cfgs)
        if grub is not None:
            result.update({"entries": grub["entries"], "default": grub["default"],
                           "default_how": grub["default_how"], "grub_cfg": grub["grub_cfg"],
                           "grubenv": grub["grubenv"]})
    result["next_boot_kernel"] = (result["default"] or {}).get("kernel")
    return result
