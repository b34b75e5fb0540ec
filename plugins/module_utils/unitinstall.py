# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Installing a systemd unit that runs this collection's module_utils on the host: its
files (units, config, the library copied byte for byte) planned, written and removed under
a root, the wants link ``systemctl enable`` makes, and whether systemctl can act at all.

Used by ``bootservice`` (``gpuhost-tuning.service``) and ``audittimer``
(``gpuhost-audit.timer``); each names its own paths.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil

from ansible_collections.gpuhost.tuning.plugins.module_utils.hostfs import (
    atomic_write,
    host_path,
)

# Package folders (relative to a library folder) that need an __init__.py.
PACKAGES = ("ansible_collections", "ansible_collections/gpuhost",
            "ansible_collections/gpuhost/tuning", "ansible_collections/gpuhost/tuning/plugins",
            "ansible_collections/gpuhost/tuning/plugins/module_utils")


def package_markers(text):
    """``{path relative to the library folder: text}`` of every package marker."""
    return dict((folder + "/__init__.py", text) for folder in PACKAGES)


def _read(path):
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def plan_files(root, files, lib_dir):
    """``[(host path, action)]`` for ``files`` (``{host path: bytes}``), sorted by path:
    ``create``, ``update`` or ``ok``, then ``remove`` for each file in ``lib_dir`` that
    ``files`` does not hold (a library file this version does not ship)."""
    plan = []
    for path in sorted(files):
        old = _read(host_path(root, path))
        plan.append((path, "ok" if old == files[path] else
                     ("create" if old is None else "update")))
    base = host_path(root, lib_dir)
    for folder, _dirs, names in os.walk(base):
        for name in names:
            rel = lib_dir + "/" + os.path.relpath(os.path.join(folder, name), base)
            if rel not in files:
                plan.append((rel, "remove"))
    return plan


def write_files(root, files, plan):
    """Carry out ``plan_files``' plan (new folders 0755, files 0644, atomic)."""
    for path, action in plan:
        full = host_path(root, path)
        if action == "remove":
            os.unlink(full)
        elif action in ("create", "update"):
            folder = os.path.dirname(full)
            if not os.path.isdir(folder):
                os.makedirs(folder, 0o755)
            atomic_write(full, files[path], mode=0o644, preserve=False)


def wants_link_ok(root, link, unit_path):
    full = host_path(root, link)
    return os.path.islink(full) and os.readlink(full) == unit_path


def make_wants_link(root, link, unit_path):
    """What ``systemctl enable`` does for the unit's ``WantedBy=``, on a tree."""
    full = host_path(root, link)
    folder = os.path.dirname(full)
    if not os.path.isdir(folder):
        os.makedirs(folder, 0o755)
    if os.path.lexists(full):
        os.unlink(full)
    os.symlink(unit_path, full)


def installed_paths(root, paths):
    """The host ``paths`` (links, files, folders) that exist under ``root``, in order."""
    return [path for path in paths if os.path.lexists(host_path(root, path))]


def remove_installed(root, paths, config_path):
    """Delete ``paths`` that exist (folders with what they hold), then the folder of
    ``config_path`` when it is empty."""
    for path in installed_paths(root, paths):
        full = host_path(root, path)
        if os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full)
        else:
            os.unlink(full)
    try:
        os.rmdir(os.path.dirname(host_path(root, config_path)))
    except OSError:
        pass


def not_live(root, runner):
    """Why systemctl cannot act on ``root`` (a tree, no systemd, no systemctl), or None."""
    if os.path.realpath(root) != "/":
        return "root is %s, not the live host" % root
    if not os.path.isdir("/run/systemd/system"):
        return "systemd is not running here (no /run/systemd/system)"
    if runner is None or not runner.which("systemctl"):
        return "systemctl not found"
    return None
