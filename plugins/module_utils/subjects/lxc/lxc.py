# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Proxmox VE container configs (``/etc/pve/lxc/<vmid>.conf``): read and parse; the edits
that rewrite them are in subjects/lxc/lxc_write.py.

The writer keeps every byte it does not change (docs/hardware-facts.md):
- the live config is everything before the first ``[section]`` line; ``[pve:pending]``
  and snapshot sections (any other ``[name]``) are never edited;
- ``#`` lines are the container description; keys repeat; order is kept;
- line endings (LF or CRLF) and the presence of a final newline are kept;
- raw ``lxc.*`` keys may be written ``key: value`` or ``key = value`` (PVE reads both).

Device majors in ``lxc.cgroup2.devices.allow`` are decimal.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    host_path,
    numbered_entries,
)

DEFAULT_CONFIG_DIR = "/etc/pve/lxc"
ALLOW_KEY = "lxc.cgroup2.devices.allow"
ALLOW_KEY_V1 = "lxc.cgroup.devices.allow"
CGROUP_V1_PREFIX = "lxc.cgroup."
MOUNT_KEY = "lxc.mount.entry"

# NVIDIA character devices with a fixed major; every other NVIDIA major is dynamic.
FIXED_MAJORS = {"nvidia": 195, "nvidiactl": 195, "nvidia-frontend": 195, "nvidia-modeset": 195}
# Names /proc/devices prints for a driver name users know.
PROC_NAMES = {
    "nvidia": ("nvidia-frontend", "nvidia"),
    "nvidiactl": ("nvidia-frontend", "nvidia"),
    "nvidia-modeset": ("nvidia-frontend", "nvidia"),
}

_SECTION = re.compile(r"^\[([^\]]+)\]\s*$")
_LXC_KEY = re.compile(r"^(lxc\.[A-Za-z0-9_\-.]+)(?::|\s*=)\s*(.*?)\s*$")
_PVE_KEY = re.compile(r"^([a-z][a-z_\-]*\d*):\s*(.*?)\s*$")
_RULE = re.compile(r"^([abc])\s+(\*|\d+):(\*|\d+)\s+([rwm]+)$")
_CONF = re.compile(r"^(\d+)\.conf$")


class LxcError(Exception):
    """A container config could not be read or planned; the message says what to do."""


class Line(object):
    """One physical line: ``raw`` without its ending, ``ending`` (``\\n``, ``\\r\\n``, ``""``)."""

    __slots__ = ("raw", "ending", "section", "kind", "key", "value")

    def __init__(self, raw, ending, section):
        self.raw = raw
        self.ending = ending
        self.section = section
        self.key = None
        self.value = None
        text = raw.rstrip("\r")
        stripped = text.strip()
        if not stripped:
            self.kind = "blank"
        elif _SECTION.match(stripped) and not text[:1].isspace():
            self.kind = "section"
            self.value = _SECTION.match(stripped).group(1)
        elif stripped.startswith("#"):
            self.kind = "comment"
        else:
            match = _LXC_KEY.match(stripped) or _PVE_KEY.match(stripped)
            if match:
                self.kind = "kv"
                self.key, self.value = match.group(1), match.group(2)
            else:
                self.kind = "other"

    @property
    def text(self):
        return self.raw + self.ending


def parse_rule(value):
    """``"c 195:* rwm"`` -> ``{type, major, minor, access}`` (majors/minors int or ``*``).

    ``"a"`` (allow everything) -> type ``a``, major/minor ``*``, access ``rwm``. None when
    the value is not a device rule.
    """
    value = " ".join((value or "").split())
    if value == "a":
        return {"type": "a", "major": "*", "minor": "*", "access": "rwm"}
    match = _RULE.match(value)
    if not match:
        return None
    kind, major, minor, access = match.groups()
    return {
        "type": kind,
        "major": major if major == "*" else int(major),
        "minor": minor if minor == "*" else int(minor),
        "access": access,
    }


def rule_text(major, access="rwm", minor="*", kind="c"):
    """The value of an allow line: ``rule_text(509)`` -> ``"c 509:* rwm"``."""
    return "%s %s:%s %s" % (kind, major, minor, access)


def _access_covers(have, want):
    return set(want) <= set(have)


class LxcConfig(object):
    """A parsed container config that renders back byte for byte."""

    def __init__(self, lines, newline="\n", final_newline=True):
        self.lines = lines
        self.newline = newline
        self.final_newline = final_newline

    @classmethod
    def parse(cls, text):
        """Parse config text (str; bytes are decoded UTF-8 with surrogateescape)."""
        if isinstance(text, bytes):
            text = text.decode("utf-8", "surrogateescape")
        lines = []
        section = None
        pieces = text.split("\n")
        for number, piece in enumerate(pieces):
            last = number == len(pieces) - 1
            if last and piece == "":
                break
            if last:
                raw, ending = piece, ""
            elif piece.endswith("\r"):
                raw, ending = piece[:-1], "\r\n"
            else:
                raw, ending = piece, "\n"
            line = Line(raw, ending, section)
            if line.kind == "section":
                section = line.value
                line.section = section
            lines.append(line)
        crlf = sum(1 for ln in lines if ln.ending == "\r\n")
        lf = sum(1 for ln in lines if ln.ending == "\n")
        newline = "\r\n" if crlf > lf else "\n"
        final = not lines or lines[-1].ending != ""
        return cls(lines, newline=newline, final_newline=final)

    @classmethod
    def read(cls, path):
        """Parse the file at ``path``; LxcError when it is missing or unreadable."""
        try:
            with hostfs.open_read(path, "rb") as handle:
                data = handle.read()
        except (IOError, OSError) as exc:
            raise LxcError("cannot read container config %s: %s" % (path, exc.strerror or exc))
        return cls.parse(data)

    def render(self):
        """The config text (str); unchanged lines are the bytes that were read."""
        return "".join(line.text for line in self.lines)

    def render_bytes(self):
        return self.render().encode("utf-8", "surrogateescape")

    # --- reading ------------------------------------------------------------------------

    def live_lines(self):
        """``[(index, Line)]`` of the live section (before the first ``[section]``)."""
        out = []
        for index, line in enumerate(self.lines):
            if line.kind == "section":
                break
            out.append((index, line))
        return out

    def sections(self):
        """Names of the ``[section]`` headers in order (``pve:pending``, snapshots)."""
        return [line.value for line in self.lines if line.kind == "section"]

    def get_all(self, key, section=None):
        """Every value of ``key`` in ``section`` (None: live), in order."""
        return [ln.value for ln in self.lines
                if ln.kind == "kv" and ln.key == key and ln.section == section]

    def get(self, key, default=None, section=None):
        values = self.get_all(key, section)
        return values[-1] if values else default

    def cgroup_v1_lines(self):
        """``key: value`` of every live ``lxc.cgroup.*`` line (cgroup v1 keys, not
        ``lxc.cgroup2.*``). LXC ignores them on a host booted with the unified hierarchy
        (liblxc's cgfsng_setup_limits_legacy: "Ignoring legacy cgroup limits on pure cgroup2
        system", LXC 4.0 to 6.0), so rules written there allow nothing."""
        return ["%s: %s" % (ln.key, ln.value) for _i, ln in self.live_lines()
                if ln.kind == "kv" and ln.key.startswith(CGROUP_V1_PREFIX)]

    @property
    def onboot(self):
        """True when the live config has ``onboot: 1``."""
        return str(self.get("onboot", "0")).strip() == "1"

    @property
    def description(self):
        """The ``#`` description lines of the live section, without the ``#``."""
        return [ln.raw.rstrip("\r")[1:] for _i, ln in self.live_lines() if ln.kind == "comment"]

    def allow_rules(self, section=None, include_v1=False):
        """Device allow rules of ``section`` (None: live).

        ``[{index, key, type, major, minor, access, value}]``; ``index`` is the line index,
        ``major``/``minor`` are ints or ``*``; lines whose value is not a rule get
        ``type: None``.
        """
        keys = (ALLOW_KEY, ALLOW_KEY_V1) if include_v1 else (ALLOW_KEY,)
        out = []
        for index, line in enumerate(self.lines):
            if line.kind != "kv" or line.key not in keys or line.section != section:
                continue
            rule = parse_rule(line.value) or {
                "type": None, "major": None, "minor": None, "access": None}
            rule.update({"index": index, "key": line.key, "value": line.value})
            out.append(rule)
        return out

    def mount_entries(self, section=None):
        """``lxc.mount.entry`` lines: ``[{index, source, target, fstype, options, value}]``."""
        out = []
        for index, line in enumerate(self.lines):
            if line.kind == "kv" and line.key == MOUNT_KEY and line.section == section:
                fields = line.value.split()
                out.append({
                    "index": index,
                    "source": fields[0] if fields else None,
                    "target": fields[1] if len(fields) > 1 else None,
                    "fstype": fields[2] if len(fields) > 2 else None,
                    "options": fields[3] if len(fields) > 3 else None,
                    "value": line.value,
                })
        return out

    def dev_entries(self, section=None):
        """PVE 8.1+ ``devN:`` passthrough entries: ``[{key, index, path, options}]``."""
        out = []
        for index, line in enumerate(self.lines):
            if line.kind != "kv" or line.section != section:
                continue
            if not re.match(r"^dev\d+$", line.key or ""):
                continue
            path = None
            options = {}
            for part in line.value.split(","):
                part = part.strip()
                if not part:
                    continue
                if "=" in part:
                    name, val = part.split("=", 1)
                    if name == "path":
                        path = val
                    else:
                        options[name] = val
                elif path is None:
                    path = part
            out.append({"key": line.key, "index": index, "path": path, "options": options,
                        "value": line.value})
        return out

    # --- planning -----------------------------------------------------------------------

    def plan(self, wanted_rules, stale_majors=(), keep_majors=()):
        """Plan the live section's allow rules; returns a :class:`Plan` (nothing written).

        ``wanted_rules``: rule values (``"c 509:* rwm"``) or rule dicts. One counts as
        present when a live ``lxc.cgroup2.devices.allow`` rule of the same type and major,
        minor ``*``, grants at least that access. ``stale_majors``: character majors whose
        live allow lines are removed (except majors of wanted rules and ``keep_majors``).
        New lines go right after the last live allow line (or after the last non-blank
        line of the live section), in the order given.
        """
        wanted = []
        for item in wanted_rules:
            rule = parse_rule(item) if isinstance(item, str) else dict(item)
            if not rule or rule.get("type") not in ("a", "b", "c"):
                raise LxcError("not a device rule: %r (want e.g. 'c 509:* rwm')" % (item,))
            wanted.append(rule)
        wanted_majors = set(r["major"] for r in wanted if r["type"] == "c")
        protect = wanted_majors | set(keep_majors)
        stale = set(int(m) for m in stale_majors) - protect
        live = self.allow_rules()
        remove = [r for r in live if r["type"] == "c" and r["major"] in stale]
        remove_idx = set(r["index"] for r in remove)
        kept = [r for r in live if r["index"] not in remove_idx]
        add = []
        for rule in wanted:
            covered = any(
                r["type"] == rule["type"] and r["major"] == rule["major"]
                and r["minor"] == "*" and _access_covers(r["access"], rule["access"])
                for r in kept
            )
            text = rule_text(rule["major"], rule["access"], rule["minor"], rule["type"])
            if not covered and text not in add:
                add.append(text)
        return Plan(self, add, remove)

    def with_changes(self, add_values, remove_indexes):
        """A new LxcConfig: live lines at ``remove_indexes`` dropped, allow lines added."""
        remove_indexes = set(remove_indexes)
        live = self.live_lines()
        anchor = None
        for index, line in live:
            if line.kind == "kv" and line.key == ALLOW_KEY:
                anchor = index
        if anchor is None:
            anchor = -1
            for index, line in live:
                if line.kind != "blank":
                    anchor = index
        lines = [Line(ln.raw, ln.ending, ln.section) for ln in self.lines]
        final_newline = self.final_newline
        new = [Line("%s: %s" % (ALLOW_KEY, value), self.newline, None) for value in add_values]
        if new:
            if anchor >= 0 and lines[anchor].ending == "":
                # the anchor was the last line of a file without a final newline
                lines[anchor].ending = self.newline
                new[-1].ending = ""
            lines[anchor + 1:anchor + 1] = new
            shift = len(new)
            remove_indexes = set(i if i <= anchor else i + shift for i in remove_indexes)
        result = [ln for i, ln in enumerate(lines) if i not in remove_indexes]
        if result and not final_newline and result[-1].ending:
            result[-1].ending = ""
        return LxcConfig(result, newline=self.newline, final_newline=final_newline)


class Plan(object):
    """What :meth:`LxcConfig.plan` decided: ``add`` (values), ``remove`` (rule dicts)."""

    def __init__(self, config, add, remove):
        self.config = config
        self.add = add
        self.remove = remove

    @property
    def changed(self):
        return bool(self.add or self.remove)

    @property
    def removed_values(self):
        return [r["value"] for r in self.remove]

    def apply(self):
        """The new LxcConfig (the original is untouched)."""
        if not self.changed:
            return self.config
        return self.config.with_changes(self.add, [r["index"] for r in self.remove])

    def new_text(self):
        return self.apply().render()


# --- host level -------------------------------------------------------------------------


def config_path(root, vmid, config_dir=DEFAULT_CONFIG_DIR):
    return os.path.join(host_path(root, config_dir), "%s.conf" % int(vmid))


def list_configs(root, config_dir=DEFAULT_CONFIG_DIR):
    """``[(vmid, path)]`` of ``<config_dir>/<vmid>.conf`` files, by VMID.

    ``/etc/pve/lxc`` shows only this node's containers (it links to nodes/<node>/lxc).
    """
    return numbered_entries(host_path(root, config_dir), _CONF, files_only=True)


def stale_majors(config, registered_char_majors):
    """Live allowed character majors (not ``*``) that ``/proc/devices`` does not register.

    ``registered_char_majors``: any iterable of majors, or a ``{name: [majors]}`` /
    ``{name: major}`` mapping (every name counts). Sorted list of ints.
    """
    registered = _major_set(registered_char_majors)
    majors = set()
    for rule in config.allow_rules():
        if rule["type"] == "c" and isinstance(rule["major"], int):
            if rule["major"] not in registered:
                majors.add(rule["major"])
    return sorted(majors)


def _major_set(registered):
    if isinstance(registered, dict):
        out = set()
        for value in registered.values():
            if isinstance(value, (list, tuple, set)):
                out.update(int(v) for v in value)
            else:
                out.add(int(value))
        return out
    return set(int(v) for v in registered)


def binds_nvidia(config):
    """Whether a container config gives the container NVIDIA GPUs (a GPU container): a
    live allow rule for major 195, or a bind mount or ``devN`` entry of a ``/dev/nvidia*``
    node. The audit's ``gpu`` of each container and driver_state's default containers."""
    allowed = set(r["major"] for r in config.allow_rules()
                  if r["type"] == "c" and isinstance(r["major"], int))
    paths = [m.get("source") or "" for m in config.mount_entries()]
    paths += [d.get("path") or "" for d in config.dev_entries()]
    return FIXED_MAJORS["nvidia"] in allowed or any(p.startswith("/dev/nvidia") for p in paths)


def driver_majors(driver, char_majors_by_name):
    """Majors of ``driver``: fixed 195 for nvidia/nvidiactl, else from ``/proc/devices``.

    Returns ``(majors, registered)``: ``majors`` a list (empty when unknown), ``registered``
    whether ``/proc/devices`` lists the driver (a fixed major is known even when not).
    """
    names = PROC_NAMES.get(driver, (driver,))
    majors = []
    for name in names:
        found = char_majors_by_name.get(name)
        if found is None:
            continue
        for major in found if isinstance(found, (list, tuple)) else [found]:
            if major not in majors:
                majors.append(int(major))
    registered = bool(majors)
    if driver in FIXED_MAJORS:
        return [FIXED_MAJORS[driver]], registered
    return majors, registered


# --- single-valued keys of the live section (cpuset pinning) -----------------------------

CPUSET_CPUS_KEY = "lxc.cgroup2.cpuset.cpus"
CPUSET_MEMS_KEY = "lxc.cgroup2.cpuset.mems"


def live_value(config, key):
    """The value the container starts with for a single-valued ``key``: the last live line
    of it (lxc applies them in order), None when absent."""
    values = config.get_all(key)
    return values[-1] if values else None
