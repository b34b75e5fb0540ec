# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host file access under a root.

Every reader and writer in this collection resolves host paths (``/sys``, ``/proc``,
``/etc``, ``/lib/modules``, ``/var/lib``) under a ``root``: ``/`` on a live host, a
temporary tree in tests, an unpacked capture in an offline audit.

Readers go through the functions here (``read_text``, ``read_bytes``, ``listdir``, ``isdir``,
``islink``, ``readlink``, ...) rather than ``open`` and ``os`` directly: while a recorder is
active (``recording``), each notes the path it touched, which is what a capture packs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import tempfile


def host_path(root, path):
    """Return ``path`` (absolute on the host) resolved under ``root``."""
    root = root or "/"
    return os.path.join(root, path.lstrip("/"))


# Active recorders: objects with ``note(path, kind)``, kind ``read`` (content used), ``list``
# (names used) or ``stat`` (existence, kind or link target used).
_RECORDERS = []


def _note(path, kind):
    for recorder in _RECORDERS:
        recorder.note(path, kind)


class recording(object):
    """Context manager: ``recorder.note(path, kind)`` for every path the readers below touch
    while it is active."""

    def __init__(self, recorder):
        self.recorder = recorder

    def __enter__(self):
        _RECORDERS.append(self.recorder)
        return self.recorder

    def __exit__(self, *exc):
        _RECORDERS.remove(self.recorder)
        return False


def open_read(path, mode="r", **kwargs):
    """``open`` for reading (``r`` or ``rb``), recorded."""
    _note(path, "read")
    return open(path, mode, **kwargs)


def listdir(path):
    _note(path, "list")
    return os.listdir(path)


def walk(path):
    """``os.walk``, each folder it lists recorded."""
    for folder, dirs, files in os.walk(path):
        _note(folder, "list")
        yield folder, dirs, files


def isdir(path):
    _note(path, "stat")
    return os.path.isdir(path)


def isfile(path):
    _note(path, "stat")
    return os.path.isfile(path)


def exists(path):
    _note(path, "stat")
    return os.path.exists(path)


def lexists(path):
    _note(path, "stat")
    return os.path.lexists(path)


def islink(path):
    _note(path, "stat")
    return os.path.islink(path)


def readlink(path):
    _note(path, "stat")
    return os.readlink(path)


def realpath(path):
    """``os.path.realpath``; the path is recorded (a capture keeps every link on it)."""
    _note(path, "stat")
    return os.path.realpath(path)


def stat(path):
    _note(path, "stat")
    return os.stat(path)


def getsize(path):
    _note(path, "stat")
    return os.path.getsize(path)


def _read_all(path):
    """The bytes of ``path`` by plain ``os.read`` calls: an audit reads thousands of tiny
    sysfs files, and a text-mode ``open`` costs 2.5 times as much per file."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        chunks = []
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    except OSError as exc:  # a folder (EISDIR), EIO: named like open() names it
        raise type(exc)(exc.errno, exc.strerror, path)
    finally:
        os.close(fd)


def read_text(path, default=None):
    """Read a small text file, stripped, as UTF-8 (bad bytes replaced, line ends made
    ``\\n`` as text mode does). Return ``default`` when it does not exist."""
    _note(path, "read")
    try:
        text = _read_all(path).decode("utf-8", "replace")
    except (IOError, OSError) as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ENODEV, errno.EINVAL):
            return default
        raise
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.strip()


def read_int(path, default=None, base=0):
    """Read an integer file (``0x10de``, ``-1``, ``4``); ``default`` when absent or empty."""
    text = read_text(path)
    if text is None or text == "":
        return default
    try:
        return int(text.split()[0], base)
    except ValueError:
        return default


def read_bytes(path, default=None):
    _note(path, "read")
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except (IOError, OSError) as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return default
        raise


def numbered_entries(folder, pattern, files_only=False):
    """``[(number, path)]``, sorted, of the entries of ``folder`` whose name matches the
    compiled ``pattern`` (its first group is the number): ``state3``, ``policy12``,
    ``129.conf``. An unreadable or missing folder gives ``[]``."""
    try:
        names = listdir(folder)
    except OSError:
        return []
    found = []
    for name in names:
        match = pattern.match(name)
        path = os.path.join(folder, name)
        if match and (not files_only or isfile(path)):
            found.append((int(match.group(1)), path))
    return sorted(found)


def write_in_place(path, text):
    """Write a kernel interface file (sysfs/procfs) in place, the way the kernel expects.

    Raises OSError as is; callers turn it into a message naming what was written.
    """
    with open(path, "w") as handle:
        handle.write(text)


def atomic_write(path, data, mode=None, preserve=True, chmod=True, root=None):
    """Write ``data`` (bytes or text) to ``path`` atomically.

    A temporary file is created in the same folder and renamed over ``path``, so a reader
    sees the old or the new file, never half of one. With ``preserve`` the existing file's
    mode and owner are kept; ``chmod=False`` never calls chmod (pmxcfs refuses it): the
    temporary file is created with the old file's mode instead, and the old owner and group
    are put back only when they differ, a refusal ignored (pmxcfs shows root:www-data by
    itself; a plain filesystem would otherwise leave the writer's owner). ``mode`` applies
    to new files (and to existing ones when ``preserve`` is off).

    With ``root`` (other than ``/``), the folder must resolve inside it (``folder_in_root``):
    a folder that is a link out of the root is refused (PathError naming the link) before
    the temporary file is made.
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    folder = os.path.dirname(os.path.abspath(path)) or "."
    if root is not None:
        folder_in_root(root, folder, "the folder of %s" % path)
    old = None
    try:
        old = os.stat(path)
    except OSError:
        old = None
    if chmod:
        fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), suffix=".tmp",
                                   dir=folder)
    else:
        # No chmod/chown allowed (pmxcfs): create the temp file with the old file's mode
        # (or ``mode``) so a plain filesystem keeps it too; the umask still applies.
        create_mode = (old.st_mode & 0o777) if old is not None else (mode or 0o644)
        fd, tmp = _create_temp(folder, os.path.basename(path), create_mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if chmod:
            if old is not None and preserve:
                os.chmod(tmp, old.st_mode & 0o7777)
                try:
                    os.chown(tmp, old.st_uid, old.st_gid)
                except OSError:
                    pass
            elif mode is not None:
                os.chmod(tmp, mode)
            else:
                os.chmod(tmp, 0o644)
        elif old is not None and preserve:
            _restore_owner(tmp, old)
        os.rename(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _restore_owner(path, old):
    """chown ``path`` to ``old``'s owner and group when they differ; a refusal is ignored."""
    now = os.stat(path)
    if (now.st_uid, now.st_gid) != (old.st_uid, old.st_gid):
        try:
            os.chown(path, old.st_uid, old.st_gid)
        except OSError:
            pass


def _create_temp(folder, name, create_mode):
    """A new temporary file in ``folder``: O_EXCL and O_NOFOLLOW, so a name planted there
    (a link, a FIFO) is never opened, only skipped."""
    for attempt in range(100):
        tmp = os.path.join(folder, ".%s.%d.%d.tmp" % (name, os.getpid(), attempt))
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                           create_mode), tmp
        except OSError as exc:
            if exc.errno != errno.EEXIST:
                raise
    raise OSError(errno.EEXIST, "no free temporary file name in %s" % folder)


def unified_diff_dict(path, before, after):
    """The ``diff`` entry Ansible renders for a file change."""
    return {
        "before_header": path,
        "after_header": path,
        "before": before,
        "after": after,
    }


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


class LinkLoop(ValueError):
    """More symlinks on one path than the kernel follows (40)."""


def walk_in_root(path, look, limit=40):
    """Walk host path ``path`` a name at a time inside a root, following symlinks as the
    kernel does but never above the root: a relative target from the link's folder, an
    absolute one from the root, ``..`` stopping at the root.

    ``look(rel, last)`` is called with every name reached (``rel`` relative to the root,
    ``a/b``; ``last``: nothing follows it) and returns the link target when ``rel`` is a
    symlink, False to stop the walk, anything else to go on. Returns the resolved host path
    (``/a/b``), or None when ``look`` stopped it; LinkLoop after ``limit`` links."""
    pending = [p for p in path.split("/") if p]
    done = []
    hops = 0
    while pending:
        name = pending.pop(0)
        if name == ".":
            continue
        if name == "..":
            if done:
                done.pop()
            continue
        rel = "/".join(done + [name])
        target = look(rel, not pending)
        if target is False:
            return None
        if isinstance(target, str):
            hops += 1
            if hops > limit:
                raise LinkLoop("too many levels of symlinks resolving %s" % path)
            if target.startswith("/"):
                done = []
            pending = [p for p in target.split("/") if p] + pending
        else:
            done.append(name)
    return "/" + "/".join(done)


def resolve_links(root, path, limit=40):
    """Host path ``path`` with every symlink on it resolved inside ``root`` (``walk_in_root``;
    the links read are recorded): the resolved host path, ``/a/b``. LinkLoop after
    ``limit`` links."""
    root = os.path.abspath(root or "/")

    def look(rel, _last):
        full = os.path.join(root, rel)
        return readlink(full) if islink(full) else None

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
