# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GRUB as it will boot (half of ``boot_entries``): the ``menuentry`` blocks of ``grub.cfg``
(nested in ``submenu``), their ``linux`` lines, ``set default=...`` and ``grubenv``
(``saved_entry``, ``next_entry`` from ``grub-set-default``/``grub-reboot``).

Plain Python, stdlib only; every reader takes ``root`` or content.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import shlex

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    host_path,
    read_text,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot.kernels import (
    kernel_from_path,
)

GRUB_CFGS = ("/boot/grub/grub.cfg", "/boot/grub2/grub.cfg")
GRUB_ENVS = ("/boot/grub/grubenv", "/boot/grub2/grubenv")
_LINUX_CMDS = ("linux", "linux16", "linuxefi")


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
