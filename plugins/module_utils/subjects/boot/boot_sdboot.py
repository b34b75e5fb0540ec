# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""systemd-boot as it will boot (half of ``boot_entries``): Boot Loader Specification type #1
entries ``<ESP>/loader/entries/*.conf``, ``<ESP>/loader/loader.conf`` (``default`` glob), the
EFI variables ``LoaderEntryOneShot``/``LoaderEntryDefault`` (which win over ``loader.conf``),
where the ESPs are (``/etc/kernel/proxmox-boot-uuids``, kernel-install's ``$BOOT``), and on
the live host the read-only mounts of Proxmox ESPs that are not mounted.

Plain Python, stdlib only; every reader takes ``root``, a folder or content.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import os

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    host_path,
    read_bytes,
    read_text,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot.kernels import (
    kernel_from_path,
    kernel_sort_key,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import QUERY_TIMEOUT_S

EFI_LOADER_GUID = "4a67b082-0a4c-41cf-b6c7-440b29bb8c4f"
EFIVARS = "/sys/firmware/efi/efivars"
PBT_UUIDS = "/etc/kernel/proxmox-boot-uuids"

BOOT_MOUNTS = ("/efi", "/boot/efi", "/boot")


def parse_loader_entry(text):
    """A type #1 boot entry: ``{title, version, machine_id, sort_key, options, linux,
    initrd, efi, kernel}``. Several ``options`` lines are joined with a space (the spec
    says so); several ``initrd`` lines make a list. ``kernel`` is ``version``, else taken
    from the ``linux`` path."""
    entry = {"title": None, "version": None, "machine_id": None, "sort_key": None,
             "options": None, "linux": None, "initrd": [], "efi": None}
    options = []
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, _sep, value = line.partition(" ")
        if "\t" in key:
            key, _sep, rest = key.partition("\t")
            value = rest + " " + value
        value = value.strip()
        if key == "options":
            options.append(value)
        elif key == "initrd":
            entry["initrd"].extend(value.split())
        elif key == "machine-id":
            entry["machine_id"] = value
        elif key == "sort-key":
            entry["sort_key"] = value
        elif key in ("title", "version", "linux", "efi"):
            entry[key] = value
    entry["options"] = " ".join(" ".join(o.split()) for o in options) if options else None
    entry["kernel"] = entry["version"] or kernel_from_path(entry["linux"])
    return entry


def parse_loader_conf(text):
    """``loader.conf``: ``{default, timeout, ...}`` (last assignment wins)."""
    conf = {}
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, _sep, value = line.partition(" ")
        conf[key.strip()] = value.strip()
    return conf


def read_efivar(root, name):
    """A systemd-boot EFI variable (``LoaderEntryOneShot``...) as text, or None.
    efivarfs files are 4 bytes of attributes, then the UTF-16LE value with a NUL."""
    raw = read_bytes(host_path(root, "%s/%s-%s" % (EFIVARS, name, EFI_LOADER_GUID)))
    if not raw or len(raw) <= 4:
        return None
    try:
        value = raw[4:].decode("utf-16-le")
    except UnicodeDecodeError:
        return None
    value = value.split("\x00", 1)[0].strip()
    return value or None


def _entry_order(entry):
    """systemd-boot menu order, first = top: sort-key, then version newest first, then id."""
    version = entry.get("version") or entry.get("kernel") or ""
    return (entry.get("sort_key") is None, entry.get("sort_key") or "",
            _Reverse(kernel_sort_key(version)), _Reverse(entry["id"]))


class _Reverse:
    """Invert one sort-key component (newest first) inside an ascending sort."""

    def __init__(self, value):
        self.value = value

    def __lt__(self, other):
        return other.value < self.value

    def __eq__(self, other):
        return self.value == other.value


def _matches(pattern, entry_id):
    plain = entry_id[:-5] if entry_id.endswith(".conf") else entry_id
    return fnmatch.fnmatchcase(entry_id, pattern) or fnmatch.fnmatchcase(plain, pattern)


def default_entry(entries, conf_default=None, efi_default=None, oneshot=None):
    """The entry systemd-boot starts without a key press: ``LoaderEntryOneShot``, else
    ``LoaderEntryDefault``, else the first menu entry matching the ``loader.conf``
    ``default`` glob, else the first menu entry. Returns ``(entry, how)``."""
    ordered = sorted(entries, key=_entry_order)
    for how, pattern in (("LoaderEntryOneShot", oneshot), ("LoaderEntryDefault", efi_default),
                         ("loader.conf default", conf_default)):
        if not pattern:
            continue
        for entry in ordered:
            if _matches(pattern, entry["id"]):
                return entry, "%s %s" % (how, pattern)
    if ordered:
        return ordered[0], "first menu entry"
    return None, "no entries"


def read_esp(path):
    """Entries and loader.conf of one ESP (a local folder). ``{path, loader_conf,
    entries: [entry + id + file]}``; missing folders give no entries."""
    conf_text = read_text(os.path.join(path, "loader", "loader.conf"))
    folder = os.path.join(path, "loader", "entries")
    entries = []
    try:
        names = sorted(hostfs.listdir(folder))
    except OSError:
        names = []
    for name in names:
        if not name.endswith(".conf"):
            continue
        text = read_text(os.path.join(folder, name))
        if text is None:
            continue
        entry = parse_loader_entry(text)
        entry["id"] = name
        entry["file"] = os.path.join(folder, name)
        entries.append(entry)
    return {"path": path, "loader_conf": parse_loader_conf(conf_text) if conf_text else None,
            "entries": entries}


def is_esp(path):
    return hostfs.isdir(os.path.join(path, "loader")) or hostfs.isdir(
        os.path.join(path, "EFI")) or hostfs.isdir(os.path.join(path, "grub"))


def pbt_uuids(root):
    """ESP file-system UUIDs of ``/etc/kernel/proxmox-boot-uuids`` (None when missing)."""
    text = read_text(host_path(root, PBT_UUIDS))
    if text is None:
        return None
    return [line.strip() for line in text.splitlines() if line.strip()]


def locate_esps(root, esp_dirs=None, uuids=None):
    """Folders holding ESP content: each of ``esp_dirs`` (host paths under root) that is an
    ESP itself, or holds ``<uuid>`` subfolders. Returns ``[{uuid, path}]``; with ``uuids``
    (Proxmox), one item per uuid (``path`` None when no folder was found for it)."""
    found = []
    for folder in esp_dirs or []:
        local = host_path(root, folder)
        if uuids:
            for uuid in uuids:
                for name in (uuid, uuid.upper(), uuid.lower()):
                    candidate = os.path.join(local, name)
                    if hostfs.isdir(candidate):
                        found.append({"uuid": uuid, "path": candidate})
                        break
            if is_esp(local) and not any(f["path"] == local for f in found):
                found.append({"uuid": None, "path": local})
        elif is_esp(local):
            found.append({"uuid": None, "path": local})
        else:
            try:
                names = sorted(hostfs.listdir(local))
            except OSError:
                names = []
            for name in names:
                candidate = os.path.join(local, name)
                if hostfs.isdir(candidate) and is_esp(candidate):
                    found.append({"uuid": name, "path": candidate})
    if uuids:
        seen = {f["uuid"] for f in found}
        for uuid in uuids:
            if uuid not in seen:
                found.append({"uuid": uuid, "path": None})
    return found


def boot_partition(root):
    """kernel-install's ``$BOOT`` under root: the first of /efi, /boot/efi, /boot that
    holds ``loader/entries`` (or ``loader/loader.conf``); None when none does."""
    for mount in BOOT_MOUNTS:
        path = host_path(root, mount)
        if hostfs.isdir(os.path.join(path, "loader", "entries")) or hostfs.isfile(
                os.path.join(path, "loader", "loader.conf")):
            return mount
    return None


def read_systemd_boot(root, esps):
    """Entries of every ESP in ``esps`` (``[{uuid, path}]``, local folders) plus the
    EFI-variable overrides; ``{esps: [...], entries: [...], default: entry, how}``."""
    oneshot = read_efivar(root, "LoaderEntryOneShot")
    efi_default = read_efivar(root, "LoaderEntryDefault")
    result = {"esps": [], "entries": [], "default": None, "default_how": None,
              "oneshot": oneshot, "efi_default": efi_default, "unreadable": []}
    for esp in esps:
        if not esp.get("path"):
            result["unreadable"].append(esp.get("uuid"))
            continue
        data = read_esp(esp["path"])
        conf_default = (data["loader_conf"] or {}).get("default")
        for entry in data["entries"]:
            entry["esp"] = esp.get("uuid") or esp["path"]
            entry["where"] = "%s:%s" % (entry["esp"], "loader/entries/" + entry["id"])
            entry["recovery"] = False
        default, how = default_entry(data["entries"], conf_default, efi_default, oneshot)
        result["esps"].append({"uuid": esp.get("uuid"), "path": esp["path"],
                               "loader_default": conf_default,
                               "entries": [e["id"] for e in data["entries"]],
                               "default": default["id"] if default else None,
                               "default_kernel": default["kernel"] if default else None,
                               "default_how": how})
        result["entries"].extend(data["entries"])
        if result["default"] is None and default is not None:
            result["default"], result["default_how"] = default, how
    return result


# --------------------------------------------------------------------------- live ESPs


def mounted_at(root, device):
    """Mount points of ``device`` (a /dev path, links resolved) from /proc/self/mounts."""
    text = read_text(host_path(root, "/proc/self/mounts")) or ""
    real = hostfs.realpath(device)
    points = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0].startswith("/dev/") and \
                hostfs.realpath(fields[0]) == real:
            points.append(fields[1].replace("\\040", " "))
    return points


def mount_esps(runner, uuids, workdir):
    """Make the Proxmox ESPs readable on the live host, as proxmox-boot-tool does: use an
    existing mount, else mount ``/dev/disk/by-uuid/<uuid>`` read-only under ``workdir``.
    Returns ``(esps, mounted)``: ``[{uuid, path, error}]`` and the mount points to
    ``umount`` afterwards."""
    esps = []
    mounted = []
    for uuid in uuids:
        device = "/dev/disk/by-uuid/%s" % uuid
        if not hostfs.exists(device):
            esps.append({"uuid": uuid, "path": None,
                         "error": "%s does not exist (clean %s?)" % (device, PBT_UUIDS)})
            continue
        points = mounted_at("/", device)
        if points:
            esps.append({"uuid": uuid, "path": points[0], "error": None})
            continue
        point = os.path.join(workdir, uuid)
        os.makedirs(point, exist_ok=True)
        rc, _out, err = runner.run(["mount", "-o", "ro", device, point], check=False,
                                   timeout=QUERY_TIMEOUT_S)
        if rc != 0:
            esps.append({"uuid": uuid, "path": None,
                         "error": "mount -o ro %s failed: %s" % (device, err.strip())})
            continue
        mounted.append(point)
        esps.append({"uuid": uuid, "path": point, "error": None})
    return esps, mounted


def umount_all(runner, points):
    for point in reversed(points):
        runner.run(["umount", point], check=False, timeout=QUERY_TIMEOUT_S)
        try:
            os.rmdir(point)
        except OSError:
            pass
