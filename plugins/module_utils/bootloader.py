# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the boot loader will really boot: read its own files, not the configuration.

``bootcfg`` edits what the host *asks* for (``/etc/kernel/cmdline``, ``/etc/default/grub``);
this reads what the loader *will use* after the refresh:

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

Plain Python, stdlib only; every reader takes ``root`` or content.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import os
import re
import shlex
import tempfile

from ansible_collections.gpuhost.tuning.plugins.module_utils import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils import bootcfg
from ansible_collections.gpuhost.tuning.plugins.module_utils.hostfs import (
    host_path,
    read_bytes,
    read_text,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.kernel import kernel_sort_key
from ansible_collections.gpuhost.tuning.plugins.module_utils.runner import QUERY_TIMEOUT_S

EFI_LOADER_GUID = "4a67b082-0a4c-41cf-b6c7-440b29bb8c4f"
EFIVARS = "/sys/firmware/efi/efivars"
PBT_UUIDS = "/etc/kernel/proxmox-boot-uuids"
PBT_PIN = "/etc/kernel/proxmox-boot-pin"
PBT_NEXT_BOOT_PIN = "/etc/kernel/next-boot-pin"
PBT_MANUAL = "/etc/kernel/proxmox-boot-manual-kernels"
# where kernel-install's $BOOT usually is (bootctl --print-boot-path), in its search order
BOOT_MOUNTS = ("/efi", "/boot/efi", "/boot")
GRUB_CFGS = ("/boot/grub/grub.cfg", "/boot/grub2/grub.cfg")
GRUB_ENVS = ("/boot/grub/grubenv", "/boot/grub2/grubenv")
_VMLINUZ_RE = re.compile(r"(?:^|/)(?:vmlinuz|vmlinux|bzImage|kernel)-([^/\s]+)$")
_LINUX_CMDS = ("linux", "linux16", "linuxefi")


class BootloaderError(Exception):
    """The boot loader's files cannot be read or do not say what was asked."""


# --------------------------------------------------------------------------- helpers


def kernel_from_path(path):
    """Kernel release from an image path: ``/boot/vmlinuz-6.1.0-56-amd64``,
    ``/EFI/proxmox/6.8.12-9-pve/vmlinuz-6.8.12-9-pve``, kernel-install's
    ``/<token>/6.1.0-56-amd64/linux``; None when the path does not say."""
    if not path:
        return None
    path = path.strip()
    # GRUB paths may carry a device or a btrfs subvolume prefix: (hd0,gpt2)/@/boot/...
    path = re.sub(r"^\([^)]*\)", "", path)
    match = _VMLINUZ_RE.search(path)
    if match:
        return match.group(1)
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[-1] in ("linux", "vmlinuz") and re.match(r"^\d+\.", parts[-2]):
        return parts[-2]
    return None


def missing_params(cmdline, params=None, absent=None):
    """What ``cmdline`` lacks of ``params`` (name -> value, True for a flag, False for
    ``off``, None for "must not be there") and still has of ``absent``: list of readable
    strings such as ``amd_pstate=active`` or ``!quiet``. Empty when it carries everything."""
    out = []
    for name, value in (params or {}).items():
        got = bootcfg.get(cmdline or "", name)
        if value is None:
            if got is not None:
                out.append("!%s" % name)
            continue
        values = value if isinstance(value, (list, tuple)) else [value]
        want = bootcfg.format_value(values[-1])
        if want is None:
            if got is not True:
                out.append(name)
        elif got != want:
            out.append("%s=%s" % (name, want))
    for spec in absent or []:
        name, sep, value = spec.partition("=")
        got = bootcfg.get(cmdline or "", name)
        if got is not None and (not sep or got == value):
            out.append("!%s" % spec)
    return out


# --------------------------------------------------------------------------- systemd-boot


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


# --------------------------------------------------------------------------- GRUB


def _grub_words(line):
    try:
        return shlex.split(line, comments=False, posix=True)
    except ValueError:
        return line.split()


def parse_grub_cfg(text):
    """Menu entries of a generated ``grub.cfg``.

    Returns ``{defaults: [values of top-level set default=...], uses_saved_entry,
    uses_next_entry, entries: [...]}``; each entry ``{title, id, path_titles, path_ids,
    index (e.g. "1>0"), linux, kernel, options, initrd, recovery}`` where ``options`` is
    what follows the image on the ``linux`` line.
    """
    entries = []
    defaults = []
    stack = []  # [(kind, title, id, index_path, child_count_holder)]
    top_counter = [0]
    current = None
    uses_saved = False
    uses_next = False
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if "${saved_entry}" in line or "$saved_entry" in line:
            uses_saved = True
        if "${next_entry}" in line:
            uses_next = True
        head = line.split(None, 1)[0]
        if head in ("menuentry", "submenu") and line.endswith("{"):
            words = _grub_words(line[:-1])
            title = words[1] if len(words) > 1 else ""
            entry_id = None
            for i, word in enumerate(words):
                if word in ("$menuentry_id_option", "--id") and i + 1 < len(words):
                    entry_id = words[i + 1]
            parent = stack[-1] if stack else None
            counter = parent["children"] if parent else top_counter
            index = counter[0]
            counter[0] += 1
            node = {
                "kind": head,
                "title": title,
                "id": entry_id,
                "path_titles": (parent["path_titles"] if parent else []) + [title],
                "path_ids": (parent["path_ids"] if parent else []) + [entry_id or title],
                "index": (parent["index"] if parent else []) + [index],
                "children": [0],
            }
            stack.append(node)
            if head == "menuentry":
                current = {
                    "title": title,
                    "id": entry_id,
                    "path_titles": node["path_titles"],
                    "path_ids": node["path_ids"],
                    "index": ">".join(str(i) for i in node["index"]),
                    "linux": None,
                    "kernel": None,
                    "options": None,
                    "initrd": [],
                    "recovery": "(recovery mode)" in title or "recovery" in (entry_id or ""),
                }
                entries.append(current)
            continue
        if line == "}" or (line.endswith("}") and head == "}"):
            if stack:
                node = stack.pop()
                if node["kind"] == "menuentry":
                    current = None
            continue
        if current is not None and head in _LINUX_CMDS:
            parts = line.split(None, 2)
            current["linux"] = parts[1] if len(parts) > 1 else None
            current["kernel"] = kernel_from_path(current["linux"])
            current["options"] = " ".join(parts[2].split()) if len(parts) > 2 else ""
            continue
        if current is not None and head in ("initrd", "initrd16", "initrdefi"):
            current["initrd"] = line.split()[1:]
            continue
        if not stack:
            match = re.match(r"^set\s+default=(.*)$", line)
            value = match.group(1).strip().strip("\"'") if match else None
            if value and "next_entry" not in value:  # the grub-reboot branch is separate
                defaults.append(value)
    return {"defaults": defaults, "uses_saved_entry": uses_saved,
            "uses_next_entry": uses_next, "entries": entries}


def parse_grubenv(text):
    """``grubenv``: ``key=value`` lines in a 1024-byte block padded with ``#``."""
    env = {}
    for line in (text or "").splitlines():
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if sep:
            env[key] = value
    return env


def _resolve_grub(entries, ref):
    """The entry a GRUB default names: an index path ("1>2"), an id path
    ("gnulinux-advanced-X>gnulinux-...-advanced-X"), a title path, or a lone id/title."""
    ref = (ref or "").strip()
    if not ref:
        return None
    parts = ref.split(">")
    if all(p.isdigit() for p in parts):
        index = ">".join(str(int(p)) for p in parts)
        for entry in entries:
            if entry["index"] == index:
                return entry
        # a number naming a submenu boots its first entry
        for entry in entries:
            if entry["index"].startswith(index + ">"):
                return entry
        return None
    for entry in entries:
        if ">".join(entry["path_ids"]) == ref or ">".join(entry["path_titles"]) == ref:
            return entry
    if len(parts) == 1:
        for entry in entries:
            if entry["id"] == ref or entry["title"] == ref:
                return entry
    return None


def grub_default_entry(cfg, env=None):
    """The entry GRUB boots without a key press: grubenv ``next_entry`` (``grub-reboot``,
    when grub.cfg reads it), else the top-level ``set default`` (``${saved_entry}`` read
    from grubenv, missing means 0). Returns ``(entry, how)``."""
    env = env or {}
    entries = cfg["entries"]
    if cfg.get("uses_next_entry") and env.get("next_entry"):
        entry = _resolve_grub(entries, env["next_entry"])
        if entry is not None:
            return entry, "grubenv next_entry %s (grub-reboot)" % env["next_entry"]
    values = [d for d in cfg["defaults"] if "next_entry" not in d]
    value = values[-1] if values else "0"
    if "saved_entry" in value:
        saved = env.get("saved_entry") or "0"
        entry = _resolve_grub(entries, saved)
        return entry, "grubenv saved_entry %s (grub-set-default)" % saved
    entry = _resolve_grub(entries, value)
    return entry, "set default=%s" % value


def grub_entry_ref(entry):
    """What ``grub-set-default``/``grub-reboot`` take for ``entry``: the id path."""
    return ">".join(entry["path_ids"]) if entry else None


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


# --------------------------------------------------------------------------- whole host


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


def read_grub(root, cfg_paths=None):
    """Entries of the first ``grub.cfg`` found (host paths) and the entry booting next."""
    for path in cfg_paths or GRUB_CFGS:
        text = read_text(host_path(root, path))
        if text is None:
            continue
        cfg = parse_grub_cfg(text)
        env = {}
        env_path = os.path.join(os.path.dirname(path), "grubenv")
        env_text = read_text(host_path(root, env_path))
        if env_text:
            env = parse_grubenv(env_text)
        for entry in cfg["entries"]:
            entry["where"] = "%s: %s" % (path, ">".join(entry["path_titles"]))
        default, how = grub_default_entry(cfg, env)
        return {"grub_cfg": path, "entries": cfg["entries"], "default": default,
                "default_how": how, "grubenv": env, "defaults": cfg["defaults"],
                "uses_saved_entry": cfg["uses_saved_entry"]}
    return None


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
    detected = bootcfg.detect_backend(root, runner)
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


# --- the boot_entries pass (module boot_entries) ------------------------------------------

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
        bootcfg.validate(p["params"], p["absent"])
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
