# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The snapshot folder and its documents, and the ``files`` section of a snapshot: the
layer below the tune parts (they read the original snapshot to know what a revert puts
back) and below ``engines/tune/snapshot.py`` (which loops over the parts' sections).

Files in ``<root>/var/lib/gpuhost/`` (JSON, one document each)::

    original.json              the first snapshot ever taken; never overwritten
    snapshot-<UTC time>.json   later "before" snapshots, only when the host drifted from
                               the last recorded state (so a re-run of tune writes nothing)
    applied.json               the state tune left (rewritten when it differs); removed by a
                               restore, since the host is no longer in that state

The ``files`` section records each file, link or folder a tune part may write (content and
mode, or that it does not exist; the parts declare them, ``engines.tune.tune_registry`` collects
them)
and puts them back as recorded, removing those that did not exist and the empty folders a
tune run created above them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import json
import os
import re
import time

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import bounded
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    OUTPUT_LIMIT,
    PathError,
    atomic_write,
    host_path,
    inside_root,
    open_read,
    read_bytes,
    under_root,
)

SCHEMA = 1
SNAPSHOT_DIR = "/var/lib/gpuhost"
ORIGINAL = "original.json"
APPLIED = "applied.json"
PREFIX = "snapshot-"


class SnapshotError(Exception):
    """A snapshot could not be read, written or found; the message names the file."""


def snapshot_dir(root, folder=SNAPSHOT_DIR):
    try:
        return under_root(root, folder, "snapshot dir")
    except PathError as exc:
        raise SnapshotError(str(exc))


def damaged(path):
    """``bad(what)`` for a check of the snapshot at ``path``: raises SnapshotError."""
    def bad(what):
        raise SnapshotError("snapshot %s is damaged or was edited: %s; nothing was restored "
                            "(restore another snapshot: tuning_snapshot state=query lists them)"
                            % (path, what))
    return bad


def load(path, root=None, check=None):
    """The snapshot document at ``path``, its schema and ``files`` section checked, then
    ``check(doc, path, root)`` (``snapshot.load`` passes the check of every section)."""
    try:
        with open_read(path, "r", OUTPUT_LIMIT) as handle:
            doc = bounded.json_loads(handle.read())
    except (IOError, OSError) as exc:
        raise SnapshotError("cannot read snapshot %s: %s" % (path, exc))
    except UnicodeDecodeError as exc:
        raise SnapshotError("snapshot %s is not UTF-8 text: %s" % (path, exc))
    except ValueError as exc:
        raise SnapshotError("snapshot %s is not valid JSON: %s" % (path, exc))
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or "state" not in doc:
        raise SnapshotError("%s is not a gpuhost.tuning snapshot (schema %s)" % (path, SCHEMA))
    if not isinstance(doc["state"], dict):
        damaged(path)("state is not a mapping")
    _check_files(doc["state"].get("files") or {}, damaged(path), root)
    if check is not None:
        check(doc, path, root)
    # after the sections' own checks (their messages are the more precise), before any
    # restore: no recorded key or value may carry a control character
    _check_text(doc["state"], "state", damaged(path))
    return doc


# C0 controls but the tab, and DEL: no recorded value (a sysfs/procfs value is one stripped
# line, a file's content is base64) holds one; a CR or LF in a restored value splits or
# rewrites the line it is written into (a cpuset line, a config line).
_CONTROL = re.compile(u"[\x00-\x08\x0a-\x1f\x7f]")


def _check_text(value, where, bad):
    """``bad`` names the first key (``state.<section>.<key>...``) whose name or string value
    holds a control character."""
    if isinstance(value, dict):
        for key, item in value.items():
            name = "%s.%s" % (where, key)
            if isinstance(key, str) and _CONTROL.search(key):
                bad("key %r holds a control character" % name)
            _check_text(item, name, bad)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_text(item, "%s[%d]" % (where, index), bad)
    elif isinstance(value, str) and _CONTROL.search(value):
        bad("%s = %r holds a control character (CR, LF, NUL...): a restore would write it"
            % (where, value[:80]))


def listing(root, folder=SNAPSHOT_DIR):
    """Snapshot file names in the folder: original first, then the others oldest first,
    applied last (names sort by time)."""
    base = snapshot_dir(root, folder)
    try:
        names = os.listdir(base)
    except OSError:
        return []
    later = sorted(n for n in names if n.startswith(PREFIX) and n.endswith(".json"))
    out = [ORIGINAL] if ORIGINAL in names else []
    out += later
    if APPLIED in names:
        out.append(APPLIED)
    return out


def last_recorded(root, folder=SNAPSHOT_DIR):
    """The file name of the newest recorded state (applied, else the newest snapshot, else
    the original), or None."""
    names = listing(root, folder)
    return names[-1] if names else None


def resolve(root, name, folder=SNAPSHOT_DIR):
    """``original``, ``latest`` (newest before-snapshot), a file name in the folder (``.json``
    optional) or a host path -> the file's full path. Raises SnapshotError when missing."""
    base = snapshot_dir(root, folder)
    name = (name or "original").strip()
    if name == "original":
        path = os.path.join(base, ORIGINAL)
    elif name == "latest":
        names = [n for n in listing(root, folder) if n != APPLIED]
        if not names:
            raise SnapshotError("no snapshot in %s: run the tune playbook first" % base)
        path = os.path.join(base, names[-1])
    elif "/" in name:
        path = host_path(root, name)
    elif name in (".", "..") or name.startswith("."):
        raise SnapshotError("snapshot name %r: give original, latest or a file name in %s"
                            % (name, base))
    else:
        path = os.path.join(base, name if name.endswith(".json") else name + ".json")
    if not inside_root(root, path):
        raise SnapshotError("snapshot %s resolves to %s, outside root %s: refused"
                            % (name, os.path.realpath(path), root))
    if not os.path.isfile(path):
        have = ", ".join(listing(root, folder)) or "none"
        raise SnapshotError("snapshot %s not found at %s (snapshots there: %s)"
                            % (name, path, have))
    return path


def _document(kind, root, state):
    return {"schema": SCHEMA, "kind": kind,
            "taken_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "root": root, "state": state}


def _write(path, doc):
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        os.makedirs(folder, 0o755)
    atomic_write(path, json.dumps(doc, indent=1, sort_keys=True) + "\n", mode=0o644,
                 preserve=False)


def _new_name(base):
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    name = "%s%s.json" % (PREFIX, stamp)
    count = 1
    while os.path.exists(os.path.join(base, name)):
        name = "%s%s-%d.json" % (PREFIX, stamp, count)
        count += 1
    return name


def write_if_new(root, kind, folder, state, check_mode, check=None):
    """Record ``state``: ``kind="before"`` (ahead of any change): the first snapshot ever
    becomes ``original.json``; after that a ``snapshot-<time>.json`` is written only when
    the state differs from the last recorded one. ``kind="applied"`` (after tuning):
    ``applied.json`` rewritten when it differs. Returns the path written (or planned in
    check mode) relative to ``folder``'s root, or None. ``check``: as for ``load``, applied
    to the recorded document compared with."""
    if kind not in ("before", "applied"):
        raise ValueError("invalid snapshot kind %r: use before or applied" % (kind,))
    base = snapshot_dir(root, folder)
    original = os.path.join(base, ORIGINAL)
    target = None
    if kind == "applied":
        current = os.path.join(base, APPLIED)
        if not os.path.isfile(current) or load(current, check=check)["state"] != state:
            target = current
    elif not os.path.isfile(original):
        target = original
    else:
        last = os.path.join(base, last_recorded(root, folder))
        if load(last, check=check)["state"] != state:
            target = os.path.join(base, _new_name(base))
    if target and not check_mode:
        _write(target, _document("original" if target == original else kind, root, state))
    return None if target is None else os.path.join(folder, os.path.basename(target))


# ---------------------------------------------------------------------------------------
# the files section


def record_file(root, path):
    """``{"type": "absent"|"file"|"link"|"dir", ...}`` for a host path: files with their
    content as base64, mode and owner; links with their target and owner; folders with
    mode and owner; an absent path with ``parent``, the nearest folder above it that exists
    (a restore removes the folders created below that one, once empty)."""
    full = under_root(root, path, "snapshot file", follow=False)
    if os.path.islink(full):
        st = os.lstat(full)
        return {"type": "link", "target": os.readlink(full), "uid": st.st_uid,
                "gid": st.st_gid}
    if os.path.isdir(full):
        st = os.stat(full)
        return {"type": "dir", "mode": "%04o" % (st.st_mode & 0o7777), "uid": st.st_uid,
                "gid": st.st_gid}
    data = read_bytes(full)
    if data is None:
        parent = os.path.dirname(path.rstrip("/")) or "/"
        while parent != "/" and not os.path.isdir(host_path(root, parent)):
            parent = os.path.dirname(parent)
        return {"type": "absent", "parent": parent}
    st = os.stat(full)
    return {"type": "file", "mode": "%04o" % (st.st_mode & 0o7777), "uid": st.st_uid,
            "gid": st.st_gid, "content_b64": base64.b64encode(data).decode("ascii")}


def same_file(now, rec):
    """Whether the path is as ``rec`` recorded it (fields a record lacks are not compared:
    snapshots taken before owners were recorded still match)."""
    if now["type"] != rec["type"]:
        return False
    if rec["type"] == "absent":
        return True
    return all(now.get(key) == rec[key]
               for key in ("target", "mode", "uid", "gid", "content_b64") if key in rec)


def _owner(full, rec, link=False):
    """Give ``full`` the recorded owner (when recorded and different)."""
    if "uid" not in rec:
        return
    st = os.lstat(full)
    if (st.st_uid, st.st_gid) != (rec["uid"], rec.get("gid", st.st_gid)):
        (os.lchown if link else os.chown)(full, rec["uid"], rec.get("gid", st.st_gid))


def _created_folders(root, path, stop):
    """The folders between ``path`` and ``stop`` (the nearest folder above ``path`` that
    existed when the snapshot was taken) that exist now, deepest first: folders a tune run
    created (a restore removes those that are empty)."""
    found = []
    folder = os.path.dirname(path.rstrip("/"))
    while folder not in ("/", "") and folder != stop and folder.startswith(stop.rstrip("/") + "/"):
        full = host_path(root, folder)
        if os.path.isdir(full) and not os.path.islink(full):
            found.append(folder)
        folder = os.path.dirname(folder)
    return found


def _empty_created_folders(root, path, stop):
    """``_created_folders`` that hold nothing now (or only other such empty folders)."""
    empty = []
    for folder in _created_folders(root, path, stop):
        try:
            names = os.listdir(host_path(root, folder))
        except OSError:
            break
        if any(folder + "/" + name not in empty for name in names):
            break
        empty.append(folder)
    return empty


def _remove_empty_parents(root, path, stop):
    """Remove the folders between ``path`` and ``stop`` that are empty now; a folder that
    holds anything (the operator's files) stays, and so does every folder above it.
    Returns the host paths removed."""
    removed = []
    for folder in _empty_created_folders(root, path, stop):
        try:
            os.rmdir(host_path(root, folder))
        except OSError:
            break
        removed.append(folder)
    return removed


def _remove_folder(root, path, full, installed):
    """Remove a folder the snapshot records as absent: the files gpuhost.tuning installed
    in it (``installed(root)``: the installers' own paths, boot_service.installed_paths) and
    its empty subfolders. A folder that holds any other file stays, with a message naming
    them."""
    ours = set(installed(root)) if installed is not None else set()
    left, remove = [], []
    for current, dirs, names in os.walk(full):
        for name in names + [d for d in dirs if os.path.islink(os.path.join(current, d))]:
            host = path.rstrip("/") + "/" + os.path.relpath(os.path.join(current, name), full)
            (remove if host in ours else left).append(host)
    if left:
        raise IOError("holds %d file(s) that gpuhost.tuning did not install (%s): left in "
                      "place; move them away and run the revert again"
                      % (len(left), ", ".join(sorted(left)[:5])))
    for host in remove:
        os.unlink(host_path(root, host))
    for current, _dirs, _names in sorted(os.walk(full), key=lambda w: -len(w[0])):
        os.rmdir(current)


def _put_file(root, path, rec, installed=None):
    full = under_root(root, path, "snapshot file", follow=False)
    if os.path.lexists(full):
        if os.path.isdir(full) and not os.path.islink(full):
            if rec["type"] != "dir":
                _remove_folder(root, path, full, installed)
        elif rec["type"] != "file":
            os.unlink(full)
    if rec["type"] == "absent":
        return
    folder = os.path.dirname(full)
    if not os.path.isdir(folder):
        os.makedirs(folder, 0o755)
    if rec["type"] == "link":
        os.symlink(rec["target"], full)
        _owner(full, rec, link=True)
    elif rec["type"] == "dir":
        if not os.path.isdir(full):
            os.mkdir(full, 0o700)
        os.chmod(full, int(rec.get("mode", "0755"), 8))
        _owner(full, rec)
    else:
        atomic_write(full, base64.b64decode(rec["content_b64"]), mode=int(rec["mode"], 8),
                     preserve=False)
        _owner(full, rec)


def _restore_files(root, recorded, check_mode, out, failures, installed=None):
    for path in sorted(recorded):
        rec = recorded[path]
        now = record_file(root, path)
        entry = {"path": path, "before": now["type"], "after": rec["type"]}
        if same_file(now, rec) or (rec["type"] == "dir" and now["type"] == "dir"
                                   and "mode" not in rec):
            entry["status"] = "ok"
        else:
            entry["status"] = "changed"
            if not check_mode:
                try:
                    _put_file(root, path, rec, installed)
                except (IOError, OSError) as exc:
                    entry.update(status="failed", reason="%s: %s" % (path, exc))
                    failures.append(entry["reason"])
        out.append(entry)
    # Folders a tune run created above absent paths go once empty (deepest first, after
    # every path is back), also when the path itself was already removed (boot_service
    # absent runs before the restore). Folders that existed, or hold anything, stay.
    parents = sorted(set((path, rec["parent"]) for path, rec in recorded.items()
                         if rec["type"] == "absent" and rec.get("parent")),
                     key=lambda item: -item[0].count("/"))
    for path, parent in parents:
        if check_mode:
            folders = _empty_created_folders(root, path, parent)
        else:
            try:
                folders = _remove_empty_parents(root, path, parent)
            except (IOError, OSError) as exc:
                failures.append("%s: %s" % (path, exc))
                continue
        for folder in folders:
            if folder not in recorded and not any(e["path"] == folder for e in out):
                out.append({"path": folder, "before": "dir", "after": "absent",
                            "status": "changed", "reason": "empty folder the tune run created"})


_FILE_TYPES = ("absent", "file", "link", "dir")


def _check_files(files, bad, root):
    if not isinstance(files, dict):
        bad("files is not a mapping")
    for fpath, rec in files.items():
        if not isinstance(fpath, str) or not fpath.startswith("/") or \
                ".." in fpath.split("/"):
            bad("file path %r is not an absolute host path without '..'" % (fpath,))
        if root is not None:
            try:
                under_root(root, fpath, "snapshot file", follow=False)
            except PathError as exc:
                bad(str(exc))
        if not isinstance(rec, dict) or rec.get("type") not in _FILE_TYPES:
            bad("file %s: type %r is not one of %s" % (fpath, (rec or {}).get("type"),
                                                       ", ".join(_FILE_TYPES)))
        if rec["type"] == "file":
            try:
                base64.b64decode(rec.get("content_b64", ""), validate=True)
                mode = int(rec.get("mode"), 8)
            except (TypeError, ValueError):
                bad("file %s: content or mode unreadable" % fpath)
            if not 0 <= mode <= 0o7777:
                bad("file %s: mode %s" % (fpath, rec["mode"]))
        if rec["type"] == "link" and (not isinstance(rec.get("target"), str)
                                      or not rec["target"] or "\0" in rec["target"]):
            bad("link %s: target %r" % (fpath, rec.get("target")))
        for key in ("uid", "gid"):
            if key in rec and (not isinstance(rec[key], int) or rec[key] < 0):
                bad("%s %s: %s %r" % (rec["type"], fpath, key, rec[key]))


class FilesSection(object):
    """The ``files`` section of a snapshot, the one no single part owns: every path the
    registered parts declare in ``files`` (and their ``file_options``' values). The
    section protocol (``record``, ``restore``, ``check``, ``summary``, ``diff_lines``,
    ``label``, ``restore_report``) is the one a tune part follows
    (engines/tune/tune_registry.py)."""

    name = snapshot_key = "files"
    label = "{path}"
    restore_report = (("files put back", "changed", "path"),)

    def __init__(self, installed=None):
        # installed(root): the paths gpuhost.tuning's installers wrote (a folder the
        # snapshot records as absent is removed only when it holds nothing else)
        self.installed = installed

    def record(self, ctx):
        return dict((path, record_file(ctx.root, path)) for path in ctx.params["files"])

    def restore(self, ctx, recorded):
        items, failures = [], []
        _restore_files(ctx.root, recorded or {}, ctx.check_mode, items, failures,
                       self.installed)
        return items, failures

    def check(self, recorded, bad, root):
        _check_files(recorded, bad, root)

    def summary(self, recorded):
        return {"files": dict((p, f["type"]) for p, f in recorded.items())}

    def diff_lines(self, item):
        return ("%s: %s" % (item["path"], item["before"]),
                "%s: %s" % (item["path"], item["after"]))
