# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Editing Proxmox VE container configs: the device rules and mounts a GPU container needs
(lxc_cgroup_devices, through subjects/cuda/container.py) and live-section values (the placement
part).
Every byte not changed is kept, as subjects/lxc/lxc.py describes.

Reading and parsing configs is subjects/lxc/lxc.py's; the audit imports only that
(docs/architecture.md,
"What the audit imports")."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.lxc.lxc import (
    FIXED_MAJORS,
    Line,
    LxcConfig,
    LxcError,
    driver_majors,
    stale_majors,
)


def write_target(root, path):
    """The file a write of the container config ``path`` (a full path under ``root``)
    replaces: ``path`` itself, or where its symlinks lead, resolved inside ``root`` (an
    absolute target from the root, ``..`` stopping there: the rule the capture and the
    readers use), so a linked config stays a link to the file that now holds the change
    and a write never lands outside the tree. LxcError when that is not a regular file."""
    root = os.path.abspath(root or "/")
    if root == "/":
        target = os.path.realpath(path)
    else:
        rel = os.path.relpath(os.path.abspath(path), root)
        if rel == ".." or rel.startswith("../"):
            raise LxcError("%s is outside root %s: refused" % (path, root))
        try:
            target = hostfs.host_path(root, hostfs.resolve_links(root, "/" + rel))
        except ValueError as exc:  # a link loop
            raise LxcError("%s: %s" % (path, exc))
    if target != path and (os.path.islink(target) or not os.path.isfile(target)):
        raise LxcError("%s is a symlink to %s, which is not a regular file: point it at the "
                       "container's config file, or replace the link by the file" % (
                           path, target))
    return target


# What to run when a driver is not registered yet.
LOAD_HINTS = {
    "nvidia": "modprobe nvidia (or nvidia-modprobe -c=0)",
    "nvidiactl": "modprobe nvidia (or nvidia-modprobe -c=0)",
    "nvidia-uvm": "nvidia-modprobe -u -c=0 (or modprobe nvidia_uvm)",
    "nvidia-caps": "modprobe nvidia (nvidia.ko registers nvidia-caps; or nvidia-modprobe -c=0)",
    "nvidia-caps-imex-channels": "modprobe nvidia (nvidia.ko registers it)",
    "nvidia-nvlink": "modprobe nvidia (nvidia.ko registers it)",
    "nvidia-nvswitch": "modprobe nvidia (nvidia.ko registers it)",
}


def sync_device_rules(config, char_majors_by_name, drivers, access="rwm", remove_stale=True,
                      missing="fail", where=None, previous_majors=()):
    """Plan one container's allow rules against ``/proc/devices``; nothing is written.

    ``char_majors_by_name``: ``{name: [majors]}`` (:func:`procfs.char_majors`). Wanted: one
    ``c <major>:* <access>`` per major of each driver. Stale (``remove_stale``): live char
    allow rules whose major ``/proc/devices`` registers under no name at all. A driver
    ``/proc/devices`` does not list raises LxcError with ``missing="fail"`` (rules repaired
    then would drop the container's access to it for good); ``missing="skip"`` leaves it out.

    ``previous_majors``: majors the listed drivers had before (an audit taken before the
    reboot). With ``remove_stale``, live allow rules for such a major that no listed driver
    has now are stale too, even when a new kernel gave the major to another driver: the
    registered-at-all test cannot see that, and the container would keep access to that
    other driver's devices (in the VM lab gpustub's 244 became nvme's on the new kernel).

    Returns ``{plan, majors, majors_all, missing, added, removed, stale, moved,
    other_allowed}``; ``moved`` lists the previous majors removed that way, with the names
    ``/proc/devices`` registers them under now; ``other_allowed`` lists live char rules kept
    because their major is registered under a name no listed driver uses (``c 226:* rwm``
    -> drm; without ``previous_majors`` an old GPU major a new kernel gave to another driver
    shows up here too: check those by hand).
    """
    if set(access) - set("rwm") or not access:
        raise LxcError("access must be made of r, w, m (got %r)" % (access,))
    majors_first = {}
    majors_all = {}
    absent = []
    wanted = []
    for driver in drivers:
        majors, registered = driver_majors(driver, char_majors_by_name)
        if not registered and driver not in FIXED_MAJORS:
            absent.append(driver)
            continue
        majors_first[driver] = majors[0]
        majors_all[driver] = list(majors)
        for major in majors:
            wanted.append({"type": "c", "major": major, "minor": "*", "access": access})
    if absent and missing != "skip":
        hints = "; ".join(
            "%s: load it with %s" % (d, LOAD_HINTS.get(d, "modprobe %s" % d.replace("-", "_")))
            for d in absent)
        raise LxcError(
            "%s not registered in /proc/devices%s, so its major is unknown; nothing was "
            "written (rewriting the rules now would drop the container's access to it). "
            "%s. Or set missing: skip if it is absent on purpose."
            % (", ".join(absent), " (%s)" % where if where else "", hints)
        )
    stale = stale_majors(config, char_majors_by_name) if remove_stale else []
    keep = set(FIXED_MAJORS.values())
    moved = []
    if remove_stale and previous_majors:
        now = set(m for majors in majors_all.values() for m in majors) | keep
        allowed = set(r["major"] for r in config.allow_rules()
                      if r["type"] == "c" and isinstance(r["major"], int))
        moved = sorted((set(int(m) for m in previous_majors) - now) & allowed)
        stale = sorted(set(stale) | set(moved))
    plan = config.plan(wanted, stale, keep_majors=keep)
    names_by_major = {}
    for name, found in char_majors_by_name.items():
        for major in found if isinstance(found, (list, tuple)) else [found]:
            names_by_major.setdefault(int(major), []).append(name)
    listed = set(m for majors in majors_all.values() for m in majors) | keep
    removed_idx = set(r["index"] for r in plan.remove)
    other = []
    for rule in config.allow_rules():
        if rule["index"] in removed_idx or rule["type"] != "c":
            continue
        if isinstance(rule["major"], int) and rule["major"] not in listed:
            other.append({"rule": rule["value"], "major": rule["major"],
                          "registered_as": sorted(names_by_major.get(rule["major"], []))})
    return {
        "plan": plan,
        "majors": majors_first,
        "majors_all": majors_all,
        "missing": absent,
        "added": list(plan.add),
        "removed": plan.removed_values,
        "stale": sorted(set(stale) - keep - set(r["major"] for r in wanted)),
        "moved": [{"major": m, "registered_as": sorted(names_by_major.get(m, []))}
                  for m in moved],
        "other_allowed": other,
    }


def with_live_values(config, values):
    """A new LxcConfig with single-valued live keys set; nothing else changes.

    ``values``: ``[(key, value)]`` in order (value None removes every live line of the key).
    A key already present keeps its line and its ``key: value`` / ``key = value`` form with
    the value replaced (earlier duplicates are dropped: only the last one counted); a new
    key goes after the last live ``lxc.*`` line (else after the last non-blank live line),
    in the order given. Pending and snapshot sections, comments, order, line endings and
    the final newline are kept byte for byte.
    """
    lines = [Line(ln.raw, ln.ending, ln.section) for ln in config.lines]
    live = len(config.live_lines())
    drop = set()
    new = []
    for key, value in values:
        where = [i for i in range(live) if lines[i].kind == "kv" and lines[i].key == key]
        if value is None:
            drop.update(where)
            continue
        value = " ".join(str(value).split())
        if where:
            drop.update(where[:-1])
            last = lines[where[-1]]
            raw = last.raw.rstrip("\r")
            match = re.match(r"^(\s*%s\s*(?::|=)\s*)" % re.escape(key), raw)
            prefix = match.group(1) if match else "%s: " % key
            lines[where[-1]] = Line(prefix + value + last.raw[len(raw):], last.ending, None)
        else:
            new.append(Line("%s: %s" % (key, value), config.newline, None))
    if new:
        anchor = _insert_after(lines, live)
        if anchor >= 0 and lines[anchor].ending == "":
            lines[anchor].ending = config.newline
            new[-1].ending = ""
        lines[anchor + 1:anchor + 1] = new
        drop = set(i if i <= anchor else i + len(new) for i in drop)
    result = [ln for i, ln in enumerate(lines) if i not in drop]
    if result and not config.final_newline and result[-1].ending:
        result[-1].ending = ""
    return LxcConfig(result, newline=config.newline, final_newline=config.final_newline)


def _insert_after(lines, live):
    """Index of the line a new live line goes after: the last live ``lxc.*`` line, else the
    last non-blank live line; -1 (the very top) in an empty live section. ``live``: how many
    of ``lines`` are the live section."""
    last_lxc = last_text = -1
    for i in range(live):
        if lines[i].kind == "kv" and (lines[i].key or "").startswith("lxc."):
            last_lxc = i
        if lines[i].kind != "blank":
            last_text = i
    return last_lxc if last_lxc >= 0 else last_text


def live_key_lines(config, key):
    """The live lines of ``key`` as written (``[raw text]``, endings left out), in order:
    what a snapshot keeps so that a restore can put exactly these bytes back."""
    return [ln.raw for _i, ln in config.live_lines() if ln.kind == "kv" and ln.key == key]


def with_live_lines(config, key, raws):
    """A new LxcConfig whose live lines of ``key`` are exactly ``raws`` (raw texts, as
    :func:`live_key_lines` returns them; empty: none): they take the place of the first
    present line of the key, else go after the last live ``lxc.*`` line (else after the
    last non-blank live line). Everything else is kept byte for byte."""
    for raw in raws:
        line = Line(raw, "\n", None)
        if "\n" in raw or line.kind != "kv" or line.key != key:
            raise LxcError("%r is not one %s line" % (raw, key))
    lines = [Line(ln.raw, ln.ending, ln.section) for ln in config.lines]
    live = len(config.live_lines())
    where = [i for i in range(live) if lines[i].kind == "kv" and lines[i].key == key]
    if where:
        at, ending = where[0], lines[where[-1]].ending
    else:
        at = _insert_after(lines, live)
        ending = config.newline
        if at >= 0 and lines[at].ending == "":
            lines[at].ending, ending = config.newline, ""
        at += 1
    new = [Line(raw, config.newline, None) for raw in raws]
    if new:
        new[-1].ending = ending
    kept = [ln for i, ln in enumerate(lines) if i not in where]
    at -= len([i for i in where if i < at])
    result = kept[:at] + new + kept[at:]
    if result and not config.final_newline and result[-1].ending:
        result[-1].ending = ""
    if result and config.final_newline and not result[-1].ending:
        result[-1].ending = config.newline
    return LxcConfig(result, newline=config.newline, final_newline=config.final_newline)
