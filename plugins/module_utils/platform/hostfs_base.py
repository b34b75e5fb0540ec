# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host file access under a root, its base: the read caps, the errors, the capture
recorder and the containment checks (every path resolved inside its root). The readers are
``hostfs``'s, the writers ``hostfs_write``'s, roots and the run lock ``hostfs_root``'s; the
public names are all imported from ``hostfs``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import stat as _stat

# Caps of one read (bytes). A file over its cap is refused (HostFileError, the cap named):
# a runaway file where a small one belongs is a finding, never the host's memory.
READ_LIMIT = 4 << 20      # read_text, read_bytes, open_read: sysfs, procfs, config files
OUTPUT_LIMIT = 16 << 20   # a command output a capture stored (nvidia-smi -q -x, the journal)
LOG_LIMIT = 256 << 20     # read_lines: a log's newest 256 MiB (older bytes are left unread)
LINE_LIMIT = 64 << 10     # read_lines: a longer line is skipped and counted

_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | \
    getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _mib(size):
    return "%d MiB" % (size >> 20) if size >= 1 << 20 and not size % (1 << 20) else \
        "%d KiB" % (size >> 10) if size >= 1 << 10 and not size % (1 << 10) else "%d bytes" % size


class HostFileError(OSError):
    """A host file the reading layer refuses: not a regular file where one is meant (a FIFO
    would block the read forever, a device may never end), or larger than the cap of its
    read. ``filename`` is the path; the message names it, what it is and what to do."""

    def __init__(self, path, message):
        OSError.__init__(self, None, "%s: %s" % (path, message), path)

    def __str__(self):
        return str(self.strerror)


class NotRegularFile(HostFileError):
    pass


class TooLarge(HostFileError):
    pass


def _kind(mode):
    for test, name in ((_stat.S_ISFIFO, "a FIFO"), (_stat.S_ISSOCK, "a socket"),
                       (_stat.S_ISCHR, "a character device"), (_stat.S_ISBLK, "a block device"),
                       (_stat.S_ISLNK, "a symlink")):
        if test(mode):
            return name
    return "not a regular file"


# ---------------------------------------------------------------------------------------
# reading sessions: cached link resolution, refusals collected

_SESSIONS = []


class session(object):
    """One reading pass over a host (an audit): while active, link resolutions inside a root
    are cached (the tree must not change meanwhile: writers never run inside one) and every
    refused file, read cut at its cap or line skipped is kept in ``problems``, a list of
    ``(section, message)`` the audit reports as errors."""

    def __init__(self):
        self.problems = []
        self.cache = {}

    def __enter__(self):
        _SESSIONS.append(self)
        return self

    def __exit__(self, *exc):
        _SESSIONS.remove(self)
        return False


def problem(section, message):
    """Keep ``message`` (once) in every active session's ``problems``."""
    for active in _SESSIONS:
        if (section, message) not in active.problems:
            active.problems.append((section, message))


def _refuse(path, st):
    if _stat.S_ISDIR(st.st_mode):  # as open() says it
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    exc = NotRegularFile(path, "%s, not a regular file: not read (a host tree unpacked with "
                               "tar -x recreates FIFOs and devices: put the file there or "
                               "remove it)" % _kind(st.st_mode))
    problem("files", str(exc))
    raise exc


def _too_large(path, limit, size=None):
    exc = TooLarge(path, "%s, over the %s this read takes: not read (a log or a runaway file "
                         "where a small file belongs?)" % (
                             "%d bytes" % size if size is not None else "larger", _mib(limit)))
    problem("files", str(exc))
    raise exc


# ---------------------------------------------------------------------------------------
# roots: every path under a root other than / is resolved inside it

# The roots other than / that host_path has joined paths to, as given and absolute (trailing
# / dropped): a path under one of them is resolved inside it before it is opened, listed or
# stat'ed, the way the kernel resolves it in a chroot (hence the capture reads the same).
_ROOTS = set()
_SEEN = set()


def _register(root):
    _SEEN.add(root)
    for key in (root.rstrip("/"), os.path.abspath(root)):
        if key and key != "/":
            _ROOTS.add(key)


def host_path(root, path):
    """Return ``path`` (absolute on the host) joined under ``root``. The readers here resolve
    what lies under a root other than ``/`` inside it (``resolve_links``' rule)."""
    root = root or "/"
    if root != "/" and root not in _SEEN:
        _register(root)
    return os.path.join(root, path.lstrip("/"))


def _root_of(path):
    """``(root, rel)`` of the innermost registered root ``path`` lies under, or ``(None, None)``."""
    i = len(path)
    while i > 0:
        head = path[:i]
        if head in _ROOTS:
            return head, path[i + 1:]
        i = path.rfind("/", 0, i)
    return None, None


def _walk_raw(root, rel, follow=True):
    """``rel`` resolved inside ``root`` by ``walk_in_root`` with plain lstat/readlink: the
    resolved ``a/b`` (no link on it but the last name with ``follow`` off)."""

    def look(name, last):
        if last and not follow:
            return None
        full = root + "/" + name
        try:
            st = os.lstat(full)
        except OSError:
            return None
        return os.readlink(full) if _stat.S_ISLNK(st.st_mode) else None

    try:
        return walk_in_root(rel, look)[1:]
    except LinkLoop:
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), root + "/" + rel)


def _step(root, base, name):
    """``(rel, st)``: the resolved ``base`` (a folder under root, ``a/b``) with ``name``
    resolved after it, and what lstat said of it (a stat result, the OSError it raised, or
    None when a link was followed: not looked at)."""
    if name in ("", "."):
        return base, None
    if name == "..":
        return base.rpartition("/")[0], None
    rel = base + "/" + name if base else name
    full = root + "/" + rel
    try:
        st = os.lstat(full)
        if not _stat.S_ISLNK(st.st_mode):
            return rel, st
        target = os.readlink(full)
    except OSError as exc:
        return rel, exc
    return _walk_raw(root, target if target.startswith("/") or not base else
                     base + "/" + target), None


def _dir_in_root(root, folder, cache):
    """``folder`` (a path under ``root``, lexical) resolved: ``a/b`` relative to root."""
    if len(folder) <= len(root):
        return ""
    if cache is not None:
        hit = cache.get(folder)
        if hit is not None:
            return hit[1]
    parent, _sep, name = folder.rpartition("/")
    out = _step(root, _dir_in_root(root, parent, cache), name)[0]
    if cache is not None:
        cache[folder] = (root, out)
    return out


def _in_root(path, follow=True):
    """``(real, st)``: ``path`` as a path on this machine that holds no symlink (but its
    last name with ``follow`` off) and never leaves the registered root it lies under, and
    its lstat (a stat result, the OSError it raised, or None: not looked at). ``path``
    itself (and None) when it is under no root: the live host, where the kernel resolves."""
    if not _ROOTS:
        return path, None
    folder, _sep, name = path.rpartition("/")
    if _SESSIONS:
        cache = _SESSIONS[-1].cache
        hit = cache.get(folder)
        if hit is not None:
            root, base = hit
        else:
            root, rel = _root_of(path)
            if root is None or not rel:
                return path, None
            base = _dir_in_root(root, folder, cache)
    else:
        root, base = _checked_folder(path, folder)
        if root is None:
            return path, None
    if follow or name in ("", ".", ".."):
        rel, st = _step(root, base, name)
    else:
        rel = base + "/" + name if base else name
        try:
            st = os.lstat(root + "/" + rel)
        except OSError as exc:
            st = exc
    return (root + "/" + rel if rel else root), st


# Outside a session (a run that writes between its reads), each folder's resolution is
# kept with the identity of the folder it reached and used again only while the resolved
# path still reaches that very folder (one stat instead of an lstat per name on the way):
# a link put on the way since then changes what it reaches, and the folder is resolved
# again. Bounded: emptied at _FOLDERS_MAX entries.
_FOLDERS = {}
_FOLDERS_MAX = 20000


def _checked_folder(path, folder):
    """``(root, resolved folder rel)`` of ``path``'s folder, or ``(None, None)`` when
    ``path`` is under no root (or is one)."""
    hit = _FOLDERS.get(folder)
    if hit is not None:
        root, base, ident = hit
        try:
            st = os.stat(root + "/" + base if base else root)
            if (st.st_dev, st.st_ino) == ident:
                return root, base
        except OSError:
            pass
    root, rel = _root_of(path)
    if root is None or not rel:
        return None, None
    base = _dir_in_root(root, folder, None)
    try:
        st = os.stat(root + "/" + base if base else root)
    except OSError:
        return root, base
    if len(_FOLDERS) >= _FOLDERS_MAX:
        _FOLDERS.clear()
    _FOLDERS[folder] = (root, base, (st.st_dev, st.st_ino))
    return root, base


def _resolved(path, follow=True):
    """``_in_root``, errors named by ``path`` (a loop of links: ELOOP)."""
    try:
        return _in_root(path, follow)
    except OSError as exc:
        raise type(exc)(exc.errno, exc.strerror, path)


def _complete(path, real, st):
    """``st`` of ``_in_root`` made a stat result (lstat when not looked at yet); the
    OSError raised naming ``path``."""
    if st is None:
        try:
            st = os.lstat(real)
        except OSError as exc:
            st = exc
    if isinstance(st, OSError):
        raise type(st)(st.errno, st.strerror, path)
    return st


def _stat_in_root(path, follow=True):
    """The stat of ``path`` inside its root (links followed there; the last one too with
    ``follow``); OSError naming ``path``."""
    real, st = _resolved(path, follow)
    if real is path:
        try:
            return os.stat(real) if follow else os.lstat(real)
        except OSError as exc:
            raise type(exc)(exc.errno, exc.strerror, path)
    return _complete(path, real, st)


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


# ---------------------------------------------------------------------------------------
# following links inside a root


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
