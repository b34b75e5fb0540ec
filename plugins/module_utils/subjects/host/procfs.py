# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Readers for /proc files: registered device majors, loaded modules, kernel command line.

Plain Python (stdlib + hostfs): the boot-time service may ship it to hosts.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    host_path,
    read_text,
)

_SECTIONS = {
    "character devices:": "character",
    "block devices:": "block",
}
_ENTRY = re.compile(r"^\s*(\d+)\s+(\S.*?)\s*$")


def parse_proc_devices_entries(text):
    """Every entry of ``/proc/devices`` in file order.

    Returns ``{"character": [(major, name), ...], "block": [...]}``. The kernel prints
    ``%3d %s`` lines under "Character devices:" and "Block devices:"; a name may appear
    more than once (a driver that registered several regions, or ``tty``/``ttyS``-style
    names under one major), and one major may carry several names (4: ``/dev/vc/0``,
    ``tty``, ``ttyS``). Nothing is merged here.
    """
    out = {"character": [], "block": []}
    section = None
    for line in (text or "").splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        key = stripped.lower()
        if key in _SECTIONS:
            section = _SECTIONS[key]
            continue
        match = _ENTRY.match(line)
        if match and section:
            out[section].append((int(match.group(1)), match.group(2)))
    return out


def parse_proc_devices(text):
    """``{"character": {name: major}, "block": {name: major}}`` (first major of a name).

    Use :func:`parse_proc_devices_entries` or :func:`char_majors` when a name may be
    registered under several majors (``nvidia-caps``).
    """
    entries = parse_proc_devices_entries(text)
    out = {}
    for section, pairs in entries.items():
        names = {}
        for major, name in pairs:
            names.setdefault(name, major)
        out[section] = names
    return out


class ProcDevicesError(ValueError):
    """``/proc/devices`` is missing, empty, not a file or not in the kernel's format."""


def check_proc_devices(text, where="/proc/devices"):
    """Raise ProcDevicesError unless ``text`` is what the kernel prints: a
    "Character devices:" header and ``%3d %s`` lines (then "Block devices:")."""
    if text is None:
        raise ProcDevicesError("%s is missing: device majors unknown" % where)
    if not text.strip():
        raise ProcDevicesError("%s is empty: device majors unknown" % where)
    section = None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.lower() in _SECTIONS:
            section = _SECTIONS[stripped.lower()]
            continue
        if section is None or not _ENTRY.match(line):
            raise ProcDevicesError("%s line %d is not in the kernel's format (%r): device "
                                   "majors unknown" % (where, number, line[:80]))
    if section is None:
        raise ProcDevicesError("%s has no \"Character devices:\" section: device majors "
                               "unknown" % where)


def read_proc_devices(root, strict=False):
    """The text of ``/proc/devices`` under ``root`` (None when missing). With ``strict``
    a missing, empty, unreadable (a folder) or garbled file raises ProcDevicesError."""
    path = host_path(root, "/proc/devices")
    try:
        text = read_text(path)
    except (IOError, OSError) as exc:
        raise ProcDevicesError("%s cannot be read: %s" % (path, exc))
    if strict:
        check_proc_devices(text, path)
    return text


def char_majors(root=None, text=None):
    """``{name: [major, ...]}`` of character devices, every major kept in file order.

    Reads ``/proc/devices`` under ``root`` unless ``text`` is given; read from ``root``, a
    missing, empty or garbled file raises ProcDevicesError (an audit must not read "no
    devices" into it).
    """
    if text is None:
        text = read_proc_devices(root, strict=True)
    out = {}
    for major, name in parse_proc_devices_entries(text)["character"]:
        majors = out.setdefault(name, [])
        if major not in majors:
            majors.append(major)
    return out


def char_major(root, name, text=None):
    """The first character major registered under ``name``, or None."""
    majors = char_majors(root, text=text).get(name)
    return majors[0] if majors else None


def registered_char_majors(root=None, text=None):
    """The set of every character major ``/proc/devices`` registers, whatever the name."""
    if text is None:
        text = read_proc_devices(root, strict=True)
    return set(major for major, _name in parse_proc_devices_entries(text)["character"])


def parse_proc_modules(text):
    """Module names from ``/proc/modules`` text (first field of each line), in order."""
    names = []
    for line in (text or "").splitlines():
        fields = line.split()
        if fields:
            names.append(fields[0])
    return names


def loaded_modules(root):
    """Names of loaded modules (``/proc/modules``; underscores, as the kernel prints them).

    Built-in drivers are not listed there; see ``/sys/module/<name>`` for those.
    """
    return parse_proc_modules(read_text(host_path(root, "/proc/modules")) or "")


def module_loaded(root, name):
    """True when ``name`` (dashes or underscores) is in ``/proc/modules``."""
    wanted = name.replace("-", "_")
    return wanted in loaded_modules(root)


def read_cmdline(root):
    """The running kernel's command line (``/proc/cmdline``), stripped; None when missing."""
    return read_text(host_path(root, "/proc/cmdline"))


def cmdline_params(text):
    """``{key: value}`` of a command line; flags without ``=`` map to None; last one wins.

    Quoted values (``key="a b"``) are kept whole, as the kernel parses them.
    """
    params = {}
    for token in split_cmdline(text or ""):
        if "=" in token:
            key, value = token.split("=", 1)
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = value[1:-1]
            params[key] = value
        else:
            params[token] = None
    return params


def split_cmdline(text):
    """Split a kernel command line the way the kernel does: on whitespace, except inside
    double quotes (``param="a b"`` is one token). Tokens keep their quotes. Lenient: an
    unbalanced quote runs to the end, as the kernel reads it."""
    tokens = []
    current = []
    quoted = False
    for char in text:
        if char == '"':
            quoted = not quoted
            current.append(char)
        elif char.isspace() and not quoted:
            if current:
                tokens.append("".join(current))
                current = []
        else:
            current.append(char)
    if current:
        tokens.append("".join(current))
    return tokens
