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
import pkgutil
import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    atomic_write,
    host_path,
    open_read,
)

# Package folders (relative to a library folder) that need an __init__.py.
PACKAGES = ("ansible_collections", "ansible_collections/gpuhost",
            "ansible_collections/gpuhost/tuning", "ansible_collections/gpuhost/tuning/plugins",
            "ansible_collections/gpuhost/tuning/plugins/module_utils")


def package_markers(text):
    """``{path relative to the library folder: text}`` of every package marker."""
    return dict((folder + "/__init__.py", text) for folder in PACKAGES)


# The collection's module_utils package: the shipped sources are read from it, and the
# library folder mirrors its path.
PACKAGE = "ansible_collections.gpuhost.tuning.plugins.module_utils"
# ``from <absolute module_utils path or dots> import <names>``: the imports a shipped file
# makes of the collection (``.`` and ``..`` forms resolved against the importing file).
_IMPORT = re.compile(r"^[ \t]*from\s+(ansible_collections\.gpuhost\.tuning\.plugins\.module_utils"
                     r"(?:\.[\w.]+)?|\.+[\w.]*)\s+import\s+(\([^)]*\)|[^\n]+)", re.M)


def _source(rel):
    """Source of module_utils ``rel`` (``a/b.py``), or None when the package lacks it."""
    try:
        return pkgutil.get_data(PACKAGE, rel)
    except (IOError, OSError):
        return None


def _resolve(dotted):
    """``(rel path, source)`` of module_utils module or package ``dotted`` (``a.b``)."""
    base = dotted.replace(".", "/")
    for rel in (base + ".py", base + "/__init__.py"):
        data = _source(rel)
        if data is not None:
            return rel, data
    return None, None


def _imported(dotted, rel, text):
    """The module_utils names (dotted, below PACKAGE) a file's imports may name."""
    package = dotted.split(".") if rel.endswith("/__init__.py") else dotted.split(".")[:-1]
    out = []
    for match in _IMPORT.finditer(text):
        source = match.group(1)
        if source.startswith("."):
            dots = len(source) - len(source.lstrip("."))
            base = package[:len(package) - (dots - 1)] if dots > 1 else list(package)
            prefix = ".".join(base + [p for p in source.lstrip(".").split(".") if p])
        else:
            prefix = source[len(PACKAGE):].lstrip(".")
        body = re.sub(r"#[^\n]*", "", match.group(2)).strip().strip("()")
        names = [n.split(" as ")[0].strip() for n in body.split(",")]
        if prefix:
            out.append(prefix)
        for name in names:
            if name and re.match(r"^\w+$", name):
                out.append(prefix + "." + name if prefix else name)
    return out


def library_closure(start, init_text):
    """``{path relative to the library folder: bytes}``: module_utils ``start`` (dotted,
    below PACKAGE) and every module_utils file it imports, followed import by import (read
    from the running collection, so a checkout and AnsiballZ's zip give the same bytes),
    plus a package marker for every package folder on the way."""
    files = package_markers(init_text)
    todo, seen = [start], set()
    while todo:
        dotted = todo.pop()
        if dotted in seen:
            continue
        seen.add(dotted)
        rel, data = _resolve(dotted)
        if rel is None:
            continue
        files[PACKAGES[-1] + "/" + rel] = data
        todo.extend(_imported(dotted, rel, data.decode("utf-8")))
    # a package marker for every sub-folder that holds a shipped file and has none
    for rel in list(files):
        if not rel.startswith(PACKAGES[-1] + "/"):
            continue
        parts = rel[len(PACKAGES[-1]) + 1:].split("/")[:-1]
        for i in range(1, len(parts) + 1):
            marker = "%s/%s/__init__.py" % (PACKAGES[-1], "/".join(parts[:i]))
            files.setdefault(marker, init_text)
    return files


def _read(path):
    try:
        with open_read(path, "rb") as handle:
            return handle.read()
    except (IOError, OSError):
        return None


# A library folder's own package: every file under it is one the installer wrote (the
# collection's namespace); the two package markers above it are the installer's when they
# hold its marker text. Anything else in the library folder is someone else's.
OWN_PACKAGE = "ansible_collections/gpuhost/tuning"


def owned_library_files(root, lib_dir, init_text):
    """Host paths of the files in ``lib_dir`` that the installer wrote, sorted."""
    base = host_path(root, lib_dir)
    owned = []
    for marker in PACKAGES[:2]:
        path = lib_dir + "/" + marker + "/__init__.py"
        if _read(host_path(root, path)) == init_text:
            owned.append(path)
    for folder, _dirs, names in os.walk(os.path.join(base, OWN_PACKAGE)):
        for name in names:
            owned.append(lib_dir + "/" + os.path.relpath(os.path.join(folder, name), base))
    return sorted(owned)


def foreign_files(root, folder, owned):
    """Host paths of the files and links under ``folder`` that are not in ``owned``."""
    base = host_path(root, folder)
    found = []
    for current, dirs, names in os.walk(base):
        for name in names + [d for d in dirs if os.path.islink(os.path.join(current, d))]:
            path = folder + "/" + os.path.relpath(os.path.join(current, name), base)
            if path not in owned:
                found.append(path)
    return sorted(found)


def plan_files(root, files, lib_dir, init_text=None):
    """``[(host path, action)]`` for ``files`` (``{host path: bytes}``), sorted by path:
    ``create``, ``update`` or ``ok``, then ``remove`` for each file of ``lib_dir``'s own
    package (``owned_library_files``) that ``files`` does not hold (a library file this
    version does not ship). Other files in ``lib_dir`` are left alone."""
    plan = []
    for path in sorted(files):
        old = _read(host_path(root, path))
        plan.append((path, "ok" if old == files[path] else
                     ("create" if old is None else "update")))
    for path in owned_library_files(root, lib_dir, init_text):
        if path not in files:
            plan.append((path, "remove"))
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


def installed_paths(root, paths, init_text=None):
    """The installer's files among host ``paths`` that exist under ``root``, in order: a
    link or file as it is, a folder as the library files the installer wrote in it
    (``owned_library_files``)."""
    found = []
    for path in paths:
        full = host_path(root, path)
        if os.path.isdir(full) and not os.path.islink(full):
            found += owned_library_files(root, path, init_text)
        elif os.path.lexists(full):
            found.append(path)
    return found


def _prune(root, folder):
    """Remove ``folder`` and the folders below it that are empty, deepest first."""
    base = host_path(root, folder)
    if not os.path.isdir(base) or os.path.islink(base):
        return
    for current, _dirs, _names in sorted(os.walk(base), key=lambda w: -len(w[0])):
        try:
            os.rmdir(current)
        except OSError:
            pass


def _folders(root, paths, config_path):
    """The folder of ``config_path`` and the folders among ``paths`` (library folders)."""
    folders = [os.path.dirname(config_path)]
    for path in paths:
        full = host_path(root, path)
        if path not in folders and os.path.isdir(full) and not os.path.islink(full):
            folders.append(path)
    return folders


def kept_folders(root, paths, config_path, init_text=None, name="the installer"):
    """``[{path, reason}]``: the config folder and the library folders among ``paths`` that
    hold files the installer did not write; removing them would lose someone's files."""
    found = installed_paths(root, paths, init_text)
    kept = []
    for folder in _folders(root, paths, config_path):
        full = host_path(root, folder)
        if not os.path.isdir(full) or os.path.islink(full):
            continue
        foreign = foreign_files(root, folder, found)
        if foreign:
            kept.append(dict(path=folder, reason="holds %d file(s) %s did not install (%s): "
                             "kept with them; only its own files were removed" % (
                                 len(foreign), name, ", ".join(foreign[:5]) + (
                                     ", ..." if len(foreign) > 5 else ""))))
    return kept


def remove_installed(root, paths, config_path, init_text=None, name="the installer"):
    """Delete the installer's files among ``paths`` (``installed_paths``), then the library
    folders and the folder of ``config_path`` when nothing else is in them. Returns
    ``kept_folders`` (the folders left because they hold someone else's files)."""
    kept = kept_folders(root, paths, config_path, init_text, name)
    folders = _folders(root, paths, config_path)
    for path in installed_paths(root, paths, init_text):
        os.unlink(host_path(root, path))
    for folder in folders:
        _prune(root, folder)
    return kept


def not_live(root, runner):
    """Why systemctl cannot act on ``root`` (a tree, no systemd, no systemctl), or None."""
    if os.path.realpath(root) != "/":
        return "root is %s, not the live host" % root
    if not os.path.isdir("/run/systemd/system"):
        return "systemd is not running here (no /run/systemd/system)"
    if runner is None or not runner.which("systemctl"):
        return "systemctl not found"
    return None
