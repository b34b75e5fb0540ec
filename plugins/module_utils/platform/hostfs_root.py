# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Roots and the paths that must stay under them (links resolved inside the root), and
the run lock: one changing run per root. Imported through ``hostfs``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import stat as _stat

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs_base import (
    host_path,
    _note,
    walk_in_root,
)


# ---------------------------------------------------------------------------------------
# roots and paths that must stay under them


class PathError(ValueError):
    """A root that is not a folder, or a path that leaves its root; the message names both."""


def check_root(root):
    """Refuse a root that cannot be meant: empty (an unset variable), missing, not a
    folder, or one that only resolves to ``/`` (``//``, ``/tmp/..``): the live host is
    written only when the root is given as ``/``."""
    if root is None or root == "":
        raise PathError("root: %r is empty: give / for the live host or the folder of a host "
                        "tree (an unset variable?)" % (root,))
    if not isinstance(root, str):
        raise PathError("root: %r is not a path" % (root,))
    if root == "/":
        return
    if not os.path.isdir(root):
        raise PathError("root: %s %s: give / for the live host or an existing folder of a "
                        "host tree" % (root, "is not a folder" if os.path.lexists(root)
                                       else "does not exist"))
    if os.path.realpath(root) == "/":
        raise PathError("root: %s resolves to / : write / itself to act on the live host"
                        % root)


def resolve_links(root, path, limit=40):
    """Host path ``path`` with every symlink on it resolved inside ``root`` (``walk_in_root``;
    the links read are recorded): the resolved host path, ``/a/b``. LinkLoop after
    ``limit`` links."""
    root = os.path.abspath(root or "/")

    def look(rel, _last):
        # rel is made of names already resolved: plain lstat is right (and recorded)
        full = os.path.join(root, rel)
        _note(full, "stat")
        try:
            if not _stat.S_ISLNK(os.lstat(full).st_mode):
                return None
            return os.readlink(full)
        except OSError:
            return None

    return walk_in_root(path, look, limit)


def inside_root(root, full):
    """True when ``full`` (a path on this machine), resolved with symlinks and ``..``, is
    ``root`` or below it."""
    if (root or "/") == "/":
        return True
    base = os.path.realpath(root)
    real = os.path.realpath(full)
    return real == base or real.startswith(base.rstrip("/") + "/")


def under_root(root, path, what="path", follow=True):
    """``host_path(root, path)``, refused (PathError) when it resolves outside ``root``:
    ``..`` components, or a symlink on the way that points out of the tree. With
    ``follow=False`` a link as the last component is not followed (it is the entry itself
    that is recorded, replaced or removed)."""
    full = host_path(root, path)
    check = full if follow else os.path.dirname(full.rstrip("/"))
    if not inside_root(root, check) or (not follow and ".." in path.split("/")):
        raise PathError("%s: %s resolves to %s, outside root %s: refused (paths are host "
                        "paths inside the root)" % (what, path, os.path.realpath(full), root))
    return full


# ---------------------------------------------------------------------------------------
# one changing run per root

LOCK_PATH = "/run/gpuhost-tuning.lock"


def folder_in_root(root, folder, what="folder"):
    """Refuse (PathError) a ``folder`` (a path on this machine, ``root`` or below it) that
    resolves outside ``root``: the first folder on the way that is a symlink leading out
    is named with its target. ``root`` ``/`` (the live host) takes any folder. Locks and
    temporary files are created only where this passes, so a tree whose ``run`` links to
    this machine's ``/run`` never puts a lock there."""
    root = root or "/"
    if root == "/":
        return folder
    base = os.path.abspath(root)
    full = os.path.abspath(folder)
    if full != base and not full.startswith(base.rstrip("/") + "/"):
        raise PathError("%s: %s is not under root %s: refused (locks and temporary files "
                        "are created inside the root only)" % (what, folder, root))
    step = base
    for name in os.path.relpath(full, base).split("/"):
        if name in ("", "."):
            continue
        step = os.path.join(step, name)
        if os.path.islink(step) and not inside_root(root, step):
            raise PathError(
                "%s: %s is a symbolic link to %s, out of root %s: refused (locks and "
                "temporary files are created inside the root only; make %s a folder of the "
                "tree or a link inside it)" % (what, step, os.readlink(step), root, step))
    if not inside_root(root, full):
        raise PathError("%s: %s resolves to %s, outside root %s: refused (locks and "
                        "temporary files are created inside the root only)"
                        % (what, folder, os.path.realpath(full), root))
    return folder


class LockError(Exception):
    """Another run holds the root's lock; the message names the holder."""


class RootLock(object):
    """``<root>/run/gpuhost-tuning.lock``, held with ``flock`` while a run changes the host.

    The holder writes ``pid host time what`` into it, so a second run names the first in
    its refusal. On release the file is removed (and ``<root>/run`` when this lock created
    it); a waiter that opened the removed file notices the inode changed and retries.
    """

    def __init__(self, root, what):
        self.root = root or "/"
        self.what = what
        self.path = host_path(self.root, LOCK_PATH)
        self.fd = None
        self.made_dir = False

    def acquire(self):
        import fcntl
        import socket
        import time
        import stat as stat_mod
        folder = os.path.dirname(self.path)
        folder_in_root(self.root, folder, "lock %s" % self.path)
        if not os.path.isdir(folder):
            os.makedirs(folder, 0o755)
            self.made_dir = True
        for _attempt in range(20):
            # no link followed, no FIFO or device opened: the lock is a plain file of the tree
            try:
                kind = os.lstat(self.path).st_mode
            except OSError:
                kind = None
            if kind is not None and not stat_mod.S_ISREG(kind):
                self._undo_dir()
                raise LockError("%s is %s, not a regular file: refused (the lock is a plain "
                                "file; remove what is there)" % (
                                    self.path, "a symbolic link to %s" % os.readlink(self.path)
                                    if stat_mod.S_ISLNK(kind) else "a special file"))
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK,
                             0o644)
            except OSError as exc:
                self._undo_dir()
                if exc.errno == errno.ELOOP:
                    raise LockError("%s is a symbolic link to %s: refused (the lock is a plain "
                                    "file; remove the link)" % (self.path,
                                                                os.readlink(self.path)))
                raise
            if not stat_mod.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                self._undo_dir()
                raise LockError("%s is not a regular file: refused (the lock is a plain file; "
                                "remove what is there)" % self.path)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except (IOError, OSError):
                try:
                    holder = os.read(fd, 512).decode("utf-8", "replace").strip()
                finally:
                    os.close(fd)
                self._undo_dir()
                raise LockError(
                    "another gpuhost.tuning run is changing this host: %s is held by %s; wait "
                    "for it to finish (two runs at once would record a half-tuned state)"
                    % (LOCK_PATH if self.root == "/" else self.path, holder or "an unknown run"))
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except OSError:
                same = False
            if not same:
                os.close(fd)
                continue
            os.ftruncate(fd, 0)
            os.write(fd, ("pid %d on %s since %s (%s)\n" % (
                os.getpid(), socket.gethostname(),
                time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), self.what)).encode("utf-8"))
            self.fd = fd
            return self
        raise LockError("could not take %s: it keeps being replaced" % self.path)

    def _undo_dir(self):
        if self.made_dir:
            try:
                os.rmdir(os.path.dirname(self.path))
            except OSError:
                pass
            self.made_dir = False

    def release(self):
        if self.fd is None:
            return
        try:
            os.unlink(self.path)
        except OSError:
            pass
        os.close(self.fd)
        self.fd = None
        self._undo_dir()

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()
        return False
